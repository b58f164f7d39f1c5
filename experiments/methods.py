"""Methods of an experiment: resolve a name, inspect its parameters, run it on an Instance.

A method is a fast selector of :data:`divopt_rag.solvers.METHODS`, a robust model of
:data:`divopt_rag.robust.ROBUST_MODELS` (a record function ``(instance, **parameters) -> dict`` with
the selected ``indices``), or anything added with :func:`register_method` (plugin modules do
this on import). :func:`run_method` runs any of them and returns one
:class:`~divopt_rag.experiments.method_result.MethodResult` (the same fields for every kind; the
CCBQP objective where it is defined, and the name of the objective the method optimizes).

Two methods are built in here, so that every command runs them as rows of its grid:

* ``exact`` (:func:`exact`): the exact CCBQP optimum (enumeration for small pools, else a MIP
  solver or divopt's branch-and-bound), with its proven ``bound``, ``proven_optimal``,
  ``exact_status`` and ``exact_solver``; the gap of every other row against it is a post-step
  over the consolidated table (:func:`divopt_rag.experiments.measures.quality.exact_gaps`);
* ``full_scale`` (:func:`full_scale`): the full-scale certificate of
  :func:`divopt_rag.solvers.certificates.certify_full_scale` (screening, bounds, exact solve of
  the survivors) on the query's whole pool.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping

import numpy as np

from divopt_rag.experiments.method_result import MethodResult, robust_result, scalar_items
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.domains import EXACT_SOLVERS, ITERATIONS_MAX, ROWS_MAX, THREADS_MAX
from divopt_rag.models.parameters import Declaration, Interval, Options, Text, declare
from divopt_rag.models.solve_config import DEFAULT_TIME_LIMIT
from divopt_rag.models.validation import check_indices
from divopt_rag.robust import ROBUST_MODELS
from divopt_rag.robust.parameters import ROBUST_PARAMS
from divopt_rag.solvers import DEFAULT_METHOD, METHODS, select
from divopt_rag.solvers.selection import METHOD_PARAMS
from divopt_rag.models.names import did_you_mean

__all__ = [
    "INSTANCE_PARAMS",
    "register_method",
    "available_methods",
    "resolve_method",
    "method_accepts",
    "method_parameters",
    "validate",
    "accepted_parameters",
    "required_parameters",
    "run_method",
    "check_selectors",
    "exact",
    "full_scale",
]

#: The parameters of the instance every method runs on (not the method's own): the selection size,
#: the trade-off theta and the pool (the top-``pool`` candidates of a query by relevance).
INSTANCE_PARAMS = ("k", "theta", "pool")
_EXTRA_METHODS: dict[str, Callable[..., Mapping[str, Any]]] = {}
# record entries an extra method writes as columns of their own (the others go to the info JSON column)
_COLUMNS: dict[str, tuple[str, ...]] = {}
_EXTRA_PARAMS: dict[str, Declaration] = {}
#: The exact engine a method row may name: "auto" or one of the exact engines.
_EXACT_SOLVER = Options(("auto", *EXACT_SOLVERS))


def register_method(name: str, *, columns: tuple[str, ...] = (), params: Mapping[str, Any] | None = None) -> Callable:
    """Decorator adding a method ``fn(instance, **params) -> {"indices": ..., ...}``; the record's
    entries named in ``columns`` become columns of the row under their own names. ``params``
    declares each keyword parameter's constraints, as :func:`divopt_rag.solvers.register` does
    (:mod:`divopt_rag.models.parameters`); without it (a plugin) they take any value."""

    def deco(fn: Callable[..., Mapping[str, Any]]) -> Callable[..., Mapping[str, Any]]:
        decl = declare(name, fn, params)
        _EXTRA_METHODS[name] = fn
        _COLUMNS[name] = tuple(columns)
        _EXTRA_PARAMS[name] = decl
        return fn

    return deco


def _none_to_nan(v: Any) -> float:
    return math.nan if v is None else float(v)


_TIME_LIMIT = [Interval(float, 0.0, None), None]


@register_method("exact", columns=("bound", "proven_optimal", "exact_status", "exact_solver"), params={
    "solver": _EXACT_SOLVER, "time_limit": _TIME_LIMIT, "mip_gap": [Interval(float, 0.0, None), None],
    "threads": [Interval(int, 1, THREADS_MAX), None], "warm_start": [Text(), None]})
def exact(inst: Instance, *, solver: str = "auto", time_limit: float | None = DEFAULT_TIME_LIMIT,
          mip_gap: float | None = None, threads: int | None = None,
          warm_start: str | None = DEFAULT_METHOD) -> dict[str, Any]:
    """The exact CCBQP optimum of ``inst`` as a method row.

    solver : "auto" (enumeration when C(n, k) is small, else the first MIP engine that takes the
        model: :func:`divopt_rag.solvers.exact.exact_optimum`), "brute", "gurobi", "scip",
        "highs" or "bnb". time_limit, mip_gap, threads : the solver's (a time limit returns the
        incumbent and the proven bound, never "optimal"). warm_start : a fast method whose set
        starts the solver (default :data:`divopt_rag.solvers.DEFAULT_METHOD`; None: none).
    Returns the incumbent's ``indices`` (none when no incumbent was found), ``bound`` (proven
    upper bound on OPT; NaN if none), ``proven_optimal``, ``exact_status``, ``exact_solver``
    and ``seconds`` (the whole call, model building included).
    """
    # solvers.exact loads Pyomo: imported when an exact row runs, not with this module
    from divopt_rag.solvers.exact import exact_optimum, solve_exact

    warm = None if warm_start is None else select(inst, warm_start).indices
    if solver == "brute" or (mip_gap is None and threads is None):  # enumeration has no gap or threads
        r = exact_optimum(inst, solver, time_limit=time_limit, warm_start=warm)
    else:
        r = solve_exact(inst, solver, time_limit=time_limit, mip_gap=mip_gap, warm_start=warm, threads=threads)
    return {"indices": r.indices if r.objective is not None else np.zeros(0, dtype=np.int64),
            "bound": _none_to_nan(r.bound), "proven_optimal": bool(r.proven_optimal), "exact_status": r.status,
            "exact_solver": r.solver, "seconds": r.seconds}


@register_method("full_scale", columns=(
    "bound", "bound_gap", "certified", "certificate", "how", "n_survivors", "screening_rounds", "safe_survivors",
    "relaxation_survivors", "concave_bound", "item_bound", "pair_bound", "exact_status"), params={
    "max_exact": Interval(int, 1, ROWS_MAX), "solver": _EXACT_SOLVER, "time_limit": _TIME_LIMIT,
    "fw_max_iter": Interval(int, 1, ITERATIONS_MAX)})
def full_scale(inst: Instance, *, max_exact: int = 1000, solver: str = "auto",
               time_limit: float | None = DEFAULT_TIME_LIMIT, fw_max_iter: int = 500) -> dict[str, Any]:
    """The full-scale certificate of ``inst`` (:func:`divopt_rag.solvers.certificates.certify_full_scale`:
    safe screening of the whole pool, upper bounds, an exact solve of the survivors when at most
    ``max_exact`` remain, by ``solver``: "auto" is Gurobi within its licence, else divopt's
    branch-and-bound) as a method row: the incumbent's ``indices``, ``bound`` (the certified
    upper bound on OPT), ``bound_gap`` = (bound - f) / (k (k-1)), ``certified``, ``certificate``
    (its status text), ``how`` and the screening counts and partial bounds."""
    from divopt_rag.solvers.certificates import certify_full_scale  # loads Pyomo, as exact above

    cert = certify_full_scale(inst, max_exact=max_exact, exact_solver=solver, time_limit=time_limit,
                              fw_max_iter=fw_max_iter)
    row = cert.as_row()
    return {"indices": cert.incumbent, "seconds": cert.seconds, "bound": cert.upper_bound,
            "bound_gap": cert.bound_gap, "certified": cert.certified, "certificate": cert.status,
            **{c: row[c] for c in ("how", "n_survivors", "screening_rounds", "safe_survivors", "relaxation_survivors",
                                   "concave_bound", "item_bound", "pair_bound", "exact_status")}}


def check_selectors(names: list[str]) -> None:
    """ValueError naming every name that is not a fast selector of :data:`divopt_rag.solvers.METHODS`."""
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        hints = "".join(did_you_mean(m, METHODS) for m in unknown[:1])
        raise ValueError(f"unknown methods {unknown}; {hints}expected some of {sorted(METHODS)}")


def available_methods() -> list[str]:
    """Every method name: selectors, robust models and registered extras."""
    return sorted(set(METHODS) | set(ROBUST_MODELS) | set(_EXTRA_METHODS))


def resolve_method(name: str) -> tuple[str, Callable]:
    """("selector" | "robust" | "extra", function) for a method name; ValueError if unknown."""
    if name in METHODS:
        return "selector", METHODS[name]
    if name in ROBUST_MODELS:
        return "robust", ROBUST_MODELS[name]
    if name in _EXTRA_METHODS:
        return "extra", _EXTRA_METHODS[name]
    raise ValueError(f"unknown method {name!r}; {did_you_mean(name, available_methods())}expected one of "
                     f"{available_methods()}")


def method_parameters(method: str) -> Declaration:
    """The declaration of ``method``'s parameters (a selector's, a robust model's or an extra
    method's: :mod:`divopt_rag.models.parameters`); ValueError if the method is unknown."""
    kind, _ = resolve_method(method)
    if kind == "selector":
        return METHOD_PARAMS[method]
    if kind == "robust":
        return ROBUST_PARAMS[method]
    return _EXTRA_PARAMS[method]


