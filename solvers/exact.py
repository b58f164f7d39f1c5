"""Exact CCBQP optima: a MIP solve (:func:`solve_exact`), enumeration (:func:`brute_force`), and
:func:`exact_optimum`, which picks between them by pool size.

``solve_exact(instance, ...)`` builds the CCBQP model (:mod:`divopt_rag.models.mip_ccbqp`, or its
quadratic convex reformulation :mod:`divopt_rag.models.mip_qcr`) and runs it through the model
runner, or runs divopt's own branch-and-bound (:mod:`divopt_rag.solvers.bnb`, ``solver="bnb"``).

The model runner (``solve(model) -> Result``, solver availability, the Gurobi license sizing)
lives in :mod:`divopt_rag.models.runner`, where both ``divopt_rag.solvers`` and ``divopt_rag.robust`` can
use it; the package hands on the names a caller needs (``from divopt_rag.solvers import Result,
solve, solve_exact, available_solvers``), each from its home module.
"""
from __future__ import annotations

import itertools
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.ccbqp import gram_objective, linear_term
from divopt_rag.models.domains import SOLVERS
from divopt_rag.models.extras import solver_install_hint
from divopt_rag.models.memory import format_bytes
from divopt_rag.models.mip_ccbqp import FORMULATIONS, build_ccbqp
from divopt_rag.models.mip_common import BuildTimeout
from divopt_rag.models.mip_qcr import QCR_FORMULATIONS, build_ccbqp_qcr
from divopt_rag.models.mip_sizing import (ModelEstimate, ccbqp_counts, estimate_ccbqp, memory_refusal,
                                          pyomo_seconds_per_unit)
from divopt_rag.models.runner import solve
from divopt_rag.models.solve_config import SolveConfig, Stopwatch
from divopt_rag.models.solve_results import (ABS_GAP_TOL, OPTIMALITY_GAP, Result, SolveStatus, compose_message,
                                             relative_gap)
from divopt_rag.models.solver_limits import ModelSize, ModelTooLarge, SolverRefused, available_solvers, solver_refusal
from divopt_rag.models.validation import check_choice, check_indices, check_nonnegative, check_scalar
from divopt_rag.solvers.bnb import branch_and_bound
from divopt_rag.solvers.bnb.tree import memory_estimate as bnb_memory_estimate
from divopt_rag.solvers.bounds import concave_bound
from divopt_rag.solvers.selection import K1_RULE, most_relevant, select

__all__ = ["solve_exact", "check_warm_start", "brute_force", "exact_optimum", "licence_refusal", "DEFAULT_FORMULATION"]


