"""Uncertainty sets and worst-case oracles against brute force over extreme points."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from helpers.uset_vertices import vertices
from divopt_rag.models import Instance
from divopt_rag.robust.oracles import average_similarity, similarity_upper_bounds, worst_case_average_similarity
from divopt_rag.robust.relevance import worst_case_relevance
from divopt_rag.robust.sets import KSparse, NormBall, make_set, protect_top


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _instance(n=7, d=6, seed=0, k=3):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=d)
    E = _unit(base + 0.9 * rng.normal(size=(n, d)))  # a narrow-ish cone: positive similarities
    q = _unit(base + 0.5 * rng.normal(size=d))
    return Instance(E, q, k=k, theta=0.5)


POLY_SETS = [NormBall(1, 0.1), NormBall("inf", 0.05), KSparse(0.1, 0, None), KSparse(0.1, 2, None),
             KSparse(0.07, 3, 2), KSparse(0.2, 6, None), KSparse(0.1, 4, 3)]


@pytest.mark.parametrize("uset", POLY_SETS, ids=lambda u: str(u.describe()))
def test_worst_case_relevance_equals_brute_force_oververtices(uset):
    """The inner-product relevance q^T mu~_i (divopt's earlier form): exact, attained at a vertex."""
    inst = _instance(seed=1)
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    wc = worst_case_relevance(inst, uset, "inner")
    free = uset.free_mask(E, q)
    for i in range(inst.n):
        row = None if free is None else free[i]
        brute = min(float(q @ (E[i] + v)) for v in vertices(uset, inst.d, row))
        assert wc.values[i] == pytest.approx(brute, abs=1e-12)
        # the returned perturbation lies in U_i and attains the worst case
        assert uset.contains(wc.perturbation[i], None if free is None else free[i : i + 1])[0]
        assert float(q @ (E[i] + wc.perturbation[i])) == pytest.approx(brute, abs=1e-12)


def test_ksparse_oracle_matches_plain_subset_enumeration_with_protection():
    """k-sparse: all coordinate subsets |J| <= K outside P_i, box per coordinate, small d."""
    rng = np.random.default_rng(5)
    d = 7
    for trial in range(20):
        a = rng.normal(size=d)
        K = int(rng.integers(0, d + 1))
        protected = rng.random(d) < 0.3
        U = KSparse(float(rng.uniform(0.01, 0.3)), K, protected)
        best = 0.0
        for size in range(K + 1):
            for J in itertools.combinations(range(d), size):
                if any(protected[j] for j in J):
                    continue
                best = max(best, U.rho_vec * sum(abs(a[j]) for j in J))
        free = U.free_mask(np.zeros((1, d)))
        assert U.support(a, free)[0] == pytest.approx(best, abs=1e-12)
        delta = U.maximizer(a, free)[0]
        assert float(a @ delta) == pytest.approx(best, abs=1e-12)
        assert np.all(delta[protected] == 0.0)


def test_l2_ball_support_is_rho_times_norm_and_sampling_never_exceeds_it():
    rng = np.random.default_rng(2)
    U = NormBall(2, 0.15)
    a = rng.normal(size=5)
    h = U.support(a)[0]
    assert h == pytest.approx(0.15 * np.linalg.norm(a))
    samples = _unit(rng.normal(size=(20000, 5))) * 0.15
    assert (samples @ a).max() <= h + 1e-12
    assert (samples @ a).max() >= 0.95 * h  # the sup is approached, the bound is not loose


def test_protected_top_m_coordinates_are_never_perturbed():
    inst = _instance(n=9, d=8, seed=3)
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    U = KSparse(0.1, 5, 3)
    wc = worst_case_relevance(inst, U, "inner")
    for i in range(inst.n):
        contrib = np.abs(q * E[i])
        top3 = sorted(range(inst.d), key=lambda j: -contrib[j])[:3]  # plain loop
        assert np.all(wc.perturbation[i, top3] == 0.0)
        assert np.count_nonzero(wc.perturbation[i]) <= 5
    # the mask helper agrees with the plain loop
    mask = protect_top(E, q, 3)
    assert mask.sum(axis=1).tolist() == [3] * inst.n


def _random_member(uset, d, rng, free_row=None):
    """A random point of U (vertex, interior or boundary)."""
    rho = uset.rho_vec
    kind = rng.integers(3)
    if isinstance(uset, NormBall):
        if uset.p == 2:
            v = _unit(rng.normal(size=d)) * rho * (1.0 if kind else rng.random())
        elif uset.p == 1:
            v = rng.normal(size=d)
            v = v / np.abs(v).sum() * rho * (1.0 if kind else rng.random())
        else:
            v = rho * (np.sign(rng.normal(size=d)) if kind else rng.uniform(-1, 1, size=d))
        return v
    free = np.ones(d, bool) if free_row is None else free_row
    coords = np.flatnonzero(free)
    m = min(uset.attack_budget, coords.size)
    J = rng.choice(coords, size=m, replace=False) if m else np.array([], int)
    v = np.zeros(d)
    v[J] = rho * (np.sign(rng.normal(size=m)) if kind else rng.uniform(-1, 1, size=m))
    return v


ALL_SETS = [NormBall(1, 0.1), NormBall(2, 0.1), NormBall("inf", 0.04), KSparse(0.1, 2, None), KSparse(0.1, 3, 2)]


@pytest.mark.parametrize("similarity", ["inner", "cosine"])
@pytest.mark.parametrize("uset", ALL_SETS, ids=lambda u: str(u.describe()))
def test_similarity_bounds_are_sound_under_sampled_and_structured_attacks(uset, similarity):
    rng = np.random.default_rng(11)
    inst = _instance(n=5, d=6, seed=4)
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    free = uset.free_mask(E, q)
    B = similarity_upper_bounds(E, uset, similarity, q=q)
    S = np.arange(inst.n)
    bound_avg = worst_case_average_similarity(inst, S, uset, similarity)
    iu = np.triu_indices(inst.n, 1)
    assert bound_avg == pytest.approx(B[iu].mean())
    worst_seen = -np.inf
    for _ in range(400):
        D = np.stack([_random_member(uset, inst.d, rng, None if free is None else free[i]) for i in range(inst.n)])
        Et = E + D
        if similarity == "cosine":
            Et = Et / np.linalg.norm(Et, axis=1, keepdims=True)
        G = Et @ Et.T
        assert np.all(G[iu] <= B[iu] + 1e-12)
        worst_seen = max(worst_seen, average_similarity(E + D, S, similarity))
    # structured attack: every document moves along the support maximizer of the pool's sum
    g = uset.maximizer(np.broadcast_to(E.sum(0), E.shape), free)
    worst_seen = max(worst_seen, average_similarity(E + g, S, similarity))
    assert worst_seen <= bound_avg + 1e-12


def test_inner_bound_attained_for_identical_documents_l2():
    mu = _unit(np.array([1.0, 2.0, 0.5]))
    E = np.stack([mu, mu])
    for rho in (0.0, 0.05, 0.3):
        B = similarity_upper_bounds(E, NormBall(2, rho), "inner")
        attacked = (mu + rho * mu) @ (mu + rho * mu)
        assert B[0, 1] == pytest.approx(attacked) == pytest.approx((1 + rho) ** 2)


@pytest.mark.parametrize("rho", [0.0, 0.05, 0.2, 0.6])
def test_cosine_bound_is_exact_for_l2_ball(rho):
    """Rotating each vector toward the other to the tangent of its ball attains the bound."""
    rng = np.random.default_rng(7)
    for _ in range(10):
        a, b = _unit(rng.normal(size=(2, 6)))
        B = similarity_upper_bounds(np.stack([a, b]), NormBall(2, rho), "cosine")
        t_a = _unit(b - (a @ b) * a)  # in-plane unit vector orthogonal to a, toward b
        t_b = _unit(a - (a @ b) * b)
        alpha = math.asin(rho)
        phi = math.acos(np.clip(a @ b, -1, 1))
        step = min(alpha, phi / 2)  # never rotate past each other
        pa = math.cos(step) * (math.cos(step) * a + math.sin(step) * t_a)
        pb = math.cos(step) * (math.cos(step) * b + math.sin(step) * t_b)
        assert np.linalg.norm(pa - a) <= rho + 1e-12 and np.linalg.norm(pb - b) <= rho + 1e-12
        attained = (pa @ pb) / (np.linalg.norm(pa) * np.linalg.norm(pb))
        assert B[0, 1] == pytest.approx(attained, abs=1e-10)


def test_cosine_bound_is_one_when_the_ball_reaches_the_origin():
    E = np.eye(3)[:2]
    B = similarity_upper_bounds(E, NormBall("inf", 0.7), "cosine")  # l2 radius sqrt(3)*0.7 > 1
    assert B[0, 1] == 1.0


def test_dual_norm_shifts_per_ball():
    inst = _instance(seed=8)
    q = inst.q.double().numpy()
    for p, pstar in ((1, np.inf), (2, 2), (np.inf, 1)):
        wc = worst_case_relevance(inst, NormBall(p, 0.03), "inner")
        assert np.allclose(wc.shift, 0.03 * np.linalg.norm(q, pstar))


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="p must be one of"):
        NormBall(3, 0.1)
    with pytest.raises(ValueError, match="rho_vec"):
        NormBall(2, -0.1)
    with pytest.raises(ValueError, match="attack_budget"):
        KSparse(0.1, -1)
    with pytest.raises(ValueError, match="protected"):
        KSparse(0.1, 2, np.array([1, 0, 1]))
    with pytest.raises(ValueError, match="unknown uncertainty set"):
        make_set("l3", 0.1)
    with pytest.raises(ValueError, match="attack_budget"):
        make_set("ksparse", 0.1)
    rng = np.random.default_rng(0)
    E = _unit(rng.normal(size=(4, 3)))
    inst = Instance(E, relevance=np.ones(4), k=2, theta=0.5)
    with pytest.raises(ValueError, match="query vector q"):
        worst_case_relevance(inst, NormBall(2, 0.1))
    with pytest.raises(ValueError, match="query_similarity"):
        worst_case_relevance(Instance(E, _unit(np.ones(3)), k=2, theta=0.5), NormBall(2, 0.1), "dot")
    with pytest.raises(ValueError, match="similarity"):
        similarity_upper_bounds(E, NormBall(2, 0.1), "euclid")
    with pytest.raises(ValueError, match="protected mask must have shape"):
        KSparse(0.1, 1, np.zeros(5, bool)).free_mask(E)
