"""Methods of an experiment: resolve a name, inspect its parameters, run it on an Instance.

A method is a fast selector of :data:`divopt_rag.solvers.METHODS`, a robust model of
:data:`divopt_rag.robust.ROBUST_MODELS` (a record function ``(instance, **parameters) -> dict`` with
the selected ``indices``), or anything added with :func:`register_method` (plugin modules do
this on import). :func:`run_method` runs any of them and returns the same fields, so every
method's rows compare on one scale (the CCBQP objective of the selection).
"""
from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Mapping

import numpy as np
import torch

from divopt_rag.experiments.grid import INSTANCE_PARAMS
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.validation import check_indices
from divopt_rag.robust import ROBUST_MODELS
from divopt_rag.solvers import METHODS, select

__all__ = [
    "register_method",
    "available_methods",
    "resolve_method",
    "method_accepts",
    "accepted_parameters",
    "required_parameters",
    "run_method",
]

_EXTRA_METHODS: dict[str, Callable[..., Mapping[str, Any]]] = {}


def register_method(name: str) -> Callable:
    """Decorator adding a method ``fn(instance, **params) -> {"indices": ..., ...}``."""

    def deco(fn: Callable[..., Mapping[str, Any]]) -> Callable[..., Mapping[str, Any]]:
        _EXTRA_METHODS[name] = fn
        return fn

    return deco


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

    ``objective`` is always the CCBQP objective of the selection at the instance's theta and k.
    A robust model's or extra method's record (a mapping with ``indices``) keeps its own
    ``objective`` as ``model_objective`` and its other scalar entries (status, bound, gap, ...)
    as ``info_<name>``.

    The run's ``seed`` is passed to the method if its signature names ``seed`` (and the
    parameters do not fix it), and seeds torch's global generator for methods that use it.
    """
    kind, fn = resolve_method(method)
    kwargs = dict(params)
    if "seed" not in kwargs and _signature_accepts(fn, "seed", explicit=True):
        kwargs["seed"] = int(seed)
    torch.manual_seed(int(seed))
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
        out.update(
            indices=idx,
            # the CCBQP objective, so that every method's rows compare on one scale; the
            # model's own objective (e.g. a robust worst case) is kept as model_objective
            objective=ccbqp_objective(inst, idx, any_size=True) if idx.size else 0.0,
            seconds=float(rec.get("seconds", seconds)),
            iterations=int(rec.get("iterations", 0) or 0),
        )
        if "objective" in rec and _scalar(rec["objective"]):
            out["model_objective"] = float(rec["objective"])
        extra = {k: v for k, v in rec.items() if k not in ("indices", "objective", "seconds", "iterations")}
    for k, v in (extra or {}).items():
        if _scalar(v):
            out[f"info_{k}"] = v.item() if hasattr(v, "item") else v
    return out
