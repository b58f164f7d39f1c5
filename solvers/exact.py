"""Exact CCBQP optima: a MIP solve (:func:`solve_exact`), enumeration (:func:`brute_force`), and
:func:`exact_optimum`, which picks between them by pool size.

``solve_exact(instance, ...)`` builds the CCBQP model (:mod:`divopt_rag.models.mip_ccbqp`, or its
quadratic convex reformulation :mod:`divopt_rag.models.mip_qcr`) and runs it through the model
runner, or runs divopt's own branch-and-bound (:mod:`divopt_rag.solvers.bnb`, ``solver="bnb"``).

The model runner (``solve(model) -> Result``, solver availability, the Gurobi license sizing)
lives in :mod:`divopt_rag.models.runner`, where both ``divopt_rag.solvers`` and ``divopt_rag.robust`` can
use it; its names are re-exported here (``from divopt_rag.solvers import Result, solve,
solve_exact, available_solvers``).
"""
from __future__ import annotations

import itertools
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.ccbqp import gram_objective, linear_term
from divopt_rag.models.mip_ccbqp import FORMULATIONS, build_ccbqp
from divopt_rag.models.mip_qcr import QCR_FORMULATIONS, build_ccbqp_qcr
from divopt_rag.models.runner import (
    ABS_GAP_TOL,
    OPTIMALITY_GAP,
    SOLVERS,
    ModelSize,
    Result,
    SolveConfig,
    SolverRefused,
    available_solvers,
    relative_gap,
    solve,
    solver_refusal,
)
from divopt_rag.models.validation import check_choice, check_nonnegative
from divopt_rag.solvers.bnb import branch_and_bound
from divopt_rag.solvers.selection import K1_RULE, most_relevant

__all__ = [
    "solve_exact",
    "brute_force",
    "exact_optimum",
    "DEFAULT_FORMULATION",
    "EXACT_SOLVERS",
    # the runner's names, re-exported
    "Result",
    "SolveConfig",
    "SolverRefused",
    "solve",
    "available_solvers",
]


