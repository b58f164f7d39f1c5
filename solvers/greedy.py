"""Greedy baselines on the full pool: top-k, MMR, gMMR (DF-RAG) and VRSD.

Each step costs one GEMV E e (O(n d)); nothing n x n is formed. Ties go to the lowest index
(``torch.argmax`` returns the first maximum), matching plain reference loops.
"""
from __future__ import annotations

import torch

from divopt.models import Instance
from divopt.models.kernels import gather_rows, matvec

from .selection import register

__all__ = ["topk", "mmr", "gmmr", "vrsd"]


def _row(inst: Instance, j: int) -> torch.Tensor:
    return gather_rows(inst.E, torch.tensor([j], device=inst.device))[0]


@register("topk")
def topk(inst: Instance):
    """The k most relevant items (theta is ignored: this is the theta = 1 limit of every method)."""
    return torch.topk(inst.relevance, inst.k).indices, 1, {}


@register("mmr")
def mmr(inst: Instance):
    """Maximal marginal relevance (Carbonell & Goldstein 1998), as in LangChain:
    first pick argmax c; then argmax_i theta c_i - (1-theta) max_{j in S} w_ij, w_ij = e_i^T e_j.
    """
    c, k, th = inst.relevance, inst.k, inst.theta
    taken = torch.zeros(inst.n, dtype=torch.bool, device=inst.device)
    max_sim = torch.full_like(c, -float("inf"))
    picks = []
    j = int(torch.argmax(c))
    for t in range(k):
        picks.append(j)
        taken[j] = True
        if t == k - 1:
            break
        torch.maximum(max_sim, matvec(inst.E, _row(inst, j)), out=max_sim)
        score = th * c - (1 - th) * max_sim
        score[taken] = -float("inf")
        j = int(torch.argmax(score))
    return torch.tensor(picks), k, {}


@register("gmmr")
def gmmr(inst: Instance):
    """Global MMR with centroid distance (DF-RAG): first pick argmax c; then
    argmax_i theta c_i + (1-theta) sqrt(2 - 2 cos(e_i, m_S)), m_S the centroid of the selected set
    (||e_i - m_S/||m_S|| ||, the distance of e_i to the normalized centroid).
    """
    c, k, th = inst.relevance, inst.k, inst.theta
    taken = torch.zeros(inst.n, dtype=torch.bool, device=inst.device)
    s = torch.zeros(inst.d, dtype=inst.acc_dtype, device=inst.device)
    picks = []
    j = int(torch.argmax(c))
    for t in range(k):
        picks.append(j)
        taken[j] = True
        if t == k - 1:
            break
        s += _row(inst, j)
        norm = float(torch.linalg.vector_norm(s))
        cos = matvec(inst.E, s) / max(norm, 1e-12)
        score = th * c + (1 - th) * torch.sqrt((2 - 2 * cos).clamp_min(0))
        score[taken] = -float("inf")
        j = int(torch.argmax(score))
    return torch.tensor(picks), k, {}


@register("vrsd")
def vrsd(inst: Instance):
    """Vector retrieval with similarity and diversity: greedy max cos(sum_S e + e_i, q).

    With s = sum_{j in S} e_j and unit rows: cos = (c_S + c_i) / sqrt(||s||^2 + 2 e_i^T s + 1),
    where c_S = q^T s = sum of the selected relevances (c = E q; user-supplied relevance is used
    in place of q^T e when no query vector is given). First pick: argmax c. theta is ignored.
    """
    c, k = inst.relevance, inst.k
    taken = torch.zeros(inst.n, dtype=torch.bool, device=inst.device)
    s = torch.zeros(inst.d, dtype=inst.acc_dtype, device=inst.device)
    cs = 0.0
    picks = []
    j = int(torch.argmax(c))
    for t in range(k):
        picks.append(j)
        taken[j] = True
        if t == k - 1:
            break
        s += _row(inst, j)
        cs += float(c[j])
        denom = (float(s @ s) + 2 * matvec(inst.E, s) + 1).clamp_min(1e-12).sqrt()
        score = (cs + c) / denom
        score[taken] = -float("inf")
        j = int(torch.argmax(score))
    return torch.tensor(picks), k, {}
