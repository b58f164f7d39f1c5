"""What an exact CCBQP solve needs, known before anything is built: model size, memory, time.

A request is judged on numbers, not by trying: the Pyomo MILP of n = 3000 items has 4.5e6
variables and 2.7e7 nonzeros (about 19 GB with the solver's copy, minutes of Python), and
divopt's branch-and-bound at n = 1e5 would allocate n x n matrices of 74.5 GiB each.

* :func:`ccbqp_counts`: variables, constraints, nonzeros and objective terms of each formulation
  of :mod:`divopt_rag.models.mip_ccbqp` / :mod:`divopt_rag.models.mip_qcr`, as functions of n, d,
  theta (the tests check them against the counts of built models).
* :func:`estimate_ccbqp`: bytes at the peak of build + the solver's copy (dense numpy arrays of the
  builder, Pyomo objects, the solver's model), and the work of building and translating it in
  units of :func:`pyomo_seconds_per_unit` (a small Pyomo build timed now, so the machine's speed
  and load count).
* :func:`available_memory`: what this process may still allocate (:mod:`divopt_rag.models.memory`).
* :func:`memory_refusal`: the one-line reason a request cannot fit, or None.

The per-item costs below were measured on divopt's 2-core development machine (Python 3.11,
Pyomo 6.10, highspy 1.16, PySCIPOpt 6.3, gurobipy 13) as peak-RSS growth of build + translation
(HiGHS MILP n = 100..300: 370-425 bytes per variable/constraint/nonzero; SCIP MIQP: about 1.5 kB
per quadratic term; Gurobi: about 650 bytes per quadratic term), rounded up.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import pyomo.environ as pe
from pyomo.core.util import quicksum

from .memory import available_memory, format_bytes

__all__ = [
    "ModelCounts",
    "ModelEstimate",
    "ccbqp_counts",
    "estimate_ccbqp",
    "memory_refusal",
    "pyomo_seconds_per_unit",
    "MEMORY_HEADROOM",
    "largest_fitting",
]

#: Share of the available memory a solve may plan to use (the rest is headroom for the
#: interpreter, the solver's own work arrays and other processes).
MEMORY_HEADROOM = 0.8

# bytes per Pyomo item (variable, constraint, linear nonzero, objective term) including the
# solver interface's copy; per quadratic objective term; by solver ("bnb" builds no Pyomo model)
_BYTES_PER_ITEM = {"highs": 450, "scip": 600, "gurobi": 450}
_BYTES_PER_QUAD = {"highs": 700, "scip": 1700, "gurobi": 800}
# work per item (variable, constraint, nonzero, linear objective term) and per quadratic term in
# units of the probe (:func:`pyomo_seconds_per_unit`): building, by formulation (the low-rank rows
# index F per term), and loading (Pyomo's model measured, then translated into the solver's own),
# by solver. Measured ratios on the shared 2-core machine at d = 384 (HiGHS MILP n = 150: build
# 0.85, load 2.6 per item; SCIP low-rank n = 150..1000: build 1.4-2.2, load 1.2-2.9 per item;
# Gurobi MIQP n = 150, 200: load 2.5-6.3 per quadratic term), rounded up by about a fifth.
_BUILD_UNITS = {"milp": (1.0, 0.0), "milp_compact": (1.0, 0.0), "miqp": (1.0, 2.5), "qcr": (1.0, 2.5),
                "miqp_lowrank": (2.5, 2.5), "qcr_lowrank": (2.5, 2.5)}
_TRANSLATE_UNITS = {"highs": (3.0, 20.0), "scip": (3.5, 18.0), "gurobi": (3.0, 8.0)}


class ModelCounts(NamedTuple):
    """Size of a built formulation: variables (binaries among them), constraints, nonzeros of
    the constraints, linear and quadratic terms of the objective."""

    n_vars: int
    n_integer: int
    n_constraints: int
    n_nonzeros: int
    n_linear_objective: int
    n_quadratic_objective: int


@dataclass(frozen=True)
class ModelEstimate:
    """What a solve is expected to need before it starts.

    what : e.g. "the MILP (formulation 'milp') for HiGHS" or "divopt's branch-and-bound".
    counts : the model's size (None for bnb, which builds no Pyomo model).
    bytes : peak memory of the solve (dense arrays, Pyomo objects, the solver's copy).
    build_units, translate_units : Pyomo work of building the model and of loading it into the
        solver, in units of :func:`pyomo_seconds_per_unit`.
    cubic : the largest dense O(p^3) step (eigendecompositions, factorizations) as p, or 0.
    detail : what the bytes are, when there are no counts (e.g. bnb's dense matrices).
    """

    what: str
    counts: ModelCounts | None
    bytes: int
    build_units: float = 0.0
    translate_units: float = 0.0
    cubic: int = 0
    detail: str = ""

    def describe(self) -> str:
        """'4.5e+06 variables, 9e+06 constraints, 2.7e+07 nonzeros, 4.5e+05 quadratic terms'."""
        c = self.counts
        if c is None:
            return self.detail
        parts = [f"{c.n_vars:.3g} variables", f"{c.n_constraints:.3g} constraints", f"{c.n_nonzeros:.3g} nonzeros"]
        if c.n_quadratic_objective:
            parts.append(f"{c.n_quadratic_objective:.3g} quadratic terms")
        return ", ".join(parts)

    def seconds(self, per_unit: float) -> float:
        """Predicted seconds to build and load the model at ``per_unit`` seconds per unit."""
        return (self.build_units + self.translate_units) * per_unit


def _rank(n: int, d: int) -> int:
    # W = E E^T has rank <= min(n, d); the diagonally shifted W - uI of n <= d is full rank
    return n if n <= d else d


def ccbqp_counts(n: int, d: int, theta: float, formulation: str, *, rlt: bool = True) -> ModelCounts:
    """Size of the CCBQP model of ``formulation`` for n items in dimension d (upper bounds: the
    builders skip coefficients that are exactly 0, and the rank of E may be below min(n, d)).

    miqp / qcr: n binaries, the cardinality row; n(n+1)/2 quadratic terms when theta < 1 (qcr: always).
    miqp_lowrank / qcr_lowrank: n binaries + r continuous v (r = rank), 1 + r rows, r (n + 1)
        nonzeros in the rows v = F^T x; r squares in the objective.
    milp: n binaries + P = n(n-1)/2 products y; rows: cardinality, 2P upper McCormick, and n RLT
        rows of n nonzeros (rlt) or P lower McCormick rows of 3 (not rlt).
    milp_compact (Glover): n binaries + n continuous z; rows: cardinality, n rows z_i >= s_i(x) -
        U_i (1 - x_i) of n + 1 nonzeros, n rows z_i >= L_i x_i of 2; theta = 1: the x and the
        cardinality row alone.
    """
    quadratic = theta < 1.0
    P = n * (n - 1) // 2
    if formulation in ("miqp", "qcr"):
        q = n * (n + 1) // 2 if (quadratic or formulation == "qcr") else 0
        return ModelCounts(n, n, 1, n, n, q)
    if formulation in ("miqp_lowrank", "qcr_lowrank"):
        r = _rank(n, d) if formulation == "miqp_lowrank" else n
        q = r if (quadratic or formulation == "qcr_lowrank") else 0
        return ModelCounts(n + r, n, 1 + r, n + r * (n + 1), n, q)
    if formulation == "milp_compact":
        if not quadratic:
            return ModelCounts(n, n, 1, n, n, 0)
        return ModelCounts(2 * n, n, 1 + 2 * n, n + n * (n + 1) + 2 * n, 2 * n, 0)
    if formulation == "milp":
        lin = n + (P if quadratic else 0)  # the y terms carry (1 - theta): none at theta = 1
        if rlt:
            return ModelCounts(n + P, n, 1 + 2 * P + n, n + 4 * P + n * n, lin, 0)
        return ModelCounts(n + P, n, 1 + 3 * P, n + 7 * P, lin, 0)
    raise ValueError(f"unknown formulation {formulation!r}; expected one of "
                     "['milp', 'milp_compact', 'miqp', 'miqp_lowrank', 'qcr', 'qcr_lowrank']")


def _dense_bytes(n: int, d: int, formulation: str) -> int:
    """Peak of the builder's numpy arrays (float64): the Gram matrix W and what is formed from it."""
    nn = 8 * n * n
    if formulation == "miqp":
        return 4 * nn  # W, its upper triangle's indices (2 x int64) and coefficients
    if formulation == "miqp_lowrank":
        return 8 * n * d * 3 if n > d else 4 * nn  # E, F (from E^T E); n <= d: W, its eigenvectors
    if formulation == "milp_compact":
        return 3 * nn  # W, its rows without the diagonal, sorted
    if formulation == "milp":
        return nn + 200 * (n * (n - 1) // 2)  # W; the pair list and Pyomo's ordered index set
    # qcr: the Shor SDP in cvxpy/SCS on an (n+1) x (n+1) matrix, then H and its factor
    return 40 * 8 * (n + 1) ** 2


def estimate_ccbqp(n: int, d: int, theta: float, formulation: str, solver: str, *, rlt: bool = True) -> ModelEstimate:
    """The :class:`ModelEstimate` of solving the ``formulation`` model with ``solver``."""
    c = ccbqp_counts(n, d, theta, formulation, rlt=rlt)
    items = c.n_vars + c.n_constraints + c.n_nonzeros + c.n_linear_objective
    per_item, per_quad = _BYTES_PER_ITEM.get(solver, 600), _BYTES_PER_QUAD.get(solver, 1700)
    nbytes = _dense_bytes(n, d, formulation) + per_item * items + per_quad * c.n_quadratic_objective
    b_item, b_quad = _BUILD_UNITS[formulation]
    t_item, t_quad = _TRANSLATE_UNITS.get(solver, (5.5, 20.0))
    build = b_item * items + b_quad * c.n_quadratic_objective
    translate = t_item * items + t_quad * c.n_quadratic_objective
    cubic = n if formulation.startswith("qcr") or (formulation in ("miqp", "miqp_lowrank") and n <= d) else 0
    names = {"highs": "HiGHS", "scip": "SCIP", "gurobi": "Gurobi"}
    what = f"the {formulation!r} model for {names.get(solver, solver)}"
    return ModelEstimate(what, c, int(nbytes), float(build), float(translate), cubic)


def memory_refusal(estimate: ModelEstimate, budget: tuple[int, str] | None = None) -> str | None:
    """Why ``estimate`` cannot fit (its need against :data:`MEMORY_HEADROOM` of the available
    memory), or None when it fits. ``budget`` overrides :func:`available_memory` (bytes, source)."""
    avail, source = available_memory() if budget is None else budget
    if estimate.bytes <= MEMORY_HEADROOM * avail:
        return None
    size = estimate.describe()
    return (f"{estimate.what} needs about {format_bytes(estimate.bytes)}"
            + (f" ({size})" if size else "")
            + f", more than {MEMORY_HEADROOM:.0%} of the {format_bytes(avail)} free ({source})")


# --- the speed of Pyomo now -------------------------------------------------------------------
_PROBE_UNITS = 100 + 100 + 200 + 465  # variables, constraints, nonzeros, quadratic terms
_probe_cache: tuple[float, float] | None = None


def _probe_once() -> float:
    t0 = time.perf_counter()
    m = pe.ConcreteModel()
    m.x = pe.Var(range(100), domain=pe.Binary)
    m.c = pe.Constraint(range(100), rule=lambda m, i: m.x[i] + m.x[(i + 1) % 100] <= 1)
    m.obj = pe.Objective(expr=quicksum(0.5 * m.x[i] * m.x[j] for i in range(30) for j in range(i, 30)),
                         sense=pe.maximize)
    return (time.perf_counter() - t0) / _PROBE_UNITS


def pyomo_seconds_per_unit(max_age: float = 10.0) -> float:
    """Seconds of one unit of Pyomo work on this machine now: the median of three builds of a
    small model (~1e3 terms, ~10 ms), re-measured when older than ``max_age`` seconds."""
    global _probe_cache
    now = time.monotonic()
    if _probe_cache is None or now - _probe_cache[1] > max_age:
        runs = sorted(_probe_once() for _ in range(3))
        _probe_cache = (runs[1], now)
    return _probe_cache[0]


def largest_fitting(need, budget_bytes: float, lo: int = 1, hi: int = 1 << 40) -> int:
    """The largest n >= lo with ``need(n) <= budget_bytes`` (``need`` nondecreasing), or lo - 1."""
    if need(lo) > budget_bytes:
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if need(mid) <= budget_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo
