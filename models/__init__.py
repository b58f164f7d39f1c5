"""divopt_rag.models: problem definitions (Instance, the CCBQP math, validation, Pyomo model builders)
and the model runner ``runner.solve(model) -> Result``.

Every name loads on first use (PEP 562): ``from divopt_rag.models import Instance`` imports the
instance module (and torch) then, and ``divopt_rag.models.domains`` (theta's range, the upper ends
of counts, the exact engines' names: standard library only) costs nothing else, so the command
line reads its domains without loading numpy or torch. The Pyomo builders (``mip_*``) and the
runner need Pyomo, the fast selectors do not, so ``import divopt_rag.solvers`` works on a machine
without Pyomo (e.g. a GPU box with torch only).
"""
import importlib
import importlib.metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what static tools see; at run time each name is imported when first asked for
    from . import ccbqp, kernels, validation
    from .ccbqp import (
        ccbqp_objective,
        exact_hit,
        normalized_gap,
        objective_scale,
        relaxed_gradient,
        relaxed_objective,
    )
    from .instance import Instance

#: Public name -> the module that defines it.
_HOMES = {
    "Instance": "instance",
    "ccbqp_objective": "ccbqp",
    "relaxed_objective": "ccbqp",
    "relaxed_gradient": "ccbqp",
    "normalized_gap": "ccbqp",
    "objective_scale": "ccbqp",
    "exact_hit": "ccbqp",
}

try:  # the installed distribution's version (pyproject.toml's), shared by every subpackage
    __version__ = importlib.metadata.version("divopt-rag")
except importlib.metadata.PackageNotFoundError:  # sources on the path without an install
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "Instance",
    "ccbqp_objective",
    "relaxed_objective",
    "relaxed_gradient",
    "normalized_gap",
    "objective_scale",
    "exact_hit",
    "ccbqp",
    "kernels",
    "validation",
    "runner",
]


def __getattr__(name: str):
    # PEP 562: names and submodules are imported when first asked for
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
