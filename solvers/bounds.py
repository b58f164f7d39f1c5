"""Certified upper bounds on the CCBQP optimum, at any pool size.

CCBQP (:mod:`divopt_rag.models.ccbqp`): f(S) = sum_{i in S} l_i + (1-theta)(k - ||sum_{i in S} e_i||^2),
l = theta (k-1) c the linear term, OPT = max over k-sets S.

* Concave bound (:func:`concave_bound`): with relax_penalty = 0 the relaxation
  f_0(x) = l^T x + (1-theta)(k - ||E^T x||^2) (:func:`divopt_rag.models.ccbqp.relaxed_objective`)
  is concave on {0 <= x <= 1, sum x = k} and equals f on binary points, so for every FW iterate
  x_t with FW gap g_t = max_s grad^T (s - x_t), OPT <= max f_0 <= f_0(x_t) + g_t (concavity: the
  linearization at x_t lies above f_0). The minimum over iterates is reported.
* Item bound (:func:`item_bound`): f(S) = sum_{i in S} (l_i - (1-theta) sum_{m in S - i} w_im)
  <= the sum of the k largest of l_i - (1-theta) L_i, with L_i a lower bound on the sum of the
  k-1 smallest cosines of i to other items of the pool
  (:func:`divopt_rag.solvers.screening.pool_cosine_bounds`: exact, or geometric from anchors).
* Pair bound: :func:`divopt_rag.solvers.screening.pair_bounds` (exact cosines), used by the
  full-scale certificate next to these two.

Every bound holds on any sub-pool that contains every optimal set (e.g. safe-screening
survivors), where the optimum is the same.
"""
from __future__ import annotations

import numpy as np
import torch

from divopt_rag.models import Instance, objective_scale
from divopt_rag.models.ccbqp import linear_term

from .frank_wolfe import fw_relaxation, initial_point
from .screening import pool_cosine_bounds

__all__ = ["upper_bound", "concave_bound", "item_bound"]


def concave_bound(inst: Instance, *, max_iter: int = 2000, tol: float | None = None) -> tuple[float, dict]:
    """min_t f_0(x_t) + g_t over the FW iterates on the concave relaxation (module docstring).

    Runs in float64 when n d <= 2 * 10^7 (the value and gap are sums of n terms); otherwise in the
    storage dtype, with the bound loosened by 1e-5 (|UB| + k(k-1)) against rounding. The bound
    is valid at any iteration. Returns (bound, FW diagnostics).
    """
    work = inst.to(dtype=torch.float64) if inst.n * inst.d <= 20_000_000 else inst
    x0 = initial_point(work, "topk")
    res = fw_relaxation(work, x0, relax_penalty=0.0, max_iter=max_iter, tol=tol)
    # (trace[t], gaps[t]) belong to the same iterate x_t
    ub = min(v + g for v, g in zip(res.trace, res.gaps))
    if work is inst and inst.E.dtype != torch.float64:
        ub += 1e-5 * (abs(ub) + objective_scale(inst.k))
    return ub, {"fw_iterations": res.iterations, "fw_converged": res.converged, "fw_gap": res.gap,
                "relaxed_value": res.value}


def item_bound(inst: Instance, *, exact_below: int = 4096) -> float:
    """Sum of the k largest l_i - (1-theta) L_i (module docstring); exact cosines for n <= exact_below."""
    k, th = inst.k, inst.theta
    pool = np.arange(inst.n)
    _, L, _, _ = pool_cosine_bounds(inst, pool, pool[:0], inst.n <= exact_below, ("query", "centroid", "clusters"))
    a = linear_term(inst.relevance.double(), th, k) - (1 - th) * L
    return float(torch.topk(a, k).values.sum()) + 1e-9 * objective_scale(k)


def upper_bound(inst: Instance, *, max_iter: int = 2000, tol: float | None = None,
                exact_below: int = 4096) -> tuple[float, dict]:
    """A certified upper bound on the CCBQP optimum of ``inst``: min(concave FW bound, item bound).

    Returns (bound, info) with info["concave_bound"], info["item_bound"] and FW diagnostics.
    """
    cb, info = concave_bound(inst, max_iter=max_iter, tol=tol)
    ib = item_bound(inst, exact_below=exact_below)
    info.update(concave_bound=cb, item_bound=ib)
    return min(cb, ib), info
