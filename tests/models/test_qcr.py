"""QCR bounding functions (divopt_rag.models.qcr) and the QCR Pyomo model, against brute force.

Independent truths: enumeration of every feasible k-set (plain numpy, written here), the
definition of an adjoint (inner products), numpy eigenvalues, and the Gurobi/SCIP optimum of the
plain MIQP for the exported model.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from divopt_rag.models import Instance
from divopt_rag.models.qcr import CardinalityQP, LiftOperator, exact_qcr, qcr_from_dual, qcr_sdp


def _instance(n=9, d=4, k=3, theta=0.4, seed=0):
    rng = np.random.default_rng(seed)
    E = rng.normal(size=(n, d))
    q = rng.normal(size=d)
    return Instance(E, q, k=k, theta=theta, normalize=True)


def _feasible(p, m):
    for S in itertools.combinations(range(p), m):
        x = np.zeros(p)
        x[list(S)] = 1.0
        yield x


def _plain_f(E, c, k, theta, x):
    """f = theta (k-1) c^T x + (1-theta)(k - ||E^T x||^2), straight from DESIGN.md."""
    v = E.T @ x
    return theta * (k - 1) * c @ x + (1 - theta) * (k - v @ v)


def test_problem_matches_design_objective():
    inst = _instance()
    P = CardinalityQP.from_instance(inst)
    E = inst.E.double().numpy()
    c = inst.relevance.double().numpy()
    for x in _feasible(inst.n, inst.k):
        assert P.value(x) == pytest.approx(_plain_f(E, c, inst.k, inst.theta, x), abs=1e-12)


def test_restrict_substitutes_fixings():
    inst = _instance(n=8, k=4)
    P = CardinalityQP.from_instance(inst)
    free, ones = np.array([0, 2, 3, 5, 7]), np.array([1, 6])
    sub = P.restrict(free, ones)
    assert sub.m == 2
    for xs in _feasible(free.size, sub.m):
        x = np.zeros(8)
        x[free], x[ones] = xs, 1.0
        assert sub.value(xs) == pytest.approx(P.value(x), abs=1e-12)


def test_lift_operator_adjoint_gram_and_projection():
    rng = np.random.default_rng(3)
    p, m = 6, 2
    L = LiftOperator(p, m)
    Y = rng.normal(size=(p + 1, p + 1))
    Y = Y + Y.T
    y = rng.normal(size=2 * p + 2)
    assert np.sum(L.adjoint(y) * Y) == pytest.approx(y @ L.apply(Y), abs=1e-10)
    basis = np.eye(2 * p + 2)
    G = np.array([L.apply(L.adjoint(e)) for e in basis]).T
    assert np.allclose(G, L.gram, atol=1e-12)
    Z = L.project(Y)
    assert np.allclose(L.apply(Z), L.b, atol=1e-10)
    # a lifted binary feasible point satisfies the equalities
    x = np.array([1, 0, 1, 0, 0, 0.0])
    Yx = np.outer(np.r_[1.0, x], np.r_[1.0, x])
    assert np.allclose(L.apply(Yx), L.b, atol=1e-12)


@pytest.mark.parametrize("kind", ["shor", "dnn"])
@pytest.mark.parametrize("theta", [0.0, 0.3, 0.8])
def test_sdp_bounding_function_is_valid_and_concave(kind, theta):
    inst = _instance(n=10, k=4, theta=theta)
    P = CardinalityQP.from_instance(inst)
    F = qcr_sdp(P, kind, eps=1e-6)
    vals = [(P.value(x), F.value(x)) for x in _feasible(P.p, P.m)]
    opt = max(g for g, _ in vals)
    assert all(Fx >= g - 1e-9 for g, Fx in vals)
    if kind == "shor":
        assert all(abs(Fx - g) <= 1e-8 for g, Fx in vals)
    # concave on {1^T x = m}: quad psd on 1-perp
    V = np.linalg.svd(np.eye(P.p) - 1.0 / P.p)[0][:, : P.p - 1]
    assert np.linalg.eigvalsh(V.T @ F.quad @ V)[0] >= -1e-10
    assert F.eigen_bound >= opt - 1e-9
    # the SDP value is (up to the solver's accuracy) a bound too, and DNN beats the plain relaxation
    assert F.info["sdp_value"] >= opt - 1e-4


def test_dnn_is_tighter_than_shor():
    inst = _instance(n=10, k=4, theta=0.3, seed=4)
    P = CardinalityQP.from_instance(inst)
    assert qcr_sdp(P, "dnn", eps=1e-6).info["sdp_value"] <= qcr_sdp(P, "shor", eps=1e-6).info["sdp_value"] + 1e-5


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), theta=st.sampled_from([0.0, 0.5, 0.9]), m=st.integers(1, 5))
def test_any_dual_point_gives_a_valid_bound(seed, theta, m):
    """The claim of the module docstring: ANY (y, N >= 0) bounds g at every feasible binary."""
    rng = np.random.default_rng(seed)
    p = 7
    inst = _instance(n=p, d=3, k=m, theta=theta, seed=seed)
    P = CardinalityQP.from_instance(inst)
    y = rng.normal(scale=2.0, size=2 * p + 2)
    N = rng.normal(size=(p + 1, p + 1))
    F = qcr_from_dual(P, y, N)
    for x in _feasible(p, m):
        assert F.value(x) >= P.value(x) - 1e-9
    opt = max(P.value(x) for x in _feasible(p, m))
    assert F.eigen_bound >= opt - 1e-9
    V = np.linalg.svd(np.eye(p) - 1.0 / p)[0][:, : p - 1]
    assert np.linalg.eigvalsh(V.T @ F.quad @ V)[0] >= -1e-10


def test_exact_qcr_equals_f_and_is_psd():
    inst = _instance(n=9, k=3, theta=0.5, seed=2)
    P = CardinalityQP.from_instance(inst)
    const, lin, H = exact_qcr(P)
    assert np.linalg.eigvalsh(H)[0] >= -1e-10
    for x in _feasible(P.p, P.m):
        assert const + lin @ x - x @ H @ x == pytest.approx(P.value(x), abs=1e-9)
    with pytest.raises(ValueError, match="exact"):
        exact_qcr(P, qcr_sdp(P, "dnn"))


@pytest.mark.parametrize("solver,formulation", [("gurobi", "qcr"), ("scip", "qcr_lowrank"), ("gurobi", "qcr_lowrank")])
def test_qcr_model_has_the_same_optimum(solver, formulation):
    from divopt_rag.models.solver_limits import available_solvers
    from divopt_rag.solvers.exact import solve_exact

    if solver not in available_solvers():
        pytest.skip(f"{solver} not installed")
    inst = _instance(n=14, d=5, k=4, theta=0.4, seed=7)
    E = inst.E.double().numpy()
    c = inst.relevance.double().numpy()
    opt = max(_plain_f(E, c, 4, 0.4, x) for x in _feasible(14, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = solve_exact(inst, solver, formulation=formulation, time_limit=60)
    assert r.status == "optimal"
    assert r.objective == pytest.approx(opt, abs=1e-6)
    assert r.info["formulation"] == formulation