#: Formulation "auto" gives each solver: Gurobi's native (Gram) MIQP, SCIP's factored MIQP
#: (its outer approximation handles r squares far better than n^2/2 products), HiGHS's MILP,
#: divopt's branch-and-bound its DNN/QCR bounds ("qcr_dnn", the only one it takes).
DEFAULT_FORMULATION = {"gurobi": "miqp", "scip": "miqp_lowrank", "highs": "milp", "bnb": "qcr_dnn"}
#: Engines of :func:`solve_exact`: the MIP solvers plus divopt's own branch-and-bound (always
#: there); :func:`exact_optimum` also enumerates (:data:`divopt_rag.models.domains.EXACT_SOLVERS`).
_ENGINES = (*SOLVERS, "bnb")


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
    memory_limit: float | None = None,
    stopwatch: Stopwatch | None = None,
) -> Result:
    """Solve the exact CCBQP of ``instance`` (see :mod:`divopt_rag.models.mip_ccbqp`).

    formulation : "miqp" (native convex MIQP in the Gram matrix; Gurobi/SCIP), "miqp_lowrank"
        (factored MIQP, v = F^T x with W = F F^T; Gurobi/SCIP), "milp" (McCormick + RLT
        linearization; every solver), "milp_compact" (Glover's linearization, n continuous z instead
        of n(n-1)/2 products: 2n variables and 2n + 1 rows, so the size-limited Gurobi licence
        takes n <= 999; every solver; :func:`~divopt_rag.models.mip_ccbqp.build_ccbqp_compact`;
        the two MILPs are the ones HiGHS accepts), "qcr" / "qcr_lowrank" (the
        Shor-SDP quadratic convex reformulation, :mod:`divopt_rag.models.mip_qcr`; Gurobi/SCIP),
        "qcr_dnn" (divopt's branch-and-bound, which takes only this), or "auto":
        :data:`DEFAULT_FORMULATION` of the solver.
    solver : "gurobi", "scip", "highs", "bnb" (divopt's own branch-and-bound,
        :mod:`divopt_rag.solvers.bnb`; needs no licence) or "auto". With
        formulation "auto", "auto" is Gurobi when it is installed and its model fits the licence
        (the runner's licence rule, :func:`divopt_rag.models.solver_limits.solver_refusal`, on the Gram
        MIQP's size: n binaries, one row; MIQP: n <= 200 with the pip licence), else "bnb" (10x+ faster than SCIP and HiGHS on the
        exact benchmark, ``benchmarks/results/exact/TABLES.md``). With an explicit MIP
        formulation, "auto" is the first installed MIP solver (gurobi -> scip -> highs) that takes
        it. An explicit solver that cannot take the model raises
        :class:`~divopt_rag.models.solver_limits.SolverRefused` (a ValueError) naming the limit and the
        alternatives.
    time_limit, mip_gap, log_path, threads : the :class:`~divopt_rag.models.solve_config.SolveConfig`
        (bnb: ``mip_gap`` default 1e-6; ``log_path`` receives its node log as CSV; one thread).
    warm_start : a k-set (indices, or a Selection/Result) to start from: exactly k unique
        indices in [0, n), else ValueError before any work.
    memory_limit : bytes the solve may plan to use (default: what the machine has free,
        :func:`divopt_rag.models.memory.available_memory`).
    stopwatch : when the time budget began and on which clock
        (:class:`~divopt_rag.models.solve_config.Stopwatch`; default: this call, on
        ``time.perf_counter``): a caller's own earlier work can count against ``time_limit``, and a
        test can run the limit on a fake clock.
    The returned objective is re-evaluated with :func:`divopt_rag.models.ccbqp_objective` on the
    selected indices (the solver's own value is kept in ``info["solver_objective"]``), and the
    message is written from the final fields. For "bnb", ``info`` holds "nodes", the node log
    "log" (DataFrame) and "root_bound".

    Limits (issue 33). Memory: before anything is built, the need of the model (variables,
    constraints, nonzeros, dense arrays, the solver's copy; bnb's dense matrices) is estimated
    (:mod:`divopt_rag.models.mip_sizing`); a request that cannot fit raises
    :class:`~divopt_rag.models.solver_limits.ModelTooLarge` (one line: the estimate, the memory free, what
    to do instead). Time: ``time_limit`` is wall clock for the whole call. Building counts: a model
    whose predicted build + load time does not fit is not built, a build that passes the limit is
    dropped, and the solver gets what is left. When no solver could run in time, or it stopped
    without an incumbent, the Result still has status "time_limit" with the best known incumbent
    (the warm start, top-k by relevance, ``select(instance, "fw_ms")``), a certified bound (the
    solver's, or the concave relaxation's, :func:`divopt_rag.solvers.bounds.concave_bound`, when
    tighter or missing) and their gap; ``info["solver_ran"]`` says whether the solver ran.
    ``info["wall_seconds"]`` is the whole call; ``seconds`` the runner's.
    k = 1 needs no solver: every item scores 0, and the answer is the most relevant item
    (:func:`divopt_rag.solvers.selection.most_relevant`, the rule every selector follows).
    """
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(instance).__name__}")
    check_choice(formulation, "formulation", ("auto",) + FORMULATIONS + tuple(QCR_FORMULATIONS) + ("qcr_dnn",))
    check_choice(solver, "solver", ("auto", *_ENGINES))
    if (solver == "bnb" and formulation not in ("auto", "qcr_dnn")) or (
            formulation == "qcr_dnn" and solver not in ("auto", "bnb")):
        raise SolverRefused(solver, f"formulation {formulation!r} is not one it takes",
                            "divopt's branch-and-bound (solver 'bnb') takes only formulation 'qcr_dnn' "
                            "(or 'auto'), and 'qcr_dnn' is its own")
    config = SolveConfig(time_limit=time_limit, mip_gap=mip_gap, threads=threads, log_path=log_path)
    warm = check_warm_start(warm_start, instance)
    budget = None if memory_limit is None else (
        int(check_scalar(memory_limit, "memory_limit", (int, float), min_val=0)), "memory_limit")
    if instance.k == 1:
        return _k1_result(instance, "rule")
    stopwatch = Stopwatch() if stopwatch is None else stopwatch
    avail = available_solvers()
    if solver == "auto" and formulation in ("auto", "qcr_dnn"):
        plan = []
        if formulation == "auto" and "gurobi" in avail:
            # Gurobi when its model fits the licence (fastest where it may run), judged on the size
            # before building it; the runner measures the built model again and catches Gurobi's own
            # refusal (second line of defence).
            why = licence_refusal("gurobi", instance.n, instance.theta)
            if why is None:
                plan.append(("gurobi", DEFAULT_FORMULATION["gurobi"]))
            else:
                warnings.warn(f"Gurobi skipped: {why}; using divopt's branch-and-bound (bnb)", RuntimeWarning,
                              stacklevel=2)
        plan.append(("bnb", "qcr_dnn"))
    elif solver == "bnb":
        plan = [("bnb", "qcr_dnn")]
    else:
        if solver == "auto" and not avail:
            raise ImportError("no MIP solver installed; install gurobipy, pyscipopt or highspy")
        if solver != "auto" and solver not in avail:
            raise ImportError(f"solver {solver!r} is not installed or not working; available: {avail or 'none'} "
                              f"({solver_install_hint(solver)})")
        plan = [(s, DEFAULT_FORMULATION[s] if formulation == "auto" else formulation)
                for s in (avail if solver == "auto" else [solver])]
    refused: dict[str, str] = {}
    too_large: dict[str, str] = {}
    built: dict[str, tuple[Any, float]] = {}  # formulation -> (model, build seconds), built once
    for i, (s, form) in enumerate(plan):
        if s == "bnb":
            if "gurobi" in refused:
                warnings.warn(f"Gurobi skipped: {refused['gurobi']}; using divopt's branch-and-bound (bnb)",
                              RuntimeWarning, stacklevel=2)
            return _solve_bnb(instance, config, warm=warm, stopwatch=stopwatch, memory_limit=memory_limit)
        why = licence_refusal(s, instance.n, instance.theta, form, rlt=rlt)
        if why is not None:  # the licence, known before an O(n^2) build (and the QCR SDP)
            if solver != "auto":
                raise SolverRefused(s, why, f"use solver 'bnb' or 'scip' / 'highs' (available: {avail})")
            refused[s] = why
            continue
        est = estimate_ccbqp(instance.n, instance.d, instance.theta, form, s, rlt=rlt)
        big = memory_refusal(est, budget)
        if big is not None:
            if solver != "auto":
                raise ModelTooLarge(s, big, _memory_hint(instance, budget))
            too_large[s] = big
            continue
        late, build_seconds = _late_build(est, config, stopwatch) if form not in built else (None, None)
        if late is None and form not in built:
            t0 = stopwatch.now()
            try:
                built[form] = (_build(instance, form, rlt, stopwatch.perf_counter_deadline(config.time_limit)), 0.0)
            except BuildTimeout as exc:
                build_seconds = stopwatch.now() - t0
                late = (f"building {est.what} ({est.describe()}) was stopped after {build_seconds:.3g} s of a "
                        f"{config.time_limit:g} s time limit ({exc})")
            else:
                built[form] = (built[form][0], stopwatch.now() - t0)
        if late is None:
            model, build_seconds = built[form]
            late = _late_load(est, config, stopwatch, build_seconds)
        if late is not None:
            if solver == "auto" and i < len(plan) - 1:  # the next candidate may fit
                refused[s] = late
                continue
            return _incumbent_only(instance, warm, config, stopwatch, s, form, f"{_NAMES[s]} did not run: {late}",
                                   build_seconds=build_seconds)
        try:
            r = solve(model, s, config, warm_start=warm, stopwatch=stopwatch)
        except SolverRefused as exc:  # measured on the built model: too large, or quadratic for HiGHS
            if solver != "auto":
                raise
            refused[s] = exc.reason
            continue
        if "gurobi" in refused and s != "gurobi":
            warnings.warn(f"Gurobi skipped: {refused['gurobi']}; using {s}", RuntimeWarning, stacklevel=2)
        if form in QCR_FORMULATIONS:
            r.info["qcr_seconds"] = model.info.details["qcr_seconds"]  # the SDP, part of build_seconds
        return _finish(instance, r, form, build_seconds, stopwatch, config, warm)
    if too_large:
        first = next(iter(too_large))
        reasons = "; ".join(too_large.values()) if len(too_large) > 1 else too_large[first]
        raise ModelTooLarge(first, reasons, _memory_hint(instance, budget))
    raise ImportError(f"no installed solver can take formulation {formulation!r}: {refused}")


