"""Adaptive k: relevance minus a sparsity penalty per selected item (Pyomo MILP).

    max  sum_i s_i x_i - sparsity_penalty * sum_i x_i
    s.t. k_min <= sum_i x_i <= k_max                                   (optional)
         y_ij <= x_i, y_ij <= x_j, y_ij >= x_i + x_j - 1, y_ij >= 0    (only with rho_div)
         sum_{i<j} w_ij y_ij <= rho_div * sum_{i<j} y_ij               (only with rho_div)
         sum_i len_i x_i <= budget                                     (optional)
    x binary.

Without constraints the optimum keeps exactly the items with s_i > sparsity_penalty: the
penalty is a relevance threshold that chooses k. With the diversity cap the cardinality is
not fixed, so the RLT equalities do not apply and the full McCormick envelope (exact on
binary x) links y to x; the cap reads: average pairwise cosine of the selection <= rho_div.
"""
from __future__ import annotations

from typing import Any

import pyomo.environ as pe
from pyomo.core.util import quicksum

from .instance import Instance
from .mip_common import BuiltModel, ModelInfo, add_pair_products, as_gram, as_scores, new_selection_model
from .mip_diversity import add_diversity_constraint, check_rho_div
from .mip_knapsack import _check_lengths, add_budget
from .validation import check_k, check_nonnegative

__all__ = ["build_sparsity"]


def build_sparsity(
    scores: Any,
    sparsity_penalty: float,
    *,
    k_min: int | None = None,
    k_max: int | None = None,
    embeddings: Any = None,
    rho_div: float | None = None,
    lengths: Any = None,
    budget: float | None = None,
) -> BuiltModel:
    """The adaptive-k model of the module docstring.

    scores : (n,) relevance or an Instance (whose E serves as embeddings when rho_div is set).
    sparsity_penalty : lambda >= 0, subtracted per selected item.
    k_min, k_max : optional bounds on the number selected (0 <= k_min <= k_max <= n).
    embeddings, rho_div : optional diversity cap (needs both).
    lengths, budget : optional token lengths and context budget.
    """
    if isinstance(scores, Instance) and embeddings is None and rho_div is not None:
        embeddings = scores
    s = as_scores(scores, "scores")
    n = s.size
    lam = check_nonnegative(sparsity_penalty, "sparsity_penalty")
    lo = 0 if k_min is None else (0 if k_min == 0 else check_k(k_min, n, "k_min"))
    hi = n if k_max is None else check_k(k_max, n, "k_max")
    if lo > hi:
        raise ValueError(f"k_min must be <= k_max, got k_min={lo}, k_max={hi}")
    m = new_selection_model(n, "sparsity")
    total = quicksum(m.x[i] for i in range(n))
    if k_min is not None and lo > 0:
        m.k_min = pe.Constraint(expr=total >= lo)
    if k_max is not None:
        m.k_max = pe.Constraint(expr=total <= hi)
    msg = []
    if rho_div is not None:
        if embeddings is None:
            raise TypeError("rho_div needs embeddings (or an Instance as scores)")
        W = as_gram(embeddings, n)
        rho = check_rho_div(rho_div)
        add_pair_products(m, n, mccormick="full")
        add_diversity_constraint(m, W, rho)
        msg.append(f"average pairwise cosine <= rho_div={rho:g}")
    if lengths is not None or budget is not None:
        if lengths is None or budget is None:
            raise TypeError("lengths and budget go together")
        b = check_nonnegative(budget, "budget")
        add_budget(m, _check_lengths(lengths, n), b)
        msg.append(f"token budget {b:g}")
    m.obj = pe.Objective(expr=quicksum(float(s[i] - lam) * m.x[i] for i in range(n)), sense=pe.maximize)
    message = f"infeasible: no selection of {lo}..{hi} items satisfies " + (" and ".join(msg) or "the constraints")
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, infeasible_message=message))
