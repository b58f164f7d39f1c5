"""Worst-case oracles: relevance of each document and a sound bound on pairwise similarity.

Notation: mu_i is row i of E (unit norm), q the query, s_i = q^T mu_i the nominal relevance,
U_i the uncertainty set of document i (:mod:`divopt_rag.robust.sets`), h_i its support function.

Worst-case relevance lives in :mod:`divopt_rag.robust.relevance` (import it from there): the report's
cosine q^T mu~_i / (||q|| ||mu~_i||) by default (exact for the l2 ball, a sound lower bound for
the l1, l_inf and k-sparse sets, each derived there), or the inner product q^T mu~_i, whose
worst case ``s_i - h_i(q)`` is exact (``s_i - rho_vec ||q||_{p*}`` for an l_p ball,
``s_i - rho_vec * (sum of the attack_budget largest |q_j| outside P_i)`` for the k-sparse set).

Worst-case inner-product similarity (sound upper bound)::

    mu~_i^T mu~_j = w_ij + mu_i^T delta_j + mu_j^T delta_i + delta_i^T delta_j
                 <= w_ij + h_j(mu_i) + h_i(mu_j) + sup delta_i^T delta_j

because the supremum of a sum is at most the sum of the suprema. Each of the three suprema
is exact on its own (sets.py), so the bound is attained whenever one perturbation pair attains
all three, e.g. mu_i = mu_j with an l2 ball: (1 + rho)^2 = 1 + 2 rho + rho^2. In general it may
be loose, never too small. Per norm: l2: w + 2 rho + rho^2; l1: w + rho (||mu_i||_inf +
||mu_j||_inf) + rho^2; linf: w + rho (||mu_i||_1 + ||mu_j||_1) + d rho^2 (large for large d: the
l_inf ball of radius rho has l2 radius sqrt(d) rho); k-sparse: w + h_j(mu_i) + h_i(mu_j) +
rho^2 min(K, |F_i ∩ F_j|).

Worst-case cosine with renormalization, cos(mu~_i, mu~_j) = mu~_i^T mu~_j / (||mu~_i|| ||mu~_j||):
U_i lies in the l2 ball of radius R_i (sets.py ``l2_radius``). For R_i < 1 the directions of
{mu_i + delta : ||delta||_2 <= R_i} form exactly the spherical cap of angular radius
alpha_i = arcsin(R_i) around mu_i (the tangent from the origin to the ball), and mu~_i != 0.
The largest cosine between two caps is that of the smallest angle between them,
``cos(max(0, phi_ij - alpha_i - alpha_j))`` with phi_ij = arccos(w_ij): attained by rotating
both vectors toward each other in the plane of mu_i, mu_j. Hence the bound is EXACT for the
l2 ball (d >= 2) and sound for l1, linf and k-sparse (their sets lie inside the l2 ball of
radius R_i). If R_i >= 1 the ball reaches the origin and the bound is 1.

The average pairwise similarity of a selected set S (|S| >= 2) is the mean over pairs i < j in
S; its worst case is at most the mean of the pairwise bounds (sup of a sum <= sum of sups).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import mean_pairwise, mean_pairwise_cosine
from divopt_rag.models.validation import check_choice, check_indices

from .relevance import check_set, pool_arrays
from .sets import UncertaintySet

__all__ = [
    "similarity_upper_bounds",
    "worst_case_average_similarity",
    "average_similarity",
    "SIMILARITIES",
]

SIMILARITIES = ("inner", "cosine")


def _pair_support(uset: UncertaintySet, E: np.ndarray, free: np.ndarray | None) -> np.ndarray:
    """H[i, j] = h_j(mu_i) = max_{delta in U_j} mu_i^T delta."""
    m = E.shape[0]
    if free is None:  # norm ball: the same set for every document
        return np.repeat(uset.support(E)[:, None], m, axis=1)
    H = np.empty((m, m))
    for j in range(m):
        H[:, j] = uset.support(E, np.broadcast_to(free[j], E.shape))
    return H


def similarity_upper_bounds(
    E: Any, uset: UncertaintySet, similarity: str = "cosine", q: Any = None, free: np.ndarray | None = None
) -> np.ndarray:
    """(m, m) matrix B with B[i, j] >= sup over U_i x U_j of the similarity of mu~_i, mu~_j.

    ``similarity="inner"``: mu~_i^T mu~_j <= w_ij + h_j(mu_i) + h_i(mu_j) + sup delta_i^T delta_j.
    ``similarity="cosine"``: cos(max(0, arccos w_ij - arcsin R_i - arcsin R_j)), 1 if R_i >= 1
    (exact for the l2 ball). Derivations in the module docstring. The diagonal is the bound for
    i = j treated as two independent documents; models only use i < j. ``q`` is needed when the
    k-sparse set protects the top-m coordinates of |q * mu_i|; ``free`` overrides the mask.
    Cost O(m^2 d) for the k-sparse set (pair-dependent free sets), O(m^2 + m d) otherwise.
    """
    uset = check_set(uset)
    check_choice(similarity, "similarity", SIMILARITIES)
    E = np.asarray(E, dtype=np.float64)
    m, d = E.shape
    if free is None:
        free = uset.free_mask(E, q)
    W = E @ E.T
    if similarity == "inner":
        H = _pair_support(uset, E, free)
        if free is None:
            C = np.full((m, m), float(uset.cross_bound(None, None, d)))
        else:
            F = free.astype(np.int64)
            C = uset.rho_vec ** 2 * np.minimum(uset.attack_budget, F @ F.T)
        return W + H + H.T + C
    norms = np.linalg.norm(E, axis=1)
    cos = np.clip(W / np.outer(norms, norms), -1.0, 1.0)
    R = np.broadcast_to(np.asarray(uset.l2_radius(free, d), dtype=np.float64), (m,))
    R = R / norms  # sin of the cap half-angle of a ball of radius R around a vector of norm ||mu_i||
    alpha = np.arcsin(np.minimum(R, 1.0))
    phi = np.arccos(cos)
    B = np.cos(np.maximum(0.0, phi - alpha[:, None] - alpha[None, :]))
    reach_origin = R >= 1.0
    B[reach_origin, :] = 1.0
    B[:, reach_origin] = 1.0
    return B


def worst_case_average_similarity(
    inst: Instance, indices: Any, uset: UncertaintySet, similarity: str = "cosine"
) -> float:
    """Sound upper bound on max over perturbations of the average pairwise similarity of S.

    Mean over pairs i < j in S of :func:`similarity_upper_bounds`; NaN when |S| < 2 (no pairs).
    For the k-sparse set with ``protected=m``, P_i is computed from document i and q alone, so
    the bound for S does not depend on the rest of the pool.
    """
    E, q, _ = pool_arrays(inst)
    idx = check_indices(indices, inst.n)
    uset = check_set(uset)
    free = uset.free_mask(E, q)
    sub_free = None if free is None else free[idx]
    return mean_pairwise(similarity_upper_bounds(E[idx], uset, similarity, q=q, free=sub_free))


def average_similarity(E: Any, indices: Any | None = None, similarity: str = "cosine") -> float:
    """Average pairwise similarity of the rows ``indices`` of a (possibly perturbed) E.

    Inner product or cosine (rows renormalized); NaN for fewer than two rows.
    """
    check_choice(similarity, "similarity", SIMILARITIES)
    X = np.asarray(E, dtype=np.float64)
    if indices is not None:
        X = X[check_indices(indices, X.shape[0])]
    return mean_pairwise_cosine(X, normalize=similarity == "cosine")
