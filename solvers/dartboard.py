"""Dartboard (Pickett et al. 2024, "Better RAG using Relevant Information Gain", arXiv 2407.12101).

The relevant information gain of a set G over the candidate set A is
    s(G, q, A, sigma) = sum_{t in A} P(T = t | q, sigma) max_{g in G} P(T = t | g, sigma),
a dart thrown at the query q lands on target t; every guess g in G covers t with probability
P(T = t | g). The paper maximizes s greedily in log space: G starts with the item closest to the
query; each step adds
    argmax_g logsumexp_t [ log P(t | q) + max(M_t, log P(t | g)) ],   M_t = max_{h in G} log P(t | h),
which is O(K^2) per step on the K x K triaged pool (divopt compares the equivalent marginal
gains, see :func:`greedy_dartboard`). A (the triage) is the top-K passages by KNN cosine to the
query, K = 100 in the paper.

This module holds the shared pieces (KNN triage, the log-space greedy, the Gaussian) and two
selectors on embeddings alone:

* ``dartboard`` — the paper's cosine Dartboard: log P(t | x) = log N(D(x, t); 0, sigma^2) with
  D(a, b) = (1 - cos(a, b)) / 2 clipped to [0, 1], for the query and for passage pairs.
* ``dartboard_minmax`` — divopt's earlier "hybrid" (not the paper's): see its docstring.

The cross-encoder variants (``dartboard_hybrid``, ``dartboard_cc``) live in
:mod:`divopt_rag.solvers.dartboard_ce`, the cross-encoder baselines in
:mod:`divopt_rag.solvers.cross_encoder_baselines`.

Precision: every log-probability, the K x K cosines and the greedy's sums are float64 whatever
the storage dtype of E (the triaged rows are upcast, O(K d)). In float32 the squared distances
over 2 sigma^2 (200 D^2 at sigma = 0.05) lose enough digits to change picks; see tests.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.domains import ROWS_MAX
from divopt_rag.models.kernels import matvec
from divopt_rag.models.parameters import ArrayLike, Interval
from divopt_rag.models.validation import check_k, check_vector

from .selection import register

__all__ = ["dartboard", "dartboard_minmax", "log_gaussian", "greedy_dartboard", "knn_triage",
           "cosine_distance", "PAPER_SIGMA", "PAPER_TRIAGE"]

#: The paper's sigma for the cosine Dartboard (its best value on RGB).
PAPER_SIGMA = 0.096
#: The paper's triage: the top-100 passages by KNN cosine.
PAPER_TRIAGE = 100


def log_gaussian(dist: torch.Tensor, sigma: float) -> torch.Tensor:
    """log N(dist; 0, sigma^2) = -log sigma - log(2 pi)/2 - dist^2 / (2 sigma^2)."""
    return -math.log(sigma) - 0.5 * math.log(2 * math.pi) - dist * dist / (2 * sigma * sigma)


def cosine_distance(cos: torch.Tensor) -> torch.Tensor:
    """The paper's distance D = 1 - (cos + 1)/2 = (1 - cos)/2, clipped to [0, 1]."""
    return ((1.0 - cos) / 2.0).clamp(0.0, 1.0)


#: The triage size of the Dartboard family: an int (k <= triage <= n, checked on the instance) or None.
TRIAGE = [Interval(int, 1, ROWS_MAX), None]


def triage_size(triage: int | None, n: int, k: int) -> int:
    """K = ``triage`` (default: the paper's 100, raised to k when k > 100), checked k <= K <= n."""
    if triage is None:
        return min(n, max(PAPER_TRIAGE, k))
    K = check_k(triage, n, "triage")
    if K < k:
        raise ValueError(f"triage must satisfy k = {k} <= triage <= n = {n}, got triage = {K}")
    return K


def _stable_top(values: torch.Tensor, K: int) -> torch.Tensor:
    """Indices of the K largest values, ties to the lower index (a stable descending sort)."""
    order = torch.sort(values, descending=True, stable=True).indices
    return order[:K]


