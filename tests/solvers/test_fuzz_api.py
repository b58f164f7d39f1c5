"""Fuzzing the public API with hypothesis (issue 16, item 8): every input either works, with a
result of the promised shape and value, or raises the documented error type (ValueError /
TypeError) with a message naming the argument. Nothing hangs (small examples, time limits on
every solve; hypothesis's wall-clock deadline per example is off, as in every test here: it failed
examples on loaded machines, issue 38), nothing crashes, nothing returns a silently wrong shape.

Truths are computed here: the CCBQP objective from DESIGN.md's formula in float64 numpy, the
exact optimum by enumeration. Examples are bounded so the file runs in well under a minute.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.robust import KSparse, NormBall, average_similarity, make_set, worst_case_average_similarity
from divopt_rag.solvers import METHOD_NEEDS, available_solvers, instance_methods, select, solve_exact
from divopt_rag.solvers.selection import METHOD_PARAMS

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ARGUMENT_ERRORS = (ValueError, TypeError)


def _f(E, q, S, k, theta):
    """DESIGN.md: f = theta (k-1) c^T x + (1-theta)(|S| - ||E^T x||^2), c = E q, float64."""
    S = np.asarray(S, dtype=np.int64)
    v = E[S].sum(0)
    return theta * (k - 1) * float((E[S] @ q).sum()) + (1 - theta) * (len(S) - float(v @ v))


@st.composite
def instances(draw, max_n=10, max_d=5):
    """Valid pools: random unit rows, sometimes with duplicated rows or a tie in relevance."""
    n = draw(st.integers(1, max_n))
    d = draw(st.integers(1, max_d))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d))
    if draw(st.booleans()) and n > 1:  # duplicated rows
        E[rng.integers(0, n, size=n // 2)] = E[0]
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.standard_normal(d)
    q /= np.linalg.norm(q)
    k = draw(st.integers(1, n))
    theta = draw(st.sampled_from([0.0, 1.0]) | st.floats(0, 1))
    return E, q, k, theta


# ---- Instance -----------------------------------------------------------------------------------
finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.floats(-3, 3)


@FAST
@given(
    E=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4), elements=finite_or_not)
    | st.lists(st.floats(-2, 2), max_size=4) | st.just("text") | st.none(),
    q=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4), elements=finite_or_not)
    | st.none(),
    k=st.integers(-2, 6) | st.booleans() | st.floats(-1, 5) | st.text(max_size=2),
    theta=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-1, 2) | st.text(max_size=2) | st.none(),
    normalize=st.booleans(),
)
def test_instance_builds_or_names_the_bad_argument(E, q, k, theta, normalize):
    try:
        inst = Instance(E, q, k=k, theta=theta, normalize=normalize)
    except ARGUMENT_ERRORS as exc:
        msg = str(exc)
        assert any(name in msg for name in ("E", "q", "k", "theta", "relevance")), msg
        return
    n = np.asarray(E).shape[0]
    assert inst.n == n and inst.relevance.shape == (n,) and 1 <= inst.k <= n and 0 <= inst.theta <= 1
    norms = np.linalg.norm(inst.E.double().numpy(), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4) and np.isfinite(inst.relevance.numpy()).all()


# ---- select(), every method ---------------------------------------------------------------------
@pytest.mark.parametrize("method", instance_methods())
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=instances())
def test_every_selector_returns_k_unique_rows_scored_by_the_formula(method, case):
    E, q, k, theta = case
    sel = select(Instance(E, q, k=k, theta=theta), method)
    idx = sel.indices
    assert idx.dtype == np.int64 and idx.shape == (k,) and len(set(idx.tolist())) == k
    assert idx.min() >= 0 and idx.max() < len(E)
    assert math.isfinite(sel.objective)
    assert sel.objective == pytest.approx(_f(E, q, idx, k, theta), abs=1e-6)
    if k == 1:  # the documented tie rule: the most relevant, ties (up to 1e-6) to the lowest index
        c = E @ q
        assert idx[0] == int(np.flatnonzero(c >= c.max() - 1e-6 * max(1.0, abs(c.max())))[0])


@pytest.mark.parametrize("method", sorted(METHOD_NEEDS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=instances(), seed=st.integers(0, 100))
def test_cross_encoder_selectors_on_precomputed_scores(method, case, seed):
    E, q, k, theta = case
    rng = np.random.default_rng(seed)
    n = len(E)
    sel = select(Instance(E, q, k=k, theta=theta), method, query_scores=rng.normal(size=n) * 5,
                 **({"pair_scores": rng.normal(size=(n, n)) * 5} if "pair_scores" in METHOD_PARAMS[method].params
                    else {}))
    assert sel.indices.shape == (k,) and len(set(sel.indices.tolist())) == k


def _parameters(method):
    return list(METHOD_PARAMS[method].params)


garbage_values = (st.integers(-3, 40) | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=3)
                  | st.booleans() | st.none() | st.lists(st.integers(0, 3), max_size=2))


@pytest.mark.parametrize("method", [m for m in instance_methods() if _parameters(m)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=instances(), data=st.data())
def test_selector_parameters_work_or_are_named(method, case, data):
    """Any of a method's own parameters with any value: a valid selection, or an error naming
    that parameter (small counts only: a billion restarts is long work, not a hang)."""
    E, q, k, theta = case
    name = data.draw(st.sampled_from(_parameters(method)))
    value = data.draw(garbage_values)
    try:
        sel = select(Instance(E, q, k=k, theta=theta), method, **{name: value})
    except ARGUMENT_ERRORS as exc:
        assert name in str(exc), (name, value, str(exc))
        return
    assert sel.indices.shape == (k,) and len(set(sel.indices.tolist())) == k


@FAST
@given(case=instances(), method=st.text(max_size=6) | st.sampled_from(["fw", "mmr"]),
       param=st.sampled_from(["sigmaa", "lambda_", "lambda_mult"]))
def test_unknown_methods_and_parameters_are_named(case, method, param):
    E, q, k, theta = case
    with pytest.raises(ARGUMENT_ERRORS) as info:
        select(Instance(E, q, k=k, theta=theta), method, **{param: 1})
    assert repr(method) in str(info.value) or repr(param) in str(info.value)


# ---- ccbqp_objective ----------------------------------------------------------------------------
@FAST
@given(case=instances(), indices=st.lists(st.integers(-3, 12), max_size=12)
       | hnp.arrays(np.float64, st.integers(0, 4)) | st.lists(st.booleans(), max_size=4)
       | hnp.arrays(np.int64, (2, 2), elements=st.integers(0, 3)))
def test_ccbqp_objective_scores_k_sets_and_refuses_the_rest(case, indices):
    E, q, k, theta = case
    inst = Instance(E, q, k=k, theta=theta)
    try:
        value = ccbqp_objective(inst, indices)
    except ARGUMENT_ERRORS as exc:
        assert "indices" in str(exc), str(exc)
        idx = np.asarray(indices)
        ok = (idx.ndim == 1 and idx.size == k and np.issubdtype(idx.dtype, np.integer)
              and idx.min(initial=0) >= 0 and idx.max(initial=0) < len(E) and len(set(idx.tolist())) == idx.size)
        assert not ok, "a valid k-set was refused"
        return
    idx = np.asarray(indices)
    assert idx.size == k and len(set(idx.tolist())) == k  # only k unique rows are ever scored
    assert value == pytest.approx(_f(E, q, idx, k, theta), abs=1e-9)


# ---- solve_exact on tiny instances --------------------------------------------------------------
@pytest.mark.parametrize("solver", available_solvers())
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=instances(max_n=6, max_d=4))
def test_solve_exact_matches_enumeration(solver, case):
    E, q, k, theta = case
    inst = Instance(E, q, k=k, theta=theta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = solve_exact(inst, solver=solver, time_limit=20)  # a limit: nothing may hang
    opt = max(_f(E, q, S, k, theta) for S in itertools.combinations(range(len(E)), k))
    assert r.indices.shape == (k,) and len(set(r.indices.tolist())) == k
    assert r.status == "optimal" and r.objective == pytest.approx(opt, abs=1e-6)
    assert r.bound is not None and r.bound >= opt - 1e-6


@FAST
@given(case=instances(max_n=5), solver=st.text(max_size=5), time_limit=st.floats(allow_nan=True) | st.integers(-2, 0),
       formulation=st.sampled_from(["auto", "milp", "miqp", "qubo"]))
def test_solve_exact_bad_options_name_themselves(case, solver, time_limit, formulation):
    E, q, k, theta = case
    assume(k > 1)
    try:
        solve_exact(Instance(E, q, k=k, theta=theta), solver=solver, time_limit=time_limit, formulation=formulation)
    except (*ARGUMENT_ERRORS, ImportError) as exc:
        msg = str(exc)
        assert "solver" in msg or "time_limit" in msg or "formulation" in msg, msg
        return
    raise AssertionError(f"accepted solver={solver!r}, time_limit={time_limit!r}")


# ---- robust oracles and sets --------------------------------------------------------------------
@FAST
@given(kind=st.sampled_from(["l1", "l2", "linf", "ksparse", "l3", ""]),
       rho=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-1, 2) | st.booleans(),
       budget=st.integers(-1, 4) | st.floats(0, 2) | st.booleans())
def test_uncertainty_sets_build_or_name_the_parameter(kind, rho, budget):
    try:
        uset = make_set(kind, rho_vec=rho, attack_budget=budget) if kind == "ksparse" else make_set(kind, rho_vec=rho)
    except ARGUMENT_ERRORS as exc:
        msg = str(exc)
        assert any(s in msg for s in ("rho_vec", "attack_budget", "uncertainty", "p must", "kind", repr(kind))), msg
        return
    assert isinstance(uset, (NormBall, KSparse)) and uset.rho_vec >= 0 and math.isfinite(uset.rho_vec)


@FAST
@given(case=instances(max_n=8), rho=st.floats(0, 0.5), kind=st.sampled_from(["l1", "l2", "linf"]),
       indices=st.lists(st.integers(-2, 9), max_size=6))
def test_worst_case_similarity_is_an_upper_bound_or_an_error(case, rho, kind, indices):
    E, q, k, theta = case
    inst = Instance(E, q, k=k, theta=theta)
    uset = make_set(kind, rho_vec=rho)
    try:
        bound = worst_case_average_similarity(inst, indices, uset)
    except ARGUMENT_ERRORS as exc:
        assert "indices" in str(exc), str(exc)
        return
    nominal = average_similarity(E, indices)
    if len(indices) < 2:
        assert math.isnan(bound) and math.isnan(nominal)
    else:  # sound: the worst case over the set is at least the unperturbed value
        assert bound >= nominal - 1e-9 and bound <= 1.0 + 1e-9
