"""Edge cases with defined answers (issue 16, item 3), against truths computed here:

* k = 1: f({i}) = theta (k-1) c_i + (1-theta)(1 - ||e_i||^2) is 0 for every unit row, so every
  item ties; the rule is "the most relevant item, ties to the lowest index" (np.argmax of E q in
  float64), for every exact path (each installed MIP solver, enumeration, exact_optimum);
* degenerate pools: all rows identical, k = n, n = 1: every exact solver reaches the optimum of a
  brute-force enumeration written here from the formula.

The same rules for every selector (the cross-encoder methods: their relevance is the CE score)
are checks of the registry's suite, tests/solvers/test_check_selector.py.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from divopt_rag.models import Instance
from divopt_rag.solvers import available_solvers, select, solve_exact
from divopt_rag.solvers.exact import brute_force, exact_optimum

THETAS = (0.0, 0.5, 1.0)


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _pool(n=12, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return _unit(rng.standard_normal((n, d))), _unit(rng.standard_normal(d))


def _f(E, q, S, k, theta):
    """The CCBQP objective from DESIGN.md, float64: theta (k-1) c^T x + (1-theta)(k - ||E^T x||^2)."""
    S = list(S)
    v = E[S].sum(0)
    return theta * (k - 1) * float((E[S] @ q).sum()) + (1 - theta) * (len(S) - float(v @ v))


def _optimum(E, q, k, theta):
    return max(_f(E, q, S, k, theta) for S in itertools.combinations(range(len(E)), k))


# k = 1 for every selector (ties to the lowest index; the cross-encoder methods: their best-scored
# item): tests/solvers/test_check_selector.py (check_k1_rule)


@pytest.mark.parametrize("theta", THETAS)
def test_k1_every_exact_path_returns_the_most_relevant_item_as_optimal(theta):
    E, q = _pool(seed=1)
    inst = Instance(E, q, k=1, theta=theta)
    best = int(np.argmax(E @ q))
    for solver in ["auto", *available_solvers()]:
        r = solve_exact(inst, solver=solver, time_limit=10)
        assert r.indices.tolist() == [best] and r.status == "optimal" and r.proven_optimal, solver
        assert r.bound == pytest.approx(r.objective) and r.objective == pytest.approx(0.0, abs=1e-12)
    assert brute_force(inst)[0].tolist() == [best]
    assert exact_optimum(inst).indices.tolist() == [best]
    # the default method agrees with the exact path: no arbitrary "optimal" item
    assert select(inst).indices.tolist() == [best]


def _degenerate():
    E, q = _pool(n=7, d=4, seed=2)
    same = np.repeat(E[:1], 6, axis=0)
    for theta in THETAS:
        yield f"duplicates-{theta}", same, q, 3, theta
        yield f"k=n-{theta}", E, q, len(E), theta
        yield f"n=1-{theta}", E[:1], q, 1, theta


@pytest.mark.parametrize("name, E, q, k, theta", list(_degenerate()), ids=lambda v: v if isinstance(v, str) else "")
def test_degenerate_pools_every_exact_solver_is_optimal(name, E, q, k, theta):
    inst = Instance(E, q, k=k, theta=theta)
    opt = _optimum(E, q, k, theta)
    # every selector on these pools: tests/solvers/test_check_selector.py (check_degenerate_pools)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Gurobi skipped, etc.
        for solver in available_solvers():
            r = solve_exact(inst, solver=solver, time_limit=20)
            assert r.status == "optimal" and r.objective == pytest.approx(opt, abs=1e-6), (solver, r)
            assert len(r.indices) == k
    _, val = brute_force(inst)
    assert val == pytest.approx(opt, abs=1e-9)
