"""divopt_rag.solvers: Frank-Wolfe, greedy baselines, local search, the exact CCBQP.

``select(instance, method, **params)`` runs any fast selector named in ``METHODS``;
``solve_exact(instance, solver=...)`` solves the CCBQP exactly through the model runner
(:mod:`divopt_rag.models.runner`; ``Result``, ``SolveStatus``, ``SolveConfig``, ``solve`` and
``available_solvers`` are handed on here from their home modules). Those exact-solver names load
on first use (they need Pyomo; the fast selectors do not), so ``import divopt_rag.solvers`` works on a machine with torch only.
"""
import importlib

from divopt_rag.models import __version__
from .selection import (DEFAULT_METHOD, METHOD_NEEDS, METHOD_PARAMS, METHODS, Selection, get_selector, instance_methods,
                        register, select, unregister)
from . import cross_encoder_baselines, dartboard, dartboard_ce, dpp, frank_wolfe, greedy  # noqa: F401  (register the selectors)
from . import lazy_mmr, local_search, multistart, ws_multistart  # noqa: F401  (registers "mmr_lazy", "fw_ls", "fw_ms", "fw_ws_ms", "<greedy>_ls")

__all__ = ["__version__", "METHODS", "METHOD_NEEDS", "METHOD_PARAMS", "instance_methods", "DEFAULT_METHOD", "Selection", "select",
           "register", "unregister", "get_selector", "Result", "solve", "solve_exact", "available_solvers"]

#: The exact solve's names (each from its home; they need Pyomo, so they load on first use).
_EXACT = {"Result": "divopt_rag.models.solve_results", "SolveStatus": "divopt_rag.models.solve_results",
          "SolveConfig": "divopt_rag.models.solve_config", "available_solvers": "divopt_rag.models.solver_limits",
          "solve": "divopt_rag.models.runner", "solve_exact": "divopt_rag.solvers.exact"}


def __getattr__(name: str):
    # PEP 562: ``from divopt_rag.solvers import solve_exact`` imports the exact module (and Pyomo) then
    if name in _EXACT:
        return getattr(importlib.import_module(_EXACT[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
