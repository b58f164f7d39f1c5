"""Inputs refused or repaired before any work (issue 33, item 4): tensors that require grad
are detached at the one validation point, iteration counts below 1 are refused, and
``normalize=True`` normalizes every finite nonzero row whatever its scale."""
from __future__ import annotations

from decimal import Decimal, getcontext

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from divopt_rag.models import Instance
from divopt_rag.models.validation import check_embeddings, check_vector
from divopt_rag.solvers import select, solve_exact
from divopt_rag.solvers.selection import METHOD_PARAMS

from helpers.pools import random_unit, unit_query

N, D, K = 40, 8, 5


# every selector on tensors that require grad: tests/solvers/test_check_selector.py (check_inputs_that_require_grad)
def test_dartboard_minmax_takes_scores_that_require_grad():
    """Its external scores may require grad too: the same selection as the detached scores."""
    E, q = random_unit(N, D, 3), unit_query(D, 3)
    scores = torch.tensor(np.random.default_rng(1).normal(size=N), requires_grad=True)
    inst = Instance(E, q, k=K, theta=0.5)
    plain = select(inst, "dartboard_minmax", scores=scores.detach().clone())
    got = select(inst, "dartboard_minmax", scores=scores)
    np.testing.assert_array_equal(got.indices, plain.indices)
    assert scores.requires_grad and scores.grad is None


def test_exact_engine_takes_tensors_that_require_grad():
    E = torch.tensor(random_unit(14, 4, 5), requires_grad=True)
    q = torch.tensor(unit_query(4, 5), requires_grad=True)
    plain = solve_exact(Instance(E.detach(), q.detach(), k=4, theta=0.5), solver="bnb")
    got = solve_exact(Instance(E, q, k=4, theta=0.5), solver="bnb")
    assert got.status == "optimal" and got.objective == pytest.approx(plain.objective, abs=1e-9)
    np.testing.assert_array_equal(got.indices, plain.indices)


ITERATION_COUNTS = ("max_iter", "max_swaps", "max_passes", "max_phases")


def test_iteration_counts_below_one_are_refused_for_every_selector():
    """Every iteration-count parameter of every selector: 0 and -1 refused with one line naming
    method, parameter, declared range and value; 1 accepted (the check, not the run)."""
    inst = Instance(random_unit(N, D, 0), unit_query(D, 0), k=K, theta=0.5)
    found = []
    for method, decl in sorted(METHOD_PARAMS.items()):
        for name in decl.params:
            if name not in ITERATION_COUNTS:
                continue
            found.append((method, name))
            for bad in (0, -1):
                with pytest.raises(ValueError, match=rf"^The '{name}' parameter of {method} must be an int in the "
                                                     rf"range \[1, \d+\]( or None)?\. Got {bad} instead\.$"):
                    select(inst, method, **{name: bad})
            assert decl.validate({name: 1}) == {name: 1}
    names = {name for _, name in found}
    assert {"max_iter", "max_swaps", "max_phases"} <= names
    assert ("fw", "max_iter") in found and ("mmr_ls", "max_swaps") in found


def test_fw_with_one_iteration_still_runs():
    inst = Instance(random_unit(N, D, 0), unit_query(D, 0), k=K, theta=0.5)
    assert select(inst, "fw", max_iter=1).iterations == 1


def test_bnb_iteration_budgets_are_checked():
    inst = Instance(random_unit(12, 4, 0), unit_query(4, 0), k=3, theta=0.5)
    from divopt_rag.solvers.bnb import BnBOptions, branch_and_bound

    for name in ("root_iterations", "node_iterations", "chunk"):
        with pytest.raises(ValueError, match=rf"^{name} must be an integer >= 1, got 0$"):
            BnBOptions(**{name: 0})
    with pytest.raises(ValueError, match=r"^node_limit must be an integer >= 1, got 0$"):
        branch_and_bound(inst, node_limit=0)


