"""The report's worst-case COSINE relevance against sampling, vertex enumeration and a plane search.

Independent truths: the perturbation the oracle returns is checked to lie in U_i and to score
what it claims; random members of U_i (vertices, boundary and interior points) never score below
the bound; in small d every vertex of U_i is enumerated (for a nonnegative worst case the vertex
minimum IS the worst case: the superlevel set {delta : cos(q, mu + delta) >= t} is convex for
t >= 0, and the k-sparse set is a union of boxes); for the l2 ball a dense search over the
boundary circle in the plane of q and mu_i reaches the closed form.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.uset_vertices import vertices
from divopt_rag.models import Instance
from divopt_rag.robust.relevance import _positive_bound, worst_case_cosine, worst_case_relevance
from divopt_rag.robust.sets import KSparse, NormBall


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _pool(n, d, seed, spread):
    """Rows around a common direction; spread 0.3 keeps cosines to q high, 3.0 mixes signs."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=d)
    E = _unit(base + spread * rng.normal(size=(n, d)))
    q = _unit(base + 0.5 * rng.normal(size=d))
    return E, q


def _cos(q, X):
    X = np.atleast_2d(X)
    return (X @ q) / (np.linalg.norm(X, axis=1) * np.linalg.norm(q))


def _samples(uset, d, rng, m, free_row=None):
    """m random members of U: boundary and interior points, plus random vertices."""
    rho = uset.rho_vec
    out = []
    for t in range(m):
        scale = 1.0 if t % 2 else rng.random()
        if isinstance(uset, NormBall) and uset.p == 2:
            v = _unit(rng.normal(size=d)) * rho * scale
        elif isinstance(uset, NormBall) and uset.p == 1:
            v = rng.laplace(size=d)
            v = v / np.abs(v).sum() * rho * scale
        elif isinstance(uset, NormBall):
            v = rho * (np.sign(rng.normal(size=d)) if t % 3 == 0 else rng.uniform(-1, 1, size=d))
        else:
            free = np.ones(d, bool) if free_row is None else free_row
            coords = np.flatnonzero(free)
            k = min(uset.attack_budget, coords.size)
            v = np.zeros(d)
            if k:
                J = rng.choice(coords, size=k, replace=False)
                v[J] = rho * (np.sign(rng.normal(size=k)) if t % 3 == 0 else rng.uniform(-1, 1, size=k))
        out.append(v)
    return np.array(out)


@pytest.mark.parametrize("rho", [0.0, 0.05, 0.3, 0.8, 1.0, 1.3])
@pytest.mark.parametrize("spread", [0.3, 3.0])
def test_l2_cosine_is_exact_attained_and_never_beaten(rho, spread):
    E, q = _pool(8, 6, seed=int(rho * 10) + int(spread), spread=spread)
    inst = Instance(E, q, k=2, theta=0.5)
    U = NormBall(2, rho)
    wc = worst_case_relevance(inst, U)
    assert wc.query_similarity == "cosine" and wc.exact.all()
    rng = np.random.default_rng(1)
    for i in range(inst.n):
        delta = wc.perturbation[i]
        assert np.linalg.norm(delta) <= rho + 1e-12
        if np.linalg.norm(E[i] + delta) > 1e-9:  # at rho = 1 the tangent point is the origin (an infimum)
            assert _cos(q, E[i] + delta)[0] == pytest.approx(wc.values[i], abs=1e-9)
        X = E[i] + _samples(U, inst.d, rng, 1500)
        X = X[np.linalg.norm(X, axis=1) > 1e-9]
        assert _cos(q, X).min() >= wc.values[i] - 1e-12
        # independent exactness check: the boundary circle in the plane of q and mu_i, densely
        if rho < 1.0:
            e1 = q
            e2 = _unit(E[i] - (E[i] @ q) * q)
            def circle(t):
                return E[i] + rho * (np.cos(t)[:, None] * e1 + np.sin(t)[:, None] * e2)

            t = np.linspace(0, 2 * math.pi, 4001)
            t0 = t[np.argmin(_cos(q, circle(t)))]
            fine = np.linspace(t0 - 2 * math.pi / 4000, t0 + 2 * math.pi / 4000, 4001)
            assert _cos(q, circle(fine)).min() == pytest.approx(wc.values[i], abs=1e-9)
        else:
            assert wc.values[i] == pytest.approx(-1.0 if rho > 1.0 else wc.values[i])


POLY = [NormBall(1, 0.15), NormBall(1, 0.6), NormBall("inf", 0.08), NormBall("inf", 0.3),
        KSparse(0.15, 2, None), KSparse(0.3, 3, 2), KSparse(0.5, 6, None)]


