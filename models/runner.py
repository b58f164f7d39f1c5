"""The model runner: any divopt Pyomo model -> :class:`Result` (Gurobi, SCIP or HiGHS).

A model is data: a ``divopt_rag.models.mip_*`` or ``divopt_rag.robust.models`` builder returns it with
its :class:`~divopt_rag.models.mip_common.ModelInfo` (a :class:`~divopt_rag.models.mip_common.BuiltModel`
pair), or it is any ConcreteModel with a binary ``model.x`` indexed by ``range(n)`` and an
objective ``model.obj``, always maximized. :func:`solve` takes it with the options of one
:class:`SolveConfig` and returns a :class:`Result`: status (a :class:`SolveStatus`), incumbent,
objective, bound, gap, seconds, solver, log path. Nothing is attached to the model to talk to the
runner; it drives Pyomo's ``pyomo.contrib.solver`` interfaces (``gurobi_persistent``,
``scip_direct``, ``highs``).

The pieces live by concept, each name in one module (import it from there):

* :mod:`~divopt_rag.models.solve_results`: :class:`SolveStatus`, :class:`Result`, the gap and the
  message (the honesty rules: "optimal" only within :data:`OPTIMALITY_GAP`, a time limit gives
  the incumbent, the bound and the gap);
* :mod:`~divopt_rag.models.solve_config`: :class:`SolveConfig` (the options) and :class:`Stopwatch`
  (when the time budget began, on which clock);
* :mod:`~divopt_rag.models.solver_limits`: the installed solvers, the size-limited Gurobi licence
  and the refusals (the solvers' names: :data:`divopt_rag.models.domains.SOLVERS`);
* this module: choosing the solver and running it through Pyomo.
"""
from __future__ import annotations

import contextlib
import functools
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyomo.environ as pe  # noqa: F401  (registers the pyomo.contrib.solver interfaces)
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
from pyomo.core.base.var import Var

from .extras import solver_install_hint
from .mip_common import BuiltModel, ModelInfo
from .solve_config import SolveConfig, Stopwatch
from .solve_results import (
    ABS_GAP_TOL,
    OPTIMALITY_GAP,
    Result,
    SolveStatus,
    compose_message,
    relative_gap,
)
from .solver_limits import (PYOMO_NAME, ModelSize, SolverRefused, available_solvers, model_size, process_streams_kept,
                            solver_refusal)
from .domains import SOLVERS
from .validation import check_choice, check_indices

__all__ = [
    "solve",
]

#: Where each Pyomo interface puts the branch-and-bound node count in ``results.extra_info``.
_NODE_COUNT = {"gurobi": "NodeCount", "scip": "NNodes", "highs": "mip_node_count"}

#: Pyomo's termination condition -> divopt's status (before the gap check of "optimal").
_STATUS = {
    TerminationCondition.convergenceCriteriaSatisfied: SolveStatus.OPTIMAL,
    TerminationCondition.maxTimeLimit: SolveStatus.TIME_LIMIT,
    TerminationCondition.iterationLimit: SolveStatus.ITERATION_LIMIT,
    TerminationCondition.objectiveLimit: SolveStatus.OBJECTIVE_LIMIT,
    TerminationCondition.minStepLength: SolveStatus.ERROR,
    TerminationCondition.unbounded: SolveStatus.UNBOUNDED,
    TerminationCondition.provenInfeasible: SolveStatus.INFEASIBLE,
    TerminationCondition.locallyInfeasible: SolveStatus.INFEASIBLE,
    TerminationCondition.infeasibleOrUnbounded: SolveStatus.INFEASIBLE_OR_UNBOUNDED,
    TerminationCondition.error: SolveStatus.ERROR,
    TerminationCondition.interrupted: SolveStatus.INTERRUPTED,
    TerminationCondition.licensingProblems: SolveStatus.ERROR,
    TerminationCondition.emptyModel: SolveStatus.EMPTY_MODEL,
    TerminationCondition.unknown: SolveStatus.UNKNOWN,
}

class _LicenseRefused(RuntimeError):
    """Gurobi's own "Model too large for size-limited license" during a solve."""


# --- the model's selection ----------------------------------------------------------------------
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