# --- normalize=True at every scale --------------------------------------------------------
def _decimal_unit_rows(X: np.ndarray) -> np.ndarray:
    """Reference: each row divided by its exact Euclidean norm, in 60-digit Decimal arithmetic."""
    getcontext().prec = 60
    out = np.empty(X.shape)
    for i, row in enumerate(X):
        ds = [Decimal(float(v)) for v in row]
        nrm = sum(v * v for v in ds).sqrt()
        out[i] = [float(v / nrm) for v in ds]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.lists(st.floats(-1.0, 1.0, allow_subnormal=False), min_size=4, max_size=4).filter(
        lambda r: max(abs(v) for v in r) > 1e-3),
    exponent=st.integers(-300, 300),
    mantissa=st.floats(1.0, 9.99),
)
def test_normalize_any_finite_nonzero_row_float64(base, exponent, mantissa):
    scale = mantissa * 10.0**exponent
    row = np.asarray(base) * scale
    if not np.isfinite(row).all() or not (row != 0).any():
        return  # the scaled row itself is not representable
    X = np.vstack([row, random_unit(1, 4, 0)[0]])
    got = check_embeddings(X, normalize=True).numpy()
    ref = _decimal_unit_rows(X)
    np.testing.assert_allclose(got, ref, rtol=0, atol=8 * np.finfo(np.float64).eps)
    q = check_vector(row, "q", 4, unit_norm=True, normalize=True).numpy()
    np.testing.assert_allclose(q, ref[0], rtol=0, atol=8 * np.finfo(np.float64).eps)


@settings(max_examples=80, deadline=None)
@given(exponent=st.integers(-30, 30), seed=st.integers(0, 1000))
def test_normalize_any_finite_nonzero_row_float32(exponent, seed):
    base = random_unit(3, 6, seed) * 0.9
    X = (base * 10.0**exponent).astype(np.float32)
    got = check_embeddings(X, normalize=True).numpy()
    ref = _decimal_unit_rows(X.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=0, atol=8 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("scale", [1e-25, 1e20, 1e-300, 1e300])
def test_issue_cases_tiny_and_huge_rows(scale):
    X = random_unit(5, 4, 2) * scale
    dtype = np.float32 if 1e-30 < scale < 1e30 else np.float64
    inst = Instance(X.astype(dtype), unit_query(4, 2) * scale, k=2, theta=0.5, normalize=True)
    np.testing.assert_allclose(torch.linalg.vector_norm(inst.E.double(), dim=1).numpy(), 1.0, atol=1e-6)
    assert inst.E.dtype == torch.from_numpy(X.astype(dtype)).dtype


def test_the_real_problems_are_still_named():
    X = random_unit(5, 4, 2)
    Z = X.copy()
    Z[3] = 0.0
    with pytest.raises(ValueError, match=r"^E row 3 is all zeros and cannot be normalized$"):
        check_embeddings(Z, normalize=True)
    Z = X.copy()
    Z[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"non-finite values \(NaN or inf\): first at row 2, column 1"):
        check_embeddings(Z, normalize=True)
    with pytest.raises(ValueError, match=r"row 1 has norm 1e\+20"):
        check_embeddings(np.vstack([X[:1], X[1:2] * 1e20]).astype(np.float32))
    with pytest.raises(ValueError, match=r"zero vector"):
        check_vector(np.zeros(4), "q", 4, normalize=True)
    # a float64 row whose norm exceeds the largest double still normalizes
    big = np.full((1, 4), 1.5e308)
    np.testing.assert_allclose(check_embeddings(big, normalize=True).numpy(), 0.5, rtol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_normalize_low_precision_storage(dtype):
    X = torch.tensor(random_unit(6, 8, 4) * 3e4).to(dtype)  # norms ~3e4: float16 holds them
    X[0] *= 2.0  # this row's norm (~6e4) is near float16's max
    got = check_embeddings(X, normalize=True)
    assert got.dtype == dtype
    np.testing.assert_allclose(torch.linalg.vector_norm(got.float(), dim=1).numpy(), 1.0, atol=2e-2)
