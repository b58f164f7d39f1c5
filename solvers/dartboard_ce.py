"""Dartboard with a cross-encoder (Pickett et al. 2024): the hybrid (D-H) and D-CC variants.

Both triage the top-K passages by KNN cosine to the query (K = 100), as the cosine variant
does (:func:`divopt_rag.solvers.dartboard.knn_triage`), score the pool with a cross-encoder and run
the same log-space greedy (:func:`divopt_rag.solvers.dartboard.greedy_dartboard`). They differ in
the log-probabilities:

* hybrid:  log P(t | q) = s_t / sigma - logsumexp_u (s_u / sigma)   (softmax of the
           cross-encoder scores s_t = CE(q, t) over the pool),
           log P(t | g) = log(1 - D(g, t)),  D = (1 - cos)/2 in [0, 1]  (no sigma);
* D-CC:    log P(t | q) = log N(d(q, t); 0, sigma^2),  d(q, t) = (hi - CE(q, t)) / (hi - lo),
           log P(t | g) = log N(d(g, t); 0, sigma^2),  d(g, t) = (hi - (CE(g, t) + CE(t, g))/2) / (hi - lo),
           with (lo, hi) = (-11.6, 11.4), the logit range of ms-marco-MiniLM-L-6-v2, and the
           self-pair CE(t, t) kept on the diagonal.

Cross-encoder inputs: see :mod:`divopt_rag.solvers.cross_encoder`. theta is ignored; sigma sets the
trade-off. All arithmetic after scoring is float64.
"""
from __future__ import annotations

from typing import Any

import torch

from divopt_rag.models import Instance
from divopt_rag.models.parameters import Interval

from .cross_encoder import CE_PAIR_PARAMS, CE_PARAMS, PAPER_CE_RANGE, pool_pair_scores, pool_query_scores, rescale_to_distance
from .dartboard import PAPER_SIGMA, TRIAGE, cosine_distance, greedy_dartboard, knn_triage, log_gaussian, triage_size
from .selection import register

__all__ = ["dartboard_hybrid", "dartboard_cc"]

_CE = ("cross_encoder",)


@register("dartboard_hybrid", needs=_CE, params={"sigma": Interval(float, 0.0, None, closed="neither"), "triage": TRIAGE,
                                                  **CE_PARAMS})
def dartboard_hybrid(inst: Instance, *, sigma: float = PAPER_SIGMA, triage: int | None = None,
                     cross_encoder: Any = None, query: Any = None, passages: Any = None, query_scores: Any = None):
    """The paper's hybrid Dartboard (D-H): cross-encoder relevance, cosine passage coverage.

    Pool: top-``triage`` by KNN cosine (default 100; k when k > 100). log P(t | q) is the
    log-softmax of s_t / sigma over the pool, s_t the cross-encoder score of (query, passage_t);
    log P(t | g) = log(1 - (1 - cos(g, t))/2) = log((1 + cos(g, t))/2). First pick: the best
    cross-encoder score. ``sigma`` default 0.096 (as for ``dartboard``).

    Scores come from ``cross_encoder`` (a callable on (query, passage) pairs, with ``query`` and
    the n ``passages``) or from precomputed ``query_scores`` (n,), e.g. ``inst.relevance`` of an
    instance built with ``relevance=`` cross-encoder scores. ``info["score"]`` is the final
    log s(G) with P(t | q) normalized over the pool.
    """
    K = triage_size(triage, inst.n, inst.k)
    pool, F, _ = knn_triage(inst, K)
    s = pool_query_scores(pool, inst.n, method="dartboard_hybrid", cross_encoder=cross_encoder, query=query,
                          passages=passages, query_scores=query_scores)
    q_logp = torch.log_softmax(s / sigma, dim=0)
    pair_logp = torch.log1p(-cosine_distance(F @ F.T))  # -inf for opposite passages (D = 1)
    picks, score = greedy_dartboard(q_logp, pair_logp, inst.k)
    return pool[torch.tensor(picks, device=pool.device)], inst.k, {"score": score, "triage": K, "sigma": sigma}


@register("dartboard_cc", needs=_CE, params={"sigma": Interval(float, 0.0, None, closed="neither"), "triage": TRIAGE,
                                              **CE_PARAMS, **CE_PAIR_PARAMS})
def dartboard_cc(inst: Instance, *, sigma: float = PAPER_SIGMA, triage: int | None = None, cross_encoder: Any = None,
                 query: Any = None, passages: Any = None, query_scores: Any = None, pair_scores: Any = None,
                 ce_range: tuple[float, float] = PAPER_CE_RANGE):
    """The paper's D-CC: the cross-encoder for query-passage and passage-passage distances.

    Pool: top-``triage`` by KNN cosine (default 100; k when k > 100). Distances rescale the
    cross-encoder scores with ``ce_range = (lo, hi)`` (default (-11.6, 11.4), the paper's range
    for ms-marco-MiniLM-L-6-v2 logits; other models need their own): d = (hi - s)/(hi - lo),
    not clipped. Passage pairs use the symmetrized score (CE(g, t) + CE(t, g))/2, the diagonal
    included. Both sides use log N(d; 0, sigma^2); ``sigma`` default 0.096 (as for ``dartboard``).

    Scores come from ``cross_encoder`` (with ``query`` and the n ``passages``: K query pairs and
    K^2 passage pairs are scored) or from precomputed ``query_scores`` (n,) / ``pair_scores`` (n, n).
    ``info["score"]`` is the final log sum_t N(d(q, t)) max_g N(d(g, t)) over the pool.
    """
    K = triage_size(triage, inst.n, inst.k)
    pool, _, _ = knn_triage(inst, K)
    s = pool_query_scores(pool, inst.n, method="dartboard_cc", cross_encoder=cross_encoder, query=query,
                          passages=passages, query_scores=query_scores)
    P = pool_pair_scores(pool, inst.n, method="dartboard_cc", cross_encoder=cross_encoder, passages=passages,
                         pair_scores=pair_scores)
    q_logp = log_gaussian(rescale_to_distance(s, ce_range), sigma)
    pair_logp = log_gaussian(rescale_to_distance((P + P.T) / 2, ce_range), sigma)
    picks, score = greedy_dartboard(q_logp, pair_logp, inst.k)
    return pool[torch.tensor(picks, device=pool.device)], inst.k, {"score": score, "triage": K, "sigma": sigma}