def _late_build(est: ModelEstimate, config: SolveConfig, stopwatch: Stopwatch) -> tuple[str | None, None]:
    """Why building and loading the model cannot fit what is left of the time limit (its
    predicted time at the speed Pyomo runs now), or None."""
    if config.time_limit is None:
        return None, None
    left = stopwatch.left(config.time_limit)
    need = est.seconds(pyomo_seconds_per_unit())
    if need <= left:
        return None, None
    return (f"building and loading {est.what} ({est.describe()}) would take about {need:.3g} s, "
            f"{max(left, 0.0):.3g} s of the {config.time_limit:g} s time limit were left"), None


def _late_load(est: ModelEstimate, config: SolveConfig, stopwatch: Stopwatch, build_seconds: float) -> str | None:
    """Why loading the built model into the solver (which cannot be interrupted) cannot fit what is
    left, predicted at the rate the build ran (the machine's load included), or None."""
    if config.time_limit is None:
        return None
    rate = max(pyomo_seconds_per_unit(), build_seconds / max(est.build_units, 1.0))
    left = stopwatch.left(config.time_limit)
    need = est.translate_units * rate
    if need <= left:
        return None
    return (f"building {est.what} ({est.describe()}) took {build_seconds:.3g} s of a {config.time_limit:g} s "
            f"time limit, and loading it would take about {need:.3g} s more ({max(left, 0.0):.3g} s were left)")


