"""DPP greedy MAP inference (Chen, Zhang & Zhou, NeurIPS 2018) with incremental Cholesky.

Kernel L = diag(r) K diag(r), K = E E^T, r_i = exp(alpha c_i), alpha = theta / (2 (1-theta)).
Greedy MAP adds argmax_i d_i^2(L), the Schur complement of i given S, which is log det gain.
Since L_S = D_S K_S D_S, d_i^2(L) = r_i^2 d_i^2(K): we run Chen et al.'s update on K
(unit diagonal, well scaled) and pick argmax 2 alpha c_i + log d_i^2(K), which never
overflows even when alpha is large. Per step: one GEMV (K_j. = E e_j) plus O(n t) for the
Cholesky rows; memory k x n floats, no n x n matrix.
theta = 1 gives alpha = inf, i.e. pure relevance (top-k); theta = 0 gives the plain K-DPP.
With float32 (or half) storage, near-tied picks are re-decided in float64 from a fresh Cholesky
of the selected rows (:func:`divopt_rag.solvers.greedy.decide`). Checked against the paper's
Algorithm 1 run on L itself in tests/solvers/test_paper_baselines.py.
"""
from __future__ import annotations

import math

import torch

from divopt_rag.models import Instance
from divopt_rag.models.kernels import gather_rows, matvec
from divopt_rag.models.parameters import Interval

from .greedy import decide, exact_relevance, exact_rows
from .selection import register

__all__ = ["dpp"]


@register("dpp", params={"eps": Interval(float, 0.0, None)})
def dpp(inst: Instance, *, eps: float = 1e-10):
    """Greedy MAP of the quality-diversity DPP. If every remaining item has
    d_i^2(K) <= eps, or d items are picked (rank(E E^T) <= d: the selected rows span the rest), the
    remaining picks are filled by relevance and ``info["filled_by_relevance"]`` counts them."""
    c, k, th, n = inst.relevance, inst.k, inst.theta, inst.n
    if th >= 1.0:
        return torch.topk(c, k).indices, k, {"alpha": math.inf}
    alpha = th / (2 * (1 - th))
    quality = (2 * alpha) * c
    d2 = torch.ones(n, dtype=inst.acc_dtype, device=inst.device)
    chol = torch.empty(k, n, dtype=inst.acc_dtype, device=inst.device)
    taken = torch.zeros(n, dtype=torch.bool, device=inst.device)
    picks: list[int] = []

    def exact(rows: torch.Tensor, picks: list[int]) -> torch.Tensor:
        """2 alpha c_i + log d_i^2(K) in float64 on unit rows: d_i^2 = 1 - ||C_S^{-1} K_{S,i}||^2."""
        q64 = (2 * alpha) * exact_relevance(inst, rows)
        if not picks:
            return q64
        X = exact_rows(inst, torch.tensor(picks))
        L, info = torch.linalg.cholesky_ex(X @ X.T)
        if int(info) != 0:  # S is numerically dependent in float64: keep the storage-precision pick
            return None
        C = torch.linalg.solve_triangular(L, X @ exact_rows(inst, rows).T, upper=False)
        d2r = 1.0 - (C * C).sum(dim=0)
        return torch.where(d2r > eps, q64 + torch.log(d2r.clamp_min(1e-300)), torch.full_like(q64, -float("inf")))

    j = decide(quality, None, lambda rows: exact(rows, []))
    filled = 0
    for t in range(k):
        picks.append(j)
        taken[j] = True
        if t == k - 1:
            break
        ej = gather_rows(inst.E, torch.tensor([j], device=inst.device))[0]
        e = (matvec(inst.E, ej) - chol[:t].T @ chol[:t, j]) / math.sqrt(float(d2[j]))
        chol[t] = e
        d2 -= e * e
        score = quality + torch.log(d2.clamp_min(1e-300 if d2.dtype == torch.float64 else 1e-38))
        score[taken | (d2 <= eps)] = -float("inf")
        # rank(E E^T) <= d: once d items are picked every residual d_i^2 is exactly 0 (what float32
        # leaves there is rounding), so the greedy has nothing left to add
        if len(picks) >= inst.d or bool(torch.isinf(score).all()):
            rest = c.clone()
            rest[taken] = -float("inf")
            extra = torch.topk(rest, k - t - 1).indices.tolist()
            picks.extend(extra)
            filled = len(extra)
            break
        j = decide(score, None, lambda rows: exact(rows, picks))
    return torch.tensor(picks), k, {"alpha": alpha, "filled_by_relevance": filled}
