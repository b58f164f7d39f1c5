"""Frank-Wolfe for the relaxed CCBQP: one kernel, :func:`fw_rows`, for every caller.

Relaxation and its terms: :mod:`divopt_rag.models.ccbqp` (``relaxed_value``, ``relaxed_grad``,
``relaxed_grad_dot_x``, ``curvature``, ``line_search``), maximized over {0 <= x <= 1, sum x = k}:
    f_lambda(x) = l^T x + (1-theta)(k + lambda (||x||^2 - k) - ||E^T x||^2),   l = theta (k-1) c
    grad        = l + 2 (1-theta)(lambda x - E v),     v = E^T x kept up to date
One iteration: s = top-k indicator of grad (linear oracle), d = s - x, gap = grad^T d;
E^T d = E^T s - v (gather k rows, O(k d)); curvature C = 2 (1-theta)(lambda ||d||^2 - ||E^T d||^2);
exact line search gamma = 1 if C >= 0 else min(1, -gap / C). The only O(n d) work per iteration
is one product E v.

:func:`fw_rows` runs that iteration on M points at once (the rows of X: one problem's starts, or
B problems of a sweep), each with its own linear term and theta on one pool E; every caller
composes it: the paper's ``fw`` and :func:`fw_relaxation` (one row), divopt's ``fw_ws`` /
``fw_topk`` (one row, rounded to a vertex at fractional stationary points),
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

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import (curvature, line_search, linear_term, objective_scale, relaxed_grad,
                                     relaxed_grad_dot_x, relaxed_gradient, relaxed_value)
from divopt_rag.models.kernels import gather_rows, gather_sum, matmul, rmatmul
from divopt_rag.models.parameters import ITERATIONS_MAX, ROWS_MAX, SEED, ArrayLike, Interval, Options
from divopt_rag.models.validation import check_choice, check_nonnegative, check_scalar, check_vector

from .selection import register

__all__ = [
    "FWResult", "FWRows", "fw_rows", "fw_relaxation", "round_pairwise", "fw_paper", "frank_wolfe", "fw_topk",
    "top_k_of", "initial_point", "random_point", "rows_times_E", "V_times_Et",
]

_INITS = ("topk", "uniform", "random")
#: The parameters every Frank-Wolfe selector takes, declared once (divopt_rag.models.parameters).
FW_PARAMS = {"relax_penalty": Interval(float, 0.0, None), "max_iter": Interval(int, 1, ITERATIONS_MAX),
             "tol": [Interval(float, 0.0, None), None], "init": [Options(_INITS), ArrayLike(ndim=1)],
             "seed": [SEED, None]}
#: Iterations between exact recomputations of l^T x and ||x||^2 (kept in closed form between them).
SYNC_EVERY = 32
#: A coordinate within this distance of 0 or 1 counts as integral (a vertex of the relaxation).
INTEGRAL_TOL = 1e-7
#: Pools of at least this many entries (n d) copy the rows that stop out of a batch, so that the
#: product E v skips them; on smaller pools (the default's candidate pools) they stay with a zero
#: step, since the copy would cost more than their share of the product.
COMPACT_ENTRIES = 1 << 20


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


@dataclass
class FWRows:
    """:func:`fw_rows` on M points: per row the final x (M, n) and v = E^T x (M, d), f_lambda
    (``value``), the last FW gap, iterations, whether it stopped at gap <= tol (``converged``), the
    roundings to a vertex; ``trace`` / ``gaps`` (when asked): per row, f_lambda at the start and
    after each iteration or rounding, and the gap of each iteration."""

    x: torch.Tensor
    v: torch.Tensor
    value: np.ndarray
    gap: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    roundings: np.ndarray
    trace: list | None = None
    gaps: list | None = None

    def row(self, m: int) -> FWResult:
        """Row m as a :class:`FWResult`."""
        return FWResult(x=self.x[m], v=self.v[m], value=float(self.value[m]), gap=float(self.gap[m]),
                        iterations=int(self.iterations[m]), converged=bool(self.converged[m]),
                        trace=[] if self.trace is None else self.trace[m],
                        gaps=[] if self.gaps is None else self.gaps[m])


def fw_tolerance(k: int, tol: float | None) -> float:
    """FW stops at gap <= tol; default 1e-6 k (k-1), a normalized gap of 1e-6."""
    return 1e-6 * objective_scale(k) if tol is None else check_nonnegative(tol, "tol")


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


def rows_times_E(X: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """X E for X (M, n): row m is E^T x_m (one pass over E for all rows), in X's dtype."""
    if E.dtype in (torch.float16, torch.bfloat16):  # upcast a row block of E at a time
        return rmatmul(E, X.T, dtype=X.dtype).T.contiguous()
    return X.to(E.dtype) @ E


