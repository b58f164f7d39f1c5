"""divopt.solvers: Frank-Wolfe, greedy baselines, exact-solver runners, local search.

``select(instance, method, **params)`` runs any fast selector named in ``METHODS``.
"""
from .selection import DEFAULT_METHOD, METHODS, Selection, get_selector, register, select
from . import dartboard, dpp, frank_wolfe, greedy  # noqa: F401  (register the selectors)
from . import lazy_mmr, local_search, multistart, ws_multistart  # noqa: F401  (registers "mmr_lazy", "fw_ls", "fw_ms", "fw_ws_ms", "<greedy>_ls")

__all__ = ["METHODS", "DEFAULT_METHOD", "Selection", "select", "register", "get_selector"]
from .exact import Result, available_solvers, solve, solve_exact  # noqa: E402  (exact MIP runners)
__all__ += ["Result", "solve", "solve_exact", "available_solvers"]
