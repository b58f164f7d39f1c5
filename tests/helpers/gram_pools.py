"""Small Gram-matrix pools and brute-force f for the search-kernel tests (kernels.moves, kernels.row_moves)."""
from __future__ import annotations

import itertools

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import objective


def pool(p=40, d=8, k=5, theta=0.5, seed=0):
    r = np.random.default_rng(seed)
    E = r.standard_normal((p, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = r.standard_normal(d)
    q /= np.linalg.norm(q)
    c = E @ q
    return E, q, c, np.ascontiguousarray(E @ E.T), theta * (k - 1) * c, 1.0 - theta, k, theta


def f_brute(E, q, k, theta, S):
    """f(S) from the instance (models.ccbqp.objective, float64): the independent truth."""
    inst = Instance(torch.from_numpy(E), torch.from_numpy(q), k=k, theta=theta)  # float64 rows: float64 sums
    return objective(inst, np.asarray(S))


def swaps(p, S):
    for q, j in itertools.product(range(len(S)), range(p)):
        if j not in S:
            T = S.copy()
            T[q] = j
            yield q, j, T