def V_times_Et(V: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """V E^T for V (M, d): row m is E v_m (one pass over E for all rows)."""
    if E.dtype in (torch.float16, torch.bfloat16):
        return matmul(E, V.T).T.contiguous()
    return V.to(E.dtype) @ E.T


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
    exact_trace: bool = False,
) -> FWRows:
    """Frank-Wolfe on f_lambda from M points at once: the one FW iteration of divopt.

    Row m of X (M, n) is a feasible point of {0 <= x <= 1, sum x = k} for the problem (lin[m],
    theta[m]) on the pool E (n, d): lin (M, n) its linear term (:func:`linear_term`), theta a
    float or (M,) array. Each row iterates (module docstring) until its FW gap is <= tol (default
    a normalized gap of 1e-6) or ``max_iter`` iterations, and follows the iterates it follows
    alone (up to the summation order of the product E v of the batch).

    Every scalar of a step comes from O(k + d) work, because x^T (E v) = ||v||^2: l^T x and
    ||x||^2 follow x = (1-gamma) x + gamma s in closed form, recomputed every ``SYNC_EVERY``
    iterations against drift (every iteration with ``exact_trace``), and the gap is
    grad^T s - :func:`relaxed_grad_dot_x`.

    E, X, lin (and ``V``) are tensors (any device and dtype: the pool) or host float64 numpy
    arrays (a candidate pool of a few hundred rows, where one torch call costs more than its
    work; the products still run on torch's BLAS). ``V`` (M, d): E^T X when known.
    ``vertex(m, x, v) -> (x, v)``: rounds row m's fractional stationary point to a vertex without
    lowering f_lambda (``fw_ws``'s :func:`round_pairwise`); with it a row that stops at a
    fractional point (and relax_penalty >= 1) is rounded and, where the relaxation is tight
    (relax_penalty >= 2), iterates on from the vertex, else stops there. ``record``: keep each
    row's trace of f_lambda and its gaps.
    """
    ops = _Numpy if isinstance(X, np.ndarray) else _Torch
    M, n = X.shape
    lam = float(relax_penalty)
    tol = fw_tolerance(k, tol)
    max_iter = int(max_iter)
    th = np.broadcast_to(np.asarray(theta, dtype=np.float64), (M,)).copy()
    X = ops.copy(X)
    w = _Rows(ops, X, ops.rows_times(X, E) if V is None else ops.copy(V), lin, th, record,
              compact=ops is _Torch and n * E.shape[1] >= COMPACT_ENTRIES)
    ev = ops.product(E)
    w.note(None, k, lam)
    for loop in itertools.count():
        if loop >= max_iter:  # the cap (a row's iterations never exceed the loops): these rows stop unconverged
            w.live &= w.iters < max_iter
        every = w.live.all()
        if not every:
            if not w.live.any():
                break
            w.drop_stopped()
            every = w.live.all()
        G = relaxed_grad(w.L, ev(w.V), w.X, w.theta, lam)
        S = ops.topk(G, k)
        gs, xs, lin_s = ops.sums_at(S, G, w.X, w.L)  # g^T s, x^T s, l^T s
        g = gs - relaxed_grad_dot_x(w.lin_x, w.x_sq, w.v_sq, w.th, lam)
        if every:
            w.gap = g
        else:
            w.gap[w.live] = g[w.live]
        if record:
            for m, gm in zip(w.cur[w.live], g[w.live]):
                w.gaps[m].append(float(gm))
        pause = g <= tol  # stationary: converged, or rounded to a vertex (then it steps next time)
        if not every:
            pause &= w.live
        if pause.any():
            every = False
            for r in np.flatnonzero(pause):
                m = int(w.cur[r])
                if vertex is None or lam < 1 or _integral(w.X[r]):
                    w.converged[r], w.live[r], pause[r] = True, False, False
                    continue
                w.X[r], w.V[r] = vertex(m, ops.copy(w.X[r]), ops.copy(w.V[r]))  # stationary but fractional
                w.rounds[r] += 1
                w.sync(np.array([r]))
                w.note(np.array([r]), k, lam)
                if lam < 2:  # not tight: FW would climb back to the fractional point; stop at the vertex
                    w.converged[r], w.live[r], pause[r] = True, False, False
            moved = w.live & ~pause
            if not moved.any():
                continue
        else:
            moved = w.live
        Ed = ops.rows_sum(E, S, w.X.dtype) - w.V  # E^T s - v
        dd = w.x_sq + k - 2.0 * xs  # ||s - x||^2
        gamma = line_search(g, curvature(dd, ops.sq_norms(Ed), w.th, lam))
        if not every:  # rows that stopped (or were just rounded) take a zero step: x, v and the
            gamma = np.where(moved, gamma, 0.0)  # scalars below stay exactly as they are
        w.V = ops.step(w.X, w.V, S, Ed, gamma)
        w.iters += moved
        w.local += moved  # (the sync below restarts a row's count)
        w.lin_x = (1 - gamma) * w.lin_x + gamma * lin_s
        w.x_sq = w.x_sq + 2 * gamma * (xs - w.x_sq) + gamma * gamma * dd
        w.v_sq = ops.sq_norms(w.V)
        due = moved & (w.local >= SYNC_EVERY) if not exact_trace else moved
        if due.any():
            w.sync(np.flatnonzero(due))
        if record:
            w.note(np.flatnonzero(moved), k, lam)
    return w.result(k, lam)


