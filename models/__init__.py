"""divopt_rag.models: problem definitions (Instance, the CCBQP math, validation, Pyomo model builders)
and the model runner ``runner.solve(model) -> Result``.

Every name loads on first use (PEP 562), so importing a light module of this package
(``divopt_rag.models.extras``, ``divopt_rag.models.parameters``) costs no torch import: the RAG
adapters import those at import time and torch only when they select. The Pyomo builders
(``mip_*``) and the runner need Pyomo, the fast selectors do not, so ``import divopt_rag.solvers``
works on a machine without Pyomo (e.g. a GPU box with torch only).
"""
from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what static tools (type checkers, the API docs) see; at run time __getattr__ below
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

#: name -> the submodule that defines it
_NAMES = {"Instance": "instance", "ccbqp_objective": "ccbqp", "exact_hit": "ccbqp", "normalized_gap": "ccbqp",
          "objective_scale": "ccbqp", "relaxed_gradient": "ccbqp", "relaxed_objective": "ccbqp"}
_SUBMODULES = ("ccbqp", "kernels", "validation", "mip_ccbqp", "mip_common", "mip_diversity", "mip_knapsack",
               "mip_sparsity", "runner", "solver_limits")

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
    # PEP 562: torch (Instance, the CCBQP math) and Pyomo (the builders, the runner) load when first asked for
    if name in _NAMES:
        return getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES, *_SUBMODULES})