@pytest.mark.parametrize("uset", POLY, ids=lambda u: str(u.describe()))
@pytest.mark.parametrize("spread", [0.4, 3.0])
def test_polytope_bounds_are_sound_tight_and_attacks_are_members(uset, spread):
    E, q = _pool(6, 6, seed=7 + int(spread), spread=spread)
    inst = Instance(E, q, k=2, theta=0.5)
    wc = worst_case_relevance(inst, uset)
    free = uset.free_mask(E, q)
    rng = np.random.default_rng(3)
    for i in range(inst.n):
        row = None if free is None else free[i]
        V = np.array([E[i] + v for v in vertices(uset, inst.d, row)])
        V = V[np.linalg.norm(V, axis=1) > 1e-9]
        vmin = _cos(q, V).min()
        X = E[i] + _samples(uset, inst.d, rng, 2000, row)
        X = X[np.linalg.norm(X, axis=1) > 1e-9]
        assert wc.values[i] <= min(vmin, _cos(q, X).min()) + 1e-12  # sound
        # the attack is a member of U_i and scores what it claims (>= the bound)
        assert uset.contains(wc.perturbation[i], None if free is None else free[i : i + 1])[0]
        assert _cos(q, E[i] + wc.perturbation[i])[0] == pytest.approx(wc.attained[i], abs=1e-12)
        assert wc.attained[i] >= wc.values[i] - 1e-12
        if vmin >= 0:  # the vertex minimum is the exact worst case
            assert vmin - wc.values[i] <= 5e-3, (i, vmin, wc.values[i])
            if isinstance(uset, NormBall) and uset.p == 1:
                assert wc.values[i] == pytest.approx(vmin, abs=1e-12) and wc.exact[i]


def test_rho_zero_is_the_nominal_cosine_for_every_set():
    E, q = _pool(9, 5, seed=4, spread=1.0)
    inst = Instance(E, q, k=2, theta=0.5)
    for U in (NormBall(1, 0.0), NormBall(2, 0.0), NormBall("inf", 0.0), KSparse(0.0, 3, None), KSparse(0.2, 0, None)):
        wc = worst_case_relevance(inst, U)
        assert np.array_equal(wc.values, wc.nominal) and wc.exact.all()
        assert np.allclose(wc.nominal, E @ q, atol=1e-15) and not wc.perturbation.any()


def test_generic_positive_bound_equals_the_l2_closed_form():
    """Case (2) of the module docstring knows nothing of caps; on the l2 ball it meets case (1)."""
    E, q = _pool(30, 7, seed=5, spread=0.8)
    for rho in (0.02, 0.1, 0.3):
        U = NormBall(2, rho)
        phi = np.arccos(np.clip(E @ q, -1, 1))
        closed = np.cos(np.minimum(math.pi, phi + math.asin(rho)))
        T, _ = _positive_bound(E, q, E @ q, np.ones(30), np.full(30, rho), U, None)
        pos = closed > 0
        assert pos.sum() >= 10
        assert np.all(T[~pos] == 0.0)  # no positive certificate where the worst case is negative
        assert np.all(T[pos] <= closed[pos] + 1e-12)
        assert np.max(np.abs(T[pos] - closed[pos])) <= 1e-9


@pytest.mark.parametrize("uset", [NormBall("inf", 0.05), NormBall("inf", 0.02), NormBall(1, 0.2),
                                  KSparse(0.05, 20, 5)], ids=lambda u: str(u.describe()))
def test_bound_and_attack_bracket_the_worst_case_tightly_in_high_dimension(uset):
    """d = 128: [values, attained] contains the true worst case; the bracket is narrow."""
    E, q = _pool(25, 128, seed=6, spread=1.0)
    inst = Instance(E, q, k=2, theta=0.5)
    wc = worst_case_relevance(inst, uset)
    gap = wc.attained - wc.values
    assert np.all(gap >= -1e-12)
    assert gap.max() <= 1e-3, gap.max()
    assert (wc.values <= wc.nominal + 1e-12).all()


def test_unnormalized_rows_and_query_follow_the_cosine_definition():
    """worst_case_cosine on raw arrays: the report's cosine divides by ||q|| ||mu~_i||."""
    rng = np.random.default_rng(8)
    E = rng.normal(size=(5, 5)) * rng.uniform(0.5, 3.0, size=(5, 1)) + 1.0
    q = 2.5 * rng.normal(size=5) + 1.0
    for U in (NormBall(2, 0.4), NormBall(1, 0.4), NormBall("inf", 0.2), KSparse(0.3, 2, None)):
        nominal, values, delta, attained, _ = worst_case_cosine(E, q, U, U.free_mask(E, q))
        assert np.allclose(nominal, _cos(q, E))
        for i in range(5):
            X = E[i] + _samples(U, 5, rng, 800)
            assert _cos(q, X).min() >= values[i] - 1e-12
            assert _cos(q, E[i] + delta[i])[0] == pytest.approx(attained[i], abs=1e-12)


def test_cosine_worst_case_is_nonincreasing_in_rho_for_the_l2_ball():
    E, q = _pool(12, 6, seed=9, spread=1.0)
    inst = Instance(E, q, k=2, theta=0.5)
    prev = None
    for rho in (0.0, 0.01, 0.05, 0.2, 0.5, 0.9, 1.1):
        v = worst_case_relevance(inst, NormBall(2, rho)).values
        if prev is not None:
            assert np.all(v <= prev + 1e-12)
        prev = v


def test_inner_form_is_kept_under_its_name():
    E, q = _pool(6, 4, seed=10, spread=1.0)
    inst = Instance(E, q, k=2, theta=0.5)
    inner = worst_case_relevance(inst, NormBall("inf", 0.1), "inner")
    assert inner.query_similarity == "inner"
    assert np.allclose(inner.values, E @ q - 0.1 * np.abs(q).sum())
