"""Greedy baselines on the full pool: top-k, MMR, gMMR (DF-RAG) and VRSD.

Each step costs one GEMV E e (O(n d)); nothing n x n is formed. Ties go to the lowest index, as
LangChain's ``maximal_marginal_relevance`` (a strict ``>`` scan) and Haystack's diversity ranker do:
scores equal up to float64 rounding, within :data:`TIE_EPS` (1 + |max|) of the maximum, are ties.
Identical rows (duplicate chunks, common in RAG corpora) get scores that differ in the last bits
when a GEMV computes their dot products in different blocks; without the band the later copy
could win.

Decisions in float64: with float32 (or half) storage the scores are computed in float32, whose
rounding (about sqrt(d) 6e-8) can swap two items whose float64 scores differ by less. Every
pick therefore re-scores, in float64 on the unit-normalized rows, the few items within
:data:`TIE_TOL` of the float32 maximum and takes the float64 winner (O(m k d) for m such
items; nothing for float64 storage). tests/solvers/test_paper_baselines.py checks float32 inputs
against float64 transcriptions of the papers.
"""
from __future__ import annotations

from typing import Callable

import torch

from divopt_rag.models import Instance
from divopt_rag.models.kernels import gather_rows, matvec

from .selection import register

__all__ = ["topk", "mmr", "gmmr", "vrsd", "greedy_loop", "decide", "lowest_within", "mmr_exact", "exact_rows",
           "exact_relevance", "TIE_TOL", "TIE_EPS"]

#: Items whose low-precision score is within TIE_TOL (1 + |max|) of the maximum are re-scored in float64.
TIE_TOL = 1e-4
#: float64 scores within TIE_EPS (1 + |max|) of the maximum are equal up to rounding: a float64 dot
#: product of unit vectors of length d is off by at most d 2^-53 (4.5e-13 at d = 4096), while two
#: different float32 embeddings differ in score by ~1e-9 or more. The lowest index among them wins.
TIE_EPS = 1e-12

ExactScore = Callable[[torch.Tensor], torch.Tensor]


def exact_rows(inst: Instance, rows: torch.Tensor) -> torch.Tensor:
    """Rows E[rows] in float64, renormalized (the unit vectors their low-precision storage rounds)."""
    X = inst.E.index_select(0, rows.to(inst.device)).double()
    return X / torch.linalg.vector_norm(X, dim=1, keepdim=True).clamp_min(1e-300)


def exact_relevance(inst: Instance, rows: torch.Tensor) -> torch.Tensor:
    """Relevance of ``rows`` in float64: q^T e_i on unit vectors when it is the stored relevance
    (c = E q), the stored (user-supplied) relevance otherwise."""
    stored = inst.relevance.index_select(0, rows.to(inst.device)).double()
    if inst.q is None:
        return stored
    q = inst.q.double()
    X = inst.E.index_select(0, rows.to(inst.device)).double()
    # stored = E q was computed from these rows as stored (in float16 they are unit only to ~5e-4,
    # so compare with their raw product, not with the cosine); a user relevance is kept
    same = (X @ q - stored).abs() <= 1e-5 * (1 + stored.abs())
    c = (X / torch.linalg.vector_norm(X, dim=1, keepdim=True).clamp_min(1e-300)) @ (q / torch.linalg.vector_norm(q))
    return torch.where(same, c, stored)


def lowest_within(score: torch.Tensor, eps: float = TIE_EPS) -> int:
    """The lowest index whose score is within ``eps`` (1 + |max|) of the maximum (one host sync)."""
    top = score.max()
    return int(torch.argmax((score >= top - eps * (1 + top.abs())).to(torch.uint8)))  # argmax: first True


def decide(score: torch.Tensor, taken: torch.Tensor | None, exact: ExactScore | None) -> int:
    """argmax of ``score`` over the untaken items, near-ties re-decided by ``exact`` in float64.

    ``exact(rows)`` returns the float64 scores of the (sorted) candidate rows, or None to keep the
    storage-precision argmax; it is skipped for float64 scores. Scores equal up to float64
    rounding (:data:`TIE_EPS`) go to the lowest index.
    """
    if taken is not None:
        score = score.masked_fill(taken, -float("inf"))
    if score.dtype == torch.float64:
        return lowest_within(score)
    j = int(torch.argmax(score))
    if exact is None:
        return j
    top = float(score[j])
    near = torch.nonzero(score >= top - TIE_TOL * (1.0 + abs(top))).flatten()
    if near.numel() <= 1:
        return j
    ex = exact(near)
    if ex is None:  # the exact scorer declined (e.g. a numerically singular system): keep argmax
        return j
    return int(near[lowest_within(ex)])


def greedy_loop(inst: Instance, add: Callable[[torch.Tensor, int], torch.Tensor],
                exact: Callable[[torch.Tensor, list[int]], torch.Tensor] | None = None,
                first: torch.Tensor | None = None, first_exact: ExactScore | None = None):
    """The greedy skeleton shared by MMR, gMMR and VRSD: first pick argmax c (or argmax ``first``);
    after each pick j, ``add(e_j, j)`` updates the method's state and returns the scores of all n
    items; the next pick is the best unselected item. ``exact(rows, picks)`` and ``first_exact``
    re-score near-tied rows in float64 (see :func:`decide`). Returns (indices, k, {})."""
    taken = torch.zeros(inst.n, dtype=torch.bool, device=inst.device)
    picks: list[int] = []
    if first is None:
        first, first_exact = inst.relevance, (lambda rows: exact_relevance(inst, rows))
    j = decide(first, None, first_exact)
    for t in range(inst.k):
        picks.append(j)
        taken[j] = True
        if t == inst.k - 1:
            break
        score = add(gather_rows(inst.E, torch.tensor([j], device=inst.device))[0], j)
        j = decide(score, taken, None if exact is None else (lambda rows: exact(rows, picks)))
    return torch.tensor(picks), inst.k, {}


