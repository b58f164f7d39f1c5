"""Node relaxation: maximize a concave QCR function over {0 <= x <= 1, sum x = m}, with a certificate.

F(x) = const + l^T x - x^T M x with M positive semidefinite on 1-perp (a
:class:`divopt_rag.models.qcr.QCRBound`) is concave on the feasible polytope
X = {0 <= x <= 1, 1^T x = m}. For ANY x in X and g = grad F(x) = l - 2 M x, concavity gives
F(y) <= F(x) + g^T (y - x) for every y in X, hence

    max_X F <= F(x) + max_{s in X} g^T s - g^T x = F(x) + (sum of the m largest g_i) - g^T x,   (FW)

the Frank-Wolfe duality gap bound: a valid upper bound at any feasible x, equal to max F at a
maximizer (the KKT conditions make the gap zero). :func:`maximize_concave_qp` finds a maximizer
with a primal active-set method (working set of variables at 0 or 1; equality-constrained Newton
steps on the free ones; exact in finitely many steps when M is positive definite on 1-perp,
which the concavity margin of :func:`divopt_rag.models.qcr.concavity_shift` ensures) and returns
the (FW) bound at its last iterate, so the bound never depends on the solver having converged.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

__all__ = ["project_capped_simplex", "fw_bound", "RelaxationResult", "maximize_concave_qp", "top_sum"]


def project_capped_simplex(y: np.ndarray, m: float) -> np.ndarray:
    """Euclidean projection of y onto {0 <= x <= 1, sum x = m} (0 <= m <= len(y)).

    x = clip(y - tau, 0, 1) with tau solving sum clip(y - tau, 0, 1) = m; that sum is piecewise
    linear and nonincreasing in tau with breakpoints y_i and y_i - 1, so tau is found exactly by
    evaluating it at the sorted breakpoints (O(p log p)) and interpolating on one segment.
    """
    y = np.asarray(y, dtype=np.float64)
    p = y.size
    if m <= 0:
        return np.zeros(p)
    if m >= p:
        return np.ones(p)
    ys = np.sort(y)
    cs = np.concatenate([[0.0], np.cumsum(ys)])
    bp = np.sort(np.concatenate([ys, ys - 1.0]))
    hi = np.searchsorted(ys, bp + 1.0, side="left")  # first y >= tau + 1
    lo = np.searchsorted(ys, bp, side="right")  # first y > tau
    g = (p - hi) + (cs[hi] - cs[lo]) - (hi - lo) * bp
    j = int(np.searchsorted(-g, -m, side="right")) - 1
    j = min(max(j, 0), bp.size - 2)
    g0, g1 = g[j], g[j + 1]
    tau = bp[j] if g0 == g1 else bp[j] + (g0 - m) * (bp[j + 1] - bp[j]) / (g0 - g1)
    return np.clip(y - tau, 0.0, 1.0)


def top_sum(g: np.ndarray, m: int) -> float:
    """Sum of the m largest entries of g."""
    if m <= 0:
        return 0.0
    if m >= g.size:
        return float(g.sum())
    return float(np.partition(g, g.size - m)[g.size - m :].sum())


def fw_bound(const: float, linear: np.ndarray, quad: np.ndarray, m: int, x: np.ndarray):
    """(F(x), the (FW) upper bound on max_X F, gradient g) at a feasible x (module docstring)."""
    Mx = quad @ x
    value = float(const + linear @ x - x @ Mx)
    g = linear - 2.0 * Mx
    return value, value + top_sum(g, m) - float(g @ x), g


@dataclass
class RelaxationResult:
    """x: the last iterate (feasible); value = F(x); bound >= max_X F (certified by (FW));
    gradient = grad F(x); iterations of the active-set method; converged: KKT reached."""

    x: np.ndarray
    value: float
    bound: float
    gradient: np.ndarray
    iterations: int
    converged: bool


def maximize_concave_qp(const: float, linear: np.ndarray, quad: np.ndarray, m: int,
                        x0: np.ndarray | None = None, *, max_iter: int | None = None,
                        stop_below: float = -np.inf, deadline: float | None = None) -> RelaxationResult:
    """max const + l^T x - x^T M x over {0 <= x <= 1, sum x = m} (M psd on 1-perp), certified.

    Primal active set from x0 (projected onto the polytope; default m/p). Each iteration either
    takes the Newton step on the free variables (KKT system [[2 M_FF, 1], [1^T, 0]]), shortened at
    the first bound it hits (which joins the working set), or, at a stationary point of the free
    subspace, releases the bounded variable whose multiplier has the wrong sign. ``stop_below``:
    stop early once the certified bound is <= it (the caller prunes). ``deadline``
    (``time.perf_counter()``): no iteration starts after it. The returned bound is (FW) at the
    final iterate, so it is valid whatever happened.
    """
    p = linear.size
    if m <= 0 or m >= p:
        x = np.zeros(p) if m <= 0 else np.ones(p)
        v, b, g = fw_bound(const, linear, quad, m, x)
        return RelaxationResult(x, v, v, g, 0, True)
    max_iter = 4 * p + 20 if max_iter is None else int(max_iter)
    x = project_capped_simplex(np.full(p, m / p) if x0 is None else x0, m)
    lo = x <= 1e-12
    hi = x >= 1.0 - 1e-12
    x[lo], x[hi] = 0.0, 1.0
    H = 2.0 * quad
    g = linear - H @ x
    tol = 1e-11 * (1.0 + float(np.abs(linear).max()) + float(np.abs(H).max()))
    converged = False
    it = 0
    check_every = 8
    while it < max_iter:
        if deadline is not None and it and time.perf_counter() > deadline:
            break
        it += 1
        F = np.flatnonzero(~(lo | hi))
        if F.size == 0:
            # no free variable: the equality pins x; KKT needs max g over 0s <= min g over 1s
            a0, a1 = np.flatnonzero(lo), np.flatnonzero(hi)
            i0 = a0[np.argmax(g[a0])]
            i1 = a1[np.argmin(g[a1])]
            if g[i0] <= g[i1] + tol:
                converged = True
                break
            lo[i0] = hi[i1] = False
            continue
        K = np.empty((F.size + 1, F.size + 1))
        K[:-1, :-1] = H[np.ix_(F, F)]
        K[:-1, -1] = K[-1, :-1] = 1.0
        K[-1, -1] = 0.0
        rhs = np.zeros(F.size + 1)
        rhs[:-1] = g[F]
        try:
            step = np.linalg.solve(K, rhs)[:-1]
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(K, rhs, rcond=None)[0][:-1]
        if np.abs(step).max() <= 1e-13:
            mu = float(g[F].mean())
            v0 = np.where(lo, g - mu, -np.inf)  # at 0 but would increase f
            v1 = np.where(hi, mu - g, -np.inf)  # at 1 but would decrease
            j0, j1 = int(np.argmax(v0)), int(np.argmax(v1))
            if max(v0[j0], v1[j1]) <= tol:
                converged = True
                break
            if v0[j0] >= v1[j1]:
                lo[j0] = False
            else:
                hi[j1] = False
            continue
        xF = x[F]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(step < -1e-15, xF / -step, np.where(step > 1e-15, (1.0 - xF) / step, np.inf))
        r = int(np.argmin(ratio))
        alpha = min(1.0, float(ratio[r]))
        x[F] = xF + alpha * step
        g -= alpha * (H[:, F] @ step)
        if alpha < 1.0:
            j = F[r]
            if step[r] < 0:
                x[j], lo[j] = 0.0, True
            else:
                x[j], hi[j] = 1.0, True
        if stop_below > -np.inf and it % check_every == 0:
            _, b, _ = fw_bound(const, linear, quad, m, x)
            if b <= stop_below:
                break
    # re-evaluate in full (no drift from the incremental gradient) and certify
    x = np.clip(x, 0.0, 1.0)
    v, b, g = fw_bound(const, linear, quad, m, x)
    if abs(x.sum() - m) > 1e-9 * max(1, m):  # cannot happen barring rounding; stay feasible
        x = project_capped_simplex(x, m)
        v, b, g = fw_bound(const, linear, quad, m, x)
    return RelaxationResult(x, v, b, g, it, converged)