# --- Pyomo's interfaces -----------------------------------------------------------------------------
def _time_scip_translation(opt: Any, stopwatch: Stopwatch, time_limit: float | None, out: dict) -> None:
    """SCIP's direct interface translates the model inside ``solve`` and then sets ``limits/time``
    from its config: time the translation (``out["seconds"]``) and give SCIP what is left of the
    budget after it, not before (``out["time_limit"]``; Pyomo's ``_create_solver_model(model,
    config)`` receives the same config object whose ``time_limit`` ``solve`` reads next; the tests
    of this module would show a Pyomo version where that changed)."""
    create = opt._create_solver_model

    def timed(model: Any, config: Any) -> Any:
        t0 = stopwatch.now()
        res = create(model, config)
        out["seconds"] = stopwatch.now() - t0
        if time_limit is not None:
            config.time_limit = out["time_limit"] = max(0.0, stopwatch.left(time_limit))
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


def _solver_keywords(model: Any, x: Any, solver: str, cfg: SolveConfig, warm_idx: np.ndarray | None) -> dict:
    """The keyword arguments of Pyomo's ``opt.solve`` (all but the time limit), with the warm
    start set on ``x``."""
    kw: dict[str, Any] = dict(load_solutions=False, raise_exception_on_nonoptimal_result=False)
    if cfg.mip_gap is not None:
        kw["rel_gap"] = float(cfg.mip_gap)
    if cfg.threads is not None:
        kw["threads"] = int(cfg.threads)
    if cfg.options:
        kw["solver_options"] = dict(cfg.options)
    if warm_idx is None:
        return kw
    _set_warm_start(x, warm_idx)
    if solver == "gurobi":
        kw["warmstart_discrete_vars"] = True
    elif solver == "scip":
        # Pyomo's SCIP start copies every discrete variable's value and fails on None.
        unset = [v.name for v in model.component_data_objects(Var, descend_into=True)
                 if v.is_integer() and v.value is None]
        if unset:
            warnings.warn(f"SCIP warm start skipped: discrete variables without a value, e.g. {unset[:3]}",
                          RuntimeWarning, stacklevel=4)
        else:
            kw["warmstart_discrete_vars"] = True
            # the start sets x only: SCIP completes the continuous variables (e.g. the pair
            # variables y of a McCormick model) only while at most 85 % of them are unknown
            # by default, and otherwise drops the start silently
            kw["solver_options"] = {"heuristics/completesol/maxunknownrate": 1.0, **kw.get("solver_options", {})}
    return kw


# --- the runner ---------------------------------------------------------------------------------
def _run_one(model: Any, info: ModelInfo | None, solver: str, cfg: SolveConfig, warm_idx: np.ndarray | None,
             stopwatch: Stopwatch, entered: float) -> Result:
    """One solver on the model. ``entered`` (a reading of the stopwatch's clock) is when
    :func:`solve` was called (``seconds`` counts from it); the time limit counts from
    ``stopwatch.started`` (the caller's start, e.g. before building the model)."""
    x = _items(model, info)
    opt = SolverFactory(PYOMO_NAME[solver])
    kw = _solver_keywords(model, x, solver, cfg, warm_idx)
    timing: dict[str, float] = {}
    scip: dict = {}
    with contextlib.ExitStack() as stack:
        if cfg.log_path is not None:
            Path(cfg.log_path).parent.mkdir(parents=True, exist_ok=True)
            kw["tee"] = [stack.enter_context(open(cfg.log_path, "w"))]
        try:
            t0 = stopwatch.now()
            _translate(opt, solver, model, kw)
            timing["translation"] = stopwatch.now() - t0
            if solver == "highs" and warm_idx is not None:
                _highs_warm_start(opt, x)
            if cfg.time_limit is not None:  # what is left of the wall-clock budget
                kw["time_limit"] = max(0.0, stopwatch.left(cfg.time_limit))
            if solver == "scip":
                _time_scip_translation(opt, stopwatch, cfg.time_limit, scip)
            t1 = stopwatch.now()
            res = opt.solve(model, **kw)
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
            if "size-limited" in text or "10010" in text:
                raise _LicenseRefused(text) from exc
            raise
        now = stopwatch.now()
    timing.update(solver=now - t1, seconds=now - entered, spent=now - stopwatch.started)
    if "seconds" in scip:  # inside opt.solve: move it from the solver to translation
        timing["translation"] += scip["seconds"]
        timing["solver"] -= scip["seconds"]
    given = scip.get("time_limit", kw.get("time_limit"))
    return _result(res, model, x, info, solver, cfg, timing, given)


