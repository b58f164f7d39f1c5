"""Top-k retrieval and its token-budget generalization as 0-1 knapsack models (Pyomo).

Top-k:       max sum_i s_i x_i   s.t. sum_i x_i = k,                          x binary.
Knapsack:    max sum_i s_i x_i   s.t. sum_i len_i x_i <= budget  [, sum_i x_i = k], x binary.

Top-k is solved by sorting; the model exists as the simplest member of the family (and as a
check of the runners). The knapsack is what a RAG user expects: passages have lengths in
tokens and the context window holds ``budget`` tokens.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyomo.environ as pe
from pyomo.core.util import quicksum

from .mip_common import BuiltModel, ModelInfo, as_scores, new_selection_model
from .validation import check_k, check_nonnegative

__all__ = ["build_topk", "build_knapsack"]


def build_topk(scores: Any, k: int) -> BuiltModel:
    """max sum_i s_i x_i s.t. sum_i x_i = k, x binary (scores: array, tensor or Instance)."""
    s = as_scores(scores, "scores")
    k = check_k(k, s.size)
    m = new_selection_model(s.size, "topk")
    m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(s.size)) == k)
    m.obj = pe.Objective(expr=quicksum(float(s[i]) * m.x[i] for i in range(s.size)), sense=pe.maximize)
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=s.size))


def _check_lengths(lengths: Any, n: int) -> np.ndarray:
    ln = as_scores(lengths, "lengths", n)
    if (ln < 0).any():
        i = int(np.flatnonzero(ln < 0)[0])
        raise ValueError(f"lengths must be nonnegative (token counts), got lengths[{i}] = {ln[i]}")
    return ln


def add_budget(m: pe.ConcreteModel, lengths: np.ndarray, budget: float) -> None:
    """sum_i len_i x_i <= budget on an existing selection model."""
    m.budget = pe.Constraint(expr=quicksum(float(lengths[i]) * m.x[i] for i in range(lengths.size)) <= budget)


def build_knapsack(scores: Any, lengths: Any, budget: float, k: int | None = None) -> BuiltModel:
    """max sum_i s_i x_i s.t. sum_i len_i x_i <= budget (and sum_i x_i = k if k is given).

    scores : (n,) relevance (array, tensor or Instance); lengths : (n,) token counts >= 0;
    budget : the context budget B >= 0 in the same unit.
    Infeasible only with a fixed k whose k shortest passages exceed the budget; the model's
    info then carries a message saying so (reported by :func:`divopt_rag.models.runner.solve`).
    """
    s = as_scores(scores, "scores")
    n = s.size
    ln = _check_lengths(lengths, n)
    budget = check_nonnegative(budget, "budget")
    m = new_selection_model(n, "knapsack")
    add_budget(m, ln, budget)
    message = None
    if k is not None:
        k = check_k(k, n)
        m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) == k)
        shortest = float(np.sort(ln)[:k].sum())
        if shortest > budget:
            message = f"infeasible: the {k} shortest passages need {shortest:g} tokens > budget={budget:g}"
    m.obj = pe.Objective(expr=quicksum(float(s[i]) * m.x[i] for i in range(n)), sense=pe.maximize)
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, infeasible_message=message))
