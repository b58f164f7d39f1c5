"""divopt.solvers: Frank-Wolfe, greedy baselines, local search, the exact CCBQP.

``select(instance, method, **params)`` runs any fast selector named in ``METHODS``;
``solve_exact(instance, solver=...)`` solves the CCBQP exactly through the model runner
(:mod:`divopt.models.runner`, whose ``Result``, ``solve`` and ``available_solvers`` are
re-exported here).
"""
from .selection import DEFAULT_METHOD, METHOD_NEEDS, METHODS, Selection, get_selector, instance_methods, register, select
from . import cross_encoder_baselines, dartboard, dartboard_ce, dpp, frank_wolfe, greedy  # noqa: F401  (register the selectors)
from . import lazy_mmr, local_search, multistart, ws_multistart  # noqa: F401  (registers "mmr_lazy", "fw_ls", "fw_ms", "fw_ws_ms", "<greedy>_ls")
from .exact import Result, available_solvers, solve, solve_exact

__all__ = ["METHODS", "METHOD_NEEDS", "instance_methods", "DEFAULT_METHOD", "Selection", "select", "register",
           "get_selector", "Result", "solve", "solve_exact", "available_solvers"]
