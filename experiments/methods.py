"""Methods of an experiment: resolve a name, inspect its parameters, run it on an Instance.

A method is a fast selector of :data:`divopt_rag.solvers.METHODS`, a robust model of
:data:`divopt_rag.robust.ROBUST_MODELS` (a record function ``(instance, **parameters) -> dict`` with
the selected ``indices``), or anything added with :func:`register_method` (plugin modules do
this on import). :func:`run_method` runs any of them and returns the same fields, so every
method's rows compare on one scale (the CCBQP objective of the selection).

Two methods are built in here, so that every command runs them as rows of its grid:

* ``exact`` (:func:`exact`): the exact CCBQP optimum (enumeration for small pools, else a MIP
  solver or divopt's branch-and-bound), with its proven ``bound``, ``proven_optimal``,
  ``exact_status`` and ``exact_solver``; the gap of every other row against it is a post-step
  over the consolidated table (:func:`divopt_rag.experiments.harness.exact_gaps`);
* ``full_scale`` (:func:`full_scale`): the full-scale certificate of
  :func:`divopt_rag.solvers.certificates.certify_full_scale` (screening, bounds, exact solve of
  the survivors) on the query's whole pool.
"""
from __future__ import annotations

import inspect
import math
import time
from typing import Any, Callable, Mapping

import numpy as np

from divopt_rag.experiments.grid import INSTANCE_PARAMS
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.runner import DEFAULT_TIME_LIMIT
from divopt_rag.models.validation import check_indices
from divopt_rag.robust import ROBUST_MODELS
from divopt_rag.solvers import DEFAULT_METHOD, METHODS, select

__all__ = [
    "register_method",
    "available_methods",
    "resolve_method",
    "method_accepts",
    "accepted_parameters",
    "required_parameters",
    "run_method",
    "check_selectors",
    "exact",
    "full_scale",
]

_EXTRA_METHODS: dict[str, Callable[..., Mapping[str, Any]]] = {}
# record entries an extra method writes as columns of their own (the others become info_<name>)
_COLUMNS: dict[str, tuple[str, ...]] = {}


def register_method(name: str, *, columns: tuple[str, ...] = ()) -> Callable:
    """Decorator adding a method ``fn(instance, **params) -> {"indices": ..., ...}``; the record's
    entries named in ``columns`` become columns of the row under their own names."""

    def deco(fn: Callable[..., Mapping[str, Any]]) -> Callable[..., Mapping[str, Any]]:
        _EXTRA_METHODS[name] = fn
        _COLUMNS[name] = tuple(columns)
        return fn

    return deco


def _none_to_nan(v: Any) -> float:
    return math.nan if v is None else float(v)


@register_method("exact", columns=("bound", "proven_optimal", "exact_status", "exact_solver"))
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
    if mip_gap is None and threads is None:
        r = exact_optimum(inst, solver, time_limit=time_limit, warm_start=warm)
    else:
        r = solve_exact(inst, solver, time_limit=time_limit, mip_gap=mip_gap, warm_start=warm, threads=threads)
    return {"indices": r.indices if r.objective is not None else np.zeros(0, dtype=np.int64),
            "bound": _none_to_nan(r.bound), "proven_optimal": bool(r.proven_optimal), "exact_status": r.status,
            "exact_solver": r.solver, "seconds": r.seconds}


@register_method("full_scale", columns=(
    "bound", "bound_gap", "certified", "certificate", "how", "n_survivors", "screening_rounds", "safe_survivors",
    "relaxation_survivors", "concave_bound", "item_bound", "pair_bound", "exact_status"))
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
        raise ValueError(f"unknown methods {unknown}; expected some of {sorted(METHODS)}")


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
    raise ValueError(f"unknown method {name!r}; expected one of {available_methods()}")


