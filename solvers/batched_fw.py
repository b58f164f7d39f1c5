"""Batched Frank-Wolfe: B problems (queries x thetas) on one pool E at once.

Problem b has relevance c_b (a query's E q_b, or user scores) and trade-off theta_b; all share E
and k. Row b of X (B x n) is its iterate and row b of V (B x d) is v_b = E^T x_b, so the
gradients of all active problems come from ONE matrix-matrix product

    G = theta (k-1) C + 2 (1-theta) (lambda X - V E^T)          (rows scaled per problem)

instead of B matrix-vector products: E is read once per iteration for the whole batch. The
iteration is :func:`divopt_rag.solvers.fw_kernel.fw_rows` (the one FW kernel) with one row per
problem, and a row that stops at a fractional point is rounded with :func:`round_pairwise` and
resumes, exactly as the "fw_topk" selector does; so each row follows the single run's iterates
and ends at the same k-set (up to floating-point summation order inside the GEMM).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import ccbqp_objective, linear_term, relaxed_grad
from divopt_rag.models.kernels import matmul
from divopt_rag.models.validation import check_nonnegative, check_theta

from .fw_arrays import V_times_Et, rows_times_E
from .fw_kernel import fw_rows
from .frank_wolfe import round_pairwise, working_set_size
from .fw_kernel import fw_gap_at, oracle, row_tolerance

__all__ = ["BatchResult", "fw_batched", "fw_batched_ws", "fw_sweep"]


@dataclass
class BatchResult:
    """One row per problem b: k-set indices[b] (sorted by decreasing x, like "fw_topk"), f value, iterations."""

    indices: torch.Tensor  # (B, k) int64
    objectives: np.ndarray  # (B,) float64 CCBQP objective
    iterations: np.ndarray  # (B,) FW iterations
    converged: np.ndarray  # (B,) bool
    thetas: np.ndarray  # (B,)
    roundings: np.ndarray  # (B,)
    x: torch.Tensor | None = None  # (B, n) final iterates


def _check_problems(inst: Instance, relevance: Any, thetas: Any) -> tuple[torch.Tensor, np.ndarray]:
    """Validate B problems on one pool: relevance (B, n) finite, one theta in [0, 1] per row."""
    n = inst.n
    C = torch.as_tensor(relevance)
    if C.ndim != 2 or C.shape[1] != n:
        raise ValueError(f"relevance must have shape (B, {n}) (B problems x pool size n), got {tuple(C.shape)}")
    C = C.to(device=inst.device, dtype=inst.acc_dtype)
    if not bool(torch.isfinite(C).all()):
        raise ValueError("relevance must be finite")
    th_np = np.asarray(thetas, dtype=np.float64).reshape(-1)
    if th_np.shape != (C.shape[0],):
        raise ValueError(f"thetas must have shape ({C.shape[0]},) (one per relevance row), got {th_np.shape}")
    for t in th_np:
        check_theta(float(t), "thetas")
    return C, th_np


def _column_instance(base: Instance, c: torch.Tensor, theta: float) -> Instance:
    """base with relevance c and theta, sharing (not re-validating) E."""
    return base.replace(theta=theta, relevance=c)


def fw_batched(
    inst: Instance,
    relevance: Any,
    thetas: Any,
    *,
    relax_penalty: float = 2.0,
    init: str = "topk",
    max_iter: int = 1000,
    tol: float | None = None,
    x0: Any = None,
) -> BatchResult:
    """Run divopt's full-pool FW ("fw_topk") on B problems at once: problem b is
    (relevance[b], thetas[b]) on inst.E.

    relevance : (B, n) relevance vectors (e.g. ``Q @ E.T`` for B queries).
    thetas : (B,) trade-offs. ``init`` is "topk" or "uniform" (the deterministic starts);
    x0 : optional (B, n) feasible starting points instead.
    k is ``inst.k``; inst.relevance and inst.theta are ignored. Returns a :class:`BatchResult`
    (with the final iterates x, B x n).

    Rows are problems (X is B x n, V is B x d): :func:`divopt_rag.solvers.fw_kernel.fw_rows`,
    the FW kernel of every single run, so each row follows the single run's iterates.
    """
    E, k, n = inst.E, inst.k, inst.n
    acc, dev = inst.acc_dtype, inst.device
    C, th_np = _check_problems(inst, relevance, thetas)
    B = C.shape[0]
    if init not in ("topk", "uniform"):
        raise ValueError(f"init must be one of ['topk', 'uniform'], got {init!r}")
    lam = check_nonnegative(relax_penalty, "relax_penalty")
    Lin = linear_term(C, torch.as_tensor(th_np, dtype=acc, device=dev)[:, None], k)  # B x n
    cols = [_column_instance(inst, C[b], float(th_np[b])) for b in range(B)]
    if x0 is not None:
        X = torch.as_tensor(x0).to(device=dev, dtype=acc).clone()
        if X.shape != (B, n):
            raise ValueError(f"x0 must have shape ({B}, {n}), got {tuple(X.shape)}")
    elif init == "topk":
        X = torch.zeros(B, n, dtype=acc, device=dev)
        X.scatter_(1, torch.topk(C, k, dim=1).indices, 1.0)
    else:
        X = torch.full((B, n), k / n, dtype=acc, device=dev)
    res = fw_rows(E, X, Lin, th_np, k, relax_penalty=lam, max_iter=max_iter, tol=tol,
                  vertex=lambda b, x, v: round_pairwise(cols[b], x, v, lam))
    idx = torch.topk(res.x, k, dim=1).indices  # B x k
    objs = np.array([ccbqp_objective(cols[b], idx[b].cpu().numpy()) for b in range(B)])
    return BatchResult(idx, objs, res.iterations, res.converged, th_np, res.roundings, res.x)


def fw_batched_ws(
    inst: Instance,
    relevance: Any,
    thetas: Any,
    *,
    working_set: int | str = "auto",
    relax_penalty: float = 2.0,
    max_iter: int = 1000,
    tol: float | None = None,
    max_rounds: int = 20,
) -> BatchResult:
    """Batched FW on a shared working set, certified on the full pool (top-k init).

    The working set P is the union over problems of their M most relevant items. Batched FW
    (:func:`fw_batched`) runs on E_P; then ONE full-pool GEMM gives every problem's full
    gradient and FW gap at its result. A problem is accepted only when that full-pool gap is
    <= tol (a certified FW-stationary point of the full problem: the stopping rule of plain FW,
    as in the "fw_ws" selector); otherwise its best outside items join P and
    the problems still open continue from their current points. ``working_set="auto"`` uses
    M = max(4096, 16 k, n / 32); when the union exceeds n / 2 this is plain :func:`fw_batched`.
    Paths differ from the single runs' (their working sets differ), the stopping rule does not.
    """
    E, k, n = inst.E, inst.k, inst.n
    acc, dev = inst.acc_dtype, inst.device
    C, th_np = _check_problems(inst, relevance, thetas)
    B = C.shape[0]
    M = working_set_size(n, k) if working_set == "auto" else int(working_set)
    if M < k:
        raise ValueError(f"working_set must be >= k = {k}, got {working_set}")
    lam = check_nonnegative(relax_penalty, "relax_penalty")
    in_P = torch.zeros(n, dtype=torch.bool, device=dev)
    in_P[torch.topk(C, min(M, n), dim=1).indices.reshape(-1)] = True
    if 2 * int(in_P.sum()) > n:
        return fw_batched(inst, C, th_np, relax_penalty=relax_penalty, max_iter=max_iter, tol=tol)
    X = torch.zeros(B, n, dtype=acc, device=dev)
    X.scatter_(1, torch.topk(C, k, dim=1).indices, 1.0)
    iters = np.zeros(B, dtype=np.int64)
    rounds = np.zeros(B, dtype=np.int64)
    converged = np.zeros(B, dtype=bool)
    open_ = np.arange(B)
    th_t = torch.as_tensor(th_np, dtype=acc, device=dev)[:, None]
    for _ in range(int(max_rounds)):
        P = in_P.nonzero().flatten()
        ot = torch.as_tensor(open_, device=dev)
        sub = inst.subset(P.cpu().numpy())
        Co = C.index_select(0, ot)
        r = fw_batched(sub, Co.index_select(1, P), th_np[open_], relax_penalty=relax_penalty,
                       max_iter=max_iter, tol=tol, x0=X.index_select(0, ot).index_select(1, P))
        Xo = torch.zeros(open_.size, n, dtype=acc, device=dev)
        Xo[:, P] = r.x
        X.index_copy_(0, ot, Xo)
        iters[open_] += r.iterations
        rounds[open_] += r.roundings
        # certify on the full pool: one GEMM for every open problem's full gradient (the oracle),
        # the gap of its vertex from the vertex's rows (fw_kernel), one host read
        Vo = rows_times_E(Xo[:, P], sub.E)
        Lo = linear_term(Co, th_t[open_], k)
        th_o = torch.as_tensor(th_np[open_], device=dev, dtype=torch.float64)
        G = relaxed_grad(Lo, V_times_Et(Vo, E), Xo, th_o[:, None], lam)
        gap_t, at_vertex = fw_gap_at(E, Xo, Lo, Vo, oracle(E, G, k, Xo, Lo, Vo, th_o, lam), th_o, k, lam)
        done_t = at_vertex | (gap_t <= row_tolerance(k, th_o, lam, Lo, tol, n, inst.d))
        done = done_t.cpu().numpy()
        ok = done | ~r.converged  # an iteration cap ends the problem, not certified
        converged[open_[ok]] = r.converged[ok] & done[ok]
        bad = np.flatnonzero(~ok)
        if bad.size == 0:
            break
        Gb = G.index_select(0, torch.as_tensor(bad, device=dev)).masked_fill(in_P, -torch.inf)
        add = torch.topk(Gb, min(max(k, M // 4), int((~in_P).sum())), dim=1).indices
        in_P[add.reshape(-1)] = True
        open_ = open_[bad]
    idx = torch.topk(X, k, dim=1).indices
    objs = np.array([ccbqp_objective(_column_instance(inst, C[b], float(th_np[b])), idx[b].cpu().numpy())
                     for b in range(B)])
    return BatchResult(idx, objs, iters, converged, th_np, rounds, X)


def fw_sweep(
    inst: Instance,
    queries: Any,
    thetas: Any,
    *,
    working_set: Any = 0,
    **params: Any,
) -> tuple[BatchResult, np.ndarray, np.ndarray]:
    """FW for every (query, theta) pair in one batch: Q queries x T thetas -> B = Q T problems.

    queries : (Q, d) unit-norm query vectors (relevance E q) or a (Q, n) relevance matrix.
    working_set : 0 (default) for :func:`fw_batched` (equals the single "fw_topk" runs),
        "auto" or an int M for :func:`fw_batched_ws` (shared working set, certified).
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
    if working_set:
        res = fw_batched_ws(inst, rel_b, th_b, working_set=working_set, **params)
    else:
        res = fw_batched(inst, rel_b, th_b, **params)
    return res, np.repeat(np.arange(Q), T), th_b
