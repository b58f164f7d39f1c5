"""The parameters of every robust model of :data:`~divopt_rag.robust.ROBUST_MODELS`, declared once.

Each record function's keyword parameters with their type and range
(:mod:`divopt_rag.models.parameters`); the defaults are the functions' own, and a parameter
without one (``rho_vec``, ``sparsity_penalty``, ``rho_div``, ``attack_budget``) is required: a
sweep that leaves it out is refused before any work. Every entry point (``sweep``, ``reproduce``,
``run_method``) checks a model's parameters against :data:`ROBUST_PARAMS` with the one validator
:meth:`~divopt_rag.models.parameters.Declaration.validate`.
"""
from __future__ import annotations

from typing import Any, Mapping

from divopt_rag.models.domains import ROWS_MAX, SOLVERS
from divopt_rag.models.parameters import Declaration, Interval, Options, declare

from .relevance import QUERY_SIMILARITIES
from .oracles import SIMILARITIES
from .records import ROBUST_MODELS

__all__ = ["ROBUST_PARAMS"]

#: Time limits and gaps: seconds >= 0 (None: the solver's own), a relative MIP gap >= 0.
_SOLVE = {"solver": Options(("auto", *SOLVERS)), "time_limit": [Interval(float, 0.0, None), None],
          "mip_gap": [Interval(float, 0.0, None), None]}
#: What every sparsity model takes (robust/records.py's _COMMON).
_COMMON: dict[str, Any] = {
    "sparsity_penalty": Interval(float, 0.0, None),  # lambda of -lambda sum x (DESIGN.md, names)
    "rho_div": Interval(float, None, None),  # cap on the average pairwise cosine: finite, any sign
    "similarity": Options(SIMILARITIES),
    "query_similarity": Options(QUERY_SIMILARITIES),
    "max_size": [Options({"k"}), Interval(int, 1, ROWS_MAX), None],  # <= n: checked on the instance
    "candidates": [Interval(int, 1, ROWS_MAX), None],  # clipped to the pool
    **_SOLVE,
}
_BALL = {"rho_vec": Interval(float, 0.0, None), **_COMMON}
_KSPARSE = {**_BALL, "attack_budget": Interval(int, 0, ROWS_MAX), "protected": [Interval(int, 0, ROWS_MAX), None]}
_CUTTING_PLANE = {**_KSPARSE, "tol": Interval(float, 0.0, None),
                  "max_iter": Interval(int, 1, 10_000),  # each iteration solves a MIP
                  "cut_support": Options({"selected", "pool"}), "cut_type": Options({"multi", "single"})}

_SPECS: Mapping[str, Mapping[str, Any]] = {
    "nominal_sparsity": _COMMON,
    "robust_l1": _BALL,
    "robust_l2": _BALL,
    "robust_linf": _BALL,
    "robust_ksparse": _KSPARSE,
    "robust_ksparse_lpdual": _KSPARSE,
    "robust_ksparse_cp": _CUTTING_PLANE,
}

#: model name -> the declaration of its parameters.
ROBUST_PARAMS: Mapping[str, Declaration] = {name: declare(name, fn, _SPECS[name]) for name, fn in ROBUST_MODELS.items()}
