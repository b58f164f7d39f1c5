"""divopt.models: problem definitions (Instance, the CCBQP math, validation, Pyomo model builders)
and the model runner ``runner.solve(model) -> Result``."""
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
from . import mip_ccbqp, mip_common, mip_diversity, mip_knapsack, mip_sparsity  # Pyomo builders
from . import runner  # solve(model) -> Result

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