def validate(method: str, params: Mapping[str, Any], *, complete: bool = True) -> dict[str, Any]:
    """``params`` checked against ``method``'s declaration, converted, before any work: the one
    validator of ``select``, sweep, certify, bench, reproduce and the RAG adapters
    (:meth:`~divopt_rag.models.parameters.Declaration.validate`). Instance parameters
    (``k``, ``theta``, ``pool``) are the instance's, not the method's: leave them out.
    ``complete``: a required parameter left out is an error too."""
    return method_parameters(method).validate(params, complete=complete)


def _signature_accepts(fn: Callable, param: str, explicit: bool = False) -> bool:
    """Whether the method ``fn`` (a registered function) takes ``param``, by its declaration;
    ``explicit``: declared by name (a plugin's ``**kwargs`` takes any name, not explicitly)."""
    for kind, table, decls in (("selector", METHODS, METHOD_PARAMS), ("robust", ROBUST_MODELS, ROBUST_PARAMS),
                               ("extra", _EXTRA_METHODS, _EXTRA_PARAMS)):
        for name, f in table.items():
            if f is fn:
                decl = decls[name]
                return param in decl.params or (decl.open and not explicit)
    return not explicit


def required_parameters(method: str) -> set[str]:
    """The parameters of ``method`` that have no default (from its declaration)."""
    return set(method_parameters(method).required)


