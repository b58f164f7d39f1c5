"""One interface for every fast selector: ``select(instance, method, **params) -> Selection``."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
import torch

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.kernels import synchronize
from divopt_rag.models.parameters import Declaration, declare, declare_dataclass
from divopt_rag.models.validation import check_indices
from divopt_rag.models.names import did_you_mean

__all__ = ["Selection", "select", "register", "unregister", "parameters", "METHODS", "METHOD_NEEDS", "METHOD_PARAMS",
           "instance_methods", "get_selector", "DEFAULT_METHOD", "most_relevant", "K1_RULE", "RELEVANCE_TIE_TOL"]

# A selector takes (instance, **params) and returns (indices, iterations, info).
Selector = Callable[..., tuple[Any, int, dict]]
_REGISTRY: dict[str, Selector] = {}
#: Read-only mapping: method name -> selector function, for every fast selector.
METHODS = MappingProxyType(_REGISTRY)
_NEEDS: dict[str, tuple[str, ...]] = {}
#: Read-only mapping: method name -> the inputs beyond the Instance it cannot run without (e.g.
#: ``("cross_encoder",)`` for the cross-encoder methods); self-contained selectors are absent.
METHOD_NEEDS = MappingProxyType(_NEEDS)
_PARAMS: dict[str, Declaration] = {}
#: Read-only mapping: method name -> the declaration of its parameters (type, range, default of
#: each: :class:`~divopt_rag.models.parameters.Declaration`), what :func:`select` validates against.
METHOD_PARAMS = MappingProxyType(_PARAMS)
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


def register(name: str, *, needs: tuple[str, ...] = (), params: Mapping[str, Any] | type | None = None,
             extends: str | None = None) -> Callable[[Selector], Selector]:
    """Decorator adding a selector to :data:`METHODS` under ``name``, with its parameters declared.

    params : each keyword parameter's constraints (:mod:`divopt_rag.models.parameters`: e.g.
        ``{"max_iter": Interval(int, 1, ITERATIONS_MAX), "tol": [Interval(float, 0, None), None]}``),
        their defaults read from the selector's signature; or a config dataclass whose
        ``_parameter_constraints`` declare its fields (the default's knobs). A parameter without
        constraints is an error at registration; a selector registered without ``params`` (a
        plugin) takes its signature's names with any value.
    extends : a registered selector whose parameters this one forwards through ``**params``
        (the ``*_ls`` wrappers): its declaration joins this one's.
    needs : inputs the selector cannot run without beyond the Instance (recorded in
        :data:`METHOD_NEEDS`); loops over every method on a bare Instance use :func:`instance_methods`.

    Returns the selector wrapped, as scikit-learn's ``validate_params`` wraps a function: each
    call checks its keyword parameters against the declaration, once, before any work (an
    :class:`~divopt_rag.models.parameters.InvalidParameterError` of one line), and at k = 1 a
    selector that runs on the Instance alone returns :func:`most_relevant` by :data:`K1_RULE`
    without running. The function's body checks only what depends on the instance (a size
    against n or k). ``__wrapped__`` is the function itself.
    """

    def deco(fn: Selector) -> Selector:
        if name in _REGISTRY and getattr(_REGISTRY[name], "__wrapped__", None) is not fn:
            raise ValueError(f"selector {name!r} is already registered")
        base = parameters(extends) if extends is not None else None
        if isinstance(params, type):
            decl = declare_dataclass(name, params)
        else:
            decl = declare(name, fn, params, base=base)
        k1_rule = not needs

        @functools.wraps(fn)
        def validated(instance: Instance, **given: Any) -> tuple[Any, int, dict]:
            checked = decl.validate(given)
            if k1_rule and instance.k == 1:
                return [most_relevant(instance)], 0, {"rule": K1_RULE}
            return fn(instance, **checked)

        _REGISTRY[name] = validated
        _PARAMS[name] = decl
        if needs:
            _NEEDS[name] = tuple(needs)
        return validated

    return deco


def unregister(name: str) -> Selector:
    """Remove the selector ``name`` (and its declaration) from the registry and return the
    function that was registered: for tests that register a throwaway selector. KeyError if it
    is not registered."""
    if name not in _REGISTRY:
        raise KeyError(f"no selector {name!r} is registered")
    _PARAMS.pop(name, None)
    _NEEDS.pop(name, None)
    return _REGISTRY.pop(name).__wrapped__  # the function as it was registered


def parameters(method: str) -> Declaration:
    """The declaration of ``method``'s parameters (ValueError naming the method if unknown)."""
    get_selector(method)
    return _PARAMS[method]


def instance_methods() -> list[str]:
    """Sorted names of the selectors that run on an Instance alone (METHODS minus METHOD_NEEDS)."""
    return sorted(m for m in _REGISTRY if m not in _NEEDS)


def get_selector(method: str) -> Selector:
    if not isinstance(method, str) or method not in _REGISTRY:
        raise ValueError(f"unknown method {method!r}; {did_you_mean(method, _REGISTRY)}expected one of {sorted(_REGISTRY)}")
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


def select(instance: Instance, method: str = DEFAULT_METHOD, **params: Any) -> Selection:
    """Run the fast selector ``method`` on ``instance``; without a method, divopt's default
    near-certified method :data:`DEFAULT_METHOD` (not a published method: name one, e.g.
    ``"fw"`` for the CCBQP paper's Algorithm 1, to run a paper's method).

    Every method returns exactly ``instance.k`` unique indices and is scored by the same CCBQP
    objective, so selections from different methods are directly comparable.

    k = 1: every method on the Instance alone returns :func:`most_relevant` (the method is not
    run; ``iterations`` 0, ``info["rule"]`` says why): f is 0 for every single item, so any
    other answer would be a method's arbitrary tie-break. The cross-encoder methods still run:
    their relevance is the cross-encoder score, and at k = 1 each returns its top item.

    The parameters are checked against the method's declaration (:data:`METHOD_PARAMS`) before
    it runs, once, by the registered selector (:func:`register`): an unknown name, or a value of
    the wrong type or out of its declared range, is an
    :class:`~divopt_rag.models.parameters.InvalidParameterError` (a ValueError and a TypeError)
    of one line, e.g. "The 'max_iter' parameter of fw must be an int in the range [1, 1000000].
    Got 0 instead."
    """
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(instance).__name__}")
    fn = get_selector(method)  # the registered selector: it checks the parameters (register)
    synchronize(instance.device)
    t0 = time.perf_counter()
    idx, iterations, info = fn(instance, **params)
    synchronize(instance.device)
    seconds = time.perf_counter() - t0
    if isinstance(idx, torch.Tensor):
        idx = idx.cpu().numpy()
    # contiguous: a selector may return a reversed view (negative strides torch cannot wrap)
    idx = check_indices(np.ascontiguousarray(idx, dtype=np.int64), instance.n, f"{method} indices", size=instance.k)
    return Selection(
        indices=idx,
        objective=ccbqp_objective(instance, idx),
        seconds=seconds,
        iterations=int(iterations),
        method=method,
        info=dict(info),
    )
