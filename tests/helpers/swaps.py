"""Swap moves by brute force: the truth the local searches are checked against."""
import itertools

import numpy as np

from divopt_rag.models import ccbqp_objective


def brute_best_swap(inst, S):
    """max over i in S, j not in S of f(S - i + j) - f(S), by plain evaluation of f."""
    S = [int(i) for i in S]
    f0 = ccbqp_objective(inst, S)
    best = -np.inf
    for p, j in itertools.product(range(len(S)), range(inst.n)):
        if j in S:
            continue
        T = S.copy()
        T[p] = j
        best = max(best, ccbqp_objective(inst, T) - f0)
    return best
