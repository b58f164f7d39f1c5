"""The one way a kernel is compiled: :func:`kernel` (explicit signature, ``cache=True``, ``nogil=True``,
on first call). numba is imported only then, so ``import divopt_rag.solvers`` neither imports numba
nor compiles anything."""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

__all__ = ["kernel", "compiled"]

_COMPILED: dict[str, Any] = {}


def compiled() -> list[str]:
    """The kernels compiled (or loaded from the cache) in this process, by qualified name."""
    return sorted(_COMPILED)


def kernel(signature: str | list[str], uses: tuple[Callable, ...] = ()) -> Callable[[Callable], Callable]:
    """Decorator: the function, compiled by ``numba.njit(signature, cache=True, nogil=True)`` on
    its first call (a list of signatures: one version each, e.g. for float32 and float64 rows).
    ``uses``: the kernels it calls (each compiled first and handed to it under its own name, since
    compiled code can only call compiled code). The wrapper keeps the Python
    function as ``py_func``; under ``NUMBA_DISABLE_JIT=1`` numba runs that function itself."""

    def wrap(py: Callable) -> Callable:
        name = f"{py.__module__}.{py.__qualname__}"

        def dispatcher() -> Any:
            fn = _COMPILED.get(name)
            if fn is None:
                import numba

                env = dict(py.__globals__)
                for dep in uses:
                    env[dep.py_func.__name__] = dep.dispatcher()
                body = types.FunctionType(py.__code__, env, py.__name__, py.__defaults__, py.__closure__)
                body.__module__, body.__qualname__ = py.__module__, py.__qualname__
                fn = numba.njit(signature, cache=True, nogil=True)(body)
                _COMPILED[name] = fn
            return fn

        @functools.wraps(py)
        def call(*args: Any) -> Any:
            return dispatcher()(*args)

        call.py_func = py  # type: ignore[attr-defined]
        call.dispatcher = dispatcher  # type: ignore[attr-defined]
        call.signature = signature  # type: ignore[attr-defined]
        return call

    return wrap