_NAMES = {"gurobi": "Gurobi", "scip": "SCIP", "highs": "HiGHS", "bnb": "bnb"}


def check_warm_start(warm_start: Any, instance: Instance) -> np.ndarray | None:
    """The warm start as sorted int64 indices: exactly k unique items in [0, n) (a Selection or
    Result gives its ``indices``); ValueError/TypeError naming ``warm_start`` otherwise."""
    if warm_start is None:
        return None
    if hasattr(warm_start, "indices"):
        warm_start = warm_start.indices
    if isinstance(warm_start, (set, frozenset)):
        warm_start = sorted(warm_start)
    if not isinstance(warm_start, (np.ndarray, torch.Tensor)):
        try:
            warm_start = np.asarray(list(warm_start))
        except TypeError:
            raise TypeError(f"warm_start must be a sequence of k = {instance.k} indices, got "
                            f"{type(warm_start).__name__}") from None
    idx = check_indices(warm_start, instance.n, "warm_start", size=instance.k, size_what=" (k)")
    return np.sort(idx)


def _memory_hint(instance: Instance, budget: tuple[int, str] | None) -> str:
    """What to do instead of a Pyomo model that cannot fit: bnb (its own estimate), screening, a smaller pool."""
    bnb = bnb_memory_estimate(instance.n, instance.d)
    fits = memory_refusal(bnb, budget) is None
    return (f"use solver 'bnb' (about {format_bytes(bnb.bytes)}{'' if fits else ', also too much here'}), "
            "screen the pool first (divopt_rag.solvers.screening.safe_screen keeps every optimal set), "
            "or use a smaller pool (e.g. inst.top_n)")


