"""divopt.solvers: Frank-Wolfe, greedy baselines, exact-solver runners, local search.

``select(instance, method, **params)`` runs any fast selector named in ``METHODS``.
"""
from .selection import METHODS, Selection, get_selector, register, select
from . import frank_wolfe  # noqa: F401  (registers "fw")

__all__ = ["METHODS", "Selection", "select", "register", "get_selector"]
