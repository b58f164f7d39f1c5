"""Screening by the concave relaxation's linearization: per-item bounds at any pool size, O(n d).

CCBQP on binary x with sum(x) = k: f(x) = l^T x + (1-theta)(k - ||E^T x||^2), l = theta (k-1) c
(:func:`divopt_rag.models.ccbqp.linear_term`). The same formula F(x) = l^T x + (1-theta)(k - ||E^T x||^2)
is concave on all of R^n (its Hessian is -2 (1-theta) E E^T), so for ANY point x and h = grad F(x)
= l - 2 (1-theta) E E^T x, every feasible binary y satisfies

    f(y) = F(y) <= F(x) + h^T (y - x).

**Claim.** Let LB be the objective of any feasible k-set and T_r(v) the sum of the r largest
entries of v. If U_i = F(x) - h^T x + h_i + T_{k-1}(h_{-i}) < LB, no optimal k-set contains i.

*Proof.* A feasible binary y with y_i = 1 has h^T y <= h_i + T_{k-1}(h_{-i}), so f(y) <= U_i <
LB <= OPT: y is not optimal.  []

The survivors contain every optimal set, so the optimum over them is the optimum over the pool and
the rule is repeated there (a new relaxation point from Frank-Wolfe on the survivors, which can
only tighten the bounds). The point x is the last Frank-Wolfe iterate on the concave relaxation
(:func:`divopt_rag.solvers.frank_wolfe.fw_relaxation` with relax_penalty 0); the closer F(x) + the
FW gap is to LB, the more items go. The values are formed in float64 and the test uses a margin
``tol`` (default 1e-9 k (k-1)) against rounding.

This is the "per-item bound from the convexified relaxation" that the exact engine's root
applies (:mod:`divopt_rag.solvers.bnb.fixing`), computed here without any n x n matrix, so it runs on
10^4+ pools before the engine sees them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from divopt_rag.models import Instance, objective_scale
from divopt_rag.models.ccbqp import linear_term, relaxed_grad, relaxed_value
from divopt_rag.models.validation import check_nonnegative

from .frank_wolfe import fw_relaxation, initial_point

__all__ = ["RelaxationScreen", "item_upper_bounds", "relaxation_screen"]


@dataclass
class RelaxationScreen:
    """survivors: positions in the pool that may be in an optimal set; rounds: FW re-solves;
    removed: items removed per round."""

    survivors: np.ndarray
    rounds: int
    removed: list


def item_upper_bounds(inst: Instance, x: torch.Tensor | np.ndarray) -> np.ndarray:
    """U_i of the module docstring at the point ``x`` (any vector of length n), float64."""
    E = inst.E.double()
    x = torch.as_tensor(np.asarray(x, dtype=np.float64) if not torch.is_tensor(x) else x.double().cpu())
    x = x.to(E.device)
    th, k = inst.theta, inst.k
    lin = linear_term(inst.relevance.double(), th, k)
    v = E.T @ x
    # F and h are f_lambda and its gradient at lambda = 0 (the lambda term vanishes)
    F = float(relaxed_value(float(lin @ x), float(x @ x), float(v @ v), th, k, 0.0))
    h = relaxed_grad(lin, E @ v, x, th, 0.0).cpu().numpy()
    base = F - float(h @ x.cpu().numpy())
    top = np.sort(h)[::-1][:k]
    kth = top[k - 1]
    # T_{k-1}(h_{-i}): the k-1 largest without i; for i among the top k-1 it is the top k minus h_i
    t_others = np.where(h > kth, top.sum() - h, top[: k - 1].sum())
    # ties at the k-th value: removing i from the top k-1 is the same as the case h_i > kth only if
    # i is one of the first k-1; a tie gives the same sums either way
    return base + h + t_others


def relaxation_screen(inst: Instance, lower_bound: float, *, max_rounds: int = 3, max_iter: int = 300,
                      tol: float | None = None) -> RelaxationScreen:
    """Items of ``inst`` that survive the rule of the module docstring, given the objective
    ``lower_bound`` of a feasible k-set (e.g. the best fast selection), repeated on the survivors
    while it removes items (at most ``max_rounds`` Frank-Wolfe solves of ``max_iter`` iterations)."""
    if not isinstance(inst, Instance):
        raise TypeError(f"inst must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    tol = 1e-9 * objective_scale(inst.k) if tol is None else check_nonnegative(tol, "tol")
    keep = np.arange(inst.n)
    removed: list = []
    rounds = 0
    while rounds < max_rounds and keep.size > inst.k:
        sub = inst if keep.size == inst.n else inst.subset(keep)
        res = fw_relaxation(sub, initial_point(sub, "topk"), relax_penalty=0.0, max_iter=max_iter)
        rounds += 1
        U = item_upper_bounds(sub, res.x)
        ok = U >= float(lower_bound) - tol
        removed.append(int((~ok).sum()))
        if ok.all():
            break
        keep = keep[ok]
    return RelaxationScreen(keep, rounds, removed)
