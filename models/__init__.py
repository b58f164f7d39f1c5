"""divopt_rag.models: problem definitions (Instance, the CCBQP math, validation, Pyomo model builders)
and the model runner ``runner.solve(model) -> Result``.

The Pyomo builders (``mip_*``) and the runner load on first use (``from divopt_rag.models.runner import
solve`` or the attribute ``divopt_rag.models.runner``): they need Pyomo, the fast selectors do not, so
``import divopt_rag.solvers`` works on a machine without Pyomo (e.g. a GPU box with torch only).
"""
import importlib

from .instance import Instance
from .ccbqp import (
    ccbqp_objective,
    exact_hit,
    normalized_gap,
    objective_scale,
    relaxed_gradient,
    relaxed_objective,
)
from . import ccbqp, kernels, validation

_NEEDS_PYOMO = ("mip_ccbqp", "mip_common", "mip_diversity", "mip_knapsack", "mip_sparsity", "runner",
                "solver_limits")

__all__ = [
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
    # PEP 562: the Pyomo builders and the runner are imported when first asked for
    if name in _NEEDS_PYOMO:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
