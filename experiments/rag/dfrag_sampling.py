"""DF-RAG's lambda sampling (Khan et al., arXiv:2601.17212v1, Sec. 3.4 and App. B.3) and its gate.

* ``uniform`` (Sec. 3.4): score every lambda of the grid.
* ``binary`` (App. B.3): "a binary-search-based sampling strategy, motivated by its
  effectiveness in locating peaks in unimodal distributions", of cost "log n". The paper gives
  the motivation and the cost, not the procedure; :func:`binary_search_sampling` is divopt's
  reading, and what it decides where the paper is silent is written there.
* The gate (Sec. 3.4, Eq. 5): lambda* = argmax RS, ties to the upper median of the tied lambdas,
  over the lambdas scored (:func:`upper_median_gate`).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Mapping, Sequence

from divopt_rag.models.validation import check_scalar, check_theta

from .adaptive import median_gate

__all__ = ["upper_median_gate", "uniform_sampling", "binary_search_sampling", "peak_search_cost", "peak_candidates",
           "SAMPLING"]


def upper_median_gate(thetas: Sequence[float], scores: Sequence[float]) -> float:
    """DF-RAG's gate: the upper median of the thetas with the best score (sort the tied t_1 < ...
    < t_m and take t_(floor(m/2)+1))."""
    return median_gate(thetas, scores, even="upper")


def uniform_sampling(grid: Sequence[float], support: Callable[[float], float]) -> list[float]:
    """Score every theta of the grid (ascending); returns the thetas in the order scored."""
    out = sorted(set(check_theta(t) for t in grid))
    for t in out:
        support(t)
    return out


@lru_cache(maxsize=None)
def _peak_plan(size: int, known: int) -> tuple[int, int]:
    """(worst-case calls, next probe) to find and score the peak among ``size`` consecutive
    candidates of a strictly unimodal profile, one of them (``known``, or -1) already scored.

    Probing x with a scored y (a < b their order): RS_a < RS_b leaves the peak in (a, hi] (b
    scored), RS_a > RS_b in [lo, b) (a scored), RS_a = RS_b strictly between them (nothing
    scored: a strict profile can tie only across its peak). The cost is 1 + the worst of the
    three; the probe minimizing it (the first such x) is the minimax-optimal comparison search
    (a discrete Fibonacci search)."""
    if size == 1:
        return (0 if known == 0 else 1), 0
    best, arg = None, 0
    for x in range(size):
        if x == known:
            continue
        if known < 0:
            cost = 1 + _peak_plan(size, x)[0]
        else:
            a, b = min(x, known), max(x, known)
            cost = 1 + max(_peak_plan(size - a - 1, b - a - 1)[0], _peak_plan(b, a)[0],
                           _peak_plan(b - a - 1, -1)[0] if b - a >= 2 else 0)
        if best is None or cost < best:
            best, arg = cost, x
    return best, arg


def peak_search_cost(n: int) -> int:
    """The most Evaluator calls :func:`binary_search_sampling` makes on an ``n``-point grid when the
    profile is strictly unimodal (5 for DF-RAG's 10 lambdas); no comparison-based search can
    guarantee fewer on every strictly unimodal profile (the dynamic program of :func:`_peak_plan`
    is the minimax over probes). With plateaus it may score up to all n (see the search)."""
    return _peak_plan(check_scalar(n, "n", int, min_val=1), -1)[0]


def peak_candidates(scores: Mapping[int, float], n: int) -> tuple[int, int]:
    """(lo, hi): the grid positions lo < i < hi are the only ones that can still score above every
    score in ``scores`` (position -> score) when the profile is weakly unimodal (non-decreasing,
    then non-increasing; plateaus allowed).

    A position i can hold a higher score exactly when the scores seen left of it are
    non-decreasing and those right of it non-increasing. So every strictly rising pair a < b
    (RS_a < RS_b) rules out the positions <= a, every strictly falling pair (RS_a > RS_b) those
    >= b, and a tie (RS_a = RS_b) rules out nothing: a plateau may hide a higher score on either
    side of it, or between. lo is the largest first element of a rising pair (-1 if none), hi the
    smallest second element of a falling pair (n if none)."""
    pos = sorted(scores)
    lo, hi = -1, n
    high = None  # the best score right of the position scanned
    for a in reversed(pos):
        if high is not None and scores[a] < high:
            lo = max(lo, a)
        high = scores[a] if high is None else max(high, scores[a])
    high = None  # the best score left of the position scanned
    for b in pos:
        if high is not None and scores[b] < high:
            hi = min(hi, b)
        high = scores[b] if high is None else max(high, scores[b])
    return lo, hi


def unscored_runs(lo: int, hi: int, scored) -> list[tuple[int, int]]:
    """The maximal runs ``(start, end)`` of grid indices strictly between ``lo`` and ``hi`` that
    have no score yet."""
    runs: list[tuple[int, int]] = []
    start = None
    for i in range(lo + 1, hi + 1):
        if i < hi and i not in scored:
            start = i if start is None else start
        elif start is not None:
            runs.append((start, i - 1))
            start = None
    return runs


def _next_probe(lo: int, hi: int, scored: Mapping[int, float]) -> int:
    """The next position to score among the candidates lo < i < hi (some of them unscored).

    At most one scored candidate: the minimax plan of the strictly unimodal case. Several (a tie,
    on a weakly unimodal profile all of them equal to the best score seen): the runs of unscored
    candidates between two tied positions first (the longest, then the one nearest relevance),
    each by the minimax plan, since a strictly unimodal profile can tie only across its peak;
    then the runs outside the tie (the longest, then the one nearest relevance), next to the tie,
    where a higher score would have to start."""
    inside = [i for i in range(lo + 1, hi) if i in scored]
    if len(inside) <= 1:
        known = inside[0] - lo - 1 if inside else -1
        return lo + 1 + _peak_plan(hi - lo - 1, known)[1]
    runs = unscored_runs(lo, hi, scored)
    between = [r for r in runs if inside[0] < r[0] and r[1] < inside[-1]]
    if between:
        a, b = max(between, key=lambda r: (r[1] - r[0], r[0]))
        return a + _peak_plan(b - a + 1, -1)[1]
    a, b = max(runs, key=lambda r: (r[1] - r[0], r[0]))
    return b if b < inside[0] else a


def binary_search_sampling(grid: Sequence[float], support: Callable[[float], float], *,
                           best: float | None = None, max_calls: int | None = None) -> list[float]:
    """DF-RAG's binary-search-based sampling (App. B.3): a search for the lambda of the highest
    Retrieval Support over the sorted grid t_0 < ... < t_{n-1}, "motivated by its effectiveness in
    locating peaks in unimodal distributions", at a cost of "log n".

    What the paper leaves open, and divopt's choices:

    * the procedure: the paper names binary search and log n only, and the authors' public code
      (github.com/SaadatKhan/DF-RAG, ``run_dfrag.py``) samples uniformly only. divopt scores the probe of the
      minimax-optimal comparison search for the peak of a unimodal sequence (:func:`_peak_plan`,
      a discrete Fibonacci search) and keeps only the lambdas that can still beat the best score
      seen (:func:`peak_candidates`);
    * ties: RS is a sum of integer step scores, so equal scores are the normal case, and the paper
      does not say what a tie means. A strictly unimodal profile ties only across its peak; one
      with plateaus may hide the peak on either side of a tie, or between. divopt assumes
      nothing: on a tie it searches between the tied lambdas first (where a strict profile has
      its peak), then the untested sides, next to the tie. It chose this rule by measurement:
      over every weakly unimodal profile with scores 0-3 and 0-5 on the 10-point grid, probing the
      untested sides first, or their middle instead of next to the tie, found the maximum as
      often (always) with more calls on average (docs/howto/reproduce.md lists the numbers);
    * when to stop: when no lambda left can score higher (so on every weakly unimodal profile the
      grid maximum is scored), when a score reaches ``best`` (a score nothing can beat; DF-RAG's
      pipeline passes 5 x the plan's steps, the Evaluator's perfect score), or after
      ``max_calls`` scores (None: no cap; a cap trades hits for calls).

    Cost: on every strictly unimodal profile it scores the peak with at most
    :func:`peak_search_cost` calls (5 for 10 lambdas, mean 4.94 over the 2,378 order types; tested
    exhaustively), exactly as the strict minimax plan, which no comparison-based search can beat.
    Over all 30,086 weakly unimodal profiles with scores 0-4 on 10 lambdas it scores the grid
    maximum every time with 5.70 calls on average (the strict rule that assumed a tie brackets the
    peak: 84.3 % with 4.62 calls; tests/experiments/rag/test_dfrag.py enumerates them); a flat profile needs all
    n calls to be sure. On a profile that is not unimodal it returns a local peak. Returns the
    thetas in the order scored; the gate (:func:`upper_median_gate`) then runs over them.
    """
    g = sorted(set(check_theta(t) for t in grid))
    if not g:
        raise ValueError("the theta grid is empty")
    if max_calls is not None:
        max_calls = check_scalar(max_calls, "max_calls", int, min_val=1)
    visited: list[float] = []
    scored: dict[int, float] = {}
    while max_calls is None or len(scored) < max_calls:
        if best is not None and scored and max(scored.values()) >= best:
            break
        lo, hi = peak_candidates(scored, len(g))
        if all(i in scored for i in range(lo + 1, hi)):
            break
        i = _next_probe(lo, hi, scored)
        scored[i] = float(support(g[i]))
        visited.append(g[i])
    return visited


#: The sampling strategies by name (``DFRAG(sampling=...)``).
SAMPLING: dict[str, Callable[..., list[float]]] = {"uniform": uniform_sampling, "binary": binary_search_sampling}