def licence_refusal(solver: str, n: int, theta: float, formulation: str = "auto", *, rlt: bool = True) -> str | None:
    """Why the MIP solver ``solver`` cannot take the exact CCBQP of ``n`` items at ``theta`` in
    ``formulation`` ("auto": its :data:`DEFAULT_FORMULATION`), judged from sizes alone, before
    anything is built: the runner's rule (:func:`~divopt_rag.models.solver_limits.solver_refusal`:
    the size-limited Gurobi licence, HiGHS without MIQP) on the model's size. "miqp" / "qcr": n
    binaries and one row, quadratic when theta < 1; "milp" / "milp_compact": their exact sizes
    (:func:`~divopt_rag.models.mip_sizing.ccbqp_counts`: n + n(n-1)/2 variables and a row per
    McCormick and RLT inequality; 2n variables and 2n + 1 rows); the low-rank forms: at least n
    binaries and one row (the rank only adds). None when it can take it, and for engines without a licence ("bnb", "brute").
    :func:`solve_exact` refuses an explicit solver by this rule; a command checks it before any work."""
    if solver not in SOLVERS:
        return None
    form = DEFAULT_FORMULATION[solver] if formulation == "auto" else formulation
    quadratic = theta < 1
    if form in ("milp", "milp_compact"):
        c = ccbqp_counts(n, 1, theta, form, rlt=rlt)
        size = ModelSize(c.n_vars, c.n_integer, c.n_constraints, False, False)
    elif form in ("miqp", "qcr"):
        size = ModelSize(n, n, 1, quadratic, quadratic)
    elif form in ("miqp_lowrank", "qcr_lowrank"):
        squares = quadratic or form == "qcr_lowrank"
        size = ModelSize(n, n, 1, squares, squares)
    else:
        return None
    return solver_refusal(solver, size)


def _build(instance: Instance, formulation: str, rlt: bool, deadline: float | None = None):
    """The Pyomo model of a MIP formulation (the QCR ones solve their SDP here: it counts)."""
    if formulation in QCR_FORMULATIONS:
        return build_ccbqp_qcr(instance, QCR_FORMULATIONS[formulation], deadline=deadline)
    return build_ccbqp(instance, formulation, rlt=rlt, deadline=deadline)


def _best_known(instance: Instance, warm: np.ndarray | None) -> tuple[np.ndarray, float, str]:
    """The best of the warm start, the top-k by relevance and ``select(instance, "fw_ms")`` (the
    incumbent heuristic of divopt's branch-and-bound): (indices, objective, source)."""
    c = instance.relevance.detach().double().cpu().numpy()
    cands = [(np.sort(np.argsort(-c, kind="stable")[:instance.k]), "top-k by relevance")]
    if warm is not None:
        cands.append((warm, "the warm start"))
    if instance.n > instance.k:
        cands.append((np.sort(select(instance, "fw_ms").indices), "fw_ms"))
    scored = [(ccbqp_objective(instance, idx), i, idx, src) for i, (idx, src) in enumerate(cands)]
    best = max(scored, key=lambda t: (t[0], -t[1]))
    return best[2].astype(np.int64), best[0], best[3]


def _cheap_bound(instance: Instance) -> float:
    """A certified upper bound at O(n d) cost: the concave relaxation's Frank-Wolfe bound."""
    return concave_bound(instance, max_iter=200)[0]


def _incumbent_only(instance: Instance, warm: np.ndarray | None, config: SolveConfig, stopwatch: Stopwatch,
                    solver: str, form: str, reason: str, build_seconds: float | None = None) -> Result:
    """Status "time_limit" without running the solver: the best known incumbent, a certified
    bound and their gap; ``reason`` says why the solver did not run."""
    idx, obj, source = _best_known(instance, warm)
    bound = _cheap_bound(instance)
    notes = [f"{reason}; incumbent from {source}, bound from the concave relaxation"]
    r = Result(indices=idx, objective=obj, bound=bound, gap=relative_gap(obj, bound),
               status=SolveStatus.TIME_LIMIT, seconds=stopwatch.elapsed(), solver=solver,
               info={"formulation": form, "solver_ran": False, "incumbent_source": source,
                     "bound_source": "concave_bound", "notes": notes, "build_seconds": build_seconds,
                     "wall_seconds": stopwatch.elapsed()})
    r.message = compose_message(r, time_limit=config.time_limit)
    return r


