"""Quadratic convex reformulation (QCR) of the CCBQP: concave upper-bounding functions from an SDP.

The problem (CCBQP and every branch-and-bound node of it) is a cardinality binary QP

    max  g(x) = const + l^T x - x^T C x      over x in {0,1}^p with 1^T x = m,          (P)

the CCBQP being const = (1-theta) k, l = theta (k-1) c, C = (1-theta) W, W = E E^T, m = k
(f = theta (k-1) c^T x + (1-theta)(k - ||E^T x||^2), DESIGN.md). Fixing x_O = 1 and x_Z = 0 gives
again a problem (P) on the free items R (:meth:`CardinalityQP.restrict`):
const' = const + l(O) - 1^T C_OO 1, l' = l_R - 2 C_RO 1, C' = C_RR, m' = m - |O|.

Lifting (Shor). With Y = [[1, x^T], [x, X]] and X = x x^T, g(x) = const + <Chat, Y> with
Chat = [[0, l^T/2], [l/2, -C]]. At every feasible binary x the lifted Y satisfies the linear
equalities A(Y) = b ((2p + 2) of them, multipliers y = (y0, d, r, s)):

    Y_00 = 1,   Y_ii - Y_0i = 0 (x_i^2 = x_i),   sum_j Y_ij - m Y_0i = 0 (x_i (1^T x - m) = 0),
    sum_i Y_0i = m,

and Y is positive semidefinite and entrywise nonnegative. The SDP max <Chat, Y> over those Y is the
Shor bound; with Y >= 0 it is the doubly nonnegative (DNN) bound.

**Claim (the bounding function).** For every y in R^(2p+2) and every symmetric N >= 0, put
Z = Chat - A*(y) + N and

    F(x) = const + b^T y + Z_00 + 2 Z_0R^T x + x^T Z_XX x.

Then F(x) >= g(x) at every feasible binary x, with equality when N = 0.
*Proof.* F(x) = const + b^T y + <Z, Y_x> = g(x) + y^T (b - A(Y_x)) + <N, Y_x>, and A(Y_x) = b,
<N, Y_x> >= 0 (both factors are entrywise nonnegative).  []

Written out, F = g + sum_i u_i (x_i^2 - x_i) + sum_i v_i x_i (1^T x - m) + w (1^T x - m) + (pair
terms of N): the diagonal perturbation and the terms that vanish on the feasible set that
Billionnet and Elloumi's QCR adds, chosen by the SDP (u, v, w come from d, r, s).

**Concavity and the continuous bound.** F is concave on the affine set {1^T x = m} iff
M = -Z_XX is positive semidefinite on 1-perp = {d : 1^T d = 0}. Let mu = lambda_min(M on 1-perp);
when mu < 0, F' = F + delta sum_i (x_i - x_i^2) with delta >= -mu is concave, equal to F on
binary x and >= F on [0, 1]^p (:func:`qcr_from_dual` applies this shift). Then

    OPT(P) <= max { F'(x) : 0 <= x <= 1, 1^T x = m },

a concave QP, and for ANY feasible x the Frank-Wolfe bound F'(x) + max_s grad^T (s - x) (top-m
of the gradient) is a valid upper bound (concavity). With the dual-optimal (y, N) its maximum is
at most the SDP bound (the SDP relaxes the same box); in practice it is often below it.
An independent bound from the same (y, N): sup over Y >= 0 (psd) with trace Y = 1 + m (= 1 + sum
x_i on the feasible set) of <Z, Y> is (1 + m) lambda_max(Z), so OPT(P) <= const + b^T y + (1 + m)
lambda_max(Z) (:attr:`QCRBound.eigen_bound`).

Restriction keeps both properties: a node's free set R lies inside the set where F was built and
{d_R : 1^T d_R = 0} is a subspace of 1-perp, so F restricted (fixings substituted) is still concave
and still >= g at the node's feasible binaries (:meth:`QCRBound.restrict`).

**Exact reformulation for MIQP solvers.** With N = 0 (Shor), F = g on the feasible set, so
max F over binaries with 1^T x = m is the same problem. Solvers need a Hessian that is negative
semidefinite on all of R^p, not only on 1-perp: adding beta_i x_i (1^T x - m) and alpha (1^T x - m)^2
terms (zero on the feasible set) gives H = M + (beta 1^T + 1 beta^T)/2 + alpha 1 1^T; with
beta = -(2/p) P M 1 (P = I - 1 1^T/p) the cross block vanishes and alpha makes the 1-direction
positive (:func:`exact_qcr`). On the feasible set x^T H x = x^T M x + m beta^T x + alpha m^2.

Bounds are computed in float64; the SDP (cvxpy; SCS by default, Clarabel on request) only has to be
approximately solved: any (y, N >= 0) gives a valid function, accuracy only affects tightness.
References: Billionnet, Elloumi, Plateau (2009) "Improving the performance of standard solvers for
quadratic 0-1 programs by a tight convex reformulation: the QCR method"; Billionnet, Elloumi,
Lambert (2012) "Extending the QCR method to general mixed-integer programs"; the trace argument
for the eigenvalue bound is that of Helmberg and Rendl's spectral bundle method.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as sla

from .ccbqp import linear_term
from .extras import require
from .instance import Instance
from .mip_common import BuildClock, BuildTimeout, as_gram
from .mip_sizing import pyomo_seconds_per_unit
from .validation import check_choice

__all__ = [
    "CardinalityQP",
    "LiftOperator",
    "QCRBound",
    "qcr_from_dual",
    "qcr_sdp",
    "exact_qcr",
    "concavity_shift",
    "SDP_KINDS",
    "SCS_CHUNK",
]

#: SDP relaxations behind :func:`qcr_sdp`: "shor" (exact reformulation) or "dnn" (tighter bound).
SDP_KINDS = ("shor", "dnn")


def _restrict(const: float, linear: np.ndarray, quad: np.ndarray, free: np.ndarray, ones: np.ndarray):
    """Substitute x_ones = 1 (and x = 0 outside free and ones) into const + l^T x - x^T Q x."""
    c = float(const + linear[ones].sum() - quad[np.ix_(ones, ones)].sum())
    lin = linear[free] - 2.0 * quad[np.ix_(free, ones)].sum(1)
    return c, lin, quad[np.ix_(free, free)]


def _as_index(idx: Any, p: int, name: str) -> np.ndarray:
    out = np.asarray(idx, dtype=np.int64).reshape(-1)
    if out.size and (out.min() < 0 or out.max() >= p):
        raise ValueError(f"{name} must hold positions in [0, {p}), got min {out.min()}, max {out.max()}")
    return out


class _QuadraticForm:
    """const + linear^T x - x^T quad x: the value shared by the problem g and its bounds F."""

    const: float
    linear: np.ndarray
    quad: np.ndarray

    @property
    def p(self) -> int:
        return int(self.linear.size)

    def value(self, x: Any) -> float:
        """The form at a 0/1 or fractional x of length p (float64)."""
        x = np.asarray(x, dtype=np.float64)
        return float(self.const + self.linear @ x - x @ self.quad @ x)


@dataclass(frozen=True, eq=False)
class CardinalityQP(_QuadraticForm):
    """max const + linear^T x - x^T quad x over x in {0,1}^p with sum(x) = m (float64 data)."""

    const: float
    linear: np.ndarray
    quad: np.ndarray
    m: int

    @classmethod
    def from_instance(cls, inst: Instance) -> "CardinalityQP":
        """The CCBQP: const (1-theta) k, linear theta (k-1) c, quad (1-theta) E E^T, m = k."""
        if not isinstance(inst, Instance):
            raise TypeError(f"inst must be a divopt_rag.models.Instance, got {type(inst).__name__}")
        th, k = inst.theta, inst.k
        c = inst.relevance.detach().double().cpu().numpy()
        return cls((1.0 - th) * k, linear_term(c, th, k), (1.0 - th) * as_gram(inst), k)

    def restrict(self, free: Any, ones: Any) -> "CardinalityQP":
        """The problem on positions ``free`` after fixing ``ones`` to 1 and every other position to 0."""
        free, ones = _as_index(free, self.p, "free"), _as_index(ones, self.p, "ones")
        if ones.size > self.m:
            raise ValueError(f"cannot fix {ones.size} items to 1 when m = {self.m}")
        c, lin, q = _restrict(self.const, self.linear, self.quad, free, ones)
        return CardinalityQP(c, lin, q, self.m - int(ones.size))

    def lifted_objective(self) -> np.ndarray:
        """Chat = [[0, l^T/2], [l/2, -C]] with g(x) = const + <Chat, [[1, x^T], [x, x x^T]]>."""
        p = self.p
        Ch = np.empty((p + 1, p + 1))
        Ch[0, 0] = 0.0
        Ch[0, 1:] = Ch[1:, 0] = 0.5 * self.linear
        Ch[1:, 1:] = -self.quad
        return Ch


class LiftOperator:
    """The equalities A(Y) = b of the lifted problem (module docstring), for p items and cardinality m.

    y = (y0, d_1..d_p, r_1..r_p, s); A*(y) is the adjoint for <U, V> = trace(U V) on symmetric
    matrices; :meth:`project` is the Frobenius projection onto {A(Y) = b} using the Gram matrix
    A A* in closed form (blocks: 1; 3/2 I; (1 + m/2) I; ((p + m^2)/2) I + 1 1^T/2; -1/2; -m/2; p/2).
    """

    def __init__(self, p: int, m: int) -> None:
        self.p, self.m = int(p), int(m)
        p, m = self.p, self.m
        self.b = np.zeros(2 * p + 2)
        self.b[0], self.b[-1] = 1.0, float(m)
        G = np.zeros((2 * p + 2, 2 * p + 2))
        G[0, 0] = 1.0
        D, R, S = slice(1, p + 1), slice(p + 1, 2 * p + 1), 2 * p + 1
        eye = np.eye(p)
        G[D, D] = 1.5 * eye
        G[D, R] = G[R, D] = (1.0 + 0.5 * m) * eye
        G[R, R] = 0.5 * (p + m * m) * eye + 0.5
        G[D, S] = G[S, D] = -0.5
        G[R, S] = G[S, R] = -0.5 * m
        G[S, S] = 0.5 * p
        self.gram = G
        self._solver: tuple[Any, Any] | None = None  # factored on first use: only projections need it

    def apply(self, Y: np.ndarray) -> np.ndarray:
        p, m = self.p, self.m
        out = np.empty(2 * p + 2)
        row = Y[0, 1:]
        out[0] = Y[0, 0]
        out[1 : p + 1] = np.diagonal(Y)[1:] - row
        out[p + 1 : 2 * p + 1] = Y[1:, 1:].sum(1) - m * row
        out[-1] = row.sum()
        return out

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        p, m = self.p, self.m
        d, r, s = y[1 : p + 1], y[p + 1 : 2 * p + 1], y[-1]
        Z = np.empty((p + 1, p + 1))
        Z[0, 0] = y[0]
        Z[0, 1:] = Z[1:, 0] = -0.5 * d - 0.5 * m * r + 0.5 * s
        X = Z[1:, 1:]
        X[...] = 0.5 * (r[:, None] + r[None, :])
        X[np.diag_indices(p)] += d
        return Z

    def solve_gram(self, v: np.ndarray) -> np.ndarray:
        """(A A*)^{-1} v (the pseudo-inverse when the equalities are dependent)."""
        if self._solver is None:  # an O(p^3) factorization, done once, and only by callers that project
            try:
                self._solver = (sla.cho_factor(self.gram), None)
            except np.linalg.LinAlgError:  # dependent equalities (p <= 2): least squares instead
                self._solver = (None, np.linalg.pinv(self.gram))
        chol, pinv = self._solver
        if chol is None:
            return pinv @ v
        return sla.cho_solve(chol, v)

    def project(self, G: np.ndarray) -> np.ndarray:
        """Frobenius projection of a symmetric G onto {Y : A(Y) = b}."""
        return G - self.adjoint(self.solve_gram(self.apply(G) - self.b))


@functools.lru_cache(maxsize=64)
def _perp_basis(p: int) -> np.ndarray:
    """An orthonormal basis (p x (p-1)) of 1-perp: columns 2..p of the Householder reflector of 1."""
    v = np.full(p, 1.0 / np.sqrt(p))
    v[0] -= 1.0
    nv = float(v @ v)
    if nv == 0.0:  # p == 1
        return np.zeros((1, 0))
    H = np.eye(p) - (2.0 / nv) * np.outer(v, v)
    return np.ascontiguousarray(H[:, 1:])


def concavity_shift(quad: np.ndarray) -> tuple[float, float]:
    """(mu, delta): mu = lambda_min(quad on 1-perp) and the shift delta >= 0 making quad + delta I
    positive semidefinite on 1-perp with a margin for the rounding of the eigenvalue solver."""
    p = quad.shape[0]
    if p <= 1:
        return 0.0, 0.0
    V = _perp_basis(p)
    ev = np.linalg.eigvalsh(V.T @ quad @ V)
    mu = float(ev[0])
    margin = 1e-12 * p * max(1.0, float(np.abs(ev).max()))
    return mu, max(0.0, margin - mu)


@dataclass(frozen=True, eq=False)
class QCRBound(_QuadraticForm):
    """A concave F(x) = const + linear^T x - x^T quad x with F >= g at every feasible binary x.

    quad is positive semidefinite on 1-perp (F concave on {sum x = m}); ``exact`` is True when
    F = g on the feasible set (Shor-type, N = 0). ``eigen_bound`` is the SDP dual bound
    const + b^T y + (1 + m) lambda_max(Z) of the same (y, N) (inf when not computed), ``shift``
    the delta added for concavity, ``kind``/``info`` describe where it came from.
    """

    const: float
    linear: np.ndarray
    quad: np.ndarray
    m: int
    exact: bool = False
    eigen_bound: float = np.inf
    shift: float = 0.0
    kind: str = ""
    info: dict = field(default_factory=dict, repr=False)

    def restrict(self, free: Any, ones: Any) -> "QCRBound":
        """F on the node that keeps ``free`` free and fixes ``ones`` (positions of this F) to 1.

        Still concave and still an upper bound of g at the node's feasible binaries (module
        docstring); the eigenvalue bound does not carry over (set to inf).
        """
        free, ones = _as_index(free, self.p, "free"), _as_index(ones, self.p, "ones")
        c, lin, q = _restrict(self.const, self.linear, self.quad, free, ones)
        return QCRBound(c, lin, q, self.m - int(ones.size), self.exact, np.inf, self.shift, self.kind, self.info)


def qcr_from_dual(problem: CardinalityQP, y: np.ndarray, N: np.ndarray | None = None, *,
                  lift: LiftOperator | None = None, kind: str = "", eigen_bound: bool = True,
                  valid_inequality: tuple[np.ndarray, float] | None = None) -> QCRBound:
    """The bounding function of (y, N) (module docstring), made concave on {sum x = m}.

    N (symmetric, (p+1) x (p+1)) is clipped at 0 (any N >= 0 is valid); N = None means Shor (exact).
    y = 0, N = None is g itself (concave when C is psd on 1-perp, as for the CCBQP).
    eigen_bound=False skips the eigenvalue bound (one (p+1) x (p+1) eigendecomposition; then inf).
    valid_inequality=(D, d0): a symmetric D and a scalar d0 with <D, Y_x> <= d0 at every lifted
    feasible binary x (e.g. a nonnegative combination of valid cuts); Z becomes Z - D and the
    constant grows by d0, which adds d0 - <D, Y_x> >= 0 to F at those x, so F stays >= g (and the
    eigenvalue bound stays valid: the same argument on the SDP with the cut as a constraint).
    """
    p, m = problem.p, problem.m
    lift = lift or LiftOperator(p, m)
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (2 * p + 2,):
        raise ValueError(f"y must have shape ({2 * p + 2},), got {y.shape}")
    Z = problem.lifted_objective() - lift.adjoint(y)
    if N is not None:
        Z += np.maximum(0.5 * (N + N.T), 0.0)
    base = problem.const + float(lift.b @ y)
    if valid_inequality is not None:
        D, d0 = valid_inequality
        Z -= 0.5 * (D + D.T)
        base += float(d0)
    eig_bound = base + (1 + m) * float(np.linalg.eigvalsh(Z)[-1]) if eigen_bound else np.inf
    quad = -Z[1:, 1:]
    mu, delta = concavity_shift(quad)
    quad = quad + delta * np.eye(p)
    linear = 2.0 * Z[0, 1:] + delta
    exact = N is None and valid_inequality is None
    return QCRBound(base + float(Z[0, 0]), linear, quad, m, exact, eig_bound, delta, kind,
                    {"lambda_min_perp": mu})


#: SCS iterations between two deadline checks of :func:`qcr_sdp` (SCS itself checks its time
#: limit only every 25 iterations: at p = 300 on a loaded 2-core machine, 0.5-1.4 s).
SCS_CHUNK = 25
# Predictions of the SDP's steps that cannot be interrupted, from what was measured before them
# (ratios measured at p = 100..600 on the shared 2-core machine): cvxpy's compilation per
# (p + 1)^2 entry in units of pyomo_seconds_per_unit (0.5-1 quiet, 2.7-4.5 under a load of 9:
# the Python probe and the C++ compiler slow down differently, so this one is a middle value, a
# guard against starting a compilation far too long, not a bound), SCS's setup per second of
# compilation (0.6-1.4) and SCS's first chunk per second of setup (1.5-2.3), rounded up.
_COMPILE_UNITS_PER_ENTRY = 2.0
_SETUP_PER_COMPILE = 1.5
_CHUNK_PER_SETUP = 2.5


def qcr_sdp(problem: CardinalityQP | Instance, kind: str = "dnn", *, solver: str = "SCS",
            eps: float = 1e-5, clock: BuildClock | None = None, eigen_bound: bool = True,
            **solver_options: Any) -> QCRBound:
    """Solve the Shor or DNN SDP of ``problem`` with cvxpy and return its bounding function.

    max <Chat, Y>  s.t.  A(Y) = b, Y psd (and Y >= 0 for "dnn"); the constraints' dual values are
    the (y, N) of :func:`qcr_from_dual` (signs checked against the eigenvalue bound in the tests).
    solver : "SCS" (default; first-order, measured 0.5 s at p = 100, eps 1e-3) or "CLARABEL"
        (interior point, accurate but ~37 s at p = 100: its KKT system is dense in the p^2/2 block).
    clock : a :class:`~divopt_rag.models.mip_common.BuildClock` whose deadline the SDP must end
        by (None: none). With SCS the iterations then run in chunks of :data:`SCS_CHUNK`, each
        warm-started from the last, and no chunk starts that its predecessor's time says would
        end past the deadline; compilation, SCS's setup and the first chunk are predicted before
        they start (:meth:`~divopt_rag.models.mip_common.BuildClock.expect`), and refused with
        :class:`~divopt_rag.models.mip_common.BuildTimeout` when they cannot fit. A dual stopped
        early is still valid (any (y, N >= 0) is, module docstring), only less tight.
    eigen_bound : compute the eigenvalue bound (one more (p+1) x (p+1) eigendecomposition).
    info holds the SDP value, solver status and seconds, and with a clock the iterations run,
    the seconds per iteration and why it stopped ("converged", "deadline").
    """
    cp = require("cvxpy", "qcr_sdp")  # optional heavy dependency, only needed here

    check_choice(kind, "kind", SDP_KINDS)
    check_choice(solver.upper(), "solver", ("SCS", "CLARABEL"))
    if isinstance(problem, Instance):
        problem = CardinalityQP.from_instance(problem)
    timed = clock is not None and clock.deadline is not None
    p, m = problem.p, problem.m
    if timed:
        clock.expect(_COMPILE_UNITS_PER_ENTRY * (p + 1) ** 2 * pyomo_seconds_per_unit(), "compiling the QCR's SDP")
    Y = cp.Variable((p + 1, p + 1), PSD=True)
    cons = [
        Y[0, 0] == 1,
        cp.diag(Y)[1:] - Y[0, 1:] == 0,
        Y[1:, 1:] @ np.ones(p) - m * Y[0, 1:] == 0,
        cp.sum(Y[0, 1:]) == m,
    ]
    if kind == "dnn":
        cons.append(Y >= 0)
    prob = cp.Problem(cp.Maximize(cp.trace(problem.lifted_objective() @ Y)), cons)
    t0 = time.perf_counter()
    opts = {"eps": eps} if solver.upper() == "SCS" else {}
    opts.update(solver_options)
    extra: dict[str, Any] = {}
    if timed and solver.upper() == "SCS":
        extra = _solve_scs_in_chunks(prob, opts, clock)
    else:
        if timed:  # Clarabel: its own time limit, what is left
            opts.setdefault("time_limit", max(clock.left(), 0.0))
        prob.solve(solver=solver.upper(), **opts)
    seconds = time.perf_counter() - t0
    if cons[0].dual_value is None:
        if extra.get("stopped") == "deadline":
            raise BuildTimeout(f"the {kind} SDP was stopped at its deadline after {extra['iterations']} iterations "
                               f"without a usable dual ({prob.status})")
        raise RuntimeError(f"the {kind} SDP failed ({solver}: {prob.status})")
    y = np.concatenate([np.atleast_1d(cons[0].dual_value), cons[1].dual_value, cons[2].dual_value,
                        np.atleast_1d(cons[3].dual_value)]).astype(np.float64)
    N = np.asarray(cons[4].dual_value, dtype=np.float64) if kind == "dnn" else None
    out = qcr_from_dual(problem, y, N, kind=kind, eigen_bound=eigen_bound)
    out.info.update(sdp_value=problem.const + float(prob.value), status=prob.status, solver=solver.upper(),
                    seconds=seconds, **extra)
    return out


def _solve_scs_in_chunks(prob: Any, opts: dict[str, Any], clock: BuildClock) -> dict[str, Any]:
    """Solve the cvxpy problem ``prob`` with SCS in warm-started chunks of :data:`SCS_CHUNK`
    iterations that end by ``clock``'s deadline (:func:`qcr_sdp`), and load the result into it.
    Returns what to record: iterations, seconds per iteration, why it stopped."""
    import cvxpy as cp
    import scs
    from cvxpy.reductions.solvers.conic_solvers.scs_conif import SCS as CvxpySCS
    from cvxpy.reductions.solvers.conic_solvers.scs_conif import dims_to_solver_dict

    with clock.timed("sdp_compile"):
        data, chain, inverse = prob.get_problem_data(cp.SCS)
    compile_seconds = clock.seconds["sdp_compile"]
    setup_guess = _SETUP_PER_COMPILE * compile_seconds
    clock.expect(setup_guess * (1.0 + _CHUNK_PER_SETUP), "the SDP solver's setup and first iterations")
    settings = CvxpySCS.parse_solver_options(dict(opts))  # eps -> eps_abs, eps_rel (as cvxpy passes it)
    max_iters = int(settings.pop("max_iters", 100_000))
    settings.pop("time_limit_secs", None)  # the chunks keep the deadline
    with clock.timed("sdp_setup"):
        solver = scs.SCS({"A": data["A"], "b": data["b"], "c": data["c"]}, dims_to_solver_dict(data["dims"]),
                         verbose=False, max_iters=SCS_CHUNK, **settings)
    next_chunk = _CHUNK_PER_SETUP * clock.seconds["sdp_setup"]
    result, iterations, per_iteration, stopped = None, 0, next_chunk / SCS_CHUNK, "converged"
    while iterations < max_iters:
        if next_chunk > clock.left():
            if result is None:
                clock.expect(next_chunk, "the SDP's first iterations")
            stopped = "deadline"
            break
        t0 = clock.now()
        warm = {} if result is None else {"x": result["x"], "y": result["y"], "s": result["s"]}
        result = solver.solve(warm_start=result is not None, **warm)
        chunk = int(result["info"]["iter"])
        next_chunk = clock.now() - t0
        per_iteration = next_chunk / max(chunk, 1)
        iterations += chunk
        if result["info"]["status_val"] not in (0, 2, -6, -7):  # unfinished or inaccurate: not yet done
            break
    else:
        stopped = "max_iters"
    prob.unpack_results(result, chain, inverse)
    return {"iterations": iterations, "iteration_seconds": per_iteration, "stopped": stopped}


def exact_qcr(problem: CardinalityQP | Instance, qcr: QCRBound | None = None, **sdp_options: Any):
    """(const, linear, H) with g(x) = const + linear^T x - x^T H x at every feasible binary x and
    H positive semidefinite on all of R^p: the Shor QCR written for an MIQP solver.

    ``qcr`` must be exact (Shor); by default it is computed with :func:`qcr_sdp` (kind "shor").
    H = M + (beta 1^T + 1 beta^T)/2 + alpha 1 1^T with beta = -(2/p) P M 1, which zeroes the block
    between 1 and 1-perp, and alpha lifting the 1-direction to the smallest eigenvalue on 1-perp
    (module docstring); on the feasible set x^T H x = x^T M x + m beta^T x + alpha m^2.
    """
    if isinstance(problem, Instance):
        problem = CardinalityQP.from_instance(problem)
    if qcr is None:
        qcr = qcr_sdp(problem, "shor", **sdp_options)
    if not qcr.exact:
        raise ValueError("exact_qcr needs an exact (Shor, N = 0) bounding function; got kind "
                         f"{qcr.kind!r}, which only bounds g from above")
    p, m = problem.p, problem.m
    M = qcr.quad
    one = np.ones(p)
    M1 = M @ one
    beta = -(2.0 / p) * (M1 - one * (M1.sum() / p))
    H = M + 0.5 * (np.outer(beta, one) + np.outer(one, beta))
    mu, delta = concavity_shift(H)  # quad on 1-perp is unchanged by the beta terms
    # the 1-direction: u = 1/sqrt(p), u^T H u = (1^T H 1)/p; raise it to max(mu, 0) + margin
    target = max(mu + delta, 0.0) + 1e-12 * max(1.0, float(np.abs(H).max())) * p
    alpha = max(0.0, (target - float(one @ H @ one) / p) / p)
    H = H + alpha * np.outer(one, one)
    linear = qcr.linear + m * beta
    const = qcr.const + alpha * m * m
    return const, linear, H
