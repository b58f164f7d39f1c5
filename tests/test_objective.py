import itertools

import numpy as np

from divopt.models import Instance, ccbqp_objective, normalized_gap, relaxed_objective

from conftest import random_unit, unit_query


def test_objective_equals_pairwise_definition():
    E, q = random_unit(12, 5, 0), unit_query(5, 0)
    W, c = E @ E.T, E @ q
    for theta in (0.0, 0.3, 1.0):
        inst = Instance(E, q, k=4, theta=theta)
        for S in [(0, 1, 2, 3), (2, 5, 7, 11)]:
            # x^T (I - W) x = k - sum_{i,j in S} w_ij = -sum over ordered pairs i != j of w_ij
            pairs = sum(W[i, j] for i in S for j in S if i != j)
            ref = theta * 3 * c[list(S)].sum() - (1 - theta) * pairs
            assert abs(ccbqp_objective(inst, S) - ref) < 1e-10


def test_relaxed_equals_binary_on_vertices_and_matches_quadratic_form():
    E, q = random_unit(10, 4, 1), unit_query(4, 1)
    W, c = E @ E.T, E @ q
    inst = Instance(E, q, k=3, theta=0.6)
    for S in itertools.islice(itertools.combinations(range(10), 3), 20):
        x = np.zeros(10)
        x[list(S)] = 1
        assert abs(relaxed_objective(inst, x) - ccbqp_objective(inst, S)) < 1e-10
    rng = np.random.default_rng(0)
    x = rng.random(10)
    x *= 3 / x.sum()
    lam = 2.0
    # theta (k-1) c^T x + (1-theta) (k - x^T W x) + (1-theta) lam (||x||^2 - k): gradient
    # theta (k-1) c + 2 (1-theta)(lam x - W x), as in DESIGN.md
    ref = 0.6 * 2 * c @ x + 0.4 * (3 - x @ W @ x) + 0.4 * lam * (x @ x - 3)
    assert abs(relaxed_objective(inst, x, lam) - ref) < 1e-10


def test_normalized_gap():
    assert normalized_gap(10.0, 8.0, 5) == 2.0 / 20