#: Formulation "auto" gives each solver: Gurobi's native (Gram) MIQP, SCIP's factored MIQP
#: (its outer approximation handles r squares far better than n^2/2 products), HiGHS's MILP,
#: divopt's branch-and-bound its DNN/QCR bounds ("qcr_dnn", the only one it takes).
DEFAULT_FORMULATION = {"gurobi": "miqp", "scip": "miqp_lowrank", "highs": "milp", "bnb": "qcr_dnn"}
#: Engines of :func:`solve_exact`: the MIP solvers plus divopt's own branch-and-bound (always there).
EXACT_SOLVERS = SOLVERS + ("bnb",)


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
    """Solve the exact CCBQP of ``instance`` (see :mod:`divopt_rag.models.mip_ccbqp`).

    formulation : "miqp" (native convex MIQP in the Gram matrix; Gurobi/SCIP), "miqp_lowrank"
        (factored MIQP, v = F^T x with W = F F^T; Gurobi/SCIP), "milp" (McCormick + RLT
        linearization; every solver, the only one HiGHS accepts), "qcr" / "qcr_lowrank" (the
        Shor-SDP quadratic convex reformulation, :mod:`divopt_rag.models.mip_qcr`; Gurobi/SCIP),
        "qcr_dnn" (divopt's branch-and-bound, which takes only this), or "auto":
        :data:`DEFAULT_FORMULATION` of the solver.
    solver : "gurobi", "scip", "highs", "bnb" (divopt's own branch-and-bound,
        :mod:`divopt_rag.solvers.bnb`; needs no licence and has no size limit) or "auto". With
        formulation "auto", "auto" is Gurobi when it is installed and its model fits the licence
        (the runner's licence rule, :func:`divopt_rag.models.runner.solver_refusal`, on the Gram
        MIQP's size: n binaries, one row; MIQP: n <= 200 with the pip licence), else "bnb" (10x+ faster than SCIP and HiGHS on the
        exact benchmark, ``benchmarks/results/exact/TABLES.md``). With an explicit MIP
        formulation, "auto" is the first installed MIP solver (gurobi -> scip -> highs) that takes
        it. An explicit solver that cannot take the model raises
        :class:`~divopt_rag.models.runner.SolverRefused` (a ValueError) naming the limit and the
        alternatives.
    time_limit, mip_gap, log_path, threads : the :class:`~divopt_rag.models.runner.SolveConfig`
        (bnb: ``mip_gap`` default 1e-6; ``log_path`` receives its node log as CSV; one thread).
    The returned objective is re-evaluated with :func:`divopt_rag.models.ccbqp_objective` on the
    selected indices (the solver's own value is kept in ``info["solver_objective"]``). For "bnb",
    ``info`` holds "nodes", the node log "log" (DataFrame) and "root_bound".

    ``time_limit`` is wall clock for the whole call: building the model counts, and the runner
    gets what is left (``info["wall_seconds"]`` is the whole call; ``seconds`` the runner's).
    k = 1 needs no solver: every item scores 0, and the answer is the most relevant item
    (:func:`divopt_rag.solvers.selection.most_relevant`, the rule every selector follows).
    """
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(instance).__name__}")
    check_choice(formulation, "formulation", ("auto",) + FORMULATIONS + tuple(QCR_FORMULATIONS) + ("qcr_dnn",))
    check_choice(solver, "solver", ("auto",) + EXACT_SOLVERS)
    if (solver == "bnb" and formulation not in ("auto", "qcr_dnn")) or (
            formulation == "qcr_dnn" and solver not in ("auto", "bnb")):
        raise SolverRefused(solver, f"formulation {formulation!r} is not one it takes",
                            "divopt's branch-and-bound (solver 'bnb') takes only formulation 'qcr_dnn' "
                            "(or 'auto'), and 'qcr_dnn' is its own")
    config = SolveConfig(time_limit=time_limit, mip_gap=mip_gap, threads=threads, log_path=log_path)
    if instance.k == 1:
        return _k1_result(instance, "rule")
    started = time.perf_counter()
    avail = available_solvers()
    if solver == "auto" and formulation in ("auto", "qcr_dnn"):
        solver = "bnb"
        if formulation == "auto" and "gurobi" in avail:
            # Gurobi when its model fits the licence (fastest where it may run). The Gram MIQP has n
            # binaries and one row (mip_ccbqp); the runner's licence rule judges that size before
            # building it, since building costs O(n^2) Pyomo terms (16 s at n = 1000) that bnb
            # does not need; the runner measures the built model again and catches Gurobi's own
            # refusal (second line of defence).
            why = _gram_refusal("gurobi", instance, DEFAULT_FORMULATION["gurobi"])
            if why is None:
                model = build_ccbqp(instance, DEFAULT_FORMULATION["gurobi"], rlt=rlt)
                build_seconds = time.perf_counter() - started
                try:
                    r = solve(model, "gurobi", config=config, warm_start=warm_start, started=started)
                except SolverRefused as exc:
                    why = exc.reason
                else:
                    return _finish(instance, r, DEFAULT_FORMULATION["gurobi"], build_seconds, started)
            warnings.warn(f"Gurobi skipped: {why}; using divopt's branch-and-bound (bnb)", RuntimeWarning, stacklevel=2)
    if solver == "bnb":
        return _solve_bnb(instance, config, warm_start=warm_start, started=started)
    if solver == "auto" and not avail:
        raise ImportError("no MIP solver installed; install gurobipy, pyscipopt or highspy")
    if solver != "auto" and solver not in avail:
        raise ImportError(f"solver {solver!r} is not installed or not working; available: {avail or 'none'}")
    built: dict[str, tuple[Any, float]] = {}  # formulation -> (model, build seconds), built once
    refused: dict[str, str] = {}
    for s in avail if solver == "auto" else [solver]:
        form = DEFAULT_FORMULATION[s] if formulation == "auto" else formulation
        why = _gram_refusal(s, instance, form)
        if why is not None:  # known before an O(n^2) build (and the QCR SDP)
            if solver != "auto":
                raise SolverRefused(s, why, f"use solver 'bnb' (no size limit) or 'scip' / 'highs' (available: {avail})")
            refused[s] = why
            continue
        if form not in built:
            t0 = time.perf_counter()
            model = _build(instance, form, rlt)
            built[form] = (model, time.perf_counter() - t0)
        model, build_seconds = built[form]
        try:
            r = solve(model, s, config=config, warm_start=warm_start, started=started)
        except SolverRefused as exc:  # measured on the built model: too large, or quadratic for HiGHS
            if solver != "auto":
                raise
            refused[s] = exc.reason
            continue
        break
    else:
        raise ImportError(f"no installed solver can take formulation {formulation!r}: {refused}")
    if "gurobi" in refused:
        warnings.warn(f"Gurobi skipped: {refused['gurobi']}; using {s}", RuntimeWarning, stacklevel=2)
    if form in QCR_FORMULATIONS:
        r.info["qcr_seconds"] = model.info.details["qcr_seconds"]  # the SDP, part of build_seconds
    return _finish(instance, r, form, build_seconds, started)


