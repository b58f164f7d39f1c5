"""The cross-encoder baselines of the Dartboard paper (Pickett et al. 2024): KNN-CC and MMR-CC.

Both start from the same triage as Dartboard (top-K by KNN cosine, K = 100) and score the pool
with a cross-encoder (inputs: :mod:`divopt_rag.solvers.cross_encoder`).

* ``knn_cc``: the pool reranked by the cross-encoder score CE(q, t); the k best.
* ``mmr_cc``: the paper's MMR on cross-encoder distances d = (hi - s)/(hi - lo) (the D-CC
  distances, passage pairs symmetrized). Its MMR is a greedy on set averages, not Carbonell &
  Goldstein's max-similarity MMR (divopt's ``mmr``): first pick argmin_t d(q, t); then
      argmin_g (1 - lambda) * mean_{i in S+g} d(q, i) - lambda * (sum_{i<j in S+g} d(i, j)) / |S+g|^2,
  with the diversity lambda = 1 - theta (theta = 1: pure relevance).
"""
from __future__ import annotations

import math
from typing import Any

import torch

from divopt_rag.models import Instance

from .cross_encoder import CE_PAIR_PARAMS, CE_PARAMS, PAPER_CE_RANGE, pool_pair_scores, pool_query_scores, rescale_to_distance
from .dartboard import TRIAGE, knn_triage, triage_size
from .selection import register

__all__ = ["knn_cc", "mmr_cc"]

_CE = ("cross_encoder",)


@register("knn_cc", needs=_CE, params={"triage": TRIAGE, **CE_PARAMS})
def knn_cc(inst: Instance, *, triage: int | None = None, cross_encoder: Any = None, query: Any = None,
           passages: Any = None, query_scores: Any = None):
    """KNN-CC (the paper's cross-encoder KNN): the top-``triage`` items by KNN cosine (default 100;
    k when k > 100) reranked by the cross-encoder score of (query, passage); the k best, best first.
    Ties keep the cosine order. theta is ignored. Scores: ``cross_encoder`` + ``query`` +
    ``passages``, or precomputed ``query_scores`` (n,).
    """
    K = triage_size(triage, inst.n, inst.k)
    pool, _, _ = knn_triage(inst, K)
    s = pool_query_scores(pool, inst.n, method="knn_cc", cross_encoder=cross_encoder, query=query,
                          passages=passages, query_scores=query_scores)
    order = torch.sort(s, descending=True, stable=True).indices[: inst.k]
    return pool[order], 1, {"triage": K}


@register("mmr_cc", needs=_CE, params={"triage": TRIAGE, **CE_PARAMS, **CE_PAIR_PARAMS})
def mmr_cc(inst: Instance, *, triage: int | None = None, cross_encoder: Any = None, query: Any = None,
           passages: Any = None, query_scores: Any = None, pair_scores: Any = None,
           ce_range: tuple[float, float] = PAPER_CE_RANGE):
    """MMR-CC as in the Dartboard paper: its set-average MMR on cross-encoder distances.

    Pool: top-``triage`` by KNN cosine (default 100; k when k > 100). Distances as in
    ``dartboard_cc`` (``ce_range`` default (-11.6, 11.4); pairs symmetrized). Greedy: first
    argmin d(q, t); then argmin over g of theta * mean_{S+g} d(q, .) - (1 - theta) *
    sum_{pairs in S+g} d / |S+g|^2 (the paper's diversity lambda = 1 - theta). Ties go to the
    better cosine rank. O(K) per step after scoring; float64.
    """
    K = triage_size(triage, inst.n, inst.k)
    pool, _, _ = knn_triage(inst, K)
    s = pool_query_scores(pool, inst.n, method="mmr_cc", cross_encoder=cross_encoder, query=query,
                          passages=passages, query_scores=query_scores)
    P = pool_pair_scores(pool, inst.n, method="mmr_cc", cross_encoder=cross_encoder, passages=passages,
                         pair_scores=pair_scores)
    qd = rescale_to_distance(s, ce_range)
    D = rescale_to_distance((P + P.T) / 2, ce_range)
    theta = inst.theta
    taken = torch.zeros(K, dtype=torch.bool, device=pool.device)
    first = int(torch.argmin(qd))
    picks = [first]
    taken[first] = True
    q_sum, pair_sum = float(qd[first]), 0.0
    pair_new = torch.zeros_like(qd)  # sum_{i in S} d(i, g) for every candidate g
    for m in range(1, inst.k):  # m = |S|
        pair_new += D[picks[-1]]
        total_q = q_sum + qd
        total_pair = pair_sum + pair_new
        score = theta * total_q / (m + 1) - (1 - theta) * total_pair / (m + 1) ** 2
        score[taken] = math.inf
        g = int(torch.argmin(score))
        picks.append(g)
        taken[g] = True
        q_sum, pair_sum = float(total_q[g]), float(total_pair[g])
    return pool[torch.tensor(picks, device=pool.device)], inst.k, {"triage": K}
