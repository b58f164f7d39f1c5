"""DF-RAG's binary-search sampling on tied scores: which tie rule (issue 37, item 1).

Every weakly unimodal profile of integer scores on the 10 lambdas, for each rule: the share of
profiles whose grid maximum the search scores, and its calls (mean, max). The rule is chosen on
the development sets (scores 0-3 and 0-5) and reported on the issue's set (scores 0-4, 30,086
profiles), never tuned on it.

Rules (all keep the lambdas that can still beat the best score seen, ``peak_candidates``, and
follow the strict minimax plan while scores differ; they differ after a tie):

* ``between, next``: divopt's: the runs between tied lambdas first, then the untested sides,
  next to the tie;
* ``sides, next``: the untested sides first, next to the tie;
* ``between, middle``: the untested sides at their middle;
* ``between, plan``: the untested sides by the strict minimax plan with the tie as known end;
* ``tie brackets the peak``: the rule before issue 37 (a tie means the peak lies strictly between);

and divopt's rule with the best possible score known (``best``: DF-RAG's pipeline passes 5 x the
plan's steps) or with at most 6 calls (``max_calls``).

    python benchmarks/dfrag_tie_rules.py --out benchmarks/results/reproduce/dfrag-binary-search.csv
"""
from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from divopt_rag.experiments.rag import dfrag_sampling as S

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.profiles import weakly_unimodal  # noqa: E402  (the generator the tests check against brute force)

GRID = [round(0.1 * i, 1) for i in range(1, 11)]
_NEXT_PROBE = S._next_probe  # divopt's rule, kept while a variant is patched in


def _sides_probe(side: str, between_first: bool):
    """A variant of ``_next_probe``: where to probe the untested sides, and in which order."""
    def probe(lo, hi, scored):
        inside = [i for i in range(lo + 1, hi) if i in scored]
        if len(inside) <= 1:
            return _NEXT_PROBE(lo, hi, scored)
        runs = S.unscored_runs(lo, hi, scored)
        between = [r for r in runs if inside[0] < r[0] and r[1] < inside[-1]]
        outer = [r for r in runs if r not in between]
        if between and (between_first or not outer):
            a, b = max(between, key=lambda r: (r[1] - r[0], r[0]))
            return a + S._peak_plan(b - a + 1, -1)[1]
        a, b = max(outer, key=lambda r: (r[1] - r[0], r[0]))
        left = b < inside[0]
        if side == "next":
            return b if left else a
        if side == "middle":
            return (a + b) // 2 if left else (a + b + 1) // 2
        size = b - a + 2  # the run and the tied end, known
        return a + S._peak_plan(size, size - 1)[1] if left else a - 1 + S._peak_plan(size, 0)[1]
    return probe


def _bracket(grid, support, **_):
    """The rule before issue 37: a tie means the peak lies strictly between (adjacent: the upper one)."""
    g = sorted(grid)
    rs, visited = {}, []

    def score(i):
        if i not in rs:
            rs[i] = float(support(g[i]))
            visited.append(g[i])
        return rs[i]

    lo, hi, known = 0, len(g) - 1, None
    while True:
        size, rel = hi - lo + 1, -1 if known is None else known - lo
        if size == 1:
            score(lo)
            return visited
        x = lo + S._peak_plan(size, rel)[1]
        score(x)
        if known is None:
            known = x
            continue
        a, b = min(x, known), max(x, known)
        if score(a) < score(b):
            lo, known = a + 1, b
        elif score(a) > score(b):
            hi, known = b - 1, a
        elif b - a >= 2:
            lo, hi, known = a + 1, b - 1, None
        else:
            lo, known = b, b


class _Ask(Exception):
    pass


def walk(search, profiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(calls, best score seen) per profile, by the search's decision tree (one run per node)."""
    index = {t: i for i, t in enumerate(GRID)}
    calls, found = np.zeros(len(profiles), int), np.zeros(len(profiles))
    stack = [(np.arange(len(profiles)), ())]
    while stack:
        rows, script = stack.pop()
        asked: list[int] = []

        def support(t):
            if len(asked) == len(script):
                raise _Ask(index[t])
            asked.append(index[t])
            return script[len(asked) - 1]

        try:
            visited = search(GRID, support)
        except _Ask as ask:
            col = profiles[rows, ask.args[0]]
            stack += [(rows[col == v], script + (int(v),)) for v in np.unique(col)]
            continue
        calls[rows], found[rows] = len(visited), max(script)
    return calls, found


RULES = {
    "between, next": (None, S.binary_search_sampling),
    "sides, next": (_sides_probe("next", between_first=False), S.binary_search_sampling),
    "between, middle": (_sides_probe("middle", between_first=True), S.binary_search_sampling),
    "between, plan": (_sides_probe("plan", between_first=True), S.binary_search_sampling),
    "tie brackets the peak": (None, _bracket),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/reproduce/dfrag-binary-search.csv"))
    args = ap.parse_args()
    recs = []
    for role, top in (("development", 3), ("development", 5), ("report", 4)):
        profiles = weakly_unimodal(len(GRID), top)
        rules = {**RULES, "between, next, best known": (None, partial(S.binary_search_sampling, best=top)),
                 "between, next, at most 6 calls": (None, partial(S.binary_search_sampling, max_calls=6))}
        for rule, (probe, search) in rules.items():
            with mock.patch.object(S, "_next_probe", probe or _NEXT_PROBE):
                calls, found = walk(search, profiles)
            recs.append({"set": f"scores 0-{top}", "role": role, "rule": rule, "profiles": len(profiles),
                         "hit_rate": float((found == profiles.max(axis=1)).mean()), "mean_calls": float(calls.mean()),
                         "max_calls": int(calls.max())})
            print(recs[-1])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(recs).to_csv(args.out, index=False, float_format="%.5g")


if __name__ == "__main__":
    main()