def accepted_parameters(method: str) -> frozenset[str] | None:
    """The parameters ``method`` takes (``seed`` excluded: the run's seed is passed to it),
    from its declaration; None when it takes any name (a plugin's ``**kwargs``)."""
    decl = method_parameters(method)
    return None if decl.open else decl.accepted - {"seed"}


def method_accepts(method: str, param: str) -> bool:
    """Whether ``method`` takes the keyword parameter ``param`` (instance parameters always)."""
    if param in INSTANCE_PARAMS:
        return True
    return method_parameters(method).accepts(param)


def _ccbqp_objective(inst: Instance, idx: np.ndarray) -> float:
    """f at the instance's theta and k where it is defined (exactly k items), else NaN."""
    return ccbqp_objective(inst, idx) if idx.size == inst.k else math.nan


def run_method(inst: Instance, method: str, params: Mapping[str, Any], seed: int) -> MethodResult:
    """Run one method on ``inst`` and return its :class:`~divopt_rag.experiments.method_result.MethodResult`.

    Selectors (:func:`divopt_rag.solvers.select`), robust models (a record of
    :data:`divopt_rag.robust.ROBUST_MODELS`, :func:`~divopt_rag.experiments.method_result.robust_result`)
    and extra methods (a mapping with ``indices``; the entries its :func:`register_method` names as
    ``columns`` become measures, its ``objective`` the ``model_objective``, its other scalars
    ``info``) all give the same fields. ``objective`` is the CCBQP objective at the instance's
    theta and k where it is defined (a selector's or extra method's set of exactly k items), else
    NaN; ``objective_kind`` names the objective the method optimizes.

    The run's ``seed`` is passed to the method if its signature names ``seed`` (and the
    parameters do not fix it); a method draws its random numbers from generators it makes from
    that seed (``torch.Generator().manual_seed(seed)``, ``np.random.default_rng(seed)``), never from
    the global ones, which this call leaves alone.
    """
    kind, fn = resolve_method(method)
    kwargs = dict(params)
    if "seed" not in kwargs and _signature_accepts(fn, "seed", explicit=True):
        kwargs["seed"] = int(seed)
    if kind == "selector":
        sel = select(inst, method, **kwargs)
        return MethodResult(method=method, kind=kind, indices=sel.indices, seconds=sel.seconds,
                            iterations=sel.iterations, objective=float(sel.objective), objective_kind="ccbqp",
                            model_objective=float(sel.objective), info=scalar_items(sel.info))
    t0 = time.perf_counter()
    rec = fn(inst, **kwargs)
    seconds = time.perf_counter() - t0
    if not isinstance(rec, Mapping) or "indices" not in rec:
        raise TypeError(f"method {method!r} must return a mapping with 'indices', got {type(rec).__name__}")
    idx = check_indices(np.asarray(rec["indices"], dtype=np.int64), inst.n, f"{method} indices")
    if kind == "robust":
        return robust_result(method, rec, idx, seconds)
    own = _COLUMNS.get(method, ())
    objective = _ccbqp_objective(inst, idx)
    own_objective = rec.get("objective")  # e.g. a plugin's own value; else the CCBQP one
    numeric = isinstance(own_objective, (int, float, np.integer, np.floating)) and not isinstance(own_objective, bool)
    return MethodResult(
        method=method, kind=kind, indices=idx, seconds=float(rec.get("seconds", seconds)),
        iterations=int(rec.get("iterations", 0) or 0), objective=objective, objective_kind="ccbqp",
        model_objective=float(own_objective) if numeric else objective,
        measures=scalar_items({k: rec[k] for k in own if k in rec}),
        info=scalar_items(rec, ("indices", "objective", "seconds", "iterations", *own)))
