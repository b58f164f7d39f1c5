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

__all__ = ["RelaxationScreen", "item_upper_bounds", "relaxation_screen", "dual_item_bounds", "dual_point", "DualPoint", "dual_screen"]


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


# --------------------------------------------------------------------------------------------
# the same bounds from a dual point y in R^d, found by column generation (no full-pool FW run)
# --------------------------------------------------------------------------------------------
def _gradient64(inst: Instance, y: torch.Tensor, block: int = 1 << 14) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, n): h = l' - 2 (1-theta) E y and n_i = ||e_i||^2, float64, E upcast a row block at a time."""
    th, k = inst.theta, inst.k
    h = torch.empty(inst.n, dtype=torch.float64, device=inst.device)
    nrm = torch.empty(inst.n, dtype=torch.float64, device=inst.device)
    y = y.to(device=inst.device, dtype=torch.float64)
    for s0 in range(0, inst.n, block):
        B = inst.E[s0 : s0 + block].double()
        h[s0 : s0 + B.shape[0]] = B @ y
        nrm[s0 : s0 + B.shape[0]] = (B * B).sum(1)
    lin = linear_term(inst.relevance.double(), th, k) + (1 - th) * nrm
    return lin - 2 * (1 - th) * h, nrm


def dual_item_bounds(inst: Instance, y: torch.Tensor | np.ndarray) -> tuple[np.ndarray, float]:
    """(U, UB): per-item upper bounds and the global upper bound at the dual point ``y`` (any vector of R^d).

    With n_i = ||e_i||^2 (rows need not be unit) and l'_i = theta (k-1) c_i + (1-theta) n_i, every
    k-set S with s = sum_{i in S} e_i has f(S) = sum_{i in S} l'_i - (1-theta) ||s||^2 (the pairs
    sum_{i != j} w_ij = ||s||^2 - sum_S n_i). For every y, -||s||^2 <= ||y||^2 - 2 y.s
    (||s - y||^2 >= 0), hence with h = l' - 2 (1-theta) E y

        f(S) <= (1-theta) ||y||^2 + sum_{i in S} h_i.

    **Claim.** OPT <= UB = (1-theta) ||y||^2 + T_k(h), and every k-set containing i has
    f <= U_i = (1-theta) ||y||^2 + h_i + T_{k-1}(h_{-i}) (T_r: the sum of the r largest).
    *Proof.* Maximize the right side over S (resp. over S containing i).  []
    At y = E^T x this is the linearization bound of :func:`item_upper_bounds` (the Lagrangian dual
    of the concave relaxation), written without the unit-row assumption. Float64 throughout.
    """
    k = inst.k
    y = torch.as_tensor(np.asarray(y, dtype=np.float64)) if not torch.is_tensor(y) else y.double()
    h, _ = _gradient64(inst, y)
    base = (1 - inst.theta) * float(y.double() @ y.double())
    hn = h.cpu().numpy()
    top = np.sort(hn)[::-1][:k]
    kth = top[k - 1]
    t_others = np.where(hn > kth, top.sum() - hn, top[: k - 1].sum())
    return base + hn + t_others, base + float(top.sum())


@dataclass
class DualPoint:
    """y: the dual point (float64, length d); bound: the global bound UB at y over the pool;
    columns: how many items the restricted relaxation used; rounds: pricing rounds."""

    y: torch.Tensor
    bound: float
    columns: int
    rounds: int


def dual_point(inst: Instance, *, start: int = 1024, grow: int = 512, max_rounds: int = 8,
               max_iter: int = 1000, rel_tol: float = 1e-7) -> DualPoint:
    """A good dual point y for :func:`dual_item_bounds`, by column generation on the concave relaxation.

    Frank-Wolfe runs on a restricted pool C (first the ``start`` most relevant items), y = E_C^T x_C
    (x zero outside C is a feasible point of the full relaxation); one float64 pass over the whole
    pool prices every item (h of :func:`dual_item_bounds`); while some item outside C would enter
    the top k of h by more than ``rel_tol`` k(k-1), the ``grow`` best outside items join C and
    Frank-Wolfe restarts from the last x (the new items at 0). Any y
    gives valid bounds: the pricing only makes them tight. O(rounds (n d + max_iter |C| d)) instead
    of max_iter n d for Frank-Wolfe on the whole pool.
    """
    k, n = inst.k, inst.n
    m = min(n, max(start, 4 * k))
    C = torch.topk(inst.relevance.double(), m).indices.cpu().numpy()
    in_c = np.zeros(n, dtype=bool)
    best: DualPoint | None = None
    x_all: np.ndarray | None = None
    for rnd in range(1, max_rounds + 1):
        in_c[C] = True
        Cs = np.sort(C)
        sub = inst.subset(Cs)
        x0 = initial_point(sub, "topk") if x_all is None else initial_point(sub, x_all[Cs])
        res = fw_relaxation(sub, x0, relax_penalty=0.0, max_iter=max_iter)
        x_all = np.zeros(n)
        x_all[Cs] = res.x.double().cpu().numpy()
        y = sub.E.double().T @ res.x.double().to(sub.device)
        h, _ = _gradient64(inst, y)
        base = (1 - inst.theta) * float(y @ y)
        ub = base + float(torch.topk(h, k).values.sum())
        if best is None or ub < best.bound:
            best = DualPoint(y, ub, int(C.size), rnd)
        best.rounds = rnd
        hn = h.cpu().numpy()
        inside = np.sort(hn[in_c])[::-1][:k]
        outside = np.where(in_c, -np.inf, hn)
        n_out = min(grow, int((~in_c).sum()))
        if n_out == 0:
            break
        cand = np.argpartition(-outside, n_out - 1)[:n_out]
        enters = cand[outside[cand] > inside[-1]]
        if ub - (base + inside.sum()) <= rel_tol * objective_scale(k) or enters.size == 0:
            break
        C = np.concatenate([C[in_c[C]], cand[np.isfinite(outside[cand])]])
    return best


def dual_screen(inst: Instance, lower_bound: float, *, max_rounds: int = 3, tol: float | None = None,
                **point_options) -> tuple[RelaxationScreen, float]:
    """:func:`relaxation_screen` with the bounds of :func:`dual_item_bounds` at the column-generated
    :func:`dual_point`: drop every i with U_i < ``lower_bound`` - tol (the objective of a feasible
    k-set), repeated on the survivors (whose optima are the pool's) while it removes items.
    Returns the survivors and the best global bound UB seen (an upper bound on OPT: each round's
    pool contains every optimal set)."""
    if not isinstance(inst, Instance):
        raise TypeError(f"inst must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    tol = 1e-9 * objective_scale(inst.k) if tol is None else check_nonnegative(tol, "tol")
    keep = np.arange(inst.n)
    removed: list = []
    rounds, ub = 0, float("inf")
    while rounds < max_rounds and keep.size > inst.k:
        sub = inst if keep.size == inst.n else inst.subset(keep)
        pt = dual_point(sub, **point_options)
        U, ub_round = dual_item_bounds(sub, pt.y)
        ub = min(ub, ub_round)
        rounds += 1
        ok = U >= float(lower_bound) - tol
        removed.append(int((~ok).sum()))
        if ok.all():
            break
        if ok.sum() < inst.k:
            raise ValueError(f"lower_bound {lower_bound} exceeds the dual bound {ub_round}: it is not an incumbent value")
        keep = keep[ok]
    return RelaxationScreen(keep, rounds, removed), ub