def _finish(instance: Instance, r: Result, form: str, build_seconds: float, stopwatch: Stopwatch,
            config: SolveConfig, warm: np.ndarray | None) -> Result:
    """The runner's Result with the formulation, timings and the objective re-evaluated on the set;
    at a time limit the incumbent is the better of the solver's and the best known one (warm start,
    top-k, fw_ms), and the bound the tighter of the solver's and the concave one; the message is
    rewritten from the final fields."""
    r.info["formulation"] = form
    r.info["build_seconds"] = build_seconds
    r.info["solver_ran"] = True
    if r.objective is not None:
        r.info["solver_objective"] = r.objective
        r.objective = ccbqp_objective(instance, r.indices)
    if r.status is SolveStatus.TIME_LIMIT:
        notes = r.info.setdefault("notes", [])
        idx, obj, source = _best_known(instance, warm)
        if r.objective is None:
            r.indices, r.objective = idx, obj
            r.info["incumbent_source"] = source
            notes.append(f"the solver found no incumbent: it is from {source}")
        elif obj > r.objective + 1e-12 * (1 + abs(obj)):  # stopped short of a set divopt already knows
            notes.append(f"the solver's incumbent ({r.objective:.6g}) is below {source}'s: the incumbent is {source}'s")
            r.indices, r.objective = idx, obj
            r.info["incumbent_source"] = source
        cheap = _cheap_bound(instance)
        if r.bound is None or cheap < r.bound:
            notes.append(f"bound from the concave relaxation (the solver's: {r.bound})")
            r.info["bound_source"] = "concave_bound"
            r.bound = cheap
    r.gap = relative_gap(r.objective, r.bound)
    r.info["wall_seconds"] = stopwatch.elapsed()
    r.message = compose_message(r, time_limit=config.time_limit, mip_gap=config.mip_gap)
    return r


def _solve_bnb(instance: Instance, config: SolveConfig, *, warm: np.ndarray | None, stopwatch: Stopwatch,
               memory_limit: float | None = None) -> Result:
    """divopt's branch-and-bound as a :class:`Result`, with the runner's honesty rules: "optimal"
    only within :data:`OPTIMALITY_GAP` (or :data:`ABS_GAP_TOL`), a time limit (wall clock from
    ``stopwatch.started``) gives the incumbent, the bound and the gap; ``log_path`` receives the
    node log."""
    kw = {} if config.mip_gap is None else {"mip_gap": check_nonnegative(config.mip_gap, "mip_gap")}
    out = branch_and_bound(instance, time_limit=config.time_limit, warm_start=warm, stopwatch=stopwatch,
                           memory_limit=memory_limit, **kw)
    objective = ccbqp_objective(instance, out.indices)
    gap = relative_gap(objective, out.bound)
    status = SolveStatus(out.status)
    if status is SolveStatus.OPTIMAL and not (gap <= OPTIMALITY_GAP or abs(out.bound - objective) <= ABS_GAP_TOL):
        status = SolveStatus.GAP_LIMIT
    # the problem it solves: n binaries, one cardinality row, a quadratic objective (theta < 1)
    n = instance.n
    size = dict(n_vars=n, n_integer=n, n_constraints=1, quadratic=instance.theta < 1,
                quadratic_objective=instance.theta < 1)
    info = dict(out.info, **size, nodes=out.nodes, log=out.log, formulation="qcr_dnn", solver_ran=True,
                solver_objective=out.objective, wall_seconds=stopwatch.elapsed())
    log_path = config.log_path
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        out.log.to_csv(log_path, index=False)
    if status is SolveStatus.TIME_LIMIT and "stop_reason" in out.info:
        info["notes"] = [out.info["stop_reason"]]
    r = Result(indices=out.indices, objective=objective, bound=out.bound, gap=gap,
               status=status, seconds=stopwatch.elapsed(), solver="bnb",
               log_path=None if log_path is None else str(log_path), info=info)
    r.message = compose_message(r, time_limit=config.time_limit, mip_gap=config.mip_gap)
    return r


