"""Variable fixing at a branch-and-bound node: reduced-cost (linearization) fixing and safe screening.

Both work on a node problem (P) of :mod:`divopt_rag.models.qcr`: max g(x) = const + l^T x - x^T C x
over x in {0,1}^p with 1^T x = m, given the value LB of a feasible point of the WHOLE problem (an
incumbent) and the acceptance tolerance tol of the search. They return items that can be fixed
without losing any solution of value > LB + tol, which is all the search needs: a fixing removes
only solutions that could never beat the incumbent by more than the tolerance, so the final
bound max(incumbent, bounds of the nodes closed within tolerance) stays valid.

Reduced-cost fixing (:func:`reduced_cost_fixing`)
--------------------------------------------------
Let F >= g on the feasible binaries of the node, F concave on {1^T x = m}, x feasible for the
relaxation and h = grad F(x). For every feasible binary y, g(y) <= F(y) <= F(x) + h^T (y - x).

**Claim.** If F(x) - h^T x + h_i + T_{m-1}(h_{-i}) <= LB + tol, no feasible y with y_i = 1 has
g(y) > LB + tol; if F(x) - h^T x + T_m(h_{-i}) <= LB + tol, none with y_i = 0 does (T_r: the sum of
the r largest entries; h_{-i}: h without entry i).
*Proof.* Over feasible y with y_i = 1, h^T y <= h_i + T_{m-1}(h_{-i}); with y_i = 0, h^T y <=
T_m(h_{-i}). Insert in the inequality above.  []
So the first case fixes x_i = 0, the second x_i = 1. Cost O(p log p).

Safe screening (:func:`swap_screening`), the per-item rule of divopt's screening module
generalized to a node problem (its proof, written for (P)):
for a set S (|S| = m), i in S and j not in S, the swap identity is

    g(S - i + j) - g(S) = l_j - l_i - (C_jj - C_ii) - 2 sum_{t in S - i} (C_jt - C_it).

Let T be any m items, U_j >= the sum of the m-1 largest C_jt over t != j, L_i <= the sum of the
m-1 smallest C_it over t != i, a_j = l_j - C_jj - 2 U_j, B = min_{j in T} a_j and
b_i = l_i - C_ii - 2 L_i.
**Claim.** If i is not in T and b_i < B - tol, no feasible S containing i has g(S) >= OPT - tol,
in particular no optimal set contains i.
*Proof.* For such an S, some j in T is not in S (|T| = |S|, i not in T). With R = S - i (m-1
items other than i and j), the identity gives g(S - i + j) - g(S) >= a_j - b_i >= B - b_i > tol, so
g(S) < OPT - tol.  []
The survivors' problem has the same optimum, so the rule is iterated with U, L recomputed. Exact
entries of C: O(p^2) memory, fine for the pools a node sees (p <= a few thousand).
"""
from __future__ import annotations

import time

import numpy as np

__all__ = ["reduced_cost_fixing", "swap_screening"]


def reduced_cost_fixing(value: float, x: np.ndarray, gradient: np.ndarray, m: int, threshold: float):
    """(fix_to_zero, fix_to_one) boolean masks from the claim of the module docstring.

    value = F(x), gradient = grad F(x) at a relaxation-feasible x; threshold = LB + tol.
    """
    p = x.size
    h = gradient
    base = value - float(h @ x)
    fix0 = np.zeros(p, dtype=bool)
    fix1 = np.zeros(p, dtype=bool)
    if m <= 0 or m >= p:
        return fix0, fix1
    order = np.sort(h)[::-1]
    top_m = float(order[:m].sum())
    # T_{m-1}(h_{-i}): the top m-1 of the others; equals T_m - h_i when h_i is among the top m
    # (ties included, as the top-m sum is the same), else T_{m-1}
    top_m1 = float(order[: m - 1].sum())
    in_top_m = h >= order[m - 1]
    t_m1_excl = np.where(in_top_m, top_m - h, top_m1)
    fix0 = base + h + t_m1_excl <= threshold
    # T_m(h_{-i}) = T_m - h_i + h_(m+1) when h_i is among the top m, else T_m
    next_val = float(order[m]) if p > m else -np.inf
    t_m_excl = np.where(in_top_m, top_m - h + next_val, top_m)
    fix1 = base + t_m_excl <= threshold
    return fix0 & ~fix1, fix1 & ~fix0


def _sum_extreme_rows(Cm: np.ndarray, r: int, largest: bool) -> np.ndarray:
    """Row-wise sum of the r largest (or smallest) off-diagonal entries."""
    p = Cm.shape[0]
    if r <= 0:
        return np.zeros(p)
    A = Cm.copy()
    np.fill_diagonal(A, -np.inf if largest else np.inf)
    if largest:
        return np.partition(A, p - r, axis=1)[:, p - r :].sum(1)
    return np.partition(A, r - 1, axis=1)[:, :r].sum(1)


def swap_screening(linear: np.ndarray, quad: np.ndarray, m: int, tol: float = 0.0,
                   max_rounds: int = 20, deadline: float | None = None) -> np.ndarray:
    """Positions (sorted) of the items that survive iterated safe screening (module docstring).

    Every feasible set of value >= OPT - tol lies inside the survivors. T is chosen as the m
    items with the largest a_j (which maximizes B). O(rounds p^2). No round starts after
    ``deadline`` (``time.perf_counter()``): the survivors of any round are valid.
    """
    p = linear.size
    pool = np.arange(p)
    if m <= 0 or m >= p:
        return pool
    for _ in range(max_rounds):
        if deadline is not None and time.perf_counter() > deadline:
            break
        q = pool.size
        if q <= m:
            break
        Cp = quad[np.ix_(pool, pool)]
        lp = linear[pool]
        diag = np.diagonal(Cp)
        U = _sum_extreme_rows(Cp, m - 1, largest=True)
        L = _sum_extreme_rows(Cp, m - 1, largest=False)
        a = lp - diag - 2.0 * U
        T = np.argpartition(-a, m - 1)[:m]
        B = float(a[T].min())
        b = lp - diag - 2.0 * L
        drop = b < B - tol
        drop[T] = False
        if not drop.any():
            break
        pool = pool[~drop]
    return pool
