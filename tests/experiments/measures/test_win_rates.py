"""VRSD's win rates (App. E.2, Eqs. 8-9) count a tie as a tie: the same set picked in another order
sums its vectors in another order, and the float noise (about 1e-16) is not a win (issue 37)."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from divopt_rag.experiments.measures import metrics as M


def _noisy_reorders(E, q, k=6, tries=200, seed=0):
    """(set, same set in another order) pairs whose VRSD similarity or ILAD differ in float64."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(tries):
        a = rng.choice(len(E), size=k, replace=False)
        b = rng.permutation(a)
        if M.vrsd_score(E, q, a) != M.vrsd_score(E, q, b) or M.ilad(E, a) != M.ilad(E, b):
            out.append((a.tolist(), b.tolist()))
    return out


def test_the_same_set_in_another_order_is_a_tie_not_a_win():
    rng = np.random.default_rng(3)
    E = rng.standard_normal((40, 16))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = E[:5].sum(axis=0) / np.linalg.norm(E[:5].sum(axis=0))
    pairs = _noisy_reorders(E, q)
    assert len(pairs) >= 10  # the noise is there: raw comparisons would call some of these wins
    recs = []
    for i, (a, b) in enumerate(pairs):
        out = M.vrsd_win(E, q, a, b)
        assert out["similarity_win"] == out["diversity_win"] == 0.0
        assert out["similarity_tie"] == out["diversity_tie"] == 1.0
        assert abs(out["similarity_a"] - out["similarity_b"]) < 1e-13
        for method, sel in (("vrsd", a), ("mmr", b)):
            recs.append({"query_id": f"q{i}", "method": method, "vrsd": M.vrsd_score(E, q, sel), "ilad": M.ilad(E, sel)})
    table = pd.DataFrame(recs)
    for x, y in (("vrsd", "mmr"), ("mmr", "vrsd")):
        wr = M.win_rates(table, x, y)
        assert wr["similarity_win_rate"].iloc[0] == wr["diversity_win_rate"].iloc[0] == 0.0
        assert wr["similarity_tie_rate"].iloc[0] == wr["diversity_tie_rate"].iloc[0] == 1.0


def test_a_real_difference_is_still_a_win():
    """Against a plain loop with the same tolerance: a difference above 1e-12 of the scale wins."""
    rng = np.random.default_rng(0)
    vals = [0.5, 0.5 + 1e-15, 0.5 + 1e-9, 0.4, np.nan]
    recs = [{"query_id": f"q{i}{j}", "method": m, "vrsd": v, "ilad": w}
            for i, j in itertools.product(range(len(vals)), repeat=2)
            for m, v, w in (("a", vals[i], vals[j]), ("b", vals[j], vals[i]))]
    table = pd.DataFrame(recs).sample(frac=1.0, random_state=int(rng.integers(100)))
    per = M.win_rates(table, "a", "b", per_query=True).set_index("query_id")
    for i, j in itertools.product(range(len(vals)), repeat=2):
        x, y = vals[i], vals[j]
        row = per.loc[f"q{i}{j}"]
        if np.isnan(x) or np.isnan(y):
            assert np.isnan(row["similarity_win"])
            continue
        tie = abs(x - y) <= 1e-12 * max(1.0, abs(x), abs(y))
        assert row["similarity_win"] == float(x > y and not tie) and row["similarity_tie"] == float(tie)
        assert row["diversity_win"] == float(y > x and not tie)
