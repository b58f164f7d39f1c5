"""One interface for every fast selector: ``select(instance, method, **params) -> Selection``."""
from __future__ import annotations

import difflib
import inspect
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

import numpy as np
import torch

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.kernels import synchronize
from divopt_rag.models.validation import check_indices, check_scalar

__all__ = ["Selection", "select", "register", "METHODS", "METHOD_NEEDS", "instance_methods", "get_selector",
           "DEFAULT_METHOD", "most_relevant", "K1_RULE", "RELEVANCE_TIE_TOL", "check_params", "declared_type", "ITERATION_COUNTS"]

# A selector takes (instance, **params) and returns (indices, iterations, info).
Selector = Callable[..., tuple[Any, int, dict]]
_REGISTRY: dict[str, Selector] = {}
#: Read-only mapping: method name -> selector function, for every fast selector.
METHODS = MappingProxyType(_REGISTRY)
_NEEDS: dict[str, tuple[str, ...]] = {}
#: Read-only mapping: method name -> the inputs beyond the Instance it cannot run without (e.g.
#: ``("cross_encoder",)`` for the cross-encoder methods); self-contained selectors are absent.
METHOD_NEEDS = MappingProxyType(_NEEDS)
#: What ``select(inst)`` runs: divopt's best near-certified fast method, not a published one
#: ("fw_ws_ms": multistart search on a candidate pool, certified 1-swap optimal on the whole pool;
#: see divopt_rag.solvers.ws_multistart). Every plain method name (``fw``, ``mmr``, ``gmmr``, ``dpp``,
#: ``dartboard``, ``vrsd``) is the published method with the published defaults.
DEFAULT_METHOD = "fw_ws_ms"


@dataclass
class Selection:
    """A selected k-set and how it was obtained.

    indices : int64 array of length k, unique, rows of the instance's pool, in pick order
        (greedy methods) or by decreasing relevance (methods that return a set).
    objective : CCBQP objective f of the set (float64).
    seconds : wall-clock time of the selector (device synchronized), objective excluded.
    iterations : greedy steps or solver iterations.
    info : method-specific diagnostics (FW trace, converged flag, ...).
    """

    indices: np.ndarray
    objective: float
    seconds: float
    iterations: int
    method: str
    info: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.indices.size)


def register(name: str, *, needs: tuple[str, ...] = ()) -> Callable[[Selector], Selector]:
    """Decorator adding a selector to :data:`METHODS` under ``name``.

    ``needs`` names inputs the selector cannot run without beyond the Instance (recorded in
    :data:`METHOD_NEEDS`); loops over every method on a bare Instance use :func:`instance_methods`.
    """

    def deco(fn: Selector) -> Selector:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"selector {name!r} is already registered")
        _REGISTRY[name] = fn
        if needs:
            _NEEDS[name] = tuple(needs)
        return fn

    return deco


def instance_methods() -> list[str]:
    """Sorted names of the selectors that run on an Instance alone (METHODS minus METHOD_NEEDS)."""
    return sorted(m for m in _REGISTRY if m not in _NEEDS)


def get_selector(method: str) -> Selector:
    if not isinstance(method, str) or method not in _REGISTRY:
        raise ValueError(f"unknown method {method!r}; expected one of {sorted(_REGISTRY)}")
    return _REGISTRY[method]


#: What every selector and the exact path return when k = 1 (recorded in ``info["rule"]``).
K1_RULE = "k = 1: f is 0 for every item (theta (k-1) = 0, 1 - ||e_i||^2 = 0), so the most relevant item"


#: Relevance values within this (relative) distance of the maximum tie in :func:`most_relevant`:
#: identical rows can get relevances one rounding apart (a BLAS matvec sums rows in different
#: orders), and a tie rule must not depend on that.
RELEVANCE_TIE_TOL = 1e-6


def most_relevant(instance: Instance) -> int:
    """The k = 1 tie rule: the item of largest relevance c_i; ties (values within
    :data:`RELEVANCE_TIE_TOL` relative of the maximum) go to the lowest index.

    With k = 1 the CCBQP objective f({i}) = theta (k-1) c_i + (1-theta)(1 - ||e_i||^2) is 0 for
    every unit row: every item is optimal, and nothing in f prefers one. divopt then returns
    the most relevant item, from every selector (the cross-encoder methods: their own
    relevance, the cross-encoder score) and from the exact path (:func:`divopt_rag.solvers.solve_exact`),
    so that a 1-item answer never depends on a method's arbitrary tie-breaking.
    """
    c = instance.relevance.detach().double().cpu().numpy()
    top = float(c.max())
    return int(np.flatnonzero(c >= top - RELEVANCE_TIE_TOL * max(1.0, abs(top)))[0])


