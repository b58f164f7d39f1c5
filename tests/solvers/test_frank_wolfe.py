"""Frank-Wolfe: the paper's Algorithm 1 ("fw") against a plain transcription, divopt's variants
("fw_ws", "fw_topk"): monotone, integral output, certified working set, bounds vs brute force."""
import itertools

import numpy as np
import pytest
import torch

from divopt_rag.models import Instance, ccbqp_objective, relaxed_objective
from divopt_rag.solvers import select
from divopt_rag.solvers.frank_wolfe import fw_relaxation, initial_point

from helpers.fw_paper import algorithm1_transcription
from helpers.pools import planted_duplicates, random_unit, unit_query


def brute_force(inst):
    best, arg = -np.inf, None
    for S in itertools.combinations(range(inst.n), inst.k):
        v = ccbqp_objective(inst, S)
        if v > best:
            best, arg = v, S
    return best, arg


@pytest.mark.parametrize("init", ["topk", "uniform", "random"])
def test_trace_non_decreasing_and_output_integral(init):
    for s in range(5):
        E = planted_duplicates(10, 6, 16, s)
        inst = Instance(E, unit_query(16, s), k=7, theta=[0.2, 0.5, 0.8, 0.4, 0.6][s])
        sel = select(inst, "fw_ws", init=init, seed=s)
        tr = np.array(sel.info["trace"])
        assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr).max()), tr
        assert sel.info["converged"]
        assert len(set(sel.indices.tolist())) == 7
        # the final relaxed value is attained by the returned binary set
        assert abs(tr[-1] - sel.objective) < 1e-6 * max(1, abs(sel.objective))


def test_analytic_trace_matches_exact_recomputation():
    """The closed-form scalar updates (no O(n) dot products) agree with recomputing f_lambda."""
    for s in range(4):
        inst = Instance(planted_duplicates(12, 8, 16, s), unit_query(16, s), k=9, theta=0.3 + 0.1 * s)
        x0 = initial_point(inst, "random", seed=s)
        fast = fw_relaxation(inst, x0, max_iter=60)
        exact = relaxed_objective(inst, fast.x.numpy())  # recomputed from x, independently
        assert abs(fast.trace[-1] - exact) < 1e-6 * max(1.0, abs(exact))
        assert abs(fast.value - exact) < 1e-6 * max(1.0, abs(fast.value))


def test_iteration_cap_is_reported():
    E = random_unit(200, 6, 0)
    sel = select(Instance(E, unit_query(6, 0), k=20, theta=0.3), "fw_ws", init="uniform", max_iter=1)
    assert not sel.info["converged"] and "iteration cap" in sel.info["stopped"]
    assert len(set(sel.indices.tolist())) == 20


@pytest.mark.parametrize("seed", range(8))
def test_fw_never_exceeds_binary_optimum_and_concave_bound_dominates(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 15))
    k = int(rng.integers(2, 6))
    E = planted_duplicates(n // 2, 2, 6, seed)[:n] if seed % 2 else random_unit(n, 6, seed)
    inst = Instance(E, unit_query(6, seed), k=k, theta=float(rng.uniform(0.05, 0.95)))
    opt, _ = brute_force(inst)
    for start in range(6):
        x0 = initial_point(inst, "random", seed=100 * seed + start)
        res = fw_relaxation(inst, x0, relax_penalty=2.0)
        assert res.value <= opt + 1e-7 * max(1, abs(opt))
        sel = select(inst, "fw_ws", init=x0.numpy())
        assert select(inst, "fw", init=x0.numpy()).objective <= opt + 1e-9
        assert sel.objective <= opt + 1e-9
    # lambda = 0: concave, value + FW gap bounds the optimum from above
    up = fw_relaxation(inst, initial_point(inst, "uniform"), relax_penalty=0.0, max_iter=200)
    assert up.value + max(up.gap, 0.0) >= opt - 1e-7


def test_fw_explicit_init_validated():
    inst = Instance(random_unit(10, 4, 0), unit_query(4, 0), k=3, theta=0.5)
    with pytest.raises(ValueError, match=r"sum\(x\) = k = 3"):
        select(inst, "fw", init=np.full(10, 0.5))
    with pytest.raises(ValueError, match=r"^The 'init' parameter of fw must be a str among \{'random', 'topk', 'uniform'\}"):
        select(inst, "fw", init="bogus")


def test_fw_half_precision_matches_float32_relevance_order():
    E = planted_duplicates(30, 8, 64, 1).astype(np.float32)
    q = unit_query(64, 1).astype(np.float32)
    s32 = select(Instance(E, q, k=10, theta=0.7), "fw_ws")
    s16 = select(Instance(torch.from_numpy(E).half(), q, k=10, theta=0.7), "fw_ws")
    assert s16.info["converged"]
    inst32 = Instance(E, q, k=10, theta=0.7)
    # the fp16 selection is scored on the float32 data: it must be a comparable local optimum
    assert ccbqp_objective(inst32, s16.indices) >= 0.98 * s32.objective


@pytest.mark.parametrize("theta", [0.2, 0.5, 0.8])
def test_working_set_result_is_certified_stationary_on_full_pool(theta):
    """The working-set variant's output must pass the plain FW stopping rule on the FULL pool:
    with x the returned indicator, max over k-sets s of grad^T (s - x) <= tol (computed here from
    scratch in numpy)."""
    from divopt_rag.data.synthetic import narrow_cone

    E, q, _ = narrow_cone(6000, 24, seed=3)
    inst = Instance(E.astype(np.float64), q.astype(np.float64), k=12, theta=theta)
    sel = select(inst, "fw_ws", working_set=300)
    assert sel.info["working_set"] is not None and sel.info["converged"]
    x = np.zeros(inst.n)
    x[sel.indices] = 1
    c = E.astype(np.float64) @ q.astype(np.float64)
    g = theta * 11 * c + 2 * (1 - theta) * (2 * x - E.astype(np.float64) @ (E.astype(np.float64).T @ x))
    top = np.sort(g)[-12:].sum()
    assert top - g @ x <= 1e-6 * 12 * 11 + 1e-9
    tr = np.array(sel.info["trace"])
    assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr).max())
    # plain FW from the same start is also stationary; both are valid local maxima
    plain = select(inst, "fw_topk")
    assert plain.info["working_set"] is None and plain.info["converged"]