class _Torch:
    """:func:`fw_rows`'s array operations on tensors, any device and dtype (float16 / bfloat16
    storage upcast to the accumulation dtype of X)."""

    copy = staticmethod(torch.clone)
    rows_times = staticmethod(rows_times_E)

    @staticmethod
    def product(E: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        """V -> V E^T (row m: E v_m), one pass over E."""
        if E.dtype in (torch.float16, torch.bfloat16):
            return lambda V: V_times_Et(V, E)
        Et = E.T
        return lambda V: torch.mm(V, Et)

    @staticmethod
    def topk(G: torch.Tensor, k: int) -> torch.Tensor:
        return torch.topk(G, k, dim=1).indices

    @staticmethod
    def sums_at(S: torch.Tensor, *rows: torch.Tensor) -> np.ndarray:
        """Per row, the float64 sum of each tensor's entries at S: one gather for all of them."""
        return _host(torch.stack(rows).gather(2, S.expand(len(rows), -1, -1)).double().sum(2))

    @staticmethod
    def rows_sum(E: torch.Tensor, S: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
        """Per row m, the sum of the rows E[S[m]] (E^T s), in the dtype ``acc``."""
        R = E.index_select(0, S.view(-1)).view(S.shape[0], S.shape[1], -1)
        return (R if R.dtype == acc else R.to(acc)).sum(1)

    @staticmethod
    def sq_norms(A: torch.Tensor) -> np.ndarray:
        Ad = A.double()
        return _host((Ad * Ad).sum(1))

    @staticmethod
    def dots(X: torch.Tensor, L: torch.Tensor, V: torch.Tensor) -> np.ndarray:
        """(l^T x, ||x||^2, ||v||^2) per row, float64."""
        Xd, Ld, Vd = X.double(), L.double(), V.double()
        return _host(torch.stack(((Ld * Xd).sum(1), (Xd * Xd).sum(1), (Vd * Vd).sum(1))))

    @staticmethod
    def step(X: torch.Tensor, V: torch.Tensor, S: torch.Tensor, Ed: torch.Tensor, gamma: np.ndarray) -> torch.Tensor:
        """x = (1 - gamma) x + gamma s in place; returns v + gamma E^T d (one rounding each)."""
        steps = torch.as_tensor(np.concatenate((1.0 - gamma, gamma)), dtype=X.dtype, device=X.device)
        steps = steps.view(2, X.shape[0], 1)
        X.mul_(steps[0]).scatter_add_(1, S, steps[1].expand(-1, S.shape[1]))
        return torch.addcmul(V, Ed, steps[1])

    @staticmethod
    def take(t: torch.Tensor, r: np.ndarray) -> torch.Tensor:
        return t.index_select(0, torch.as_tensor(r, device=t.device))


class _Numpy:
    """:func:`fw_rows`'s array operations on host float64 numpy arrays; the products run on
    torch's BLAS through zero-copy views (numpy's may start a thread pool)."""

    copy = staticmethod(np.copy)

    @staticmethod
    def rows_times(X: np.ndarray, E: np.ndarray) -> np.ndarray:
        return torch.mm(torch.from_numpy(X), torch.from_numpy(E)).numpy()

    @staticmethod
    def product(E: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        Et = torch.from_numpy(E).T
        return lambda V: torch.mm(torch.from_numpy(V), Et).numpy()

    @staticmethod
    def topk(G: np.ndarray, k: int) -> np.ndarray:
        return np.argpartition(-G, k - 1, axis=1)[:, :k]

    @staticmethod
    def sums_at(S: np.ndarray, *rows: np.ndarray) -> np.ndarray:
        at = np.arange(S.shape[0])[:, None], S
        return np.stack([a[at].sum(1) for a in rows])

    @staticmethod
    def rows_sum(E: np.ndarray, S: np.ndarray, acc: Any) -> np.ndarray:
        return E[S].sum(1)

    @staticmethod
    def sq_norms(A: np.ndarray) -> np.ndarray:
        return (A * A).sum(1)

    @staticmethod
    def dots(X: np.ndarray, L: np.ndarray, V: np.ndarray) -> np.ndarray:
        return np.stack(((L * X).sum(1), (X * X).sum(1), (V * V).sum(1)))

    @staticmethod
    def step(X: np.ndarray, V: np.ndarray, S: np.ndarray, Ed: np.ndarray, gamma: np.ndarray) -> np.ndarray:
        X *= (1.0 - gamma)[:, None]
        X[np.arange(S.shape[0])[:, None], S] += gamma[:, None]
        return V + gamma[:, None] * Ed

    @staticmethod
    def take(t: np.ndarray, r: np.ndarray) -> np.ndarray:
        return t[r]


def _host(t: torch.Tensor) -> np.ndarray:
    return t.numpy() if t.device.type == "cpu" else t.cpu().numpy()


def _integral(x: Any) -> bool:
    """Is every coordinate of x (a tensor or an array) within INTEGRAL_TOL of 0 or 1?"""
    return bool(((x < INTEGRAL_TOL) | (x > 1 - INTEGRAL_TOL)).all())


class _Rows:
    """The rows of :func:`fw_rows`: per row l^T x, ||x||^2, ||v||^2 (kept in closed form), the last
    gap, the iteration counts, whether it converged, its roundings and whether it still iterates
    (``live``); and the working copies of X, V, the linear terms and theta (a float when every
    row shares it, else an (M, 1) column). A row that stops is copied out of the working copies
    (``compact``, large pools: the product E v then skips it) or stays with a zero step (small
    pools, where the copy would cost more than its share of the product); ``cur`` maps the
    working rows to the batch."""

    _PER_ROW = ("cur", "th", "lin_x", "x_sq", "v_sq", "gap", "iters", "local", "rounds", "converged", "live")

    def __init__(self, ops, X, V, L, th, record: bool, compact: bool):
        M = X.shape[0]
        self.ops, self.X, self.V, self.L, self.th, self.compact = ops, X, V, L, th, compact
        if (th == th[0]).all():
            self.theta = float(th[0])
        else:
            self.theta = th[:, None] if ops is _Numpy else torch.as_tensor(th, device=X.device)[:, None]
        self.cur = np.arange(M)
        self.gap = np.full(M, np.inf)
        self.iters = np.zeros(M, dtype=np.int64)  # total iterations (the cap)
        self.local = np.zeros(M, dtype=np.int64)  # iterations since the last exact recomputation
        self.rounds = np.zeros(M, dtype=np.int64)
        self.converged = np.zeros(M, dtype=bool)
        self.live = np.ones(M, dtype=bool)
        self.out = None  # (X, V, per-row arrays) of the whole batch, once rows have been copied out
        self.trace = [[] for _ in range(M)] if record else None
        self.gaps = [[] for _ in range(M)] if record else None
        self.lin_x, self.x_sq, self.v_sq = ops.dots(X, L, V)

    def sync(self, r: np.ndarray) -> None:
        """Exact l^T x, ||x||^2 and ||v||^2 of working rows r, against the drift of the closed form."""
        take = self.ops.take
        self.lin_x[r], self.x_sq[r], self.v_sq[r] = self.ops.dots(take(self.X, r), take(self.L, r), take(self.V, r))
        self.local[r] = 0

    def note(self, r: np.ndarray | None, k: int, lam: float) -> None:
        """f_lambda of working rows r (all: None) joins their traces."""
        if self.trace is not None:
            r = np.arange(self.cur.size) if r is None else r
            for m, f in zip(self.cur[r], relaxed_value(self.lin_x[r], self.x_sq[r], self.v_sq[r], self.th[r], k, lam)):
                self.trace[m].append(float(f))

    def drop_stopped(self) -> None:
        """Where rows are copied out (``compact``): the rows that stopped leave the working copies."""
        if not self.compact:
            return
        gone, keep = ~self.live, np.flatnonzero(self.live)
        if self.out is None:  # the first rows to leave: the whole state so far is the output
            self.out = (self.X, self.V, {a: getattr(self, a) for a in self._PER_ROW[1:]})
        else:
            self._copy_out(gone)
        self.X, self.V, self.L = (self.ops.take(t, keep) for t in (self.X, self.V, self.L))
        if not isinstance(self.theta, float):
            self.theta = self.ops.take(self.theta, keep)
        for a in self._PER_ROW:
            setattr(self, a, getattr(self, a)[keep])

    def _copy_out(self, rows: np.ndarray) -> None:
        X, V, arrays = self.out
        b = self.cur[rows]
        at = torch.as_tensor(np.flatnonzero(rows), device=X.device)
        to = torch.as_tensor(b, device=X.device)
        X.index_copy_(0, to, self.X.index_select(0, at))
        V.index_copy_(0, to, self.V.index_select(0, at))
        for a, arr in arrays.items():
            arr[b] = getattr(self, a)[rows]

    def result(self, k: int, lam: float) -> FWRows:
        if self.out is None:  # no row was copied out: the working copies are the batch
            X, V, a = self.X, self.V, {name: getattr(self, name) for name in self._PER_ROW[1:]}
        else:
            self._copy_out(np.ones(self.cur.size, dtype=bool))
            X, V, a = self.out
        return FWRows(X, V, relaxed_value(a["lin_x"], a["x_sq"], a["v_sq"], a["th"], k, lam), a["gap"], a["iters"],
                      a["converged"], a["rounds"], self.trace, self.gaps)


def fw_relaxation(
    inst: Instance,
    x0: torch.Tensor,
    *,
    relax_penalty: float = 2.0,
    max_iter: int = 1000,
    tol: float | None = None,
    v0: torch.Tensor | None = None,
    exact_trace: bool = False,
) -> FWResult:
    """Run FW on f_lambda from the feasible point x0 until gap <= tol or max_iter iterations
    (:func:`fw_rows` on one row).

    ``tol`` defaults to 1e-6 * k (k-1), i.e. a normalized gap of 1e-6. For relax_penalty = 0
    the objective is concave and ``value + gap`` is a certified upper bound on the optimum.
    ``exact_trace=True`` recomputes f_lambda from x and v at every iteration instead of keeping
    its scalars in closed form (slower).
    """
    lam = check_nonnegative(relax_penalty, "relax_penalty")
    max_iter = check_scalar(max_iter, "max_iter", int, min_val=0)
    return fw_rows(inst.E, x0[None], linear_term(inst.relevance, inst.theta, inst.k)[None], inst.theta, inst.k,
                   relax_penalty=lam, max_iter=max_iter, tol=tol, V=None if v0 is None else v0[None],
                   record=True, exact_trace=exact_trace).row(0)


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


def _fw_to_vertex(inst, x, v, relax_penalty, max_iter, tol, exact_trace):
    """FW, rounded pairwise at fractional stationary points (and resumed while lambda >= 2),
    until a binary FW-stationary point or the cap: (x, v, result, iterations, trace, roundings)."""
    relax_penalty = check_nonnegative(relax_penalty, "relax_penalty")
    max_iter = check_scalar(max_iter, "max_iter", int, min_val=0)
    res = fw_rows(inst.E, x[None], linear_term(inst.relevance, inst.theta, inst.k)[None], inst.theta, inst.k,
                  relax_penalty=relax_penalty, max_iter=max_iter, tol=tol, V=None if v is None else v[None],
                  vertex=lambda m, xm, vm: round_pairwise(inst, xm, vm, relax_penalty), record=True,
                  exact_trace=exact_trace)
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
    linear oracle and the exact line search of :mod:`divopt_rag.models.ccbqp` (stop early when the FW
    gap is <= ``tol``, default a normalized gap of 1e-6), and return the top-k of x.
    No rounding step, no restart, no working set: that is divopt's ``fw_topk`` / ``fw_ws``.
    The k items are ordered by decreasing x, ties by decreasing relevance.

    info: converged (gap <= tol before the cap), gap, trace (f_lambda per iteration), init,
    relaxed_value, integral (whether x ended binary).
    """
    x0 = initial_point(inst, init, seed)
    res = fw_relaxation(inst, x0, relax_penalty=relax_penalty, max_iter=max_iter, tol=tol)
    integral = _integral(res.x)
    info = {
        "converged": res.converged,
        "gap": res.gap,
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


@register("fw_ws", params={**FW_PARAMS, "exact_trace": bool,
                          "working_set": [Options({"auto"}), Interval(int, 0, ROWS_MAX), None]})
def frank_wolfe(
    inst: Instance,
    *,
    relax_penalty: float = 2.0,
    init: Any = "topk",
    max_iter: int = 1000,
    tol: float | None = None,
    seed: int | None = None,
    exact_trace: bool = False,
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
        M = check_scalar(working_set, "working_set ('auto', 0, None or an integer M)", int)
        if M < k:
            raise ValueError(f"working_set must be >= k = {k}, got {working_set}")
        if not (isinstance(init, str) and init == "topk"):
            raise ValueError("working_set requires init='topk'")
        M = None if M >= n else M
    x = initial_point(inst, init, seed)
    if M is None:
        x, v, res, total, trace, roundings = _fw_to_vertex(inst, x, None, relax_penalty, max_iter, tol, exact_trace)
        gap, converged, full = res.gap, res.converged, total + 1
    else:
        x, v, gap, converged, total, trace, roundings, full, M = _fw_working_set(
            inst, x, M, relax_penalty, max_iter, tol, exact_trace)
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


def _fw_working_set(inst, x, M, relax_penalty, max_iter, tol, exact_trace):
    n, k, th = inst.n, inst.k, inst.theta
    lam = relax_penalty
    tol_ = fw_tolerance(k, tol)
    lin = linear_term(inst.relevance, th, k)
    P = torch.topk(inst.relevance, M).indices
    in_P = torch.zeros(n, dtype=torch.bool, device=inst.device)
    in_P[P] = True
    v = gather_sum(inst.E, x.nonzero().flatten())
    trace: list[float] = []
    total = roundings = full = 0
    gap, converged = float("inf"), False
    while total < max_iter:
        sub = inst.subset(P.cpu().numpy())
        xs, v, res, it, tr, r = _fw_to_vertex(sub, x[P], v, relax_penalty, max_iter - total, tol, exact_trace)
        total += it
        roundings += r
        trace.extend(tr if not trace else tr[1:])
        x = torch.zeros_like(x)
        x[P] = xs
        if not res.converged:
            gap = res.gap
            break
        # certify on the full pool: one GEMV for the full gradient and FW gap
        g = relaxed_gradient(inst, x, relax_penalty=lam, v=v, lin=lin)
        full += 1
        s = torch.topk(g, k).indices
        gap = float(g.index_select(0, s).double().sum() - (g.double() @ x.double()))
        if gap <= tol_:
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
    return frank_wolfe(inst, relax_penalty=relax_penalty, init=init, max_iter=max_iter, tol=tol, seed=seed,
                       working_set=0)
