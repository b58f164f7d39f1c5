"""DESIGN.md's CCBQP formulas, each checked against an independent numpy evaluation.

Every function of divopt_rag.models.ccbqp is compared with the definition written out here in plain
float64 numpy (Gram matrices, loops, finite differences), never with divopt's own code paths.
"""
import itertools

import numpy as np
import pytest

from divopt_rag.models import Instance, ccbqp_objective, exact_hit, normalized_gap, relaxed_objective
from divopt_rag.models import ccbqp
from divopt_rag.models.ccbqp import swap_gains
from divopt_rag.solvers.frank_wolfe import initial_point

from helpers.pools import random_unit, unit_query


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
    assert abs(relaxed_objective(inst, x, relax_penalty=lam) - ref) < 1e-10


def test_normalized_gap():
    assert normalized_gap(10.0, 8.0, 5) == 2.0 / 20


def test_objective_checks_the_size_unless_any_size():
    inst = Instance(random_unit(8, 3, 0), unit_query(3, 0), k=3, theta=0.5)
    with pytest.raises(ValueError, match="exactly 3 items, got 2"):
        ccbqp_objective(inst, [0, 1])
    E, c = random_unit(8, 3, 0), random_unit(8, 3, 0) @ unit_query(3, 0)
    ref = 0.5 * 2 * (c[0] + c[1]) - 0.5 * 2 * (E[0] @ E[1])
    assert ccbqp_objective(inst, [0, 1], any_size=True) == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("theta", [0.0, 0.35, 0.8])
def test_relaxed_gradient_matches_finite_differences(theta):
    E, q = random_unit(9, 4, 3), unit_query(4, 3)
    W, c = E @ E.T, E @ q
    inst = Instance(E, q, k=3, theta=theta)
    x = np.random.default_rng(1).random(9)
    x *= 3 / x.sum()
    lam = 2.0

    def f(y):  # DESIGN.md's f_lambda, plain numpy, up to a constant
        return theta * 2 * c @ y + (1 - theta) * (lam * y @ y - y @ W @ y)

    h = 1e-6
    fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(9)])
    g = ccbqp.relaxed_gradient(inst, x, relax_penalty=lam).numpy()
    assert np.allclose(g, fd, atol=1e-6)


def test_line_search_is_the_exact_maximizer_on_the_segment():
    rng = np.random.default_rng(4)
    E, q = random_unit(10, 4, 4), unit_query(4, 4)
    W = E @ E.T
    for theta, lam in [(0.2, 2.0), (0.7, 0.0), (0.5, 1.0)]:
        inst = Instance(E, q, k=3, theta=theta)
        x = initial_point(inst, "random", seed=int(rng.integers(1000))).numpy()
        g = ccbqp.relaxed_gradient(inst, x, relax_penalty=lam).numpy()
        s = np.zeros(10)
        s[np.argsort(-g)[:3]] = 1
        d = s - x
        C = ccbqp.curvature(d @ d, d @ W @ d, theta, lam)
        gamma = ccbqp.line_search(g @ d, C)
        grid = np.linspace(0, 1, 2001)
        vals = [relaxed_objective(inst, x + t * d, relax_penalty=lam) for t in grid]
        assert relaxed_objective(inst, x + gamma * d, relax_penalty=lam) >= max(vals) - 1e-9
        # the quadratic model along d is exact: f(x + t d) = f(x) + t g^T d + t^2 C / 2
        f0 = relaxed_objective(inst, x, relax_penalty=lam)
        assert vals[700] == pytest.approx(f0 + grid[700] * (g @ d) + grid[700] ** 2 * C / 2, abs=1e-9)
    batch = ccbqp.line_search(np.array([1.0, 2.0, 0.5]), np.array([1.0, -4.0, -0.25]))
    assert batch.tolist() == [1.0, 0.5, 1.0]


def test_swap_gains_match_brute_force():
    inst = Instance(random_unit(12, 5, 1), unit_query(5, 1), k=3, theta=0.45)
    S = np.array([2, 7, 9])
    D = swap_gains(inst, S).numpy()
    f0 = ccbqp_objective(inst, S)
    for p, j in itertools.product(range(3), range(12)):
        if j in S:
            assert D[j, p] == -np.inf
            continue
        T = S.copy()
        T[p] = j
        assert D[j, p] == pytest.approx(ccbqp_objective(inst, T) - f0, abs=1e-10)


