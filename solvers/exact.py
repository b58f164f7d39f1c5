"""Exact CCBQP optima: a MIP solve (:func:`solve_exact`), enumeration (:func:`brute_force`), and
:func:`exact_optimum`, which picks between them by pool size.

``solve_exact(instance, ...)`` builds the CCBQP model (:mod:`divopt.models.mip_ccbqp`) and runs
it through the model runner.

The model runner (``solve(model) -> Result``, solver availability, the Gurobi license sizing)
lives in :mod:`divopt.models.runner`, where both ``divopt.solvers`` and ``divopt.robust`` can
use it; its names are re-exported here (``from divopt.solvers import Result, solve,
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

from divopt.models import Instance, ccbqp_objective
from divopt.models.ccbqp import gram_objective, linear_term
from divopt.models.mip_ccbqp import FORMULATIONS, build_ccbqp
from divopt.models.runner import (
    SOLVERS,
    Result,
    SolveConfig,
    SolverRefused,
    available_solvers,
    relative_gap,
    solve,
)
from divopt.models.validation import check_choice

__all__ = [
    "solve_exact",
    "brute_force",
    "exact_optimum",
    "DEFAULT_FORMULATION",
    # the runner's names, re-exported
    "Result",
    "SolveConfig",
    "SolverRefused",
    "solve",
    "available_solvers",
]


#: Formulation "auto" gives each solver: Gurobi's native (Gram) MIQP, SCIP's factored MIQP
#: (its outer approximation handles r squares far better than n^2/2 products), HiGHS's MILP.
DEFAULT_FORMULATION = {"gurobi": "miqp", "scip": "miqp_lowrank", "highs": "milp"}


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
        linearization; every solver, the only one HiGHS accepts), or "auto":
        :data:`DEFAULT_FORMULATION` of the solver.
    solver : "auto" takes the first installed solver (gurobi -> scip -> highs) that can take its
        formulation, measured on the built model (:func:`divopt.models.runner.model_size`);
        Gurobi is skipped with a warning when the model exceeds its size-limited license
        (MIQP: n > 200). An explicit solver that cannot take it raises
        :class:`~divopt.models.runner.SolverRefused` (a ValueError) naming the limit and the
        alternatives.
    time_limit, mip_gap, log_path, threads : the :class:`~divopt.models.runner.SolveConfig`.
    The returned objective is re-evaluated with :func:`divopt.models.ccbqp_objective` on the
    selected indices (the solver's own value is kept in ``info["solver_objective"]``).
    """
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a divopt.models.Instance, got {type(instance).__name__}")
    check_choice(formulation, "formulation", ("auto",) + FORMULATIONS)
    check_choice(solver, "solver", ("auto",) + SOLVERS)
    config = SolveConfig(time_limit=time_limit, mip_gap=mip_gap, threads=threads, log_path=log_path)
    avail = available_solvers()
    if solver == "auto" and not avail:
        raise ImportError("no MIP solver installed; install gurobipy, pyscipopt or highspy")
    if solver != "auto" and solver not in avail:
        raise ImportError(f"solver {solver!r} is not installed or not working; available: {avail or 'none'}")
    built: dict[str, tuple[Any, float]] = {}  # formulation -> (model, build seconds), built once
    refused: dict[str, str] = {}
    for s in avail if solver == "auto" else [solver]:
        form = DEFAULT_FORMULATION[s] if formulation == "auto" else formulation
        if form not in built:
            t0 = time.perf_counter()
            model = build_ccbqp(instance, form, rlt=rlt)
            built[form] = (model, time.perf_counter() - t0)
        model, build_seconds = built[form]
        try:
            r = solve(model, s, config=config, warm_start=warm_start)
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
    r.info["formulation"] = form
    r.info["build_seconds"] = build_seconds
    if r.objective is not None:
        r.info["solver_objective"] = r.objective
        r.objective = ccbqp_objective(instance, r.indices)
        r.gap = relative_gap(r.objective, r.bound)
    return r


def brute_force(inst: Instance, max_sets: int = 3_000_000, return_all: bool = False, atol: float = 1e-9):
    """Exact CCBQP optimum by enumerating every k-subset (vectorized, float64).

    Each chunk of sets is scored by :func:`divopt.models.ccbqp.gram_objective` on the formed
    Gram matrix. Returns (indices, objective) of one optimal set; with ``return_all`` also the
    list of all optimal sets (objective within ``atol`` of the optimum). Refuses more than
    ``max_sets`` sets.
    """
    n, k, th = inst.n, inst.k, inst.theta
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
    if solver == "brute" or (solver == "auto" and math.comb(inst.n, inst.k) <= brute_max_sets):
        idx, val = brute_force(inst, max_sets=max(brute_max_sets, 3_000_000) if solver == "brute" else brute_max_sets)
        return Result(indices=np.sort(idx), objective=val, bound=val, gap=0.0, status="optimal",
                      seconds=time.perf_counter() - t0, solver="brute")
    r = solve_exact(inst, solver=solver, time_limit=time_limit, warm_start=warm_start)
    r.info["solve_seconds"] = r.seconds
    r.seconds = time.perf_counter() - t0
    return r