def test_non_tight_penalty_rounds_once_instead_of_cycling():
    """relax_penalty in [1, 2): the relaxation is not tight, FW must stop at a rounded vertex
    whose f_lambda is at least the fractional stationary value (pairwise moves are convex for
    lambda >= 1 only when w_ij >= 0, so the check uses a narrow cone where all w_ij > 0)."""
    from divopt_rag.data.synthetic import narrow_cone

    E, q, _ = narrow_cone(300, 16, seed=4)
    inst = Instance(E.astype(np.float64), q.astype(np.float64), k=8, theta=0.3)
    sel = select(inst, "fw_topk", relax_penalty=1.0, init="uniform", max_iter=1000)
    assert sel.iterations < 1000 and sel.info["roundings"] <= 1
    assert len(set(sel.indices.tolist())) == 8


def test_replace_relevance_and_query():
    E, q = random_unit(20, 5, 0), unit_query(5, 0)
    inst = Instance(E, q, k=3, theta=0.5)
    c = np.arange(20.0)
    r = inst.replace(relevance=c, theta=0.2)
    assert r.theta == 0.2 and r.E is inst.E and np.array_equal(r.relevance.numpy(), c)
    q2 = unit_query(5, 1)
    np.testing.assert_allclose(inst.replace(q=q2).relevance.numpy(), E @ q2, atol=1e-12)
    with pytest.raises(ValueError, match="relevance must have length 20"):
        inst.replace(relevance=np.ones(3))




@pytest.mark.parametrize("seed", range(12))
def test_fw_is_the_papers_algorithm_1(seed):
    rng = np.random.default_rng(seed)
    n, d, k = int(rng.integers(30, 120)), int(rng.integers(4, 24)), int(rng.integers(2, 12))
    E = planted_duplicates(n // 3, 3, d, seed)[:n] if seed % 2 else random_unit(n, d, seed)
    n = E.shape[0]
    q = unit_query(d, seed)
    for theta in (0.0, 0.3, 0.6, 0.9, 1.0):
        ref_set, ref_x = algorithm1_transcription(E, q, k, theta)
        sel = select(Instance(E, q, k=k, theta=theta), "fw")
        assert set(sel.indices.tolist()) == ref_set, (seed, theta)
        assert sel.iterations <= 200
        # the returned order is decreasing x, ties by relevance: a deterministic set order
        xs = ref_x[sel.indices]
        assert np.all(np.diff(xs) <= 1e-9)


def test_fw_on_float32_pools_matches_the_float64_transcription():
    hits = 0
    for seed in range(10):
        E = planted_duplicates(20, 4, 32, seed).astype(np.float32)
        q = unit_query(32, seed).astype(np.float32)
        ref_set, _ = algorithm1_transcription(E, q, 8, 0.5)
        hits += set(select(Instance(E, q, k=8, theta=0.5), "fw").indices.tolist()) == ref_set
    assert hits == 10


def test_fw_variants_are_registered_with_their_own_defaults():
    import inspect

    from divopt_rag.solvers import METHODS

    fw = inspect.signature(METHODS["fw"]).parameters
    assert fw["init"].default == "uniform" and fw["max_iter"].default == 200 and "working_set" not in fw
    ws = inspect.signature(METHODS["fw_ws"]).parameters
    assert ws["init"].default == "topk" and ws["working_set"].default == "auto"
    assert "working_set" not in inspect.signature(METHODS["fw_topk"]).parameters


def test_top_k_of_orders_like_a_full_lexsort_under_heavy_ties():
    """fw's set order: decreasing x, ties by decreasing relevance, then index; computed from a
    device top-k, compared here with a full numpy lexsort on pools built to tie."""
    from divopt_rag.solvers.frank_wolfe import top_k_of

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(5, 60))
        k = int(rng.integers(1, n + 1))
        inst = Instance(random_unit(n, 4, int(rng.integers(1000))), relevance=np.round(rng.random(n), 1), k=k,
                        theta=0.5)
        x = np.round(rng.random(n) * 3) / 3  # four distinct values: many ties, also at the k-th
        ref = np.lexsort((np.arange(n), -inst.relevance.numpy(), -x))[:k]
        assert np.array_equal(top_k_of(inst, torch.as_tensor(x)).numpy(), ref)