def test_swap_terms_with_rows_of_any_norm_match_the_gram_definition():
    rng = np.random.default_rng(5)
    E = rng.standard_normal((9, 4))  # not unit rows
    G = E @ E.T
    lin = rng.standard_normal(9)
    theta, S = 0.4, np.array([1, 4, 6])

    def f(T):  # sum l_i + (1-theta)(|T| - sum_{i,j in T} G_ij)
        return lin[T].sum() + (1 - theta) * (len(T) - G[np.ix_(T, T)].sum())

    b, a = ccbqp.swap_terms(lin, G[:, S].sum(1), theta, sq_norms=np.diag(G))
    for p, j in itertools.product(range(3), range(9)):
        if j in S:
            continue
        T = S.copy()
        T[p] = j
        assert b[j] + a[S[p]] + 2 * (1 - theta) * G[j, S[p]] == pytest.approx(f(T) - f(S), abs=1e-12)
        assert ccbqp.gram_objective(lin, G, T, theta) == pytest.approx(f(T), abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_pairwise_mass_moves_never_decrease_relaxation(seed):
    """Tightness as proved: for lambda = 2, f_lambda is convex along e_i - e_j, so one endpoint of
    the feasible segment through a fractional point is at least as good as the point."""
    rng = np.random.default_rng(seed)
    n, k = 12, 4
    E, q = random_unit(n, 5, seed), unit_query(5, seed)
    inst = Instance(E, q, k=k, theta=rng.random())
    for _ in range(10):
        x = initial_point(inst, "random", seed=int(rng.integers(1 << 30))).numpy().astype(np.float64)
        frac = np.flatnonzero((x > 1e-9) & (x < 1 - 1e-9))
        i, j = rng.choice(frac, size=2, replace=False)
        hi, lo = min(1 - x[i], x[j]), -min(x[i], 1 - x[j])
        f0 = relaxed_objective(inst, x, relax_penalty=2.0)
        ends = []
        for t in (lo, hi):
            y = x.copy()
            y[i] += t
            y[j] -= t
            ends.append(relaxed_objective(inst, y, relax_penalty=2.0))
        assert max(ends) >= f0 - 1e-10
        # and convexity along the segment: f at the point is below the chord
        a = (0 - lo) / (hi - lo)
        assert f0 <= (1 - a) * ends[0] + a * ends[1] + 1e-10


def test_tightness_check_has_teeth_for_concave_relaxation():
    """With lambda = 0 the relaxation is concave: interior points beat both endpoints somewhere."""
    found = False
    for seed in range(20):
        E, q = random_unit(12, 5, seed), unit_query(5, seed)
        inst = Instance(E, q, k=4, theta=0.1)
        x = initial_point(inst, "random", seed=seed).numpy().astype(np.float64)
        frac = np.flatnonzero((x > 1e-9) & (x < 1 - 1e-9))
        i, j = frac[:2]
        hi, lo = min(1 - x[i], x[j]), -min(x[i], 1 - x[j])
        vals = []
        for t in (lo, hi):
            y = x.copy()
            y[i] += t
            y[j] -= t
            vals.append(relaxed_objective(inst, y, relax_penalty=0.0))
        found |= relaxed_objective(inst, x, relax_penalty=0.0) > max(vals) + 1e-9
    assert found


def test_mean_pairwise_cosine_and_its_empty_convention():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((5, 3))
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    ref = np.mean([U[i] @ U[j] for i in range(5) for j in range(i + 1, 5)])
    assert ccbqp.mean_pairwise_cosine(X) == pytest.approx(ref, abs=1e-12)
    ref_ip = np.mean([X[i] @ X[j] for i in range(5) for j in range(i + 1, 5)])
    assert ccbqp.mean_pairwise_cosine(X, normalize=False) == pytest.approx(ref_ip, abs=1e-12)
    for m in (0, 1):  # no pairs: undefined, NaN (the one convention)
        assert np.isnan(ccbqp.mean_pairwise_cosine(X[:m]))
        assert np.isnan(ccbqp.mean_pairwise(np.eye(m)))


def test_exact_hit_is_the_normalized_gap_within_tolerance():
    assert exact_hit(10.0, 10.0 - 1e-9, 5)
    assert not exact_hit(10.0, 10.0 - 1e-6, 5)
    assert ccbqp.linear_term(np.array([1.0, 2.0]), 0.5, 3).tolist() == [1.0, 2.0]