def _result(res: Any, model: Any, x: Any, info: ModelInfo | None, solver: str, cfg: SolveConfig,
            timing: dict[str, float], given: float | None) -> Result:
    """The :class:`Result` of Pyomo's results ``res`` under the honesty rules (module docstring);
    ``timing``: seconds of translation, solver, the call and the budget spent; ``given``: the
    time limit the solver was handed."""
    tc = res.termination_condition
    status = _STATUS.get(tc, SolveStatus.UNKNOWN)
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
    if status is SolveStatus.OPTIMAL:
        if objective is None:
            status = SolveStatus.UNKNOWN
            notes.append("solver reported convergence without a solution")
        elif bound is None:
            # LP-style proof without a separate bound: the incumbent is the optimum.
            bound, gap = objective, 0.0
        elif not (gap <= OPTIMALITY_GAP or abs(bound - objective) <= ABS_GAP_TOL):
            status = SolveStatus.GAP_LIMIT
    if status is SolveStatus.INFEASIBLE_OR_UNBOUNDED and _all_bounded(model):
        # Every variable has finite bounds, so the model cannot be unbounded.
        status = SolveStatus.INFEASIBLE
    if status is SolveStatus.INFEASIBLE:
        notes.append((info.infeasible_message if info is not None else None)
                     or "the model is infeasible (proven by the solver)")
    limit, spent = cfg.time_limit, timing["spent"]
    if limit is not None and spent > max(1.25 * limit, limit + 0.25):
        # the solver got no time left, or overran: say how long the call really took and why
        before = spent - timing["solver"]
        notes.append(
            f"took {spent:.3g} s of a {limit:g} s time limit: {before:.3g} s before the solver "
            f"started ({timing['translation']:.3g} s of them translating the model), {timing['solver']:.3g} s "
            f"in the solver")
    extras = {
        "termination_condition": tc.name,
        "solution_status": res.solution_status.name,
        "solver_version": _scip_version() if solver == "scip" else ".".join(str(v) for v in (res.solver_version or ())),
        "translation_seconds": timing["translation"], "solver_seconds": timing["solver"],
        "solver_time_limit": given, "notes": notes,
    }
    nodes = getattr(res.extra_info, _NODE_COUNT[solver], None)
    if nodes is not None:
        extras["nodes"] = int(nodes)
    if info is not None:
        extras["model"] = info.kind
    r = Result(indices=indices, objective=objective, bound=bound, gap=gap, status=status,
               seconds=timing["seconds"], solver=solver,
               log_path=None if cfg.log_path is None else str(cfg.log_path), info=extras)
    r.message = compose_message(r, time_limit=limit, mip_gap=cfg.mip_gap)
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
    config: SolveConfig | None = None,
    *,
    warm_start: Any = None,
    info: ModelInfo | None = None,
    stopwatch: Stopwatch | None = None,
) -> Result:
    """Solve a divopt Pyomo model (binary ``model.x``, objective ``model.obj``, maximized).

    model : a builder's :class:`~divopt_rag.models.mip_common.BuiltModel` (model and info), or a
        ConcreteModel (then ``info`` may give its :class:`~divopt_rag.models.mip_common.ModelInfo`).
    solver : "auto" (first of gurobi -> scip -> highs that is installed and takes the measured
        model: HiGHS only for linear models, Gurobi only within its license limits), or a name
        (:class:`SolverRefused` when it cannot take the model).
    config : the options, one :class:`SolveConfig` (time limit, mip gap, threads, log, raw
        solver options); default: none of them.
    warm_start : indices (iterable, array, or a Selection/Result) to set x to before solving.
    stopwatch : when the time budget began and on which clock (default: this call, on
        ``time.perf_counter``), so that a caller's own work (building the model) counts against
        ``config.time_limit``.
    """
    if config is not None and not isinstance(config, SolveConfig):
        raise TypeError(f"config must be a SolveConfig, got {type(config).__name__} {config!r} "
                        f"(write solve(model, solver, SolveConfig(time_limit=...)))")
    cfg = config or SolveConfig()
    stopwatch = stopwatch or Stopwatch()
    entered = stopwatch.now()
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
            with process_streams_kept():  # one Pyomo solve at a time in the process, its streams kept
                r = _run_one(model, info, s, cfg, warm_idx, stopwatch, entered)
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
