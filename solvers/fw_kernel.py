"""The one Frank-Wolfe iteration of divopt: :func:`fw_rows`, on M points at once.

Relaxation and its terms: :mod:`divopt_rag.models.ccbqp` (``relaxed_value``, ``relaxed_grad``,
``curvature``, ``line_search``), maximized over {0 <= x <= 1, sum x = k}:
    f_lambda(x) = l^T x + (1-theta)(k + lambda (||x||^2 - k) - ||E^T x||^2),   l = theta (k-1) c
    grad        = l + 2 (1-theta)(lambda x - E v),     v = E^T x kept up to date
One iteration: s = top-k indicator of grad (linear oracle), d = s - x, gap = grad^T d;
E^T d = E^T s - v (gather k rows, O(k d)); curvature C = 2 (1-theta)(lambda ||d||^2 - ||E^T d||^2);
exact line search gamma = 1 if C >= 0 else min(1, -gap / C). The only O(n d) work per iteration
is one product E v, and it only chooses s: the gap of s is formed from E^T s (below).

**Stopping rule that storage rounding cannot defeat.** A row stops when (a) the oracle's vertex s
is the iterate itself (x = s: in exact arithmetic d = 0 and the gap is exactly 0; the CCBQP
authors' code stops when the gap is exactly 0), or (b) its gap is <= the tolerance
max(tol, B), tol defaulting to 1e-6 k (k-1) and B the rounding bound below. The gap is

    gap = (l^T s - l^T x) + 2 (1-theta)(lambda (x^T s - ||x||^2) - v^T (E^T s - v))

(grad^T s - grad^T x with (E v)^T s = v^T E^T s and x^T E v = ||v||^2): every term is a sum of
stored values, formed in float64, and none comes from the product E v. A product that rounds
(float16 operands or outputs, reduced-precision reductions, TF32) can only make the oracle
choose a worse s; it cannot make the gap of that s wrong, so a row at a vertex or at a
stationary point stops instead of stepping on rounding noise until ``max_iter``.

**The bound B.** Let u be the unit roundoff of the accumulation dtype of X (2^-24 for float32,
2^-53 for float64; float16/bfloat16 storage accumulates in float32), eps = 2^-53, N = n + d + k,
||l||_inf per row, and the rows of E of norm <= 1 (an Instance's unit rows, within 1 + u of 1
after rounding to storage). The computed gap differs from the gap of the iterate's state
(x, v) by at most

    B = u k (||l||_inf + 2 (1-theta) lambda) + 4 N eps (k ||l||_inf + 2 (1-theta)(lambda k + 16 k^2)).

Proof sketch. l^T x and ||x||^2 are float64 sums of products l_i x_i and x_i^2 rounded once in
the accumulation dtype: errors <= u sum |l_i| x_i <= u k ||l||_inf and u sum x_i^2 <= u k (0 <= x
<= 1, sum x = k), the latter weighted by 2 (1-theta) lambda in the gap. Every other term (l^T s,
x^T s, E^T s = the sum of k stored rows, v^T (E^T s - v)) is a float64 sum of at most N exact
(or once-rounded) float64 products: error <= N eps times the sum of the magnitudes (to first
order), which is <= k ||l||_inf for l^T s + l^T x, <= 2 lambda k for lambda (x^T s + ||x||^2), and
<= ||v|| (||v|| + ||E^T s||) + k ||v|| <= 16 k^2 for the v-term (||v||, ||E^T s|| <= k for
rows of norm <= 1); the factor 4 covers the float64 differences and products that combine the
terms. In float32, for |c| <= 1, k >= 2 and N <= 10^7, B < 1e-6 k (k-1): the first term is at
most u k (theta (k-1) + 4) <= 5 u k (k-1) = 3.0e-7 k (k-1), the second at most
4 N eps * 37 k^2 <= 3.3e-7 k (k-1). So the default tolerance stands and float32/float64 runs stop
where they did (``tests/solvers/test_fw_precision.py`` checks the bound over k, theta and both dtypes). B covers the evaluation of the gap; that (x, v) drift apart by the float32
rounding of their updates is the state FW ascends on: its exact line search increases
f_lambda of that state, and a step of gamma = 1 lands x exactly on s.

The oracle's rounding: with |(E v)~_i - (E v)_i| <= delta_i, the true FW gap max_s' grad^T (s' - x)
is at most the computed gap of s plus 2 (1-theta) * 2 k max_i delta_i (s and s' differ in at most
2k coordinates). With float32 products (divopt's kernels, any storage) delta is float32 rounding.

**Host syncs.** On tensors (any device) every per-row scalar stays on the device; each
iteration reads one small (2, M) tensor of stop flags to the host (one sync). A row that stops at
a fractional point and is rounded (``vertex``), a cap on ``max_iter`` and a compaction of the
working rows cost a few more, per event, not per iteration; the result is one more read.

:func:`fw_rows` runs that iteration on M points at once (the rows of X: one problem's starts, or
B problems of a sweep), each with its own linear term and theta on one pool E; every caller
composes it: the paper's ``fw`` and ``fw_relaxation`` (one row), divopt's ``fw_ws`` / ``fw_topk``
(one row, rounded to a vertex at fractional stationary points),
:func:`divopt_rag.solvers.batched_fw.fw_batched` (B rows), the bounds and the screening
(lambda = 0), and the starts of the default's search on its candidate pools
(:meth:`divopt_rag.solvers.gram_search.GramSearch.fw`, E = the pool's rows).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from divopt_rag.models.ccbqp import line_search, objective_scale, pair_weight, relaxed_grad, relaxed_value
from divopt_rag.models.validation import check_nonnegative

from .fw_arrays import NumpyRows, TorchRows

__all__ = ["FWResult", "FWRows", "fw_rows", "fw_tolerance", "gap_rounding_bound", "fw_gap_at", "oracle",
           "row_tolerance", "INTEGRAL_TOL", "COMPACT_ENTRIES"]

#: A coordinate within this distance of 0 or 1 counts as integral (a vertex of the relaxation).
INTEGRAL_TOL = 1e-7
#: Pools of at least this many entries (n d) copy the rows that stop out of a batch (once a
#: quarter of the working rows have stopped), so that the product E v skips them; on smaller
#: pools (the default's candidate pools) they stay with a zero step.
COMPACT_ENTRIES = 1 << 20
_EPS64 = 2.0 ** -53


@dataclass
class FWResult:
    """State of FW on the relaxation: final x, v = E^T x, value, last FW gap."""

    x: torch.Tensor
    v: torch.Tensor
    value: float
    gap: float
    iterations: int
    converged: bool
    trace: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    tolerance: float = float("nan")


@dataclass
class FWRows:
    """:func:`fw_rows` on M points: per row the final x (M, n) and v = E^T x (M, d), f_lambda
    (``value``), the last FW gap, iterations, whether it stopped by the rule (``converged``), the
    roundings to a vertex and the tolerance it stopped at (max(tol, B)); ``trace`` / ``gaps``
    (when asked): per row, f_lambda at the start and after each iteration or rounding, and the
    gap of each iteration."""

    x: Any
    v: Any
    value: np.ndarray
    gap: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    roundings: np.ndarray
    trace: list | None = None
    gaps: list | None = None
    tolerance: np.ndarray | None = None

    def row(self, m: int) -> FWResult:
        """Row m as a :class:`FWResult`."""
        return FWResult(x=self.x[m], v=self.v[m], value=float(self.value[m]), gap=float(self.gap[m]),
                        iterations=int(self.iterations[m]), converged=bool(self.converged[m]),
                        trace=[] if self.trace is None else self.trace[m],
                        gaps=[] if self.gaps is None else self.gaps[m],
                        tolerance=float("nan") if self.tolerance is None else float(self.tolerance[m]))


def fw_tolerance(k: int, tol: float | None) -> float:
    """FW stops at gap <= tol; default 1e-6 k (k-1), a normalized gap of 1e-6 (raised to the
    rounding bound :func:`gap_rounding_bound` where that is larger)."""
    return 1e-6 * objective_scale(k) if tol is None else check_nonnegative(tol, "tol")


def gap_rounding_bound(k: int, theta: Any, relax_penalty: float, lin_inf: Any, acc: Any, n: int, d: int) -> Any:
    """B, the rounding bound of the computed FW gap (module docstring, with its proof sketch).

    ``lin_inf``: ||l||_inf per row (float or array); ``acc``: the accumulation dtype of X (a torch
    or numpy dtype). Returns an array (or float) like ``lin_inf``.
    """
    u = _unit_roundoff(acc)
    pw = pair_weight(theta)
    lam = float(relax_penalty)
    return u * k * (lin_inf + pw * lam) + 4 * (n + d + k) * _EPS64 * (k * lin_inf + pw * (lam * k + 16.0 * k * k))


def _unit_roundoff(acc: Any) -> float:
    if isinstance(acc, torch.dtype):
        return float(torch.finfo(acc).eps) / 2
    return float(np.finfo(acc).eps) / 2


def fw_rows(
    E: Any,
    X: Any,
    lin: Any,
    theta: Any,
    k: int,
    *,
    relax_penalty: float = 2.0,
    max_iter: int = 1000,
    tol: float | None = None,
    V: Any = None,
    vertex: Callable[[int, Any, Any], tuple[Any, Any]] | None = None,
    record: bool = False,
) -> FWRows:
    """Frank-Wolfe on f_lambda from M points at once: the one FW iteration of divopt.

    Row m of X (M, n) is a feasible point of {0 <= x <= 1, sum x = k} for the problem (lin[m],
    theta[m]) on the pool E (n, d): lin (M, n) its linear term (``linear_term``), theta a float or
    (M,) array. Each row iterates (module docstring) until the oracle returns its own vertex, its
    FW gap is <= max(tol, B) (tol default a normalized gap of 1e-6, B the rounding bound), or
    ``max_iter`` iterations, and follows the iterates it follows alone (up to the summation order
    of the product E v of the batch).

    Every scalar of a step comes from O(k d) work (the k rows of s) plus sums over x (l^T x,
    ||x||^2), recomputed from the stored x at every iteration.

    E, X, lin (and ``V``) are tensors (any device and dtype: the pool) or host float64 numpy
    arrays (a candidate pool of a few hundred rows, where one torch call costs more than its
    work; the products still run on torch's BLAS). ``V`` (M, d): E^T X when known.
    ``vertex(m, x, v) -> (x, v)``: rounds row m's fractional stationary point to a vertex without
    lowering f_lambda (``fw_ws``'s ``round_pairwise``); with it a row that stops at a fractional
    point (and relax_penalty >= 1) is rounded and, where the relaxation is tight (relax_penalty
    >= 2), iterates on from the vertex, else stops there. ``record``: keep each row's trace of
    f_lambda and its gaps.
    """
    lam = float(relax_penalty)
    tol = fw_tolerance(k, tol)
    max_iter = int(max_iter)
    ops = NumpyRows() if isinstance(X, np.ndarray) else TorchRows(X)
    w = _Rows(ops, E, X, lin, theta, k, lam, tol, V, record)
    ev = ops.product(E)
    for loop in itertools.count():
        if loop >= max_iter:  # the cap (a row's iterations never exceed the loops): these rows stop unconverged
            w.cap(max_iter)
        if not w.live.any():
            break
        w.compact()
        G = relaxed_grad(w.L, ev(w.V), w.X, w.theta, lam)
        flags = w.iterate(E, ops.vertices(G, k, E, w.X, w.L, w.V, w.pw, lam))
        w.after(ops.host(flags), vertex)
    return w.result()


class _Rows:
    """The working rows of :func:`fw_rows` and their bookkeeping.

    Backend arrays (device tensors, or numpy): X, V, L, theta, and per row the float64 scalars
    l^T x, ||x||^2, ||v||^2, the last gap, the tolerance, 2 (1-theta) and whether it still
    iterates (``alive``). Host numpy arrays, indexed by the batch row: iterations, roundings,
    converged, ``live``. ``cur`` maps working rows to batch rows; rows that stop are copied out
    of the working copies (``compact``, large pools) or stay with a zero step (small pools).
    """

    _SCALARS = ("lin_x", "x_sq", "v_sq", "gap", "tol", "pw", "th", "alive")

    def __init__(self, ops, E, X, lin, theta, k, lam, tol, V, record):
        self.ops, self.k, self.lam = ops, k, lam
        M, n = X.shape
        d = E.shape[1]
        th = np.broadcast_to(np.asarray(theta, dtype=np.float64), (M,)).copy()
        self.X = ops.copy(X)
        self.V = ops.rows_times(self.X, E) if V is None else ops.copy(V)
        self.L = lin
        self.theta = float(th[0]) if (th == th[0]).all() else ops.column(th)
        self.th = ops.vector(th)
        self.pw = pair_weight(self.th)
        lin_inf = ops.abs_max(lin)
        self.tol = ops.maximum(gap_rounding_bound(k, self.th, lam, lin_inf, ops.acc, n, d), tol)
        self._refresh()
        self.gap = ops.full(M, np.inf)
        self.alive = ops.full_bool(M, True)
        self.cur = np.arange(M)
        self.iters = np.zeros(M, dtype=np.int64)
        self.rounds = np.zeros(M, dtype=np.int64)
        self.converged = np.zeros(M, dtype=bool)
        self.live = np.ones(M, dtype=bool)
        self.compacting = ops.compacts and n * d >= COMPACT_ENTRIES
        self.out = None  # (X, V, scalars) of the whole batch, once rows have been copied out
        # (kind "f" / "g", batch rows, backend values of the working rows, which of them): read at the end
        self.log = [] if record else None
        if record:
            self.log.append(("f", self.cur, self._values(), np.ones(M, dtype=bool)))

    # --- one iteration ------------------------------------------------------------------------
    def iterate(self, E, S):
        """Gap, stop flags and the exact line-search step of every working row at the oracle's
        vertices S (M, k); rows that stop (or stopped before) take a zero step. Returns the
        flags to read on the host: (2, M) booleans, stop and "the iterate is the vertex s"."""
        ops, k, lam = self.ops, self.k, self.lam
        xs, lin_s, V64, Ed = ops.at_vertices(self.X, self.L, E, S, self.V)
        v_ed, ed_sq = ops.dots2(V64, Ed)
        g = (lin_s - self.lin_x) + self.pw * (lam * (xs - self.x_sq) - v_ed)
        at_vertex = xs >= k * (1.0 - INTEGRAL_TOL)
        stop = self.alive & ((g <= self.tol) | at_vertex)
        self.gap = ops.where(self.alive, g, self.gap)
        moved = self.alive & ~stop
        dd = self.x_sq + k - 2.0 * xs  # ||s - x||^2
        gamma = ops.where(moved, line_search(g, self.pw * (lam * dd - ed_sq)), 0.0)
        V64 = ops.step(self.X, V64, S, Ed, gamma)  # v + gamma E^T d, rounded once to v's dtype
        self.V = V64.to(self.V.dtype) if V64.dtype != self.V.dtype else V64
        self.lin_x, self.x_sq = ops.dots(self.X, self.L)
        self.v_sq = ops.sq_norm(V64)
        if self.log is not None:
            self._pending = (self.cur, g, self._values())
        self.alive = moved
        return ops.flags(stop, at_vertex)

    def after(self, flags: np.ndarray, vertex) -> None:
        """Host bookkeeping of one iteration from its flags; rounds the rows that stopped at a
        fractional point when a ``vertex`` rounding is given (a rare event: its own host reads)."""
        stop, at_vertex = flags
        live = self.live[self.cur]
        if self.log is None and not stop.any():  # the common case: every live row stepped
            self.iters[self.cur[live]] += 1
            return
        moved = live & ~stop
        self.iters[self.cur[moved]] += 1
        if self.log is not None:
            rows, g, f = self._pending
            self.log.append(("g", rows[live], g, live))
            self.log.append(("f", rows[moved], f, moved))
        for r in np.flatnonzero(stop):
            m = int(self.cur[r])
            if vertex is None or self.lam < 1 or at_vertex[r] or self.ops.integral(self.X[r], INTEGRAL_TOL):
                self.converged[m], self.live[m] = True, False
                continue
            x, v = vertex(m, self.ops.copy(self.X[r]), self.ops.copy(self.V[r]))  # stationary but fractional
            self.X[r], self.V[r] = x, v
            self.rounds[m] += 1
            self._refresh()
            if self.log is not None:
                one = np.arange(self.cur.size) == r
                self.log.append(("f", self.cur[one], self._values(), one))
            if self.lam < 2:  # not tight: FW would climb back to the fractional point; stop at the vertex
                self.converged[m], self.live[m] = True, False
            else:
                self.alive = self.ops.set_rows(self.alive, np.array([r]), True)

    def cap(self, max_iter: int) -> None:
        """Rows at the iteration cap stop, unconverged."""
        capped = self.live[self.cur] & (self.iters[self.cur] >= max_iter)
        if capped.any():
            self.live[self.cur[capped]] = False
            self.alive = self.ops.set_rows(self.alive, np.flatnonzero(capped), False)

    def compact(self) -> None:
        """Large pools: once a quarter of the working rows have stopped, they leave the working
        copies (the product then skips them)."""
        gone = ~self.live[self.cur]
        if not self.compacting or not gone.any() or 4 * gone.sum() < self.cur.size:
            return
        self._copy_out(np.flatnonzero(gone))
        keep = np.flatnonzero(~gone)
        take = self.ops.rows(keep)
        self.X, self.V, self.L = (t.index_select(0, take) for t in (self.X, self.V, self.L))
        if not isinstance(self.theta, float):
            self.theta = self.theta.index_select(0, take)
        for a in self._SCALARS:
            setattr(self, a, getattr(self, a).index_select(0, take))
        self.cur = self.cur[keep]

    # --- results ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        """l^T x, ||x||^2 and ||v||^2 of every working row from the stored x and v."""
        self.lin_x, self.x_sq = self.ops.dots(self.X, self.L)
        self.v_sq = self.ops.sq_norm(self.ops.widen(self.V))

    def _values(self):
        return relaxed_value(self.lin_x, self.x_sq, self.v_sq, self.th, self.k, self.lam)

    def _copy_out(self, rows: np.ndarray) -> None:
        if self.out is None:  # the first rows to leave: the whole state so far is the output
            self.out = (self.X, self.V, {a: getattr(self, a) for a in ("gap", "lin_x", "x_sq", "v_sq", "th", "tol")})
            return
        X, V, scalars = self.out
        at, to = self.ops.rows(rows), self.ops.rows(self.cur[rows])
        X.index_copy_(0, to, self.X.index_select(0, at))
        V.index_copy_(0, to, self.V.index_select(0, at))
        for a, t in scalars.items():
            t.index_copy_(0, to, getattr(self, a).index_select(0, at))

    def result(self) -> FWRows:
        if self.out is None:  # no row was copied out: the working copies are the batch
            X, V, s = self.X, self.V, {a: getattr(self, a) for a in ("gap", "lin_x", "x_sq", "v_sq", "th", "tol")}
        else:
            self._copy_out(np.arange(self.cur.size))
            X, V, s = self.out
        value = relaxed_value(s["lin_x"], s["x_sq"], s["v_sq"], s["th"], self.k, self.lam)
        gap, value, tol, logged = self.ops.read_all((s["gap"], value, s["tol"]), self.log)
        trace = gaps = None
        if self.log is not None:
            M = self.iters.size
            trace, gaps = [[] for _ in range(M)], [[] for _ in range(M)]
            for (kind, rows, _, sel), vals in zip(self.log, logged):
                dest = trace if kind == "f" else gaps
                for m, val in zip(rows, vals[sel]):
                    dest[m].append(float(val))
        return FWRows(X, V, value, gap, self.iters, self.converged, self.rounds, trace, gaps, tol)


def fw_gap_at(E: torch.Tensor, X: torch.Tensor, L: torch.Tensor, V: torch.Tensor, S: torch.Tensor, theta: Any,
              k: int, relax_penalty: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(gap, at_vertex) of the points X (M, n) with v = V (M, d) at the vertices S (M, k): the
    kernel's gap (module docstring; from E^T s, never from a product) and whether x is the
    vertex s. For certificates that find S from a full-pool gradient (``fw_ws``'s working set,
    the batched working set). ``theta``: a float or an (M,) float64 tensor."""
    ops = TorchRows(X)
    xs, lin_s, V64, Ed = ops.at_vertices(X, L, E, S, V)
    v_ed, _ = ops.dots2(V64, Ed)
    lin_x, x_sq = ops.dots(X, L)
    g = (lin_s - lin_x) + pair_weight(theta) * (float(relax_penalty) * (xs - x_sq) - v_ed)
    return g, xs >= k * (1.0 - INTEGRAL_TOL)


def oracle(E: torch.Tensor, G: torch.Tensor, k: int, X: torch.Tensor, L: torch.Tensor, V: torch.Tensor, theta: Any,
           relax_penalty: float) -> torch.Tensor:
    """The kernel's linear oracle for gradients G (M, n) computed elsewhere (a full-pool
    certificate): the top-k of each row, re-ranked by the exact gradient on float16 / bfloat16
    storage (:meth:`divopt_rag.solvers.fw_arrays.TorchRows.vertices`)."""
    return TorchRows(X).vertices(G, k, E, X, L, V, pair_weight(theta), float(relax_penalty))


def row_tolerance(k: int, theta: Any, relax_penalty: float, L: torch.Tensor, tol: float | None,
                  n: int, d: int) -> torch.Tensor:
    """max(tol, B) per row of the linear terms L (M, n), on L's device (float64)."""
    ops = TorchRows(L)
    B = gap_rounding_bound(k, theta, relax_penalty, ops.abs_max(L), L.dtype, n, d)
    return ops.maximum(B, fw_tolerance(k, tol))
