"""Greedy baselines on the full pool: top-k, MMR, gMMR (DF-RAG) and VRSD.

Each step costs one GEMV E e (O(n d)); nothing n x n is formed. Ties go to the lowest index
(``torch.argmax`` returns the first maximum), matching plain reference loops.
"""
from __future__ import annotations

from typing import Callable

import torch

from divopt.models import Instance
from divopt.models.kernels import gather_rows, matvec

from .selection import register

__all__ = ["topk", "mmr", "gmmr", "vrsd", "greedy_loop"]


def greedy_loop(inst: Instance, add: Callable[[torch.Tensor, int], torch.Tensor]):
    """The greedy skeleton shared by MMR, gMMR and VRSD: first pick argmax c; after each pick j,
    ``add(e_j, j)`` updates the method's state and returns the scores of all n items; the next
    pick is the best unselected item. Returns (indices, k, {})."""
    taken = torch.zeros(inst.n, dtype=torch.bool, device=inst.device)
    picks = []
    j = int(torch.argmax(inst.relevance))
    for t in range(inst.k):
        picks.append(j)
        taken[j] = True
        if t == inst.k - 1:
            break
        score = add(gather_rows(inst.E, torch.tensor([j], device=inst.device))[0], j)
        score[taken] = -float("inf")
        j = int(torch.argmax(score))
    return torch.tensor(picks), inst.k, {}


@register("topk")
def topk(inst: Instance):
    """The k most relevant items (theta is ignored: this is the theta = 1 limit of every method)."""
    return torch.topk(inst.relevance, inst.k).indices, 1, {}


@register("mmr")
def mmr(inst: Instance):
    """Maximal marginal relevance (Carbonell & Goldstein 1998), as in LangChain:
    first pick argmax c; then argmax_i theta c_i - (1-theta) max_{j in S} w_ij, w_ij = e_i^T e_j.
    """
    c, th = inst.relevance, inst.theta
    max_sim = torch.full_like(c, -float("inf"))

    def add(e: torch.Tensor, j: int) -> torch.Tensor:
        torch.maximum(max_sim, matvec(inst.E, e), out=max_sim)
        return th * c - (1 - th) * max_sim

    return greedy_loop(inst, add)


@register("gmmr")
def gmmr(inst: Instance):
    """Global MMR with centroid distance (DF-RAG): first pick argmax c; then
    argmax_i theta c_i + (1-theta) sqrt(2 - 2 cos(e_i, m_S)), m_S the centroid of the selected set
    (||e_i - m_S/||m_S|| ||, the distance of e_i to the normalized centroid).
    """
    c, th = inst.relevance, inst.theta
    s = torch.zeros(inst.d, dtype=inst.acc_dtype, device=inst.device)

    def add(e: torch.Tensor, j: int) -> torch.Tensor:
        s.add_(e)
        cos = matvec(inst.E, s) / max(float(torch.linalg.vector_norm(s)), 1e-12)
        return th * c + (1 - th) * torch.sqrt((2 - 2 * cos).clamp_min(0))

    return greedy_loop(inst, add)


@register("vrsd")
def vrsd(inst: Instance):
    """Vector retrieval with similarity and diversity: greedy max cos(sum_S e + e_i, q).

    With s = sum_{j in S} e_j and unit rows: cos = (c_S + c_i) / sqrt(||s||^2 + 2 e_i^T s + 1),
    where c_S = q^T s = sum of the selected relevances (c = E q; user-supplied relevance is used
    in place of q^T e when no query vector is given). First pick: argmax c. theta is ignored.
    """
    c = inst.relevance
    s = torch.zeros(inst.d, dtype=inst.acc_dtype, device=inst.device)
    cs = [0.0]

    def add(e: torch.Tensor, j: int) -> torch.Tensor:
        s.add_(e)
        cs[0] += float(c[j])
        denom = (float(s @ s) + 2 * matvec(inst.E, s) + 1).clamp_min(1e-12).sqrt()
        return (cs[0] + c) / denom

    return greedy_loop(inst, add)