def brute_force(inst: Instance, max_sets: int = 3_000_000, return_all: bool = False, atol: float = 1e-9):
    """Exact CCBQP optimum by enumerating every k-subset (vectorized, float64).

    Each chunk of sets is scored by :func:`divopt_rag.models.ccbqp.gram_objective` on the formed
    Gram matrix. Returns (indices, objective) of one optimal set; with ``return_all`` also the
    list of all optimal sets (objective within ``atol`` of the optimum). Refuses more than
    ``max_sets`` sets.
    """
    n, k, th = inst.n, inst.k, inst.theta
    if k == 1:  # every item scores 0: the tie rule, not rounding noise, decides
        r = _k1_result(inst, "brute")
        return (r.indices, r.objective, [np.array([i]) for i in range(n)]) if return_all else (r.indices, r.objective)
    total = math.comb(n, k)
    if total > max_sets:
        raise ValueError(f"brute force would enumerate C({n}, {k}) = {total} sets > max_sets = {max_sets}; "
                         f"use an exact solver or a smaller pool")
    E = inst.E.double().cpu().numpy()
    lin = linear_term(inst.relevance.double().cpu().numpy(), th, k)
    G = E @ E.T
    best_val, best = -math.inf, None
    values, combos_all = [], []
    it = itertools.combinations(range(n), k)
    while True:
        chunk = np.array(list(itertools.islice(it, 200_000)), dtype=np.int64)
        if chunk.size == 0:
            break
        chunk = chunk.reshape(-1, k)
        f = gram_objective(lin, G, chunk, th)
        j = int(np.argmax(f))
        if f[j] > best_val:
            best_val, best = float(f[j]), chunk[j].copy()
        if return_all:
            values.append(f)
            combos_all.append(chunk)
    if not return_all:
        return best, best_val
    f = np.concatenate(values)
    combos = np.concatenate(combos_all)
    optimal = [combos[i] for i in np.flatnonzero(f >= best_val - atol)]
    return best, best_val, optimal


def exact_optimum(inst: Instance, solver: str = "auto", time_limit: float | None = None,
                  warm_start: Any = None, brute_max_sets: int = 200_000, mip_gap: float | None = None) -> Result:
    """Exact CCBQP optimum: "brute" (enumeration), a MIP solver name, or "auto".

    "auto" enumerates when C(n, k) <= ``brute_max_sets`` (the Result has solver "brute", status
    "optimal" and bound = objective) and otherwise calls :func:`solve_exact`, which reports a
    time limit honestly: then ``proven_optimal`` is False, ``bound`` is the solver's best bound
    (None if it has none) and ``objective`` is None when no incumbent was found.
    ``seconds`` covers the whole call, model building included (the runner's own time is kept
    in ``info["solve_seconds"]``). ``mip_gap``: the relative gap at which a MIP solver may stop
    and report "optimal" (None: the solver's default, e.g. Gurobi's 1e-4; bnb's 1e-6).
    """
    t0 = time.perf_counter()
    if inst.k == 1:
        return _k1_result(inst, "rule")
    if solver == "brute" or (solver == "auto" and math.comb(inst.n, inst.k) <= brute_max_sets):
        idx, val = brute_force(inst, max_sets=max(brute_max_sets, 3_000_000) if solver == "brute" else brute_max_sets)
        return Result(indices=np.sort(idx), objective=val, bound=val, gap=0.0, status=SolveStatus.OPTIMAL,
                      seconds=time.perf_counter() - t0, solver="brute")
    r = solve_exact(inst, solver=solver, time_limit=time_limit, warm_start=warm_start, mip_gap=mip_gap)
    r.info["solve_seconds"] = r.seconds
    r.seconds = time.perf_counter() - t0
    return r


def _k1_result(inst: Instance, solver: str) -> Result:
    """The exact answer at k = 1: f({i}) = (1-theta)(1 - ||e_i||^2) is 0 for every unit row, so
    every item is optimal and the tie rule (:func:`~divopt_rag.solvers.selection.most_relevant`)
    picks. ``objective`` is f of that item (0 up to the rows' float rounding), ``bound`` the same
    (in the model every item ties at 0); ``info["max_item_objective"]`` keeps max_i f({i}) as
    computed, the rounding spread."""
    t0 = time.perf_counter()
    i = most_relevant(inst)
    f = ccbqp_objective(inst, np.array([i]))
    norms2 = inst.E.double().pow(2).sum(1)
    spread = float(((1.0 - inst.theta) * (1.0 - norms2)).max())
    return Result(indices=np.array([i], dtype=np.int64), objective=f, bound=f, gap=0.0, status=SolveStatus.OPTIMAL,
                  seconds=time.perf_counter() - t0, solver=solver, message=K1_RULE,
                  info={"rule": K1_RULE, "max_item_objective": spread})