@register("topk")
def topk(inst: Instance):
    """The k most relevant items (theta is ignored: this is the theta = 1 limit of every method)."""
    return torch.topk(inst.relevance, inst.k).indices, 1, {}


@register("mmr")
def mmr(inst: Instance):
    """Maximal marginal relevance (Carbonell & Goldstein 1998), as in LangChain:
    first pick argmax c; then argmax_i theta c_i - (1-theta) max_{j in S} w_ij, w_ij = e_i^T e_j.
    Checked against the paper's loop in tests/solvers/test_paper_baselines.py (no difference found).
    """
    c, th = inst.relevance, inst.theta
    max_sim = torch.full_like(c, -float("inf"))

    def add(e: torch.Tensor, j: int) -> torch.Tensor:
        torch.maximum(max_sim, matvec(inst.E, e), out=max_sim)
        return th * c - (1 - th) * max_sim

    return greedy_loop(inst, add, lambda rows, picks: mmr_exact(inst, rows, picks))


def mmr_exact(inst: Instance, rows: torch.Tensor, picks: list[int]) -> torch.Tensor:
    """MMR's scores of ``rows`` after ``picks``, in float64 on the unit rows (near-ties, :func:`decide`)."""
    W = exact_rows(inst, rows) @ exact_rows(inst, torch.tensor(picks)).T
    return inst.theta * exact_relevance(inst, rows) - (1 - inst.theta) * W.amax(dim=1)


@register("gmmr")
def gmmr(inst: Instance):
    """Geometric MMR, gMMR (DF-RAG, Khan et al., Sec. 3.1, Eqs. 1-3): first pick argmax c; then
    argmax_i theta c_i + (1-theta) sqrt(2 - 2 cos(e_i, m_S)), m_S the centroid of the selected set
    (||e_i - m_S/||m_S|| ||, the distance of e_i to the normalized centroid).
    """
    c, th = inst.relevance, inst.theta
    s = torch.zeros(inst.d, dtype=inst.acc_dtype, device=inst.device)

    def add(e: torch.Tensor, j: int) -> torch.Tensor:
        s.add_(e)
        cos = matvec(inst.E, s) / max(float(torch.linalg.vector_norm(s)), 1e-12)
        return th * c + (1 - th) * torch.sqrt((2 - 2 * cos).clamp_min(0))

    def exact(rows: torch.Tensor, picks: list[int]) -> torch.Tensor:
        m = exact_rows(inst, torch.tensor(picks)).sum(dim=0)
        cos = exact_rows(inst, rows) @ (m / torch.linalg.vector_norm(m).clamp_min(1e-300))
        return th * exact_relevance(inst, rows) + (1 - th) * torch.sqrt((2 - 2 * cos).clamp_min(0))

    return greedy_loop(inst, add, exact)


@register("vrsd")
def vrsd(inst: Instance):
    """Vector retrieval with similarity and diversity (Gao & Zhang 2024, the heuristic algorithm):
    first pick the item most similar to q; then greedy max cos(sum_S e + e_i, q).

    With s = sum_{j in S} e_j and unit rows: cos = (c_S + c_i) / sqrt(||s||^2 + 2 e_i^T s + 1),
    where c_S = q^T s = sum of the selected relevances. c = E q when the instance has a query
    vector (the paper's similarity, also when a user relevance is stored beside q); the stored
    relevance stands in for q^T e only when no query vector is given. theta is ignored.
    """
    c = inst.relevance if inst.q is None else matvec(inst.E, inst.q)
    s = torch.zeros(inst.d, dtype=inst.acc_dtype, device=inst.device)
    cs = [0.0]

    def add(e: torch.Tensor, j: int) -> torch.Tensor:
        s.add_(e)
        cs[0] += float(c[j])
        denom = (float(s @ s) + 2 * matvec(inst.E, s) + 1).clamp_min(1e-12).sqrt()
        return (cs[0] + c) / denom

    def exact(rows: torch.Tensor, picks: list[int]) -> torch.Tensor:
        if inst.q is None:
            c64 = exact_relevance(inst, rows)
            S = exact_rows(inst, torch.tensor(picks))
            s64 = S.sum(dim=0)
            cS = float(exact_relevance(inst, torch.tensor(picks)).sum())
            X = exact_rows(inst, rows)
            return (cS + c64) / (float(s64 @ s64) + 2 * (X @ s64) + 1).clamp_min(1e-300).sqrt()
        V = exact_rows(inst, torch.tensor(picks)).sum(dim=0)[None, :] + exact_rows(inst, rows)
        return (V @ inst.q.double()) / torch.linalg.vector_norm(V, dim=1).clamp_min(1e-300)

    if inst.q is None:
        return greedy_loop(inst, add, exact)
    q64 = inst.q.double()
    return greedy_loop(inst, add, exact, first=c,
                       first_exact=lambda rows: exact_rows(inst, rows) @ (q64 / torch.linalg.vector_norm(q64)))
