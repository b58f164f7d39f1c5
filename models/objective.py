"""CCBQP objective, its lambda-relaxation and gradient, evaluated without forming E E^T.

Binary form (x in {0,1}^n):
    f(x) = theta (k-1) c^T x + (1-theta) (x^T x - ||E^T x||^2)
which for sum(x) = k is theta (k-1) c^T x + (1-theta) (k - ||E^T x||^2), i.e.
theta (k-1) * sum_{i in S} c_i - (1-theta) * sum over ordered pairs i != j in S of w_ij.

Relaxation over {0 <= x <= 1, sum(x) = k} with relax_penalty lambda:
    f_lambda(x) = f(x) + (1-theta) lambda (||x||^2 - k)
                = theta (k-1) c^T x + (1-theta) (k + lambda (||x||^2 - k) - ||E^T x||^2)
for which f_lambda = f on binary points (x^T x = k). This differs from the DESIGN.md form
theta (k-1) c^T x + (1-theta)(lambda ||x||^2 - ||E^T x||^2) only by the constant
(1-theta)(lambda - 1) k, so gradients, FW steps and maximizers are identical.
Along e_i - e_j the second derivative is 2 (1-theta)(2 lambda - ||e_i - e_j||^2)
= 2 (1-theta)(2 lambda - 2 + 2 w_ij) >= 0 when lambda >= 2 (w_ij >= -1), so mass moved
between two fractional coordinates never lowers f_lambda: the relaxation is tight.
With lambda = 0, f_0 is concave and its maximum bounds the binary optimum from above.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .instance import Instance
from .kernels import gather_rows, matvec, rmatvec
from .validation import check_indices, check_nonnegative, check_vector

__all__ = ["ccbqp_objective", "relaxed_objective", "relaxed_gradient", "normalized_gap", "objective_scale"]


def ccbqp_objective(inst: Instance, indices: Any) -> float:
    """f(x) for the indicator x of ``indices`` (unique, in [0, n)), in float64.

    f = theta (k-1) sum_{i in S} c_i + (1-theta) (|S| - ||sum_{i in S} e_i||^2), with k = inst.k.
    Costs O(|S| d): only the selected rows are read.
    """
    idx = check_indices(indices, inst.n)
    if idx.size == 0:
        return 0.0
    t = torch.as_tensor(idx, device=inst.device)
    rows = gather_rows(inst.E, t).double()
    v = rows.sum(0)
    rel = float(inst.relevance.index_select(0, t).double().sum())
    th = inst.theta
    return th * (inst.k - 1) * rel + (1.0 - th) * (idx.size - float(v @ v))


def _as_x(inst: Instance, x: Any) -> torch.Tensor:
    xt = check_vector(x, "x", inst.n, " (the pool size n)")
    return xt.to(device=inst.device, dtype=inst.acc_dtype)


def relaxed_objective(inst: Instance, x: Any, relax_penalty: float = 2.0, v: torch.Tensor | None = None) -> float:
    """f_lambda(x) = theta (k-1) c^T x + (1-theta)(k + lambda (||x||^2 - k) - ||E^T x||^2).

    One pass over E for v = E^T x unless ``v`` is given (no n x n matrix). Equals
    :func:`ccbqp_objective` on binary x.
    """
    lam = check_nonnegative(relax_penalty, "relax_penalty")
    xt = _as_x(inst, x)
    if v is None:
        v = rmatvec(inst.E, xt)
    th, k = inst.theta, inst.k
    return float(
        th * (k - 1) * (inst.relevance.double() @ xt.double())
        + (1 - th) * (k + lam * (float(xt.double() @ xt.double()) - k) - float(v.double() @ v.double()))
    )


def relaxed_gradient(inst: Instance, x: Any, v: torch.Tensor | None = None, relax_penalty: float = 2.0) -> torch.Tensor:
    """grad f_lambda(x) = theta (k-1) c + 2 (1-theta)(lambda x - E v), v = E^T x."""
    xt = _as_x(inst, x)
    if v is None:
        v = rmatvec(inst.E, xt)
    th = inst.theta
    return th * (inst.k - 1) * inst.relevance + 2 * (1 - th) * (relax_penalty * xt - matvec(inst.E, v))


def objective_scale(k: int) -> float:
    """k (k-1): the scale by which optimality gaps are normalized."""
    return float(max(k * (k - 1), 1))


def normalized_gap(optimum: float, value: float, k: int) -> float:
    """(OPT - f) / (k (k-1)), the gap reported everywhere in divopt."""
    return (float(optimum) - float(value)) / objective_scale(k)
