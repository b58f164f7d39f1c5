"""divopt's branch-and-bound (divopt_rag.solvers.bnb) against independent truths.

Truths: enumeration of every k-set (numpy, written here), cvxpy/Clarabel for the node QP, a
bisection for the projection, and Gurobi (pip licence) on instances both engines solve.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from divopt_rag.models import Instance
from divopt_rag.models.qcr import CardinalityQP, qcr_from_dual
from divopt_rag.models.solver_limits import available_solvers
from divopt_rag.solvers.bnb import LOG_COLUMNS, BnBOptions, branch_and_bound
from divopt_rag.solvers.bnb.bound import maximize_concave_qp, project_capped_simplex
from divopt_rag.solvers.bnb.cuts import CutPool
from divopt_rag.solvers.bnb.fixing import reduced_cost_fixing, swap_screening
from divopt_rag.solvers.bnb.sdp import dnn_admm
from divopt_rag.solvers.exact import solve_exact


def _instance(n, k, theta, seed, d=5):
    rng = np.random.default_rng(seed)
    return Instance(rng.normal(size=(n, d)), rng.normal(size=d), k=k, theta=theta, normalize=True)


def _brute(inst):
    """(optimum, list of optimal sets) by enumeration, f straight from DESIGN.md."""
    E = inst.E.double().numpy()
    c = inst.relevance.double().numpy()
    k, th = inst.k, inst.theta
    best, sets = -math.inf, []
    for S in itertools.combinations(range(inst.n), k):
        v = E[list(S)].sum(0)
        f = th * (k - 1) * c[list(S)].sum() + (1 - th) * (k - v @ v)
        if f > best + 1e-10:
            best, sets = f, [set(S)]
        elif f >= best - 1e-10:
            sets.append(set(S))
    return best, sets


def _feasible(p, m):
    for S in itertools.combinations(range(p), m):
        x = np.zeros(p)
        x[list(S)] = 1.0
        yield x


# --- node relaxation --------------------------------------------------------------------------
def test_projection_matches_bisection():
    rng = np.random.default_rng(0)
    for _ in range(100):
        p = int(rng.integers(2, 30))
        m = int(rng.integers(1, p))
        y = rng.normal(scale=rng.uniform(0.1, 3), size=p)
        x = project_capped_simplex(y, m)
        lo, hi = y.min() - 1.0, y.max()
        for _ in range(200):
            tau = 0.5 * (lo + hi)
            lo, hi = (tau, hi) if np.clip(y - tau, 0, 1).sum() > m else (lo, tau)
        assert np.allclose(x, np.clip(y - 0.5 * (lo + hi), 0, 1), atol=1e-9)


def test_concave_qp_matches_clarabel():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(1)
    for _ in range(8):
        p = int(rng.integers(5, 25))
        m = int(rng.integers(1, p))
        A = rng.normal(size=(p, 3))
        M = A @ A.T - np.diag(rng.uniform(0, 0.5, p))
        V = np.linalg.svd(np.eye(p) - 1.0 / p)[0][:, : p - 1]
        M += max(0.0, 1e-6 - np.linalg.eigvalsh(V.T @ M @ V)[0]) * np.eye(p)
        lin = rng.normal(size=p)
        r = maximize_concave_qp(0.0, lin, M, m)
        x = cp.Variable(p)
        shift = 2.0 * (1 + np.abs(M).max())  # x^T 11^T x = m^2 on the feasible set: makes it psd
        prob = cp.Problem(cp.Maximize(lin @ x - cp.quad_form(x, cp.psd_wrap(M + shift * np.ones((p, p)))) + shift * m * m),
                          [x >= 0, x <= 1, cp.sum(x) == m])
        prob.solve(solver="CLARABEL")
        assert r.converged
        assert r.bound >= prob.value - 1e-6
        assert r.bound - r.value <= 1e-8
        assert r.value == pytest.approx(prob.value, abs=1e-4)
        # the certificate holds at any iterate, even a capped one
        r1 = maximize_concave_qp(0.0, lin, M, m, max_iter=1)
        assert r1.bound >= prob.value - 1e-6


# --- fixing -----------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), theta=st.sampled_from([0.0, 0.4, 0.8]), m=st.integers(1, 4))
def test_fixings_never_remove_a_better_set(seed, theta, m):
    p = 8
    inst = _instance(p, m, theta, seed, d=3)
    P = CardinalityQP.from_instance(inst)
    vals = [(P.value(x), x) for x in _feasible(p, m)]
    opt = max(v for v, _ in vals)
    # reduced-cost fixing from a (random-dual) valid concave bound and a threshold below OPT
    rng = np.random.default_rng(seed)
    F = qcr_from_dual(P, rng.normal(scale=0.3, size=2 * p + 2), np.abs(rng.normal(size=(p + 1, p + 1))))
    r = maximize_concave_qp(F.const, F.linear, F.quad, m)
    threshold = opt - rng.uniform(0, 0.5)
    fix0, fix1 = reduced_cost_fixing(r.value, r.x, r.gradient, m, threshold)
    for v, x in vals:
        if v > threshold:
            assert not (x[fix0] == 1).any() and (x[fix1] == 1).all()
    # safe screening keeps every optimal set
    keep = set(swap_screening(P.linear, P.quad, m, tol=1e-9).tolist())
    for v, x in vals:
        if v >= opt - 1e-9:
            assert set(np.flatnonzero(x).tolist()) <= keep


def test_cuts_are_valid_and_their_adjoint_matches():
    """Every McCormick/triangle cut holds at every lifted binary x (not only feasible ones), and
    <D, Y> - d0 equals gamma^T (T(Y) - d) for the multiplier-weighted shift."""
    rng = np.random.default_rng(4)
    p = 6
    pool = CutPool(p)
    Y = rng.uniform(0, 1, (p + 1, p + 1))
    Y = 0.5 * (Y + Y.T)
    assert pool.separate(Y, 10_000, tol=-np.inf) == p * (p - 1) + p * (p - 1) * (p - 2) // 2 + p * (p - 1) * (p - 2) // 6
    for bits in itertools.product([0.0, 1.0], repeat=p):
        z = np.r_[1.0, bits]
        assert pool.violation(np.outer(z, z)).max() <= 1e-12
    pool.gamma = rng.uniform(0, 1, len(pool))
    D, d0 = pool.shift()
    assert np.allclose(D, D.T)
    assert np.sum(D * Y) - d0 == pytest.approx(pool.gamma @ pool.violation(Y), abs=1e-10)
    keep = np.array([0, 2, 5])
    sub = pool.restrict(keep)
    Ysub = Y[np.ix_(np.r_[0, keep + 1], np.r_[0, keep + 1])]
    assert len(sub) == 3 * 2 + 3 + 1 and sub.violation(Ysub).size == len(sub)


# --- node SDP ---------------------------------------------------------------------------------
def test_admm_bound_valid_at_any_iteration_and_converges():
    cp = pytest.importorskip("cvxpy")  # noqa: F841
    from divopt_rag.models.qcr import qcr_sdp

    inst = _instance(10, 4, 0.3, 5)
    P = CardinalityQP.from_instance(inst)
    opt = max(P.value(x) for x in _feasible(10, 4))
    state = None
    bounds = []
    for _ in range(6):
        F, state = dnn_admm(P, state, max_iter=100)
        r = maximize_concave_qp(F.const, F.linear, F.quad, F.m)
        assert r.bound >= opt - 1e-9 and F.eigen_bound >= opt - 1e-9
        bounds.append(min(r.bound, F.eigen_bound))
    sdp = qcr_sdp(P, "dnn", eps=1e-7).info["sdp_value"]
    assert bounds[-1] <= sdp + 1e-3 * (1 + abs(sdp))


# --- the search -------------------------------------------------------------------------------
SMALL = [(n, k, th, seed) for seed, (n, k) in enumerate([(6, 1), (7, 3), (9, 2), (10, 5), (12, 4), (14, 6), (16, 3), (16, 7), (11, 10)])
         for th in (0.0, 0.3, 0.6, 1.0)]


@pytest.mark.parametrize("n,k,theta,seed", SMALL)
def test_equals_brute_force(n, k, theta, seed):
    inst = _instance(n, k, theta, seed)
    opt, sets = _brute(inst)
    # no heuristic and no local search: the tree itself must find and prove the optimum
    r = branch_and_bound(inst, options=BnBOptions(heuristic=None, local_search=False))
    assert r.status == "optimal"
    assert r.objective == pytest.approx(opt, abs=1e-7)
    assert set(r.indices.tolist()) in sets
    assert r.bound >= opt - 1e-9 and r.bound - opt <= 1e-6 * max(1.0, abs(opt))


@pytest.mark.parametrize("theta", [0.3, 0.7])
def test_default_engine_through_solve_exact(theta):
    inst = _instance(13, 5, theta, 11, d=6)
    opt, sets = _brute(inst)
    r = solve_exact(inst, "bnb")
    assert r.solver == "bnb" and r.status == "optimal" and r.proven_optimal
    assert r.objective == pytest.approx(opt, abs=1e-7) and set(r.indices.tolist()) in sets
    assert r.gap <= 1e-6
    assert isinstance(r.info["log"], pd.DataFrame) and list(r.info["log"].columns) == list(LOG_COLUMNS)
    assert r.info["nodes"] == len(r.info["log"]) >= 1


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), theta=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
       k=st.integers(1, 6), node_limit=st.integers(1, 3))
def test_bound_is_never_below_the_optimum(seed, theta, k, node_limit):
    inst = _instance(11, k, theta, seed, d=4)
    opt, _ = _brute(inst)
    r = branch_and_bound(inst, node_limit=node_limit, options=BnBOptions(heuristic=None, local_search=False))
    assert r.bound >= opt - 1e-9
    assert r.objective <= opt + 1e-9
    assert r.status in ("optimal", "node_limit")
    if r.status == "optimal":
        assert r.objective == pytest.approx(opt, abs=1e-7)


def test_time_limit_is_honest():
    inst = _instance(40, 8, 0.3, 3, d=10)
    r = solve_exact(inst, "bnb", time_limit=0.0)
    assert r.status == "time_limit" and not r.proven_optimal
    assert r.indices.size == 8 and r.objective is not None
    assert r.bound >= r.objective and r.gap > 0
    out = branch_and_bound(inst, time_limit=0.0, options=BnBOptions(heuristic=None))
    assert out.status == "time_limit" and out.bound >= out.objective


def test_log_path_writes_the_node_log(tmp_path):
    inst = _instance(10, 3, 0.4, 2)
    r = solve_exact(inst, "bnb", log_path=tmp_path / "sub" / "bnb.csv")
    df = pd.read_csv(tmp_path / "sub" / "bnb.csv")
    assert list(df.columns) == list(LOG_COLUMNS) and len(df) == r.info["nodes"]
    assert r.log_path == str(tmp_path / "sub" / "bnb.csv")


def test_callback_and_log():
    rows = []
    inst = _instance(12, 4, 0.4, 8)
    out = branch_and_bound(inst, callback=rows.append, options=BnBOptions(heuristic=None, local_search=False))
    assert len(rows) == out.nodes == len(out.log)
    assert (out.log["bound"] >= out.log["incumbent"] - 1e-12).all()
    assert out.log["seconds"].is_monotonic_increasing


def test_bad_arguments():
    inst = _instance(8, 3, 0.5, 0)
    with pytest.raises(ValueError, match="heuristic"):
        BnBOptions(heuristic="nope")
    with pytest.raises(ValueError, match="chunk"):
        BnBOptions(chunk=0)
    with pytest.raises(TypeError, match="options must be a BnBOptions"):
        branch_and_bound(inst, options={"chunk": 5})
    with pytest.raises(ValueError, match="warm_start"):
        branch_and_bound(inst, warm_start=[0, 1])
    with pytest.raises(ValueError, match="formulation"):
        solve_exact(inst, "bnb", formulation="milp")


@pytest.mark.skipif("gurobi" not in available_solvers(), reason="gurobipy not installed")
@pytest.mark.parametrize("theta", [0.3, 0.8])
def test_equals_gurobi(theta):
    rng = np.random.default_rng(21)
    # a clustered pool: 4 topics, relevance from a query near one of them
    centers = rng.normal(size=(4, 12))
    E = np.repeat(centers, 10, axis=0) + 0.6 * rng.normal(size=(40, 12))
    inst = Instance(E, centers[0] + 0.3 * rng.normal(size=12), k=6, theta=theta, normalize=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = solve_exact(inst, "gurobi", time_limit=60)
    b = solve_exact(inst, "bnb", time_limit=60)
    assert g.status == b.status == "optimal"
    assert b.objective == pytest.approx(g.objective, rel=1e-6, abs=1e-7)
    assert b.bound >= g.objective - 1e-7
