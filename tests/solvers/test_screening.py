"""Safe screening never removes an optimal item; bounds bound; certificates match brute force.

The truth is enumeration of every k-subset with divopt_rag.models.ccbqp_objective in a plain loop
(the lead's objective), independent of the vectorized brute force and of the screening code.
"""
import itertools

import numpy as np
import pytest
import torch

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.solve_results import Result
from divopt_rag.solvers import bounds, certificates, exact, screening


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _random_instance(rng, with_query=True):
    n = int(rng.integers(7, 13))
    d = int(rng.integers(2, 6))
    k = int(rng.integers(2, 5))
    theta = float(rng.choice([rng.uniform(0.05, 1.0), rng.uniform(0.7, 1.0), 1.0]))
    if rng.random() < 0.5:  # a narrow cone with near-duplicates, where screening has work to do
        base = _unit(rng.standard_normal(d))
        E = _unit(base + rng.uniform(0.2, 1.0) * rng.standard_normal((n, d)))
    else:
        E = _unit(rng.standard_normal((n, d)))
    q = _unit(rng.standard_normal(d) + (E[0] if rng.random() < 0.5 else 0))
    if with_query:
        return Instance(E, q, k=k, theta=theta)
    return Instance(E, relevance=rng.uniform(-1, 1, size=n), k=k, theta=theta)


def _all_optima(inst, atol=1e-9):
    vals = {S_: ccbqp_objective(inst, list(S_)) for S_ in itertools.combinations(range(inst.n), inst.k)}
    best = max(vals.values())
    return best, [S_ for S_, v in vals.items() if v >= best - atol]


@pytest.mark.parametrize("rule", ["per_item", "design"])
@pytest.mark.parametrize("exact_below", [10_000, 0])  # exact cosines / cheap geometric bounds
def test_screening_never_removes_an_optimal_item(rule, exact_below):
    rng = np.random.default_rng(12345)
    screen = screening.safe_screen if rule == "per_item" else screening.design_screen
    removed_total = 0
    for trial in range(60):
        inst = _random_instance(rng, with_query=trial % 4 != 0)
        best, optima = _all_optima(inst)
        res = screen(inst, exact_below=exact_below)
        keep = set(res.survivors.tolist())
        for opt in optima:
            assert set(opt) <= keep, (trial, rule, inst, opt, res)
        removed_total += inst.n - res.n_survivors
    assert removed_total > 0, "screening removed nothing on any instance: the test would be vacuous"


def test_per_item_rule_dominates_design_rule_on_exact_cosines():
    rng = np.random.default_rng(7)
    for _ in range(20):
        inst = _random_instance(rng)
        a = screening.safe_screen(inst).n_survivors
        b = screening.design_screen(inst).n_survivors
        assert a <= b


def test_upper_bounds_bound_the_brute_force_optimum():
    rng = np.random.default_rng(99)
    for trial in range(25):
        inst = _random_instance(rng, with_query=trial % 3 != 0)
        best, _ = _all_optima(inst)
        ub, info = bounds.upper_bound(inst, exact_below=10_000 if trial % 2 else 0)
        assert info["concave_bound"] >= best - 1e-9
        assert info["item_bound"] >= best - 1e-9
        assert ub == pytest.approx(min(info["concave_bound"], info["item_bound"]))


def test_brute_force_matches_plain_enumeration():
    rng = np.random.default_rng(3)
    for _ in range(5):
        inst = _random_instance(rng)
        best, optima = _all_optima(inst)
        idx, val, allopt = exact.brute_force(inst, return_all=True)
        assert val == pytest.approx(best, abs=1e-9)
        assert {tuple(sorted(o)) for o in allopt} == {tuple(o) for o in optima}
    with pytest.raises(ValueError, match="max_sets"):
        exact.brute_force(Instance(_unit(np.ones((30, 2)) + np.eye(30, 2)), relevance=np.zeros(30), k=10, theta=0.5),
                      max_sets=10)


def _clustered(rng, n, d, k):
    """An instance of n unit rows around a random direction, its query near it, theta drawn from .5/.8/.95."""
    base = _unit(rng.standard_normal(d))
    E = _unit(base + 0.6 * rng.standard_normal((n, d)))
    q = _unit(base + 0.3 * rng.standard_normal(d))
    return Instance(E, q, k=k, theta=float(rng.choice([0.5, 0.8, 0.95])))


