"""Knapsack, diversity-constrained and sparsity models against sorting and brute force."""
import itertools

import numpy as np
import pytest

from divopt_rag.models import Instance
from divopt_rag.models.mip_diversity import build_diversity
from divopt_rag.models.mip_knapsack import build_knapsack, build_topk
from divopt_rag.models.mip_sparsity import build_sparsity
from divopt_rag.solvers import available_solvers, solve

SOLVERS = available_solvers()


def _pool(n, d, seed):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((max(n // 3, 1), d))
    E = centers[rng.integers(0, centers.shape[0], n)] + 0.3 * rng.standard_normal((n, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    return E, rng.uniform(0, 1, n)


def _avg_cos_loop(E, S):
    """Average pairwise cosine by a plain double loop."""
    S = list(S)
    if len(S) < 2:
        return 0.0
    tot, cnt = 0.0, 0
    for a in range(len(S)):
        for b in range(a + 1, len(S)):
            tot += float(np.dot(E[S[a]], E[S[b]]))
            cnt += 1
    return tot / cnt


def _all_subsets(n, sizes=None):
    for r in (range(n + 1) if sizes is None else sizes):
        yield from itertools.combinations(range(n), r)


@pytest.mark.parametrize("solver", SOLVERS)
def test_topk_model_equals_sorting(solver):
    rng = np.random.default_rng(0)
    s = rng.standard_normal(30)
    for k in (1, 7):
        r = solve(build_topk(s, k), solver)
        assert r.proven_optimal and r.solver == solver
        np.testing.assert_array_equal(r.indices, np.sort(np.argsort(-s)[:k]))
        assert r.objective == pytest.approx(np.sort(s)[::-1][:k].sum(), abs=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_knapsack_token_budget_vs_brute_force(solver):
    rng = np.random.default_rng(1)
    n = 12
    s = rng.uniform(0, 1, n)
    lengths = rng.integers(50, 400, n)
    for budget, k in ((900, None), (1000, 4)):
        best = max(
            (s[list(S)].sum() for S in _all_subsets(n, None if k is None else [k])
             if lengths[list(S)].sum() <= budget),
        )
        r = solve(build_knapsack(s, lengths, budget, k=k), solver)
        assert r.proven_optimal
        assert lengths[r.indices].sum() <= budget
        assert k is None or r.indices.size == k
        assert r.objective == pytest.approx(best, abs=1e-6)
        assert s[r.indices].sum() == pytest.approx(best, abs=1e-6)


def test_knapsack_infeasible_and_bad_input():
    s = np.ones(5)
    r = solve(build_knapsack(s, [100] * 5, 250, k=3), "highs")
    assert r.status == "infeasible" and not r.proven_optimal
    assert "budget" in r.message and r.indices.size == 0 and r.objective is None
    with pytest.raises(ValueError, match="lengths"):
        build_knapsack(s, [1, 2, -3, 4, 5], 10)
    with pytest.raises(ValueError, match="lengths"):
        build_knapsack(s, [1, 2, 3], 10)
    with pytest.raises(ValueError, match="budget"):
        build_knapsack(s, [1] * 5, -1)
    with pytest.raises(ValueError, match="k"):
        build_topk(s, 6)


def _diverse_brute_force(E, s, k, rho):
    best, arg = -np.inf, None
    for S in itertools.combinations(range(len(s)), k):
        if _avg_cos_loop(E, S) <= rho + 1e-12 and s[list(S)].sum() > best:
            best, arg = s[list(S)].sum(), S
    return best, arg


@pytest.mark.parametrize("solver", SOLVERS)
def test_diversity_never_exceeds_rho_div_and_matches_brute_force(solver):
    E, s = _pool(12, 5, 2)
    k = 4
    top = np.argsort(-s)[:k]
    rho_top = _avg_cos_loop(E, top)
    checked = 0
    for rho in (rho_top - 0.25, rho_top - 0.1, 0.9):
        best, _ = _diverse_brute_force(E, s, k, rho)
        if not np.isfinite(best):
            continue
        checked += 1
        r = solve(build_diversity(s, E, k, rho), solver)
        assert r.proven_optimal, r.status
        assert r.indices.size == k
        assert _avg_cos_loop(E, r.indices) <= rho + 1e-7
        assert r.objective == pytest.approx(best, abs=1e-6)
    assert checked >= 2


def test_diversity_without_rlt_same_optimum_and_instance_input():
    E, s = _pool(11, 5, 3)
    inst = Instance(E, relevance=s, k=3, theta=0.5)
    a = solve(build_diversity(inst, rho_div=0.2), "highs")
    b = solve(build_diversity(s, E, 3, 0.2, rlt=False), "highs")
    best, _ = _diverse_brute_force(E, s, 3, 0.2)
    assert a.proven_optimal and b.proven_optimal
    assert a.objective == pytest.approx(best, abs=1e-6) and b.objective == pytest.approx(best, abs=1e-6)


def test_diversity_with_token_budget_vs_brute_force():
    E, s = _pool(10, 4, 4)
    lengths = np.random.default_rng(4).integers(100, 300, 10)
    sets = list(itertools.combinations(range(10), 3))
    rho = float(np.median([_avg_cos_loop(E, S) for S in sets]))  # a cap that binds for half the sets
    best = -np.inf
    for S in sets:
        if _avg_cos_loop(E, S) <= rho and lengths[list(S)].sum() <= 600:
            best = max(best, s[list(S)].sum())
    assert np.isfinite(best)
    r = solve(build_diversity(s, E, 3, rho, lengths=lengths, budget=600), "highs")
    assert r.proven_optimal and r.objective == pytest.approx(best, abs=1e-6)
    assert lengths[r.indices].sum() <= 600 and _avg_cos_loop(E, r.indices) <= rho + 1e-7


@pytest.mark.parametrize("solver", SOLVERS)
def test_infeasible_rho_div_is_reported_with_a_message(solver):
    E, s = _pool(9, 4, 5)
    # the least redundant 3-set by brute force; a cap below it is infeasible
    least = min(_avg_cos_loop(E, S) for S in itertools.combinations(range(9), 3))
    r = solve(build_diversity(s, E, 3, least - 0.05), solver)
    assert r.status == "infeasible" and not r.proven_optimal
    assert "rho_div" in r.message and "infeasible" in r.message
    assert r.objective is None and r.indices.size == 0


def test_diversity_bad_input():
    E, s = _pool(6, 3, 6)
    with pytest.raises(TypeError, match="rho_div"):
        build_diversity(s, E, 2, "high")
    with pytest.raises(ValueError, match="rho_div"):
        build_diversity(s, E, 2, float("nan"))
    with pytest.raises(ValueError, match="embeddings"):
        build_diversity(s, E[:5], 2, 0.5)
    with pytest.raises(ValueError, match="k"):
        build_diversity(s, E, 7, 0.5)


def test_sparsity_threshold_and_bounds_vs_brute_force():
    E, s = _pool(12, 5, 7)
    lam = 0.55
    r = solve(build_sparsity(s, lam), "highs")
    assert r.proven_optimal
    np.testing.assert_array_equal(r.indices, np.flatnonzero(s > lam))
    for k_min, k_max, rho in ((None, 3, None), (6, None, None), (2, 5, 0.3), (None, None, 0.2)):
        sizes = range(0 if k_min is None else k_min, (12 if k_max is None else k_max) + 1)
        best = max(
            s[list(S)].sum() - lam * len(S)
            for S in _all_subsets(12, sizes)
            if rho is None or _avg_cos_loop(E, S) <= rho + 1e-12
        )
        m = build_sparsity(s, lam, k_min=k_min, k_max=k_max,
                           embeddings=None if rho is None else E, rho_div=rho)
        r = solve(m, "highs")
        assert r.proven_optimal
        assert r.objective == pytest.approx(best, abs=1e-6), (k_min, k_max, rho)
        assert (k_min or 0) <= r.indices.size <= (k_max or 12)
        if rho is not None:
            assert _avg_cos_loop(E, r.indices) <= rho + 1e-7


@pytest.mark.parametrize("solver", [s for s in SOLVERS if s != "highs"])
def test_sparsity_with_diversity_other_solvers(solver):
    E, s = _pool(10, 4, 8)
    lam = 0.3
    best = max(s[list(S)].sum() - lam * len(S) for S in _all_subsets(10) if _avg_cos_loop(E, S) <= 0.25)
    r = solve(build_sparsity(s, lam, embeddings=E, rho_div=0.25), solver)
    assert r.proven_optimal and r.objective == pytest.approx(best, abs=1e-6)


def test_sparsity_bad_input():
    s = np.linspace(0, 1, 5)
    with pytest.raises(ValueError, match="sparsity_penalty"):
        build_sparsity(s, -1.0)
    with pytest.raises(ValueError, match="k_min"):
        build_sparsity(s, 0.1, k_min=4, k_max=2)
    with pytest.raises(TypeError, match="embeddings"):
        build_sparsity(s, 0.1, rho_div=0.3)
