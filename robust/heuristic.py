"""A feasible starting set for the robust sparsity models: greedy peeling.

The models of :mod:`divopt_rag.robust.models` maximize sum_{i in S} w_i (w_i = r_i - lambda, the
worst-case relevance minus the sparsity penalty) subject to the robust diversity row

    T(S) = sum_{i<j in S} a_ij <= 0,    a_ij = B_ij - rho_div,

(B the sound pairwise similarity bounds: the average of B over the pairs of S is at most
rho_div) and optionally |S| <= max_size. When the a_ij have mixed signs the McCormick relaxation
is weak (its bound can sit at sum_i max(w_i, 0)) and a MIP solver may stop at its time limit
with a poor incumbent (e.g. one document where hundreds fit). :func:`peel` gives the solver a
good feasible set to start from in O(n^2):

1. start from every document with w_i > 0 (the best any set could do), the max_size most
   valuable ones if capped;
2. while T(S) > 0 and |S| >= 2: remove the document with the largest g_i / w_i, where
   g_i = sum_{j in S, j != i} a_ij is its share of the violation (only g_i > 0 are candidates):
   the most violation shed per unit of objective lost;
3. add back, by decreasing w_j, every document with w_j > 0 whose entry keeps T <= 0 and the cap.

The result is feasible (T(S) <= 0 or |S| <= 1, within max_size); it is a heuristic, not an
optimum: the solver proves or improves it.
"""
from __future__ import annotations

import numpy as np

__all__ = ["peel"]


def peel(weights: np.ndarray, a: np.ndarray, max_size: int | None = None) -> np.ndarray:
    """A feasible set of the robust sparsity model (module docstring), sorted row indices.

    weights : (n,) w_i = r_i - lambda. a : (n, n) symmetric a_ij = B_ij - rho_div (diagonal
    ignored). max_size : the cap on |S| (None: none).
    """
    w = np.asarray(weights, dtype=np.float64)
    A = np.array(a, dtype=np.float64)
    np.fill_diagonal(A, 0.0)
    order = np.argsort(-w, kind="stable")
    start = order[w[order] > 0]
    if max_size is not None:
        start = start[: int(max_size)]
    inside = np.zeros(w.size, dtype=bool)
    inside[start] = True
    g = A[:, inside].sum(axis=1)  # g_i = sum_{j in S} a_ij (a_ii = 0)
    total = 0.5 * float(g[inside].sum())
    while total > 1e-12 and inside.sum() >= 2:
        cand = np.flatnonzero(inside & (g > 0))
        r = int(cand[np.argmax(g[cand] / np.maximum(w[cand], 1e-12))])
        inside[r] = False
        total -= float(g[r])
        g -= A[:, r]
    for j in order:
        if w[j] <= 0:
            break
        if inside[j] or (max_size is not None and inside.sum() >= max_size):
            continue
        if inside.sum() == 0 or total + g[j] <= 1e-12:
            inside[j] = True
            total += float(g[j])
            g += A[:, j]
    return np.flatnonzero(inside).astype(np.int64)