def test_certify_full_scale_against_brute_force():
    rng = np.random.default_rng(2024)
    certified = 0
    for trial in range(12):
        inst = _clustered(rng, n=24, d=4, k=3)
        best, optima = _all_optima(inst)
        cert = certificates.certify_full_scale(inst, max_exact=14, exact_solver="brute")
        assert cert.upper_bound >= best - 1e-9
        assert cert.incumbent_objective <= best + 1e-9
        assert ccbqp_objective(inst, cert.incumbent) == pytest.approx(cert.incumbent_objective)
        if cert.certified:
            certified += 1
            assert cert.incumbent_objective == pytest.approx(best, abs=1e-9)
            assert cert.bound_gap == pytest.approx(0.0, abs=1e-6)
        else:
            assert cert.bound_gap >= 0
    assert certified > 0


def test_certify_full_scale_warm_start_is_the_incumbent_unless_beaten_or_screened_out():
    """warm_start: an optimal k-set (enumeration's) becomes the incumbent ("used"); a set that
    safe screening cuts is not optimal (screening keeps every optimal set) and is not used."""
    rng = np.random.default_rng(7)
    seen = set()
    for trial in range(12):
        inst = _clustered(rng, n=16, d=4, k=3)
        best, optima = _all_optima(inst)
        cert = certificates.certify_full_scale(inst, max_exact=16, exact_solver="brute", warm_start=optima[0])
        assert cert.info["warm_start"] == "used"
        assert cert.incumbent_objective == pytest.approx(best, abs=1e-9)
        kept = set(screening.safe_screen(inst).survivors.tolist())
        worst = np.argsort(inst.relevance.numpy(), kind="stable")[: inst.k]  # the least relevant items
        cert = certificates.certify_full_scale(inst, max_exact=16, exact_solver="brute", warm_start=worst)
        seen.add(cert.info["warm_start"])
        if not set(worst.tolist()) <= kept:
            assert cert.info["warm_start"] == "screened out"
        assert cert.incumbent_objective == pytest.approx(best, abs=1e-9)  # enumeration still finds the optimum
    assert "screened out" in seen


def test_screening_keeps_low_precision_storage_safe():
    # float16 rows are unit only to ~1e-3: the slack must keep the optimum in the pool
    rng = np.random.default_rng(5)
    for _ in range(10):
        inst64 = _random_instance(rng)
        inst = inst64.to(dtype=torch.float16)
        best, optima = _all_optima(inst)
        keep = set(screening.safe_screen(inst, exact_below=0).survivors.tolist())
        assert all(set(o) <= keep for o in optima)


def test_pair_bound_and_incumbent_screening_against_brute_force():
    rng = np.random.default_rng(77)
    removed = 0
    for trial in range(40):
        inst = _random_instance(rng, with_query=trial % 3 != 0)
        best, optima = _all_optima(inst)
        UB = screening.pair_bounds(inst).numpy()
        # UB_i bounds every k-set containing i: check all sets, not only the optima
        for s_ in itertools.combinations(range(inst.n), inst.k):
            f = ccbqp_objective(inst, list(s_))
            assert all(UB[i] >= f - 1e-9 for i in s_)
        # the strongest legitimate lower bound (OPT itself) must never remove an optimal item
        res, ub = screening.incumbent_screen(inst, best)
        assert ub >= best - 1e-9
        keep = set(res.survivors.tolist())
        assert all(set(o) <= keep for o in optima)
        removed += inst.n - res.n_survivors
    assert removed > 0
    with pytest.raises(ValueError, match="not an incumbent"):
        screening.incumbent_screen(inst, best + 1e6)


def test_exact_optimum_is_one_result_type_for_enumeration_and_mip():
    """Enumeration and a MIP solver return the same Result type and agree with plain enumeration."""
    rng = np.random.default_rng(8)
    inst = _random_instance(rng)
    best, optima = _all_optima(inst)
    brute = exact.exact_optimum(inst, "brute")
    mip = exact.exact_optimum(inst, "highs")
    for r in (brute, mip):
        assert isinstance(r, Result) and r.proven_optimal and r.objective == pytest.approx(best, abs=1e-6)
        assert r.bound >= best - 1e-6 and r.seconds > 0
    assert brute.solver == "brute" and brute.gap == 0.0 and tuple(brute.indices) in {tuple(o) for o in optima}
    assert mip.solver == "highs" and mip.info["solve_seconds"] <= mip.seconds
    assert exact.exact_optimum(inst).solver == "brute"  # "auto" enumerates small pools
