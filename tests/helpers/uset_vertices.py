"""The extreme points of a polyhedral uncertainty set, by plain enumeration: the independent
truth of the robust tests (a linear or support optimum over U is attained at one of them, and
a quasi-concave function such as the cosine takes its minimum over U at one of them)."""
from __future__ import annotations

import itertools
import math
from typing import Iterator

import numpy as np

from divopt_rag.robust import KSparse, NormBall

__all__ = ["vertices"]


def vertices(uset, d: int, free_row: np.ndarray | None = None) -> Iterator[np.ndarray]:
    """Every extreme point of ``uset`` in R^d: the 2d signed unit vectors (scaled by rho_vec)
    of the l1 ball, the 2^d sign vectors of the l_inf ball, and for the k-sparse set every
    sign pattern on at most ``attack_budget`` of the free coordinates (``free_row``: the
    coordinates the adversary may change, None = all), the zero vector included."""
    rho = uset.rho_vec
    if isinstance(uset, NormBall) and uset.p == 1:
        for j in range(d):
            for sgn in (-1.0, 1.0):
                v = np.zeros(d)
                v[j] = sgn * rho
                yield v
    elif isinstance(uset, NormBall) and uset.p == math.inf:
        for signs in itertools.product((-1.0, 1.0), repeat=d):
            yield rho * np.array(signs)
    elif isinstance(uset, KSparse):
        free = np.ones(d, bool) if free_row is None else free_row
        coords = [j for j in range(d) if free[j]]
        for size in range(min(uset.attack_budget, len(coords)) + 1):
            for J in itertools.combinations(coords, size):
                for signs in itertools.product((-1.0, 1.0), repeat=size):
                    v = np.zeros(d)
                    v[list(J)] = rho * np.array(signs)
                    yield v
    else:
        raise AssertionError(f"{uset!r} has no finite vertex set")