def _gram_refusal(solver: str, instance: Instance, formulation: str) -> str | None:
    """The runner's licence rule (:func:`~divopt_rag.models.runner.solver_refusal`) on the size of the
    Gram-form MIQPs ("miqp", "qcr": n binaries, one row, quadratic when theta < 1), judged before
    building them; other formulations are measured by the runner once built."""
    if formulation not in ("miqp", "qcr"):
        return None
    quadratic = instance.theta < 1
    return solver_refusal(solver, ModelSize(instance.n, instance.n, 1, quadratic, quadratic))


def _build(instance: Instance, formulation: str, rlt: bool):
    """The Pyomo model of a MIP formulation (the QCR ones solve their SDP here: it counts)."""
    if formulation in QCR_FORMULATIONS:
        return build_ccbqp_qcr(instance, QCR_FORMULATIONS[formulation])
    return build_ccbqp(instance, formulation, rlt=rlt)


def _finish(instance: Instance, r: Result, form: str, build_seconds: float, started: float) -> Result:
    """The runner's Result with the formulation, timings and the objective re-evaluated on the set."""
    r.info["formulation"] = form
    r.info["build_seconds"] = build_seconds
    r.info["wall_seconds"] = time.perf_counter() - started
    if r.objective is not None:
        r.info["solver_objective"] = r.objective
        r.objective = ccbqp_objective(instance, r.indices)
        r.gap = relative_gap(r.objective, r.bound)
    return r


def _solve_bnb(instance: Instance, config: SolveConfig, *, warm_start: Any, started: float) -> Result:
    """divopt's branch-and-bound as a :class:`Result`, with the runner's honesty rules: "optimal"
    only within :data:`OPTIMALITY_GAP` (or :data:`ABS_GAP_TOL`), a time limit (wall clock from
    ``started``) gives the incumbent, the bound and the gap; ``log_path`` receives the node log."""
    kw = {} if config.mip_gap is None else {"mip_gap": check_nonnegative(config.mip_gap, "mip_gap")}
    out = branch_and_bound(instance, time_limit=config.time_limit, warm_start=warm_start, started=started, **kw)
    gap = relative_gap(out.objective, out.bound)
    status, message = out.status, ""
    if status == "optimal" and not (gap <= OPTIMALITY_GAP or abs(out.bound - out.objective) <= ABS_GAP_TOL):
        status = "gap_limit"
        message = f"stopped at relative gap {gap:.3g} (mip_gap={config.mip_gap}); optimality not proven"
    elif status != "optimal":
        message = f"{status.replace('_', ' ')} reached: incumbent {out.objective}, bound {out.bound}, gap {gap:.3g}"
    # the problem it solves: n binaries, one cardinality row, a quadratic objective (theta < 1)
    n = instance.n
    size = dict(n_vars=n, n_integer=n, n_constraints=1, quadratic=instance.theta < 1,
                quadratic_objective=instance.theta < 1)
    info = dict(out.info, **size, nodes=out.nodes, log=out.log, formulation="qcr_dnn",
                solver_objective=out.objective, wall_seconds=time.perf_counter() - started)
    log_path = config.log_path
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        out.log.to_csv(log_path, index=False)
    return Result(indices=out.indices, objective=ccbqp_objective(instance, out.indices), bound=out.bound, gap=gap,
                  status=status, seconds=time.perf_counter() - started, solver="bnb",
                  log_path=None if log_path is None else str(log_path), message=message, info=info)


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
                  warm_start: Any = None, brute_max_sets: int = 200_000) -> Result:
    """Exact CCBQP optimum: "brute" (enumeration), a MIP solver name, or "auto".

    "auto" enumerates when C(n, k) <= ``brute_max_sets`` (the Result has solver "brute", status
    "optimal" and bound = objective) and otherwise calls :func:`solve_exact`, which reports a
    time limit honestly: then ``proven_optimal`` is False, ``bound`` is the solver's best bound
    (None if it has none) and ``objective`` is None when no incumbent was found.
    ``seconds`` covers the whole call, model building included (the runner's own time is kept
    in ``info["solve_seconds"]``).
    """
    t0 = time.perf_counter()
    if inst.k == 1:
        return _k1_result(inst, "rule")
    if solver == "brute" or (solver == "auto" and math.comb(inst.n, inst.k) <= brute_max_sets):
        idx, val = brute_force(inst, max_sets=max(brute_max_sets, 3_000_000) if solver == "brute" else brute_max_sets)
        return Result(indices=np.sort(idx), objective=val, bound=val, gap=0.0, status="optimal",
                      seconds=time.perf_counter() - t0, solver="brute")
    r = solve_exact(inst, solver=solver, time_limit=time_limit, warm_start=warm_start)
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
    return Result(indices=np.array([i], dtype=np.int64), objective=f, bound=f, gap=0.0, status="optimal",
                  seconds=time.perf_counter() - t0, solver=solver, message=K1_RULE,
                  info={"rule": K1_RULE, "max_item_objective": spread})