def _signature_accepts(fn: Callable, param: str, explicit: bool = False) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return not explicit
    if param in sig.parameters and sig.parameters[param].kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        return True
    return not explicit and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def required_parameters(method: str) -> set[str]:
    """Keyword parameters of ``method`` without a default (the instance argument excluded)."""
    try:
        params = list(inspect.signature(resolve_method(method)[1]).parameters.values())
    except (TypeError, ValueError):
        return set()
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {p.name for p in params[1:] if p.kind in kinds and p.default is inspect.Parameter.empty}


def accepted_parameters(method: str) -> frozenset[str] | None:
    """The keyword parameters ``method`` takes (the instance argument and ``seed`` excluded);
    None when it takes any (a ``**kwargs`` signature, or one that cannot be inspected)."""
    try:
        params = list(inspect.signature(resolve_method(method)[1]).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(p.name for p in params[1:] if p.kind in kinds) - {"seed"}


def method_accepts(method: str, param: str) -> bool:
    """Whether ``method`` takes the keyword parameter ``param`` (instance parameters always)."""
    if param in INSTANCE_PARAMS:
        return True
    return _signature_accepts(resolve_method(method)[1], param)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, np.integer, np.floating, np.bool_))


def run_method(inst: Instance, method: str, params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Run one method: {"indices", "objective", "seconds", "iterations", "info_*" scalars}.

    ``objective`` is always the CCBQP objective of the selection at the instance's theta and k
    (NaN when a record found no selection and gives no objective of its own, e.g. an exact solve
    stopped before its first incumbent). A robust model's or extra method's record (a mapping
    with ``indices``) keeps its own ``objective`` as ``model_objective``, the entries its
    :func:`register_method` names as ``columns`` under their names, and its other scalar entries
    (status, bound, gap, ...) as ``info_<name>``.

    The run's ``seed`` is passed to the method if its signature names ``seed`` (and the
    parameters do not fix it); a method draws its random numbers from generators it makes from
    that seed (``torch.Generator().manual_seed(seed)``, ``np.random.default_rng(seed)``), never from
    the global ones, which this call leaves alone.
    """
    kind, fn = resolve_method(method)
    kwargs = dict(params)
    if "seed" not in kwargs and _signature_accepts(fn, "seed", explicit=True):
        kwargs["seed"] = int(seed)
    out: dict[str, Any] = {}
    if kind == "selector":
        sel = select(inst, method, **kwargs)
        out.update(indices=sel.indices, objective=sel.objective, seconds=sel.seconds, iterations=sel.iterations)
        extra = sel.info
    else:
        t0 = time.perf_counter()
        rec = fn(inst, **kwargs)
        seconds = time.perf_counter() - t0
        if not isinstance(rec, Mapping) or "indices" not in rec:
            raise TypeError(f"method {method!r} must return a mapping with 'indices', got {type(rec).__name__}")
        idx = check_indices(np.asarray(rec["indices"], dtype=np.int64), inst.n, f"{method} indices")
        chose_nothing = 0.0 if rec.get("objective") is not None else math.nan  # an empty choice vs no answer
        out.update(
            indices=idx,
            # the CCBQP objective, so that every method's rows compare on one scale; the
            # model's own objective (e.g. a robust worst case) is kept as model_objective
            objective=ccbqp_objective(inst, idx, any_size=True) if idx.size else chose_nothing,
            seconds=float(rec.get("seconds", seconds)),
            iterations=int(rec.get("iterations", 0) or 0),
        )
        if "objective" in rec and _scalar(rec["objective"]):
            out["model_objective"] = float(rec["objective"])
        own = _COLUMNS.get(method, ())
        for k in own:
            if k in rec and _scalar(rec[k]):
                out[k] = rec[k].item() if hasattr(rec[k], "item") else rec[k]
        extra = {k: v for k, v in rec.items() if k not in ("indices", "objective", "seconds", "iterations", *own)}
    for k, v in (extra or {}).items():
        if _scalar(v):
            out[f"info_{k}"] = v.item() if hasattr(v, "item") else v
    return out
