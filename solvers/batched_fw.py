"""Batched Frank-Wolfe: B problems (queries x thetas) on one pool E at once.

Problem b has relevance c_b (a query's E q_b, or user scores) and trade-off theta_b; all share E
and k. Column b of X (n x B) is its iterate and column b of V (d x B) is v_b = E^T x_b, so the
gradients of all active problems come from ONE matrix-matrix product

    G = theta (k-1) C + 2 (1-theta) (lambda X - E V)          (columns scaled per problem)

instead of B matrix-vector products: E is read once per iteration for the whole batch. Every
other step (top-k oracle, gap, line search, update of v) is the per-column version of
:func:`divopt.solvers.frank_wolfe.fw_relaxation`, and a column that stops at a fractional point
is rounded with :func:`round_pairwise` and resumes, exactly as the "fw" selector does; so each
column follows the single run's iterates and ends at the same k-set (up to floating-point
summation order inside the GEMM).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from divopt.models import Instance, objective_scale
from divopt.models.kernels import matmul, rmatvec
from divopt.models.validation import check_k, check_nonnegative, check_theta, check_vector

from .frank_wolfe import initial_point, round_pairwise

__all__ = ["BatchResult", "fw_batched", "fw_sweep"]


@dataclass
class BatchResult:
    """One row per problem b: k-set indices[b] (sorted by decreasing x, like "fw"), f value, iterations."""

    indices: torch.Tensor  # (B, k) int64
    objectives: np.ndarray  # (B,) float64 CCBQP objective
    iterations: np.ndarray  # (B,) FW iterations
    converged: np.ndarray  # (B,) bool
    thetas: np.ndarray  # (B,)
    roundings: np.ndarray  # (B,)


def _column_instance(base: Instance, c: torch.Tensor, theta: float) -> Instance:
    """base with relevance c and theta, sharing (not re-validating) E."""
    new = base.replace(theta=theta)
    object.__setattr__(new, "relevance", c)
    return new


def fw_batched(
    inst: Instance,
    relevance: Any,
    thetas: Any,
    *,
    relax_penalty: float = 2.0,
    init: str = "topk",
    max_iter: int = 1000,
    tol: float | None = None,
) -> BatchResult:
    """Run the "fw" selector on B problems at once; problem b = (relevance[b], thetas[b]) on inst.E.

    relevance : (B, n) relevance vectors (e.g. ``Q @ E.T`` for B queries).
    thetas : (B,) trade-offs. ``init`` is "topk" or "uniform" (the deterministic starts).
    k is ``inst.k``; inst.relevance and inst.theta are ignored. Returns a :class:`BatchResult`.
    """
    E, k, n = inst.E, inst.k, inst.n
    acc, dev = inst.acc_dtype, inst.device
    C = torch.as_tensor(relevance)
    if C.ndim != 2 or C.shape[1] != n:
        raise ValueError(f"relevance must have shape (B, {n}) (B problems x pool size n), got {tuple(C.shape)}")
    C = C.to(device=dev, dtype=acc)
    if not bool(torch.isfinite(C).all()):
        raise ValueError("relevance must be finite")
    B = C.shape[0]
    th_np = np.asarray(thetas, dtype=np.float64).reshape(-1)
    if th_np.shape != (B,):
        raise ValueError(f"thetas must have shape ({B},) (one per relevance row), got {th_np.shape}")
    for t in th_np:
        check_theta(float(t), "thetas")
    if init not in ("topk", "uniform"):
        raise ValueError(f"init must be one of ['topk', 'uniform'], got {init!r}")
    lam = check_nonnegative(relax_penalty, "relax_penalty")
    tol = 1e-6 * objective_scale(k) if tol is None else check_nonnegative(tol, "tol")
    max_iter = int(max_iter)
    cols = [_column_instance(inst, C[b], float(th_np[b])) for b in range(B)]
    th = torch.as_tensor(th_np, dtype=acc, device=dev)
    coef = 2 * (1 - th)  # (B,)
    Lin = (C * (th * (k - 1))[:, None]).T.contiguous()  # n x B, column b = theta_b (k-1) c_b
    X = torch.stack([initial_point(cols[b], init) for b in range(B)], 1)  # n x B
    V = torch.stack([rmatvec(E, X[:, b]) for b in range(B)], 1)  # d x B
    iters = np.zeros(B, dtype=np.int64)
    rounds = np.zeros(B, dtype=np.int64)
    converged = np.zeros(B, dtype=bool)
    active = np.ones(B, dtype=bool)
    while active.any():
        A = np.flatnonzero(active)
        At = torch.as_tensor(A, device=dev)
        XA, VA = X[:, At], V[:, At]
        G = Lin[:, At] + coef[At] * (lam * XA - matmul(E, VA))  # the one GEMM of the iteration
        S = torch.topk(G, k, dim=0).indices  # k x |A|
        D = -XA
        D.scatter_add_(0, S, torch.ones_like(S, dtype=acc))
        gap = (G * D).sum(0)
        gap_np = gap.cpu().numpy()
        stop = gap_np <= tol
        for r in np.flatnonzero(stop):
            b = int(A[r])
            x_b = X[:, b]
            if bool(((x_b < 1e-7) | (x_b > 1 - 1e-7)).all()) or lam < 1:
                converged[b], active[b] = True, False
            else:  # stationary but fractional: round without lowering f_lambda, then resume
                X[:, b], V[:, b] = round_pairwise(cols[b], x_b, V[:, b], lam)
                rounds[b] += 1
        move = np.flatnonzero(~stop)
        if move.size:
            mv = torch.as_tensor(move, device=dev)
            Sm = S[:, mv]
            Ed = E.index_select(0, Sm.reshape(-1)).to(acc).reshape(k, move.size, -1).sum(0) - VA[:, mv].T  # |M| x d
            Dm = D[:, mv]
            dd = (Dm * Dm).sum(0)
            curv = coef[At[mv]] * (lam * dd - (Ed * Ed).sum(1))
            g_m = gap[mv]
            gamma = torch.where(curv >= 0, torch.ones_like(curv), torch.clamp(-g_m / curv, max=1.0))
            bm = At[mv]
            X[:, bm] = (XA[:, mv] + gamma * Dm).clamp_(0.0, 1.0)
            V[:, bm] = VA[:, mv] + gamma * Ed.T
            iters[A[move]] += 1
        capped = active & (iters >= max_iter)
        active &= ~capped
    idx = torch.topk(X, k, dim=0).indices.T.contiguous()  # B x k
    from divopt.models import ccbqp_objective

    objs = np.array([ccbqp_objective(cols[b], idx[b].cpu().numpy()) for b in range(B)])
    return BatchResult(idx, objs, iters, converged, th_np, rounds)


def fw_sweep(
    inst: Instance,
    queries: Any,
    thetas: Any,
    **params: Any,
) -> tuple[BatchResult, np.ndarray, np.ndarray]:
    """FW for every (query, theta) pair in one batch: Q queries x T thetas -> B = Q T problems.

    queries : (Q, d) unit-norm query vectors (relevance E q) or a (Q, n) relevance matrix.
    Returns (result, query_index (B,), theta (B,)); problem b is query b // T at thetas[b % T].
    """
    Qt = torch.as_tensor(np.asarray(queries) if not isinstance(queries, torch.Tensor) else queries)
    if Qt.ndim != 2:
        raise ValueError(f"queries must be 2-D ((Q, d) vectors or (Q, n) relevance), got shape {tuple(Qt.shape)}")
    if Qt.shape[1] == inst.d and Qt.shape[1] != inst.n:
        rel = matmul(inst.E, Qt.T.to(inst.device)).T
    elif Qt.shape[1] == inst.n:
        rel = Qt
    else:
        raise ValueError(f"queries must have {inst.d} (d) or {inst.n} (n) columns, got {Qt.shape[1]}")
    th = np.asarray([check_theta(float(t), "thetas") for t in np.asarray(thetas, dtype=np.float64).reshape(-1)])
    Q, T = rel.shape[0], th.size
    rel_b = rel.repeat_interleave(T, dim=0)
    th_b = np.tile(th, Q)
    res = fw_batched(inst, rel_b, th_b, **params)
    return res, np.repeat(np.arange(Q), T), th_b
