"""Relevance maximization under a cap on redundancy, McCormick-linearized (Pyomo MILP).

With W = E E^T (pairwise cosines w_ij) and y_ij standing for x_i x_j (i < j):

    max  sum_i s_i x_i
    s.t. sum_i x_i = k
         y_ij <= x_i,  y_ij <= x_j,  y_ij >= x_i + x_j - 1,  y_ij >= 0        (McCormick)
         sum_{j != i} y_ij = (k - 1) x_i                       for every i     (RLT, optional)
         sum_{i<j} w_ij y_ij <= rho_div * sum_{i<j} y_ij                       (diversity)

On binary x the McCormick inequalities force y_ij = x_i x_j, so the last row says that the
average pairwise cosine of the selected set, sum_{i<j in S} w_ij / C(|S|, 2), is at most
rho_div (sets of size <= 1 satisfy it trivially). The RLT equalities are valid because the
cardinality is fixed (multiply sum x = k by x_i, use x_i^2 = x_i) and tighten the LP bound.
If no k-set meets the cap the model is infeasible; the model's info then carries a message
saying so (reported by :func:`divopt_rag.models.runner.solve`). An optional token budget adds sum len_i x_i <= B.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyomo.environ as pe
from pyomo.core.util import quicksum

from .instance import Instance
from .mip_common import BuiltModel, ModelInfo, add_pair_products, as_gram, as_scores, new_selection_model
from .mip_knapsack import _check_lengths, add_budget
from .validation import check_k, check_nonnegative

__all__ = ["build_diversity", "add_diversity_constraint", "check_rho_div"]


def check_rho_div(rho_div: Any) -> float:
    """rho_div must be a finite number; cosines lie in [-1, 1], so values outside are pointless
    but legal (rho_div >= 1 never binds, rho_div < -1 is always infeasible)."""
    try:
        r = float(rho_div)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"rho_div must be a number (cap on average pairwise cosine), got {rho_div!r}") from exc
    if not np.isfinite(r):
        raise ValueError(f"rho_div must be finite, got {rho_div!r}")
    return r


def add_diversity_constraint(m: pe.ConcreteModel, W: np.ndarray, rho_div: float) -> None:
    """sum_{i<j} w_ij y_ij <= rho_div sum_{i<j} y_ij on a model with pair variables ``m.y``."""
    if len(m.P) == 0:
        return  # one item: no pairs, nothing to cap
    m.diversity = pe.Constraint(
        expr=quicksum(float(W[i, j] - rho_div) * m.y[i, j] for i, j in m.P) <= 0.0
    )


def build_diversity(
    scores: Any,
    embeddings: Any = None,
    k: int | None = None,
    rho_div: float = 0.5,
    *,
    lengths: Any = None,
    budget: float | None = None,
    rlt: bool = True,
) -> BuiltModel:
    """Max relevance of a k-set whose average pairwise cosine is at most rho_div (see module doc).

    scores : (n,) relevance, or an Instance (then embeddings and k default to its E and k).
    embeddings : (n, d) unit-norm rows; k : the cardinality; rho_div : the cap.
    lengths, budget : optional token lengths and context budget (sum len_i x_i <= budget).
    rlt : add the RLT equalities (valid because sum x = k is fixed).
    Size: n binaries, n(n-1)/2 continuous y, 3 n(n-1)/2 + n + 2 constraints.
    """
    if isinstance(scores, Instance):
        embeddings = scores if embeddings is None else embeddings
        k = scores.k if k is None else k
    if embeddings is None or k is None:
        raise TypeError("build_diversity needs embeddings and k (or an Instance)")
    s = as_scores(scores, "scores")
    n = s.size
    W = as_gram(embeddings, n)
    k = check_k(k, n)
    rho = check_rho_div(rho_div)
    m = new_selection_model(n, "diversity")
    m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) == k)
    add_pair_products(m, n, mccormick="full", rlt_k=k if rlt else None)
    add_diversity_constraint(m, W, rho)
    if lengths is not None or budget is not None:
        if lengths is None or budget is None:
            raise TypeError("lengths and budget go together")
        add_budget(m, _check_lengths(lengths, n), check_nonnegative(budget, "budget"))
    m.obj = pe.Objective(expr=quicksum(float(s[i]) * m.x[i] for i in range(n)), sense=pe.maximize)
    message = (
        f"infeasible: no set of k={k} items has average pairwise cosine <= rho_div={rho:g}"
        + (f" within the token budget {budget:g}" if budget is not None else "")
        + "; raise rho_div (or lower k)"
    )
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, infeasible_message=message))