def knn_triage(inst: Instance, K: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The paper's triage: the top-K items by cosine to the query, in decreasing cosine.

    Returns (pool, F, qcos): pool indices (int64, length K), F = E[pool] in float64 (K x d)
    and the float64 cosines q^T e of the pool. Ties go to the lower index. The cosine is
    q^T e (the instance's relevance is not used when q is given: it may be external scores);
    without a query vector the relevance is taken as the cosine.

    The full-pool ranking runs in the accumulation dtype (one GEMV); for non-float64 storage a
    shortlist of the top-2K is re-ranked in float64, so membership and order are those of a
    float64 evaluation (unless more than K items tie within float32 rounding).
    """
    c = matvec(inst.E, inst.q) if inst.q is not None else inst.relevance
    exact = c.dtype == torch.float64 or inst.q is None  # nothing finer to recompute
    M = K if exact else min(inst.n, 2 * K)
    thr = torch.topk(c, M).values[-1]
    short = torch.nonzero(c >= thr).squeeze(1)  # ascending; every tie at the threshold is kept
    F = inst.E.index_select(0, short).to(torch.float64)
    cos = c.index_select(0, short).to(torch.float64) if exact else F @ inst.q.to(torch.float64)
    keep = _stable_top(cos, K)  # short is ascending, so a stable sort sends ties to the lower index
    return short[keep], F[keep], cos[keep]


def _log_gains(q_logp: np.ndarray, rows: np.ndarray, cover: np.ndarray) -> np.ndarray:
    """log sum_t P(t | q) (P(t | g) - C_t)_+ for each row g of ``rows`` (log P(t | g)), given
    cover = log C_t: logsumexp_t [log P(t | q) + a + log(-expm1(b - a))] over the t with
    a = log P(t | g) > b = log C_t (-inf where no t qualifies). float64 in and out."""
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = cover[None, :] - rows  # b - a (NaN where both are -inf: not a target g can raise)
        up = diff < 0
        x = np.where(up, rows + np.log(-np.expm1(np.where(up, diff, -1.0))) + q_logp[None, :], -np.inf)
    top = x.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(top), safe + np.log(np.exp(x - safe[:, None]).sum(axis=1)), -np.inf)


#: Candidates whose gains a lazy step re-evaluates at once (doubled while the step is undecided).
LAZY_BATCH = 4


def greedy_dartboard(q_logp: torch.Tensor, pair_logp: torch.Tensor, k: int) -> tuple[list[int], float]:
    """The paper's greedy on log-probabilities (float64 in, positions of the pool out).

    q_logp[t] = log P(T = t | q) (any additive constant), pair_logp[g, t] = log P(T = t | g).
    First pick argmax_t q_logp; then argmax_g s(G + g). The argmax is taken over the marginal
    gain, which has the same argmax:
        s(G + g) - s(G) = sum_t P(t | q) (P(t | g) - C_t)_+,   C_t = max_{h in G} P(t | h),
    evaluated as logsumexp_t [log P(t | q) + a + log(-expm1(b - a))] over the t with
    a = log P(t | g) > b = log C_t. Comparing log s(G + g) directly fails once the covered mass is
    near all of s (e.g. the hybrid's peaked softmax at small sigma): every candidate's log s then
    equals log s(G) to the last bit and the pick is rounding noise; the gain keeps full relative
    precision. Ties go to the lower position. Returns (picks, log s(G)) in the units of q_logp.

    Lazy evaluation (Minoux's accelerated greedy), same picks: s is a facility-location score,
    so a candidate's gain only shrinks as C grows, and a gain computed at an earlier step is an
    upper bound. Each step re-evaluates, exactly, the candidates of largest bound (ties: lower
    position first) in batches of :data:`LAZY_BATCH` (doubled per round) until the best fresh
    gain is at least every remaining bound (ties to the lower position): that candidate is the
    full argmax. A bound of -inf is exact. One step costs O(K) per re-evaluated candidate
    instead of the O(K^2) of re-scoring every candidate, so k = K = 1000 runs in about a
    second rather than tens.
    """
    Q = q_logp.detach().to(torch.float64).cpu().numpy()
    P = pair_logp.detach().to(torch.float64).cpu().numpy()
    K = Q.shape[0]
    first = int(np.argmax(Q))
    picks = [first]
    taken = np.zeros(K, dtype=bool)
    taken[first] = True
    cover = P[first].copy()  # log C_t
    x = Q + cover
    top = x.max()
    log_s = float(top + np.log(np.exp(x - top).sum())) if np.isfinite(top) else -math.inf
    if k <= 1:
        return picks, log_s
    bound = _log_gains(Q, P, cover)  # every gain after the first pick: exact
    fresh = np.ones(K, dtype=bool)
    bound[first] = -math.inf
    for _ in range(k - 1):
        free = np.flatnonzero(~taken)
        order = free[np.argsort(-bound[free], kind="stable")]  # by bound, ties to the lower position
        batch = LAZY_BATCH
        while True:
            stale = order[~fresh[order]]  # by bound, ties to the lower position
            done = order[fresh[order]]
            best = -1
            if done.size:
                gain = bound[done]
                best = int(done[gain == gain.max()].min())  # the best fresh gain, ties to the lower position
            if stale.size == 0 or (best >= 0 and (bound[best] > bound[stale[0]] or (
                    bound[best] == bound[stale[0]] and best < stale[0]))):
                break
            rows = stale[:batch]
            bound[rows] = _log_gains(Q, P[rows], cover)
            fresh[rows] = True
            batch *= 2
        if not np.isfinite(bound[best]):  # every remaining candidate adds nothing: next in pool order
            best = int(free[0])
        g = int(best)
        picks.append(g)
        taken[g] = True
        if np.isfinite(bound[g]):
            log_s = float(np.logaddexp(log_s, bound[g]))
        np.maximum(cover, P[g], out=cover)
        bound[g] = -math.inf
        fresh[:] = ~np.isfinite(bound)  # -inf stays exact; every other bound is stale now
    return picks, log_s


@register("dartboard", params={"sigma": Interval(float, 0.0, None, closed="neither"), "triage": TRIAGE})
def dartboard(inst: Instance, *, sigma: float = PAPER_SIGMA, triage: int | None = None):
    """Dartboard with cosine distances, as published (Pickett et al. 2024).

    Triage: the top-``triage`` items by cosine to the query (default the paper's 100; k when
    k > 100). On that pool, log P(t | x) = log N(D(x, t); 0, sigma^2) with D = (1 - cos)/2 in
    [0, 1] for the query x = q and for passages x = g; then the log-space greedy
    (:func:`greedy_dartboard`). ``sigma`` (default 0.096, the paper's value for this variant)
    sets the trade-off: small sigma tends to KNN. theta is ignored.

    Without a query vector the instance's relevance is taken as the query cosine.
    ``info["score"]`` is the final log sum_t N(q, t) max_{g in G} N(g, t) over the triaged pool.
    """
    K = triage_size(triage, inst.n, inst.k)
    pool, F, qcos = knn_triage(inst, K)
    q_logp = log_gaussian(cosine_distance(qcos), sigma)
    pair_logp = log_gaussian(cosine_distance(F @ F.T), sigma)
    picks, score = greedy_dartboard(q_logp, pair_logp, inst.k)
    return pool[torch.tensor(picks, device=pool.device)], inst.k, {"score": score, "triage": K, "sigma": sigma}


@register("dartboard_minmax", params={"sigma": Interval(float, 0.0, None, closed="neither"), "triage": TRIAGE,
                                       "scores": [ArrayLike(ndim=1), None]})
def dartboard_minmax(inst: Instance, *, sigma: float = 0.1, triage: int | None = None, scores=None):
    """divopt's earlier Dartboard "hybrid" — NOT the paper's ``dartboard_hybrid``.

    Differences from the paper's hybrid: the triage is the top-``triage`` items by the external
    ``scores`` (default: the instance's relevance; default size max(4k, 100)), not by KNN cosine;
    the scores are min-max rescaled to [-1, 1] over the triaged pool and used as query cosines
    in the Gaussian log N((1 - s)/2; 0, sigma^2), instead of the paper's softmax(score / sigma);
    passage pairs use the Gaussian on (1 - cos)/2 instead of the paper's log(1 - dist).
    Default sigma 0.1. Greedy and precision as in :func:`dartboard`.
    """
    n, k = inst.n, inst.k
    K = min(n, max(4 * k, 100)) if triage is None else triage_size(triage, n, k)
    ext = inst.relevance if scores is None else check_vector(scores, "scores", n, " (the pool size n)")
    ext = ext.to(device=inst.device)
    short = torch.nonzero(ext >= torch.topk(ext, K).values[-1]).squeeze(1)
    pool = short[_stable_top(ext[short].to(torch.float64), K)]
    ext = ext.to(torch.float64)
    F = inst.E.index_select(0, pool).to(torch.float64)
    s = ext[pool]
    lo, hi = float(s.min()), float(s.max())
    qcos = 2 * (s - lo) / (hi - lo) - 1 if hi > lo else torch.ones_like(s)
    q_logp = log_gaussian(cosine_distance(qcos), sigma)
    pair_logp = log_gaussian(cosine_distance(F @ F.T), sigma)
    picks, score = greedy_dartboard(q_logp, pair_logp, k)
    return pool[torch.tensor(picks, device=pool.device)], k, {"score": score, "triage": K, "sigma": sigma}
