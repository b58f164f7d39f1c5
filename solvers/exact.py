"""Exact solver runners: any divopt Pyomo model -> :class:`Result` (Gurobi, SCIP or HiGHS).

``solve(model, solver=...)`` runs one of the installed MIP solvers on a model built by a
``divopt.models.mip_*`` builder (or any ConcreteModel with a binary ``model.x`` indexed by
``range(n)`` and an objective ``model.obj``), through Pyomo's uniform solver interfaces
(``pyomo.contrib.solver``: ``gurobi_persistent``, ``scip_direct``, ``highs``).
``solve_exact(instance, ...)`` builds and solves the exact CCBQP.

Honesty rules (the exact optima certify every fast method):

* ``status == "optimal"`` only when the solver terminated on its optimality criterion AND the
  reported relative gap is at most :data:`OPTIMALITY_GAP` (or the absolute gap at most
  :data:`ABS_GAP_TOL`); a looser user ``mip_gap`` gives ``"gap_limit"``.
* a time limit gives ``"time_limit"`` with the incumbent, the best proven bound and the gap.
* gap = |bound - objective| / max(|objective|, 1e-10), ``inf`` when either is unknown.

The size-limited Gurobi license shipped with gurobipy refuses models with more than 2000
variables or 2000 linear constraints, or more than 200 variables when the model is
quadratic ("Model too large for size-limited license", error 10010). ``solver="auto"``
checks the model against the limits up front (and catches the error as a second line of
defence) and falls back to SCIP/HiGHS with a warning; ``solver="gurobi"`` raises an error
naming the limit and the alternatives.
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pyomo.environ as pe  # noqa: F401  (registers the pyomo.contrib.solver interfaces)
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
from pyomo.core.base.var import Var
from pyomo.core.base.constraint import Constraint
from pyomo.core.expr.visitor import polynomial_degree

from divopt.models import Instance, ccbqp_objective
from divopt.models.mip_ccbqp import FORMULATIONS, build_ccbqp
from divopt.models.mip_qcr import QCR_FORMULATIONS, build_ccbqp_qcr
from divopt.models.validation import check_choice, check_indices, check_nonnegative

from .bnb import branch_and_bound

__all__ = [
    "Result",
    "solve",
    "solve_exact",
    "available_solvers",
    "gurobi_size_limits",
    "model_size",
    "SOLVERS",
    "OPTIMALITY_GAP",
    "DEFAULT_FORMULATION",
]

#: Solvers in the order ``"auto"`` tries them.
SOLVERS = ("gurobi", "scip", "highs")
_PYOMO_NAME = {"gurobi": "gurobi_persistent", "scip": "scip_direct", "highs": "highs"}
#: Relative gap at or below which a converged solve is reported "optimal" (Gurobi's and
#: HiGHS's default MIP gap; SCIP's default is 0).
OPTIMALITY_GAP = 1e-4
#: Absolute gap at or below which a converged solve is "optimal" whatever the relative gap
#: (objectives near 0).
ABS_GAP_TOL = 1e-6

_STATUS = {
    TerminationCondition.convergenceCriteriaSatisfied: "optimal",
    TerminationCondition.maxTimeLimit: "time_limit",
    TerminationCondition.iterationLimit: "iteration_limit",
    TerminationCondition.objectiveLimit: "objective_limit",
    TerminationCondition.minStepLength: "error",
    TerminationCondition.unbounded: "unbounded",
    TerminationCondition.provenInfeasible: "infeasible",
    TerminationCondition.locallyInfeasible: "infeasible",
    TerminationCondition.infeasibleOrUnbounded: "infeasible_or_unbounded",
    TerminationCondition.error: "error",
    TerminationCondition.interrupted: "interrupted",
    TerminationCondition.licensingProblems: "error",
    TerminationCondition.emptyModel: "empty_model",
    TerminationCondition.unknown: "unknown",
}


@dataclass
class Result:
    """What an exact solve found and what it proved.

    indices : int64 array of the selected items (x_i > 0.5), sorted; empty without a solution.
    objective : incumbent objective value (float) or None when no feasible point was found.
    bound : best proven bound on the optimum (an upper bound: models maximize) or None.
    gap : |bound - objective| / max(|objective|, 1e-10); ``inf`` when unknown.
    status : "optimal" (proven within :data:`OPTIMALITY_GAP`), "gap_limit" (stopped at a
        user ``mip_gap`` looser than that), "time_limit", "infeasible", "unbounded",
        "infeasible_or_unbounded", "iteration_limit", "interrupted", "error", "unknown", ...
    seconds : wall-clock seconds of the solve call (model translation included).
    solver : the solver actually used ("gurobi", "scip" or "highs").
    log_path : path of the solver log, when one was requested.
    message : human-readable explanation (infeasibility, fallback, ...).
    info : extras (termination condition, formulation, node count, model size, ...).
    """

    indices: np.ndarray
    objective: float | None
    bound: float | None
    gap: float
    status: str
    seconds: float
    solver: str
    log_path: str | None = None
    message: str = ""
    info: dict = field(default_factory=dict)

    @property
    def proven_optimal(self) -> bool:
        """True only when the solver proved optimality (within OPTIMALITY_GAP)."""
        return self.status == "optimal"

    def __len__(self) -> int:
        return int(self.indices.size)


# --- availability and license -------------------------------------------------------------
# Pyomo's Gurobi interfaces share one gurobipy Env with a client count that can go negative
# (and log a warning, then reopen the Env) when short-lived solver objects are collected; one
# long-lived client keeps the Env open for the whole process.
_KEEPALIVE: dict[str, Any] = {}


@functools.lru_cache(maxsize=None)
def _is_available(name: str) -> bool:
    try:
        opt = SolverFactory(_PYOMO_NAME[name])
        if name == "gurobi":
            _KEEPALIVE[name] = opt
        if not bool(opt.available()):
            return False
    except Exception:  # noqa: BLE001  (a broken install counts as not available)
        return False
    return True


def available_solvers() -> list[str]:
    """The installed and working solvers among ("gurobi", "scip", "highs"), in "auto" order."""
    return [s for s in SOLVERS if _is_available(s)]


@functools.lru_cache(maxsize=None)
def gurobi_size_limits() -> dict | None:
    """Limits of the active Gurobi license, or None when it is unrestricted (or absent).

    Probed once by optimizing an empty 2001-variable model: the size-limited license refuses
    it with error 10010. The returned limits are those of the pip license:
    ``{"max_vars": 2000, "max_constraints": 2000, "max_quadratic_vars": 200}``.
    """
    try:
        import gurobipy as gp
    except ImportError:
        return None
    try:
        with gp.Env(empty=True) as env:
            env.setParam("OutputFlag", 0)
            env.start()
            with gp.Model(env=env) as m:
                m.addVars(2001)
                m.optimize()
    except gp.GurobiError as exc:
        if exc.errno == 10010 or "size-limited" in str(exc):
            return {"max_vars": 2000, "max_constraints": 2000, "max_quadratic_vars": 200}
        return None
    return None


def model_size(model: Any) -> dict:
    """Counts of the active model: variables, binaries/integers, constraints, quadratic?"""
    n_vars = n_int = 0
    for v in model.component_data_objects(Var, descend_into=True):
        n_vars += 1
        if v.is_integer() or v.is_binary():
            n_int += 1
    n_cons = 0
    quadratic = False
    for c in model.component_data_objects(Constraint, active=True, descend_into=True):
        n_cons += 1
        if not quadratic:
            deg = polynomial_degree(c.body)
            quadratic = deg is None or deg > 1
    obj = _objective(model)
    deg = polynomial_degree(obj.expr) if obj is not None else 1
    obj_quadratic = deg is None or deg > 1
    return {
        "n_vars": n_vars,
        "n_integer": n_int,
        "n_constraints": n_cons,
        "quadratic": bool(quadratic or obj_quadratic),
        "quadratic_objective": bool(obj_quadratic),
    }


def _gurobi_refusal(size: dict) -> str | None:
    """Why the size-limited Gurobi license would refuse this model (None if it fits)."""
    lim = gurobi_size_limits()
    if lim is None:
        return None
    if size["n_vars"] > lim["max_vars"]:
        return f"{size['n_vars']} variables > {lim['max_vars']}"
    if size["n_constraints"] > lim["max_constraints"]:
        return f"{size['n_constraints']} constraints > {lim['max_constraints']}"
    if size["quadratic"] and size["n_vars"] > lim["max_quadratic_vars"]:
        return f"{size['n_vars']} variables > {lim['max_quadratic_vars']} in a quadratic model"
    return None


def _objective(model: Any):
    obj = getattr(model, "obj", None)
    if obj is not None:
        return obj
    objs = list(model.component_data_objects(pe.Objective, active=True))
    return objs[0] if objs else None


class _LicenseRefused(RuntimeError):
    pass


# --- warm start ---------------------------------------------------------------------------
def _warm_indices(warm_start: Any, n: int) -> np.ndarray:
    if hasattr(warm_start, "indices"):  # a Selection or a Result
        warm_start = warm_start.indices
    if isinstance(warm_start, (set, frozenset)):
        warm_start = sorted(warm_start)
    return check_indices(np.asarray(list(warm_start) if not hasattr(warm_start, "shape") else warm_start,
                                    dtype=np.int64), n, "warm_start")


def _set_warm_start(model: Any, idx: np.ndarray) -> None:
    chosen = set(int(i) for i in idx)
    for i in model.x:
        model.x[i].set_value(1.0 if i in chosen else 0.0)


# --- the runner ---------------------------------------------------------------------------
def _n_items(model: Any) -> int:
    x = getattr(model, "x", None)
    if x is None:
        raise ValueError("model must have a binary selection variable model.x indexed by range(n)")
    return len(x)


def _selected(model: Any) -> np.ndarray:
    out = [int(i) for i in model.x if model.x[i].value is not None and model.x[i].value > 0.5]
    return np.asarray(sorted(out), dtype=np.int64)


def _all_bounded(model: Any) -> bool:
    for v in model.component_data_objects(Var, descend_into=True):
        if v.fixed:
            continue
        lb, ub = v.bounds
        if lb is None or ub is None:
            return False
    return True


def _gap(objective: float | None, bound: float | None) -> float:
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return math.inf
    return abs(bound - objective) / max(abs(objective), 1e-10)


def _highs_warm_start(opt: Any, model: Any, kw: dict) -> None:
    """Hand HiGHS the x values of the warm start (it completes the other columns itself).

    Pyomo's persistent HiGHS interface has no warm-start option, so the model is loaded
    first and the partial solution set on the underlying ``highspy.Highs``; ``opt.solve``
    then sees the same model and only updates it. Internals may change between Pyomo
    versions: on failure the solve goes on cold, with a warning.
    """
    try:
        opt._active_config = opt.config(value=kw, preserve_implicit=True)
        opt.set_instance(model)
        cols = [opt._pyomo_var_to_solver_var_map[id(model.x[i])] for i in model.x]
        vals = [float(model.x[i].value) for i in model.x]
        opt._solver_model.setSolution(len(cols), np.asarray(cols, dtype=np.int32), np.asarray(vals, dtype=np.float64))
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"HiGHS warm start not applied ({exc!r}); solving cold", RuntimeWarning, stacklevel=3)
    finally:
        opt._active_config = opt.config


@functools.lru_cache(maxsize=None)
def _scip_version() -> str:
    """SCIP's own version (Pyomo reports PySCIPOpt's), e.g. "10.0 (PySCIPOpt 6.3.0)"."""
    import pyscipopt

    return f"{pyscipopt.Model().version()} (PySCIPOpt {pyscipopt.__version__})"


def _run_one(model, solver, *, time_limit, mip_gap, warm_idx, log_path, threads, options) -> Result:
    opt = SolverFactory(_PYOMO_NAME[solver])
    kw: dict[str, Any] = dict(load_solutions=False, raise_exception_on_nonoptimal_result=False)
    if time_limit is not None:
        kw["time_limit"] = float(time_limit)
    if mip_gap is not None:
        kw["rel_gap"] = float(mip_gap)
    if threads is not None:
        kw["threads"] = int(threads)
    if options:
        kw["solver_options"] = dict(options)
    if warm_idx is not None:
        _set_warm_start(model, warm_idx)
        if solver == "gurobi":
            kw["warmstart_discrete_vars"] = True
        elif solver == "scip":
            # Pyomo's SCIP start copies every discrete variable's value and fails on None.
            unset = [v.name for v in model.component_data_objects(Var, descend_into=True)
                     if v.is_integer() and v.value is None]
            if unset:
                warnings.warn(f"SCIP warm start skipped: discrete variables without a value, e.g. {unset[:3]}",
                              RuntimeWarning, stacklevel=3)
            else:
                kw["warmstart_discrete_vars"] = True
    with contextlib.ExitStack() as stack:
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            kw["tee"] = [stack.enter_context(open(log_path, "w"))]
        t0 = time.perf_counter()
        try:
            if solver == "highs" and warm_idx is not None:
                _highs_warm_start(opt, model, kw)
            res = opt.solve(model, **kw)
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
            if "size-limited" in text or "10010" in text:
                raise _LicenseRefused(text) from exc
            raise
        seconds = time.perf_counter() - t0

    tc = res.termination_condition
    status = _STATUS.get(tc, "unknown")
    has_sol = res.solution_status in (SolutionStatus.feasible, SolutionStatus.optimal)
    objective = float(res.incumbent_objective) if has_sol and res.incumbent_objective is not None else None
    bound = float(res.objective_bound) if res.objective_bound is not None else None
    if bound is not None and not math.isfinite(bound):
        bound = None
    if has_sol:
        res.solution_loader.load_vars()
        indices = _selected(model)
    else:
        indices = np.zeros(0, dtype=np.int64)
    gap = _gap(objective, bound)
    message = ""
    if status == "optimal":
        if objective is None:
            status, message = "unknown", "solver reported convergence without a solution"
        elif bound is None:
            # LP-style proof without a separate bound: the incumbent is the optimum.
            bound, gap = objective, 0.0
        elif not (gap <= OPTIMALITY_GAP or abs(bound - objective) <= ABS_GAP_TOL):
            status = "gap_limit"
            message = f"stopped at relative gap {gap:.3g} (mip_gap={mip_gap}); optimality not proven"
    if status == "infeasible_or_unbounded" and _all_bounded(model):
        # Every variable has finite bounds, so the model cannot be unbounded.
        status = "infeasible"
    if status == "infeasible":
        message = getattr(model, "infeasible_message", None) or "the model is infeasible (proven by the solver)"
    if status == "time_limit":
        message = (f"time limit {time_limit} s reached: incumbent {objective}, bound {bound}, gap {gap:.3g}"
                   if objective is not None else f"time limit {time_limit} s reached without a feasible solution")
    info = {
        "termination_condition": tc.name,
        "solution_status": res.solution_status.name,
        "solver_version": _scip_version() if solver == "scip" else ".".join(str(v) for v in (res.solver_version or ())),
    }
    nodes = getattr(res.extra_info, "mip_node_count", None) if hasattr(res, "extra_info") else None
    if nodes is not None:
        info["nodes"] = nodes
    return Result(indices=indices, objective=objective, bound=bound, gap=gap, status=status,
                  seconds=seconds, solver=solver, log_path=None if log_path is None else str(log_path),
                  message=message, info=info)


def _candidates(solver: str, size: dict) -> list[str]:
    check_choice(solver, "solver", ("auto",) + SOLVERS)
    avail = available_solvers()
    if solver != "auto":
        if solver not in avail:
            raise ImportError(
                f"solver {solver!r} is not installed or not working; available: {avail or 'none'} "
                f"(install gurobipy, pyscipopt or highspy)"
            )
        if solver == "highs" and size["quadratic"]:
            raise ValueError(
                "solver 'highs' cannot solve mixed-integer quadratic models (HiGHS supports MILP only); "
                "use a linearized model (formulation='milp') or solver 'scip' / 'gurobi'"
            )
        if solver == "gurobi":
            why = _gurobi_refusal(size)
            if why is not None:
                raise ValueError(
                    f"model too large for the size-limited Gurobi license ({why}; the limit is 2000 "
                    f"variables and 2000 constraints, 200 variables for quadratic models); use solver "
                    f"'scip' or 'highs' (available: {avail}), or install a full Gurobi license"
                )
        return [solver]
    out = []
    for s in avail:
        if s == "highs" and size["quadratic"]:
            continue
        if s == "gurobi":
            why = _gurobi_refusal(size)
            if why is not None:
                warnings.warn(f"Gurobi skipped: model too large for the size-limited license ({why}); "
                              f"falling back to {[a for a in avail if a != 'gurobi']}", RuntimeWarning, stacklevel=3)
                continue
        out.append(s)
    if not out:
        raise ImportError(f"no installed solver can solve this model (quadratic={size['quadratic']}); "
                          f"available: {avail or 'none'}")
    return out


def solve(
    model: Any,
    solver: str = "auto",
    time_limit: float | None = None,
    mip_gap: float | None = None,
    warm_start: Any = None,
    log_path: str | Path | None = None,
    *,
    threads: int | None = None,
    options: dict | None = None,
) -> Result:
    """Solve a divopt Pyomo model (binary ``model.x``, objective ``model.obj``).

    solver : "auto" (first of gurobi -> scip -> highs that is installed and fits the model:
        HiGHS only for linear models, Gurobi only within its license limits), or a name.
    time_limit : seconds; on expiry the Result has status "time_limit", the incumbent, the
        best bound and the gap.
    mip_gap : relative gap at which the solver may stop (status "gap_limit" if above
        :data:`OPTIMALITY_GAP`).
    warm_start : indices (iterable, array, or a Selection/Result) to set x to before solving.
    log_path : file receiving the solver log.
    threads, options : solver threads and raw solver options (passed through).
    """
    n = _n_items(model)
    if time_limit is not None:
        time_limit = check_nonnegative(time_limit, "time_limit")
    if mip_gap is not None:
        mip_gap = check_nonnegative(mip_gap, "mip_gap")
    warm_idx = None if warm_start is None else _warm_indices(warm_start, n)
    size = model_size(model)
    cands = _candidates(solver, size)
    last_exc: Exception | None = None
    for s in cands:
        try:
            r = _run_one(model, s, time_limit=time_limit, mip_gap=mip_gap, warm_idx=warm_idx,
                         log_path=log_path, threads=threads, options=options)
        except _LicenseRefused as exc:
            if solver != "auto":
                raise ValueError(
                    f"Gurobi refused the model: {exc}. The size-limited license allows 2000 variables "
                    f"and constraints (200 variables in quadratic models); use solver 'scip' or 'highs'"
                ) from exc
            warnings.warn(f"Gurobi refused the model ({exc}); falling back", RuntimeWarning, stacklevel=2)
            last_exc = exc
            continue
        r.info.update(size)
        return r
    raise RuntimeError(f"every candidate solver failed: {last_exc}")


#: Formulation "auto" gives each solver: Gurobi's native (Gram) MIQP, SCIP's factored MIQP
#: (its outer approximation handles r squares far better than n^2/2 products), HiGHS's MILP,
#: divopt's branch-and-bound its DNN/QCR bounds ("qcr_dnn", the only one it takes).
DEFAULT_FORMULATION = {"gurobi": "miqp", "scip": "miqp_lowrank", "highs": "milp", "bnb": "qcr_dnn"}
#: Engines of :func:`solve_exact`: the MIP solvers plus divopt's own branch-and-bound (always there).
EXACT_SOLVERS = SOLVERS + ("bnb",)


def _ccbqp_size(inst: Instance, formulation: str) -> dict:
    """Model size of a CCBQP formulation, without building it (for solver selection)."""
    n, p = inst.n, inst.n * (inst.n - 1) // 2
    quadratic = inst.theta < 1
    if formulation in ("miqp", "qcr", "qcr_dnn"):
        return {"n_vars": n, "n_constraints": 1, "quadratic": quadratic}
    if formulation == "miqp_lowrank":
        r = min(inst.n, inst.d)
        return {"n_vars": n + r, "n_constraints": r + 1, "quadratic": quadratic}
    if formulation == "qcr_lowrank":
        return {"n_vars": 2 * n, "n_constraints": n + 1, "quadratic": quadratic}
    return {"n_vars": n + p, "n_constraints": 2 * p + n + 1, "quadratic": False}


def _ccbqp_fits(solver: str, inst: Instance, formulation: str) -> str | None:
    """Why ``solver`` cannot take this CCBQP formulation (None when it can)."""
    if (solver == "bnb") != (formulation == "qcr_dnn"):
        return ("divopt's branch-and-bound only takes formulation 'qcr_dnn'" if solver == "bnb"
                else "formulation 'qcr_dnn' is divopt's branch-and-bound's own (solver 'bnb')")
    size = _ccbqp_size(inst, formulation)
    if solver == "highs" and size["quadratic"]:
        return f"HiGHS has no MIQP; formulation {formulation!r} is quadratic (use 'milp')"
    if solver == "gurobi":
        why = _gurobi_refusal(size)
        if why is not None:
            return (f"model too large for the size-limited Gurobi license ({why}; the limit is 2000 "
                    f"variables and 2000 constraints, 200 variables for quadratic models)")
    return None


def solve_exact(
    instance: Instance,
    solver: str = "auto",
    time_limit: float | None = None,
    mip_gap: float | None = None,
    warm_start: Any = None,
    formulation: str = "auto",
    log_path: str | Path | None = None,
    *,
    threads: int | None = None,
    rlt: bool = True,
) -> Result:
    """Solve the exact CCBQP of ``instance`` (see :mod:`divopt.models.mip_ccbqp`).

    formulation : "miqp" (native convex MIQP in the Gram matrix; Gurobi/SCIP), "miqp_lowrank"
        (factored MIQP, v = F^T x with W = F F^T; Gurobi/SCIP), "milp" (McCormick + RLT
        linearization; every solver, the only one HiGHS accepts), "qcr" / "qcr_lowrank" (the
        Shor-SDP quadratic convex reformulation, :mod:`divopt.models.mip_qcr`; Gurobi/SCIP),
        "qcr_dnn" (divopt's branch-and-bound, which takes only this), or "auto":
        :data:`DEFAULT_FORMULATION` of the solver.
    solver : "gurobi", "scip", "highs", "bnb" (divopt's own branch-and-bound,
        :mod:`divopt.solvers.bnb`; needs no licence) or "auto": Gurobi when it is installed and the
        model fits its licence (MIQP: n <= 200 with the pip licence), else "bnb" (formulation
        "auto"; with an explicit formulation the first of scip -> highs that takes it). An
        explicit solver that cannot take the model raises ValueError naming the limit and the
        alternatives.
    mip_gap : relative gap at which to stop (bnb default 1e-6, its status then "optimal").
    The returned objective is re-evaluated with :func:`divopt.models.ccbqp_objective` on the
    selected indices (the solver's own value is kept in ``info["solver_objective"]``). For "bnb",
    ``info`` holds "nodes", the node log "log" (DataFrame) and "root_bound".
    """
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a divopt.models.Instance, got {type(instance).__name__}")
    check_choice(formulation, "formulation", ("auto",) + FORMULATIONS + tuple(QCR_FORMULATIONS) + ("qcr_dnn",))
    check_choice(solver, "solver", ("auto",) + EXACT_SOLVERS)
    avail = available_solvers()
    if solver == "auto" and formulation in ("auto", "qcr_dnn"):
        # Gurobi when it fits its licence, else divopt's own engine (faster than SCIP/HiGHS by 10x+
        # on the exact benchmark and without size limits)
        gurobi_why = _ccbqp_fits("gurobi", instance, DEFAULT_FORMULATION["gurobi"]) if "gurobi" in avail else "not installed"
        solver = "gurobi" if gurobi_why is None and formulation == "auto" else "bnb"
    if solver == "bnb":
        why = _ccbqp_fits("bnb", instance, "qcr_dnn" if formulation == "auto" else formulation)
        if why is not None:
            raise ValueError(f"solver 'bnb' cannot solve this CCBQP: {why}")
        return _solve_bnb(instance, time_limit=time_limit, mip_gap=mip_gap, warm_start=warm_start, log_path=log_path)
    if solver == "auto":
        if not avail:
            raise ImportError("no MIP solver installed; install gurobipy, pyscipopt or highspy")
        reasons = {}
        for s in avail:
            f = DEFAULT_FORMULATION[s] if formulation == "auto" else formulation
            reasons[s] = _ccbqp_fits(s, instance, f)
            if reasons[s] is None:
                solver = s
                break
        if solver == "auto":
            raise ImportError(f"no installed solver can take formulation {formulation!r}: {reasons}")
        if reasons.get("gurobi"):
            warnings.warn(f"Gurobi skipped: {reasons['gurobi']}; using {solver}", RuntimeWarning, stacklevel=2)
    elif solver not in avail:
        raise ImportError(f"solver {solver!r} is not installed or not working; available: {avail or 'none'}")
    if formulation == "auto":
        formulation = DEFAULT_FORMULATION[solver]
    why = _ccbqp_fits(solver, instance, formulation)
    if why is not None:
        others = [s for s in avail if s != solver]
        raise ValueError(f"solver {solver!r} cannot solve this CCBQP: {why}; alternatives: {others}")
    t0 = time.perf_counter()
    if formulation in QCR_FORMULATIONS:
        model = build_ccbqp_qcr(instance, QCR_FORMULATIONS[formulation])
    else:
        model = build_ccbqp(instance, formulation, rlt=rlt)
    build_seconds = time.perf_counter() - t0
    r = solve(model, solver, time_limit=time_limit, mip_gap=mip_gap, warm_start=warm_start,
              log_path=log_path, threads=threads)
    r.info["formulation"] = formulation
    r.info["build_seconds"] = build_seconds
    if formulation in QCR_FORMULATIONS:
        r.info["qcr_seconds"] = model.qcr_seconds
        r.seconds += build_seconds  # the SDP is part of the method's time
    if r.objective is not None:
        r.info["solver_objective"] = r.objective
        r.objective = ccbqp_objective(instance, r.indices)
        r.gap = _gap(r.objective, r.bound)
    return r


def _solve_bnb(instance: Instance, *, time_limit, mip_gap, warm_start, log_path=None) -> Result:
    """divopt's branch-and-bound as a :class:`Result` (same honesty rules as the MIP runners);
    ``log_path`` receives the node log as CSV."""
    kw = {} if mip_gap is None else {"mip_gap": check_nonnegative(mip_gap, "mip_gap")}
    warm = None if warm_start is None else _warm_indices(warm_start, instance.n)
    out = branch_and_bound(instance, time_limit=time_limit, warm_start=warm, **kw)
    gap = _gap(out.objective, out.bound)
    status, message = out.status, ""
    if status == "optimal" and not (gap <= OPTIMALITY_GAP or abs(out.bound - out.objective) <= ABS_GAP_TOL):
        status = "gap_limit"
        message = f"stopped at relative gap {gap:.3g} (mip_gap={mip_gap}); optimality not proven"
    elif status != "optimal":
        message = f"{status.replace('_', ' ')} reached: incumbent {out.objective}, bound {out.bound}, gap {gap:.3g}"
    info = dict(out.info, nodes=out.nodes, log=out.log, formulation="qcr_dnn", solver_objective=out.objective)
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        out.log.to_csv(log_path, index=False)
    return Result(indices=out.indices, objective=out.objective, bound=out.bound, gap=gap, status=status,
                  seconds=out.seconds, solver="bnb", log_path=None if log_path is None else str(log_path),
                  message=message, info=info)
