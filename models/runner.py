"""The model runner: any divopt Pyomo model -> :class:`Result` (Gurobi, SCIP or HiGHS).

A model is data: a ``divopt_rag.models.mip_*`` or ``divopt_rag.robust.models`` builder returns it with
its :class:`~divopt_rag.models.mip_common.ModelInfo` (a :class:`~divopt_rag.models.mip_common.BuiltModel`
pair), or it is any ConcreteModel with a binary ``model.x`` indexed by ``range(n)`` and an
objective ``model.obj``, always maximized. :func:`solve` takes it, with the options of one
:class:`SolveConfig`, and returns a :class:`Result`: status, incumbent, objective, bound, gap,
seconds, solver, log path. Nothing is attached to the model to talk to the runner; it drives
Pyomo's ``pyomo.contrib.solver`` interfaces (``gurobi_persistent``, ``scip_direct``, ``highs``).

Honesty rules (the exact optima certify every fast method):

* ``status == "optimal"`` only when the solver terminated on its optimality criterion AND the
  reported relative gap is at most :data:`OPTIMALITY_GAP` (or the absolute gap at most
  :data:`ABS_GAP_TOL`); a looser user ``mip_gap`` gives ``"gap_limit"``.
* a time limit gives ``"time_limit"`` with the incumbent, the best proven bound and the gap.
* gap = |bound - objective| / max(|objective|, 1e-10), ``inf`` when either is unknown.

The size-limited Gurobi license shipped with gurobipy refuses models with more than 2000
variables or 2000 linear constraints, or more than 200 variables when the model is
quadratic ("Model too large for size-limited license", error 10010). The runner measures
every model before solving it (:func:`model_size`): ``solver="auto"`` skips Gurobi with a
warning when the model exceeds the limits (and catches the error as a second line of
defence), an explicit ``solver="gurobi"`` raises :class:`SolverRefused` naming the limit and
the alternatives; HiGHS is refused for quadratic models the same way.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import numpy as np
import pyomo.environ as pe  # noqa: F401  (registers the pyomo.contrib.solver interfaces)
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
from pyomo.core.base.constraint import Constraint
from pyomo.core.base.var import Var
from pyomo.core.expr.visitor import polynomial_degree

from .extras import solver_install_hint
from .mip_common import BuiltModel, ModelInfo
from .validation import check_choice, check_indices, check_nonnegative

__all__ = [
    "Result",
    "SolveConfig",
    "SolverRefused",
    "ModelSize",
    "solve",
    "available_solvers",
    "gurobi_size_limits",
    "model_size",
    "solver_refusal",
    "relative_gap",
    "SOLVERS",
    "OPTIMALITY_GAP",
    "ABS_GAP_TOL",
    "DEFAULT_TIME_LIMIT",
    "ModelTooLarge",
    "status_message",
    "compose_message",
]

#: Solvers in the order ``"auto"`` tries them.
SOLVERS = ("gurobi", "scip", "highs")
_PYOMO_NAME = {"gurobi": "gurobi_persistent", "scip": "scip_direct", "highs": "highs"}
#: Where each Pyomo interface puts the branch-and-bound node count in ``results.extra_info``.
_NODE_COUNT = {"gurobi": "NodeCount", "scip": "NNodes", "highs": "mip_node_count"}
#: Relative gap at or below which a converged solve is reported "optimal" (Gurobi's and
#: HiGHS's default MIP gap; SCIP's default is 0).
OPTIMALITY_GAP = 1e-4
#: Absolute gap at or below which a converged solve is "optimal" whatever the relative gap
#: (objectives near 0).
ABS_GAP_TOL = 1e-6
#: Seconds: the time limit of the exact solves run by robust records, certificates and the
#: experiments unless they are given one (:func:`solve` itself has no limit by default).
DEFAULT_TIME_LIMIT = 60.0

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
    seconds : wall-clock seconds of the :func:`solve` call (model measurement and translation
        included); ``info["translation_seconds"]`` and ``info["solver_seconds"]`` split it.
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


@dataclass(frozen=True)
class SolveConfig:
    """The options of one solve, validated once (the part of Pyomo's ``SolverConfig`` divopt uses).

    time_limit : wall-clock seconds for the whole :func:`solve` call (None: no limit): measuring
        and translating the model count, and the solver's own limit is what is left (0 when
        nothing is). On expiry the Result has status "time_limit", the incumbent, the best bound
        and the gap; when the call still overran (a translation longer than the limit cannot be
        interrupted), ``message`` says how long it took and where the time went.
    mip_gap : relative gap at which the solver may stop (status "gap_limit" if above
        :data:`OPTIMALITY_GAP`).
    threads : solver threads (None: the solver's default).
    log_path : file receiving the solver log.
    options : raw solver options, passed through.
    """

    time_limit: float | None = None
    mip_gap: float | None = None
    threads: int | None = None
    log_path: str | Path | None = None
    options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.time_limit is not None:
            object.__setattr__(self, "time_limit", check_nonnegative(self.time_limit, "time_limit"))
        if self.mip_gap is not None:
            object.__setattr__(self, "mip_gap", check_nonnegative(self.mip_gap, "mip_gap"))

    def updated(self, **settings: Any) -> "SolveConfig":
        """A copy with the settings that are not None replaced (keyword arguments over a config)."""
        given = {k: v for k, v in settings.items() if v is not None}
        return dataclasses.replace(self, **given) if given else self


class SolverRefused(ValueError):
    """The named solver cannot take this model (size-limited Gurobi license, or a quadratic
    model for HiGHS); the message names the limit and the alternatives, ``reason`` the limit."""

    def __init__(self, solver: str, reason: str, hint: str) -> None:
        super().__init__(f"solver {solver!r} cannot take this model: {reason}; {hint}")
        self.solver, self.reason = solver, reason


class ModelTooLarge(SolverRefused, MemoryError):
    """The request cannot fit in the memory this process may use, judged before anything is
    built (:mod:`divopt_rag.models.mip_sizing`): one line with the estimate, the memory free and
    what to do instead. A :class:`SolverRefused` (a ValueError) and a MemoryError."""


# --- messages -------------------------------------------------------------------------------
def status_message(status: str, objective: float | None, bound: float | None, gap: float, *,
                   time_limit: float | None = None, mip_gap: float | None = None) -> str:
    """The sentence a Result's message starts with, written from its fields (so the two agree)."""
    if status == "time_limit":
        head = f"time limit {time_limit:g} s reached" if time_limit is not None else "time limit reached"
        if objective is None:
            return head + " without a feasible solution" + (f" (bound {bound})" if bound is not None else "")
        return f"{head}: incumbent {objective}, bound {bound}, gap {gap:.3g}"
    if status == "gap_limit":
        return f"stopped at relative gap {gap:.3g} (mip_gap={mip_gap}); optimality not proven"
    if status in ("node_limit", "iteration_limit"):
        return f"{status.replace('_', ' ')} reached: incumbent {objective}, bound {bound}, gap {gap:.3g}"
    return ""


def compose_message(r: "Result", *, time_limit: float | None = None, mip_gap: float | None = None) -> str:
    """``r.message`` rebuilt from its current fields: :func:`status_message` followed by the notes
    that do not depend on them (``r.info["notes"]``: infeasibility, overrun, fallback, ...)."""
    parts = [status_message(r.status, r.objective, r.bound, r.gap, time_limit=time_limit, mip_gap=mip_gap)]
    parts += list(r.info.get("notes", ()))
    return "; ".join(p for p in parts if p)


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


class ModelSize(NamedTuple):
    """Counts of a built model's active components (what solver licenses and HiGHS care about)."""

    n_vars: int
    n_integer: int
    n_constraints: int
    quadratic: bool
    quadratic_objective: bool


def model_size(model: Any) -> ModelSize:
    """Measure a built model: variables, binaries/integers, active constraints, quadratic terms."""
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
    return ModelSize(n_vars, n_int, n_cons, bool(quadratic or obj_quadratic), bool(obj_quadratic))


def solver_refusal(solver: str, size: ModelSize) -> str | None:
    """Why ``solver`` cannot take a model of this :func:`model_size` (None when it can).

    HiGHS solves MILPs only; the size-limited Gurobi license (:func:`gurobi_size_limits`)
    refuses more than 2000 variables or constraints, or 200 variables in a quadratic model.
    """
    if solver == "highs" and size.quadratic:
        return "HiGHS has no MIQP (it solves MILPs only) and the model is quadratic"
    if solver != "gurobi":
        return None
    lim = gurobi_size_limits()
    if lim is None:
        return None
    if size.n_vars > lim["max_vars"]:
        why = f"{size.n_vars} variables > {lim['max_vars']}"
    elif size.n_constraints > lim["max_constraints"]:
        why = f"{size.n_constraints} constraints > {lim['max_constraints']}"
    elif size.quadratic and size.n_vars > lim["max_quadratic_vars"]:
        why = f"{size.n_vars} variables > {lim['max_quadratic_vars']} in a quadratic model"
    else:
        return None
    return (f"model too large for the size-limited Gurobi license ({why}; the limit is 2000 variables "
            f"and 2000 constraints, 200 variables for quadratic models)")


def _objective(model: Any):
    obj = getattr(model, "obj", None)
    if obj is not None:
        return obj
    objs = list(model.component_data_objects(pe.Objective, active=True))
    return objs[0] if objs else None


class _LicenseRefused(RuntimeError):
    """Gurobi's own "Model too large for size-limited license" during a solve."""


# --- warm start ---------------------------------------------------------------------------
def _warm_indices(warm_start: Any, n: int) -> np.ndarray:
    if hasattr(warm_start, "indices"):  # a Selection or a Result
        warm_start = warm_start.indices
    if isinstance(warm_start, (set, frozenset)):
        warm_start = sorted(warm_start)
    return check_indices(np.asarray(list(warm_start) if not hasattr(warm_start, "shape") else warm_start,
                                    dtype=np.int64), n, "warm_start")


def _set_warm_start(x: Any, idx: np.ndarray) -> None:
    chosen = set(int(i) for i in idx)
    for i in x:
        x[i].set_value(1.0 if i in chosen else 0.0)


# --- the runner ---------------------------------------------------------------------------
def _items(model: Any, info: ModelInfo | None) -> Any:
    """The binary selection variable (``info.item_var``, default ``x``), indexed by range(n)."""
    name = info.item_var if info is not None else "x"
    x = getattr(model, name, None)
    if x is None:
        raise ValueError(f"model must have a binary selection variable model.{name} indexed by range(n)")
    return x


def _selected(x: Any) -> np.ndarray:
    out = [int(i) for i in x if x[i].value is not None and x[i].value > 0.5]
    return np.asarray(sorted(out), dtype=np.int64)


def _all_bounded(model: Any) -> bool:
    for v in model.component_data_objects(Var, descend_into=True):
        if v.fixed:
            continue
        lb, ub = v.bounds
        if lb is None or ub is None:
            return False
    return True


def relative_gap(objective: float | None, bound: float | None) -> float:
    """|bound - objective| / max(|objective|, 1e-10); inf when either is unknown or infinite."""
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return math.inf
    return abs(bound - objective) / max(abs(objective), 1e-10)


def _time_scip_translation(opt: Any, started: float, time_limit: float | None, out: dict) -> None:
    """SCIP's direct interface translates the model inside ``solve`` and then sets ``limits/time``
    from its config: time the translation (``out["seconds"]``) and give SCIP what is left of the
    budget after it, not before (Pyomo's ``_create_solver_model(model, config)`` receives the same
    config object whose ``time_limit`` ``solve`` reads next; the tests of this module would show
    a Pyomo version where that changed)."""
    create = opt._create_solver_model

    def timed(model: Any, config: Any) -> Any:
        t0 = time.perf_counter()
        res = create(model, config)
        out["seconds"] = time.perf_counter() - t0
        if time_limit is not None:
            config.time_limit = max(0.0, float(time_limit) - (time.perf_counter() - started))
        return res

    opt._create_solver_model = timed


def _translate(opt: Any, solver: str, model: Any, kw: dict) -> bool:
    """Load ``model`` into a persistent solver interface (HiGHS, Gurobi) ahead of ``opt.solve``,
    which then only checks it for changes: the translation is timed on its own, and the
    solver's own time limit gets what is left of the budget. Returns False for interfaces
    that translate inside ``solve`` (SCIP's direct interface).

    Pyomo's HiGHS interface reads its options during ``set_instance`` from ``_active_config``
    (set here as ``solve`` would); internals may change between Pyomo versions, which the tests
    of this module would show.
    """
    if solver == "highs":
        opt._active_config = opt.config(value=kw, preserve_implicit=True)
        try:
            opt.set_instance(model)
        finally:
            opt._active_config = opt.config
        return True
    if solver == "gurobi":
        opt.set_instance(model)
        return True
    return False


def _highs_warm_start(opt: Any, x: Any) -> None:
    """Hand HiGHS the x values of the warm start (it completes the other columns itself).

    Pyomo's persistent HiGHS interface has no warm-start option: the model is loaded first
    (:func:`_translate`) and the partial solution set on the underlying ``highspy.Highs``;
    ``opt.solve`` then sees the same model and only updates it. On failure the solve goes on
    cold, with a warning.
    """
    try:
        cols = [opt._pyomo_var_to_solver_var_map[id(x[i])] for i in x]
        vals = [float(x[i].value) for i in x]
        opt._solver_model.setSolution(len(cols), np.asarray(cols, dtype=np.int32), np.asarray(vals, dtype=np.float64))
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"HiGHS warm start not applied ({exc!r}); solving cold", RuntimeWarning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def _scip_version() -> str:
    """SCIP's own version (Pyomo reports PySCIPOpt's), e.g. "10.0 (PySCIPOpt 6.3.0)"."""
    import pyscipopt

    return f"{pyscipopt.Model().version()} (PySCIPOpt {pyscipopt.__version__})"


def _run_one(model: Any, info: ModelInfo | None, solver: str, cfg: SolveConfig,
             warm_idx: np.ndarray | None, entered: float, started: float) -> Result:
    """One solver on the model. ``entered`` (perf_counter) is when :func:`solve` was called
    (``seconds`` counts from it); ``started`` when the time budget began (the caller's start,
    e.g. before building the model): the time limit is wall clock from then."""
    x = _items(model, info)
    opt = SolverFactory(_PYOMO_NAME[solver])
    kw: dict[str, Any] = dict(load_solutions=False, raise_exception_on_nonoptimal_result=False)
    if cfg.mip_gap is not None:
        kw["rel_gap"] = float(cfg.mip_gap)
    if cfg.threads is not None:
        kw["threads"] = int(cfg.threads)
    if cfg.options:
        kw["solver_options"] = dict(cfg.options)
    if warm_idx is not None:
        _set_warm_start(x, warm_idx)
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
    log_path = cfg.log_path
    with contextlib.ExitStack() as stack:
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            kw["tee"] = [stack.enter_context(open(log_path, "w"))]
        scip_translation: dict = {}
        try:
            t0 = time.perf_counter()
            _translate(opt, solver, model, kw)
            translation = time.perf_counter() - t0
            if solver == "highs" and warm_idx is not None:
                _highs_warm_start(opt, x)
            if cfg.time_limit is not None:  # what is left of the wall-clock budget
                kw["time_limit"] = max(0.0, float(cfg.time_limit) - (time.perf_counter() - started))
            if solver == "scip":
                _time_scip_translation(opt, started, cfg.time_limit, scip_translation)
            t1 = time.perf_counter()
            res = opt.solve(model, **kw)
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
            if "size-limited" in text or "10010" in text:
                raise _LicenseRefused(text) from exc
            raise
        solver_seconds = time.perf_counter() - t1
        seconds = time.perf_counter() - entered
        spent = time.perf_counter() - started
        if "seconds" in scip_translation:  # inside opt.solve: move it from the solver to translation
            translation += scip_translation["seconds"]
            solver_seconds -= scip_translation["seconds"]

    tc = res.termination_condition
    status = _STATUS.get(tc, "unknown")
    has_sol = res.solution_status in (SolutionStatus.feasible, SolutionStatus.optimal)
    objective = float(res.incumbent_objective) if has_sol and res.incumbent_objective is not None else None
    bound = float(res.objective_bound) if res.objective_bound is not None else None
    if bound is not None and not math.isfinite(bound):
        bound = None
    if has_sol:
        res.solution_loader.load_vars()
        indices = _selected(x)
    else:
        indices = np.zeros(0, dtype=np.int64)
    gap = relative_gap(objective, bound)
    notes: list[str] = []
    if status == "optimal":
        if objective is None:
            status = "unknown"
            notes.append("solver reported convergence without a solution")
        elif bound is None:
            # LP-style proof without a separate bound: the incumbent is the optimum.
            bound, gap = objective, 0.0
        elif not (gap <= OPTIMALITY_GAP or abs(bound - objective) <= ABS_GAP_TOL):
            status = "gap_limit"
    if status == "infeasible_or_unbounded" and _all_bounded(model):
        # Every variable has finite bounds, so the model cannot be unbounded.
        status = "infeasible"
    if status == "infeasible":
        notes.append((info.infeasible_message if info is not None else None)
                      or "the model is infeasible (proven by the solver)")
    if cfg.time_limit is not None and spent > max(1.25 * cfg.time_limit, cfg.time_limit + 0.25):
        # the solver got no time left, or overran: say how long the call really took and why
        before = spent - solver_seconds
        notes.append(
            f"took {spent:.3g} s of a {cfg.time_limit:g} s time limit: {before:.3g} s before the solver "
            f"started ({translation:.3g} s of them translating the model), {solver_seconds:.3g} s in the solver")
    extras = {
        "termination_condition": tc.name,
        "solution_status": res.solution_status.name,
        "solver_version": _scip_version() if solver == "scip" else ".".join(str(v) for v in (res.solver_version or ())),
    }
    extras.update(translation_seconds=translation, solver_seconds=solver_seconds, notes=notes)
    nodes = getattr(res.extra_info, _NODE_COUNT[solver], None)
    if nodes is not None:
        extras["nodes"] = int(nodes)
    if info is not None:
        extras["model"] = info.kind
    r = Result(indices=indices, objective=objective, bound=bound, gap=gap, status=status,
               seconds=seconds, solver=solver, log_path=None if log_path is None else str(log_path), info=extras)
    r.message = compose_message(r, time_limit=cfg.time_limit, mip_gap=cfg.mip_gap)
    return r


def _candidates(solver: str, size: ModelSize) -> list[str]:
    check_choice(solver, "solver", ("auto",) + SOLVERS)
    avail = available_solvers()
    if solver != "auto":
        if solver not in avail:
            raise ImportError(
                f"solver {solver!r} is not installed or not working; available: {avail or 'none'} "
                f"({solver_install_hint(solver)})"
            )
        why = solver_refusal(solver, size)
        if why is not None:
            hint = ("use a linearized model (formulation='milp') or solver 'scip' / 'gurobi'" if solver == "highs"
                    else f"use solver 'scip' or 'highs' (available: {avail}), or install a full Gurobi license")
            raise SolverRefused(solver, why, hint)
        return [solver]
    out = []
    for s in avail:
        why = solver_refusal(s, size)
        if why is not None:
            if s == "gurobi":
                warnings.warn(f"Gurobi skipped: {why}; falling back to {[a for a in avail if a != 'gurobi']}",
                              RuntimeWarning, stacklevel=3)
            continue
        out.append(s)
    if not out:
        raise ImportError(f"no installed solver can solve this model (quadratic={size.quadratic}); "
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
    config: SolveConfig | None = None,
    info: ModelInfo | None = None,
    started: float | None = None,
) -> Result:
    """Solve a divopt Pyomo model (binary ``model.x``, objective ``model.obj``, maximized).

    model : a builder's :class:`~divopt_rag.models.mip_common.BuiltModel` (model and info), or a
        ConcreteModel (then ``info`` may give its :class:`~divopt_rag.models.mip_common.ModelInfo`).

    solver : "auto" (first of gurobi -> scip -> highs that is installed and takes the measured
        model: HiGHS only for linear models, Gurobi only within its license limits), or a name
        (:class:`SolverRefused` when it cannot take the model).
    config : a :class:`SolveConfig`; ``time_limit``, ``mip_gap``, ``log_path``, ``threads`` and
        ``options`` given as keywords override its fields (see :class:`SolveConfig`).
    warm_start : indices (iterable, array, or a Selection/Result) to set x to before solving.
    started : ``time.perf_counter()`` at which the time budget began (default: this call), so
        that a caller's own work (building the model) counts against ``time_limit``.
    """
    entered = time.perf_counter()
    started = entered if started is None else float(started)
    cfg = (config or SolveConfig()).updated(time_limit=time_limit, mip_gap=mip_gap, threads=threads,
                                            log_path=log_path, options=options)
    if isinstance(model, BuiltModel):
        model, info = model.model, info if info is not None else model.info
    n = len(_items(model, info))
    if info is not None and n != info.n_items:
        raise ValueError(f"info.n_items = {info.n_items} does not match the model's {n} selection variables")
    warm_idx = None if warm_start is None else _warm_indices(warm_start, n)
    size = model_size(model)
    cands = _candidates(solver, size)
    last_exc: Exception | None = None
    for s in cands:
        try:
            r = _run_one(model, info, s, cfg, warm_idx, entered, started)
        except _LicenseRefused as exc:
            if solver != "auto":
                raise SolverRefused(
                    solver, f"Gurobi refused it ({exc})", "the size-limited license allows 2000 variables "
                    "and constraints (200 variables in quadratic models); use solver 'scip' or 'highs'"
                ) from exc
            warnings.warn(f"Gurobi refused the model ({exc}); falling back", RuntimeWarning, stacklevel=2)
            last_exc = exc
            continue
        r.info.update(size._asdict())
        return r
    raise RuntimeError(f"every candidate solver failed: {last_exc}")
