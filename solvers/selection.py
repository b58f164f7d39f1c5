"""One interface for every fast selector: ``select(instance, method, **params) -> Selection``."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

import numpy as np
import torch

from divopt.models import Instance, ccbqp_objective
from divopt.models.kernels import synchronize
from divopt.models.validation import check_indices

__all__ = ["Selection", "select", "register", "METHODS", "METHOD_NEEDS", "instance_methods", "get_selector",
           "DEFAULT_METHOD"]

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
#: see divopt.solvers.ws_multistart). Every plain method name (``fw``, ``mmr``, ``gmmr``, ``dpp``,
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


def select(instance: Instance, method: str = DEFAULT_METHOD, **params: Any) -> Selection:
    """Run the fast selector ``method`` on ``instance``; without a method, divopt's default
    near-certified method :data:`DEFAULT_METHOD` (not a published method: name one, e.g.
    ``"fw"`` for the CCBQP paper's Algorithm 1, to run a paper's method).

    Every method returns exactly ``instance.k`` unique indices and is scored by the same CCBQP
    objective, so selections from different methods are directly comparable.
    Unknown parameters raise ``TypeError`` naming them.
    """
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a divopt.models.Instance, got {type(instance).__name__}")
    fn = get_selector(method)
    synchronize(instance.device)
    t0 = time.perf_counter()
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