_SCALARS = {"int": int, "float": float, "bool": bool}
#: Selector parameters that count iterations (Frank-Wolfe steps, local-search swaps, passes over
#: the pool, search phases): :func:`check_params` refuses values below 1, since 0 returns the
#: start unrefined (``max_iter=0`` gave FW's arbitrary top-k of its uniform start). Parameters
#: whose 0 documentedly switches a stage off (``perturb_rounds``, ``tabu_iters``, ``n_random``,
#: ``continuation_steps``) are not in this list.
ITERATION_COUNTS = ("max_iter", "max_swaps", "max_passes", "max_phases")


def declared_type(p: inspect.Parameter) -> tuple[type | None, bool]:
    """(int, float, bool or None, None allowed) from a parameter's annotation ("int | None",
    "float", ...), else from the type of its default; (None, True) when neither says. What
    :func:`check_params` checks, and what the sweep checks before any work."""
    ann = p.annotation
    text = ann if isinstance(ann, str) else ("" if ann is p.empty else getattr(ann, "__name__", str(ann)))
    names = {t.strip() for t in text.split("|")} if text else set()
    if names and names <= set(_SCALARS) | {"None"} and len(names - {"None"}) == 1:
        return _SCALARS[(names - {"None"}).pop()], "None" in names
    if not names and p.default is not p.empty and type(p.default) in (int, float, bool):
        return type(p.default), False
    return None, True


def check_params(method: str, fn: Callable, params: dict) -> None:
    """Check the keyword parameters given to a selector, before it runs: unknown names are a
    TypeError listing the valid ones; a value of the wrong scalar type (declared by the
    parameter's annotation, e.g. ``max_iter: int``, or its default's type) is an error naming
    the parameter (a bool is not a count, NaN not a number; ``seed`` must be >= 0; an
    iteration count of :data:`ITERATION_COUNTS` must be >= 1). Other ranges are each method's
    own checks."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    ps = list(sig.parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in ps):
        return
    by_name = {p.name: p for p in ps if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    valid = sorted(by_name)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        close = difflib.get_close_matches(unknown[0], valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"method {method!r} has no parameter {', '.join(map(repr, unknown))}{hint}; "
                        f"its parameters: {valid}")
    for name, value in params.items():
        kind, nullable = declared_type(by_name[name])
        if name == "seed":
            check_scalar(value, f"{method} seed", int, min_val=0, allow_none=nullable or kind is None)
        elif kind is bool:
            if not isinstance(value, (bool, np.bool_)) and not (nullable and value is None):
                raise TypeError(f"{method} {name} must be a bool, got {type(value).__name__} {value!r}")
        elif kind is not None:
            check_scalar(value, f"{method} {name}", kind, allow_none=nullable,
                         min_val=1 if name in ITERATION_COUNTS and kind is int else None)


def select(instance: Instance, method: str = DEFAULT_METHOD, **params: Any) -> Selection:
    """Run the fast selector ``method`` on ``instance``; without a method, divopt's default
    near-certified method :data:`DEFAULT_METHOD` (not a published method: name one, e.g.
    ``"fw"`` for the CCBQP paper's Algorithm 1, to run a paper's method).

    Every method returns exactly ``instance.k`` unique indices and is scored by the same CCBQP
    objective, so selections from different methods are directly comparable.
    Unknown parameters raise ``TypeError`` naming them and listing the valid ones.

    k = 1: every method on the Instance alone returns :func:`most_relevant` (the method is not
    run; ``iterations`` 0, ``info["rule"]`` says why): f is 0 for every single item, so any
    other answer would be a method's arbitrary tie-break. The cross-encoder methods still run:
    their relevance is the cross-encoder score, and at k = 1 each returns its top item.
    """
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(instance).__name__}")
    fn = get_selector(method)
    check_params(method, fn, params)
    synchronize(instance.device)
    t0 = time.perf_counter()
    if instance.k == 1 and method not in _NEEDS:
        idx, iterations, info = [most_relevant(instance)], 0, {"rule": K1_RULE}
    else:
        idx, iterations, info = fn(instance, **params)
    synchronize(instance.device)
    seconds = time.perf_counter() - t0
    if isinstance(idx, torch.Tensor):
        idx = idx.cpu().numpy()
    idx = check_indices(np.asarray(idx, dtype=np.int64), instance.n, f"{method} indices", size=instance.k)
    return Selection(
        indices=idx,
        objective=ccbqp_objective(instance, idx),
        seconds=seconds,
        iterations=int(iterations),
        method=method,
        info=dict(info),
    )
