"""Frank-Wolfe selectors: the CCBQP paper's ``fw`` and divopt's ``fw_ws`` / ``fw_topk``.

Every FW in divopt runs the one iteration of :mod:`divopt_rag.solvers.fw_kernel`
(:func:`fw_rows`: the relaxation, the oracle, the gap from E^T s, the stopping rule that storage
rounding cannot defeat and its rounding bound, one host read per iteration). This module holds
what the selectors add to it: the starting points (:func:`initial_point`, :func:`random_point`),
one run from one point (:func:`fw_relaxation`), the pairwise rounding to a vertex
(:func:`round_pairwise`), the set order of ``fw`` (:func:`top_k_of`) and the certified working
set of ``fw_ws``. The kernel's names (``fw_rows``, ``FWRows``, ``FWResult``, ``fw_tolerance``) are
:mod:`divopt_rag.solvers.fw_kernel`'s, ``rows_times_E`` and ``V_times_Et``
:mod:`divopt_rag.solvers.fw_arrays`'.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import curvature, linear_term, relaxed_grad, relaxed_gradient
from divopt_rag.models.domains import ITERATIONS_MAX, ROWS_MAX
from divopt_rag.models.kernels import gather_rows, gather_sum
from divopt_rag.models.parameters import SEED, ArrayLike, Interval, Options
from divopt_rag.models.validation import check_choice, check_nonnegative, check_scalar, check_vector

from .fw_kernel import INTEGRAL_TOL, FWResult, fw_gap_at, fw_rows, oracle, row_tolerance
from .selection import register

__all__ = ["fw_relaxation", "round_pairwise", "fw_paper", "fw_ws", "fw_topk", "top_k_of", "initial_point",
           "random_point", "working_set_size"]

_INITS = ("topk", "uniform", "random")
#: The parameters every Frank-Wolfe selector takes, declared once (divopt_rag.models.parameters).
FW_PARAMS = {"relax_penalty": Interval(float, 0.0, None), "max_iter": Interval(int, 1, ITERATIONS_MAX),
             "tol": [Interval(float, 0.0, None), None], "init": [Options(_INITS), ArrayLike(ndim=1)],
             "seed": [SEED, None]}


def random_point(n: int, k: int, seed: int | None) -> np.ndarray:
    """The "random" start: a Dirichlet(1, 1, 1)-weighted mix of three uniformly random k-subsets
    of range(n) (float64, sum k; depends only on n, k and the seed)."""
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(3))
    x = np.zeros(n)
    for wi in w:
        x[rng.choice(n, size=k, replace=False)] += wi
    return x


def initial_point(inst: Instance, init: Any = "topk", seed: int | None = None) -> torch.Tensor:
    """A feasible starting point of {0 <= x <= 1, sum x = k}.

    "topk": indicator of the k most relevant items; "uniform": k/n everywhere; "random": a
    Dirichlet-weighted mix of three uniformly random k-subsets (seeded); or an explicit array.
    """
    n, k, acc = inst.n, inst.k, inst.acc_dtype
    if isinstance(init, str):
        check_choice(init, "init", _INITS)
        if init == "topk":
            x = torch.zeros(n, dtype=acc, device=inst.device)
            x[torch.topk(inst.relevance, k).indices] = 1.0
            return x
        if init == "uniform":
            return torch.full((n,), k / n, dtype=acc, device=inst.device)
        return torch.as_tensor(random_point(n, k, seed), dtype=acc, device=inst.device)
    x = check_vector(init, "init", n, " (the pool size n)").to(device=inst.device, dtype=acc)
    if bool((x < -1e-6).any()) or bool((x > 1 + 1e-6).any()) or abs(float(x.sum()) - k) > 1e-4 * max(1, k):
        raise ValueError(f"init must satisfy 0 <= x <= 1 and sum(x) = k = {k}, got sum {float(x.sum()):.6g}")
    return x.clamp(0.0, 1.0)


def fw_relaxation(
    inst: Instance,
    x0: torch.Tensor,
    *,
    relax_penalty: float = 2.0,
    max_iter: int = 1000,
    tol: float | None = None,
    v0: torch.Tensor | None = None,
) -> FWResult:
    """Run FW on f_lambda from the feasible point x0 until the oracle returns x itself, the gap
    is <= max(tol, B) or max_iter iterations (:func:`fw_rows` on one row; B its rounding bound).

    ``tol`` defaults to 1e-6 * k (k-1), i.e. a normalized gap of 1e-6. For relax_penalty = 0
    the objective is concave and ``value + gap`` is a certified upper bound on the optimum
    (the gap is the oracle's: exact for a float64 pool, module docstring of the kernel).
    """
    lam = check_nonnegative(relax_penalty, "relax_penalty")
    max_iter = check_scalar(max_iter, "max_iter", int, min_val=1)  # >= 1, as the selectors declare it
    return fw_rows(inst.E, x0[None], linear_term(inst.relevance, inst.theta, inst.k)[None], inst.theta, inst.k,
                   relax_penalty=lam, max_iter=max_iter, tol=tol, V=None if v0 is None else v0[None],
                   record=True).row(0)


def round_pairwise(inst: Instance, x: torch.Tensor, v: torch.Tensor, relax_penalty: float = 2.0,
                   eps: float = INTEGRAL_TOL):
    """Round a feasible x to a k-set without lowering f_lambda (for relax_penalty >= 1).

    While two coordinates i, j are fractional, move t along e_i - e_j: the change is
    phi(t) = t (g_i - g_j) + (1-theta)(2 lambda - 2 + 2 w_ij) t^2, convex when lambda >= 1, so
    the better endpoint of the feasible interval is at least phi(0) = 0 and makes one more
    coordinate integral. Costs O(m^2 d) for m fractional coordinates. Returns (x, v).
    """
    th, k, lam = inst.theta, inst.k, relax_penalty
    x = x.clone()
    v = v.clone()
    frac = ((x > eps) & (x < 1 - eps)).nonzero().flatten()
    lin = linear_term(inst.relevance, th, k)
    if frac.numel() >= 2:
        F = gather_rows(inst.E, frac)  # m x d, accumulation dtype
        xf = x[frac].clone()
        active = list(range(frac.numel()))
        while len(active) >= 2:
            i, j = active[0], active[1]
            gi = float(relaxed_grad(lin[frac[i]], F[i] @ v, xf[i], th, lam))
            gj = float(relaxed_grad(lin[frac[j]], F[j] @ v, xf[j], th, lam))
            # phi''(t) / 2 along e_i - e_j: ||e_i - e_j||^2 = 2 - 2 w_ij, ||d||^2 = 2
            a = curvature(2.0, 2.0 - 2.0 * float(F[i] @ F[j]), th, lam) / 2
            hi = min(1 - float(xf[i]), float(xf[j]))
            lo = -min(float(xf[i]), 1 - float(xf[j]))
            t = hi if hi * (gi - gj) + a * hi * hi >= lo * (gi - gj) + a * lo * lo else lo
            xf[i] += t
            xf[j] -= t
            v = v + t * (F[i] - F[j])
            active = [a_ for a_ in active if eps < float(xf[a_]) < 1 - eps]
        x[frac] = xf
    sel = torch.topk(x, k).indices  # snaps the (now integral) point; exact top-k if not
    xb = torch.zeros_like(x)
    xb[sel] = 1.0
    return xb, gather_sum(inst.E, sel)


def _fw_to_vertex(inst, x, v, relax_penalty, max_iter, tol):
    """FW, rounded pairwise at fractional stationary points (and resumed while lambda >= 2),
    until a binary FW-stationary point or the cap: (x, v, result, iterations, trace, roundings).
    The parameters are the selector's, checked by its declaration."""
    res = fw_rows(inst.E, x[None], linear_term(inst.relevance, inst.theta, inst.k)[None], inst.theta, inst.k,
                  relax_penalty=relax_penalty, max_iter=max_iter, tol=tol, V=None if v is None else v[None],
                  vertex=lambda m, xm, vm: round_pairwise(inst, xm, vm, relax_penalty), record=True)
    one = res.row(0)
    return one.x, one.v, one, one.iterations, one.trace, int(res.roundings[0])


def working_set_size(n: int, k: int) -> int:
    """M = max(4096, 16 k, n / 32): the working-set size of ``working_set="auto"``."""
    return max(4096, 16 * k, n // 32)


def _auto_working_set(n: int, k: int, theta: float) -> int | None:
    # Below theta = 0.5 diversity dominates and relevance rank is a poor guide to where the
    # optimum lives, so auto keeps plain FW there (the measurement: docs/concepts/methods.md).
    m = working_set_size(n, k)
    return m if (4 * m <= n and theta >= 0.5) else None


@register("fw", params=FW_PARAMS)
def fw_paper(
    inst: Instance,
    *,
    relax_penalty: float = 2.0,
    max_iter: int = 200,
    tol: float | None = None,
    init: Any = "uniform",
    seed: int | None = None,
):
    """The CCBQP paper's Algorithm 1 (Lu & Sidiropoulos 2026), with its defaults.

    Start from x0 = (k/n) 1 (``init="uniform"``), run at most ``max_iter`` = 200 Frank-Wolfe
    iterations on the relaxation f_lambda (lambda = ``relax_penalty`` = 2, tight) with the top-k
    linear oracle and the exact line search of :mod:`divopt_rag.models.ccbqp`, and return the
    top-k of x. It stops early, as the paper's Algorithm 1 does at a zero FW gap, when the oracle
    returns the iterate's own vertex (the authors' code: the gap is exactly 0 there) or the gap
    is <= ``tol`` (default a normalized gap of 1e-6, raised to the gap's rounding bound where
    that is larger: :mod:`divopt_rag.solvers.fw_kernel`); the gap is formed from the k rows of
    the oracle's vertex, so float16 / bfloat16 storage and rounding products stop where float32
    does. No rounding step, no restart, no working set: that is divopt's ``fw_topk`` / ``fw_ws``.
    The k items are ordered by decreasing x, ties by decreasing relevance.

    info: converged (stopped by the rule before the cap), gap, tolerance (the one it stopped at),
    trace (f_lambda per iteration), init, relaxed_value, integral (whether x ended binary).
    """
    x0 = initial_point(inst, init, seed)
    res = fw_relaxation(inst, x0, relax_penalty=relax_penalty, max_iter=max_iter, tol=tol)
    integral = bool(((res.x < INTEGRAL_TOL) | (res.x > 1 - INTEGRAL_TOL)).all())
    info = {
        "converged": res.converged,
        "gap": res.gap,
        "tolerance": res.tolerance,
        "trace": res.trace,
        "init": init if isinstance(init, str) else "array",
        "relaxed_value": res.value,
        "integral": integral,
    }
    return top_k_of(inst, res.x), res.iterations, info


def top_k_of(inst: Instance, x: torch.Tensor) -> torch.Tensor:
    """The k largest coordinates of x, ordered by decreasing x, ties by decreasing relevance
    (then lower index): a deterministic order for a set whose x values may tie (e.g. all 1)."""
    k = inst.k
    vals, idx = torch.topk(x, k)  # O(n) on x's device; only the k winners and the ties at the
    kth = vals[-1]                # k-th value are ever ordered on the host
    tied = (x == kth).nonzero().flatten()
    inside = int((vals == kth).sum())
    if tied.numel() > inside:  # ties at the boundary: the most relevant of the tied items win
        keep = idx[vals > kth]
        c_tied = inst.relevance.index_select(0, tied).double()
        order = np.lexsort((tied.cpu().numpy(), -c_tied.cpu().numpy()))[: k - keep.numel()]
        idx = torch.cat([keep, tied[torch.as_tensor(order, device=tied.device)]])
    xs = x.index_select(0, idx).double().cpu().numpy()
    cs = inst.relevance.index_select(0, idx).double().cpu().numpy()
    ids = idx.cpu().numpy()
    return idx[torch.as_tensor(np.lexsort((ids, -cs, -xs)), device=idx.device)]


@register("fw_ws", params={**FW_PARAMS, "working_set": [Options({"auto"}), Interval(int, 0, ROWS_MAX), None]})
def fw_ws(
    inst: Instance,
    *,
    relax_penalty: float = 2.0,
    init: Any = "topk",
    max_iter: int = 1000,
    tol: float | None = None,
    seed: int | None = None,
    working_set: Any = "auto",
):
    """divopt's Frank-Wolfe ("fw_ws"): top-k start, pairwise rounding, and a certified working set.

    Differs from the paper's Algorithm 1 (``fw``) in three ways, each keeping FW's stopping
    rule: (1) it starts from the top-k vertex instead of x0 = (k/n) 1; (2) at a fractional
    stationary point it rounds pairwise (never lowering f_lambda, the tightness argument) and
    resumes, so the result is a binary FW-stationary point instead of the top-k of a fractional
    x; (3) on large pools (``working_set="auto"``) it runs on a working set certified by one
    full-pool GEMV (below). ``fw_topk`` is this with ``working_set=0`` (full pool).

    Iterates FW until the FW gap is <= tol. If it stops at a fractional point, the point is
    rounded pairwise (never lowering f_lambda) and FW resumes from that vertex, so the result
    is a binary FW-stationary point whenever the iteration cap is not hit. If the cap is hit,
    ``info["converged"]`` is False and the set is the top-k of x.

    working_set: "auto" (default), an int M, or 0/None for plain full-pool FW. With a working
    set, FW runs on the top-M items by relevance (plus items added later), starting from the
    top-k init; then ONE full-pool GEMV computes the full gradient and FW gap at the result.
    The result is accepted only if that full-pool gap is <= tol, i.e. it is a certified
    FW-stationary point of the full problem, exactly the stopping rule of plain FW; otherwise
    the full gradient's top-k items (and the next best) join the working set and FW continues.
    "auto" uses M = max(4096, 16k, n/32) when n >= 4M, theta >= 0.5 and init is "topk"; else
    plain FW. With 1 <= relax_penalty < 2 (relaxation not tight) a fractional stationary point is
    rounded once, never lowering f_lambda, and FW stops there instead of cycling.

    info: converged, gap (full-pool), trace (f_lambda, non-decreasing), roundings, init,
    working_set (final size or None), full_gemvs (full-pool passes, verification included).
    """
    n, k = inst.n, inst.k
    if working_set == "auto":
        M = _auto_working_set(n, k, inst.theta) if (isinstance(init, str) and init == "topk") else None
    elif not working_set:
        M = None
    else:
        M = int(working_set)  # an int by the declaration
        if M < k:
            raise ValueError(f"working_set must be >= k = {k}, got {working_set}")
        if not (isinstance(init, str) and init == "topk"):
            raise ValueError("working_set requires init='topk'")
        M = None if M >= n else M
    x = initial_point(inst, init, seed)
    if M is None:
        x, v, res, total, trace, roundings = _fw_to_vertex(inst, x, None, relax_penalty, max_iter, tol)
        gap, converged, full = res.gap, res.converged, total + 1
    else:
        x, v, gap, converged, total, trace, roundings, full, M = _fw_working_set(
            inst, x, M, relax_penalty, max_iter, tol)
    sel = torch.topk(x, k).indices
    info = {
        "converged": converged,
        "gap": gap,
        "trace": trace,
        "roundings": roundings,
        "init": init if isinstance(init, str) else "array",
        "relaxed_value": trace[-1],
        "working_set": M,
        "full_gemvs": full,
    }
    if not converged:
        info["stopped"] = f"iteration cap max_iter={max_iter} reached; rounded by top-k of x"
    return sel, total, info


def _fw_working_set(inst, x, M, relax_penalty, max_iter, tol):
    n, k, th = inst.n, inst.k, inst.theta
    lam = relax_penalty
    lin = linear_term(inst.relevance, th, k)
    tol_ = row_tolerance(k, th, lam, lin[None], tol, n, inst.d)
    P = torch.topk(inst.relevance, M).indices
    in_P = torch.zeros(n, dtype=torch.bool, device=inst.device)
    in_P[P] = True
    v = gather_sum(inst.E, x.nonzero().flatten())
    trace: list[float] = []
    total = roundings = full = 0
    gap, converged = float("inf"), False
    while total < max_iter:
        sub = inst.subset(P.cpu().numpy())
        xs, v, res, it, tr, r = _fw_to_vertex(sub, x[P], v, relax_penalty, max_iter - total, tol)
        total += it
        roundings += r
        trace.extend(tr if not trace else tr[1:])
        x = torch.zeros_like(x)
        x[P] = xs
        if not res.converged:
            gap = res.gap
            break
        # certify on the full pool: one GEMV for the full gradient (the oracle), the gap of its
        # vertex from the vertex's rows (fw_kernel), one host read
        g = relaxed_gradient(inst, x, relax_penalty=lam, v=v, lin=lin)
        full += 1
        s = oracle(inst.E, g[None], k, x[None], lin[None], v[None], th, lam)
        g_s, at_vertex = fw_gap_at(inst.E, x[None], lin[None], v[None], s, th, k, lam)
        gap, done = (float(a) for a in torch.stack((g_s, (at_vertex | (g_s <= tol_)).to(g_s.dtype))).cpu()[:, 0])
        if done:
            converged = True
            break
        g[in_P] = -float("inf")
        new = torch.topk(g, min(int((~in_P).sum()), max(k, M // 4))).indices
        in_P[new] = True
        P = torch.cat([P, new])
    return x, v, gap, converged, total, trace, roundings, full, int(P.numel())




@register("fw_topk", params=FW_PARAMS)
def fw_topk(
    inst: Instance,
    *,
    relax_penalty: float = 2.0,
    init: Any = "topk",
    max_iter: int = 1000,
    tol: float | None = None,
    seed: int | None = None,
):
    """divopt's full-pool Frank-Wolfe: ``fw_ws`` with ``working_set=0``.

    Differs from the paper's ``fw`` by the top-k start and the pairwise rounding + restart
    (a binary FW-stationary result); runs on the whole pool at every iteration.
    """
    return fw_ws(inst, relax_penalty=relax_penalty, init=init, max_iter=max_iter, tol=tol, seed=seed,
                 working_set=0)
