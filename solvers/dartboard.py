"""Dartboard (Pickett et al. 2024, "Better RAG using relevant information gain").

Score of a set G: s(G) = log sum_{t in A} N(q, t) max_{g in G} N(g, t), where A is the triaged
pool (top-K by relevance), N(a, b) = exp(-dist(a, b)^2 / (2 sigma^2)) / (sigma sqrt(2 pi)) and
dist = (1 - cos) / 2 in [0, 1]. Greedy in log space: first pick the most relevant; then add
argmax_g logsumexp_t [log N(q, t) + max(M_t, log N(g, t))], M_t = max_{g in G} log N(g, t).
Work is O(K^2) per step on the K x K triaged pool (K = ``triage``), never n x n.
Variants: "cosine" (query distances from q^T e, or from the relevance when no q is given) and
"hybrid" (query distances from external relevance scores, e.g. a cross-encoder or BM25: the
scores are min-max rescaled to [-1, 1] over the triaged pool and mapped like cosines).
theta is ignored; sigma sets the trade-off.
"""
from __future__ import annotations

import math

import torch

from divopt.models import Instance
from divopt.models.kernels import gather_rows
from divopt.models.validation import check_choice, check_nonnegative, check_vector

from .selection import register

__all__ = ["dartboard", "log_gaussian"]


def log_gaussian(dist: torch.Tensor, sigma: float) -> torch.Tensor:
    """log N(dist; 0, sigma^2) = -log sigma - log(2 pi)/2 - dist^2 / (2 sigma^2)."""
    return -math.log(sigma) - 0.5 * math.log(2 * math.pi) - dist * dist / (2 * sigma * sigma)


@register("dartboard")
def dartboard(inst: Instance, *, sigma: float = 0.1, triage: int | None = None, variant: str = "cosine", scores=None):
    """Greedy Dartboard over the triaged top-``triage`` pool (default max(4k, 100), capped at n).

    ``scores`` (hybrid variant only): external relevance scores of all n items; defaults to
    ``inst.relevance``. Returns the selection and ``info["score"]``, the final log s(G).
    """
    sigma = check_nonnegative(sigma, "sigma", allow_zero=False)
    check_choice(variant, "variant", ("cosine", "hybrid"))
    n, k = inst.n, inst.k
    K = min(n, max(4 * k, 100)) if triage is None else int(triage)
    if K < k or K > n:
        raise ValueError(f"triage must satisfy k = {k} <= triage <= n = {n}, got {triage}")
    ext = inst.relevance if scores is None else check_vector(scores, "scores", n, " (the pool size n)").to(inst.device, inst.acc_dtype)
    rank_by = ext if variant == "hybrid" else inst.relevance
    pool = torch.topk(rank_by, K).indices
    F = gather_rows(inst.E, pool)
    if variant == "cosine":
        qcos = F @ inst.q if inst.q is not None else inst.relevance[pool]
    else:
        s = ext[pool]
        lo, hi = float(s.min()), float(s.max())
        qcos = 2 * (s - lo) / (hi - lo) - 1 if hi > lo else torch.ones_like(s)
    q_logp = log_gaussian((1 - qcos) / 2, sigma)  # (K,)
    doc_logp = log_gaussian((1 - F @ F.T) / 2, sigma)  # (K, K), row g = candidate
    taken = torch.zeros(K, dtype=torch.bool, device=inst.device)
    first = int(torch.argmax(q_logp))
    picks = [first]
    taken[first] = True
    best = doc_logp[first].clone()
    score_val = float(torch.logsumexp(q_logp + best, 0))
    for _ in range(k - 1):
        upd = torch.maximum(best.unsqueeze(0), doc_logp)  # (K, K): candidate g x target t
        gain = torch.logsumexp(upd + q_logp.unsqueeze(0), dim=1)
        gain[taken] = -float("inf")
        g = int(torch.argmax(gain))
        picks.append(g)
        taken[g] = True
        best = upd[g]
        score_val = float(gain[g])
    return pool[torch.tensor(picks, device=inst.device)], k, {"score": score_val, "triage": K, "variant": variant, "sigma": sigma}
