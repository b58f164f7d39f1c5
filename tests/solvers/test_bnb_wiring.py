"""Where divopt's branch-and-bound is used: solve_exact("auto") without Gurobi or beyond its licence,
the k = 1 rule, wall-clock time limits from the caller's start, full-scale certificates.

Truths: enumeration of every k-set (numpy, written here) and Gurobi where its licence takes the model.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from helpers.fake_clock import FakeClock
from helpers.solvers_here import gurobi_is_size_limited

from divopt_rag.models import Instance
from divopt_rag.models.solve_config import Stopwatch
from divopt_rag.models.solver_limits import SolverRefused, available_solvers
from divopt_rag.solvers import exact
from divopt_rag.solvers.bnb import branch_and_bound
from divopt_rag.solvers.certificates import certify_full_scale
from divopt_rag.solvers.exact import solve_exact

# found without divopt (helpers.solvers_here), as every licence test does
LIMITED = gurobi_is_size_limited()


def _instance(n, k, theta, seed, d=5):
    rng = np.random.default_rng(seed)
    return Instance(rng.normal(size=(n, d)), rng.normal(size=d), k=k, theta=theta, normalize=True)


def _brute(inst):
    """The optimum by enumeration, f straight from DESIGN.md."""
    E, c = inst.E.double().numpy(), inst.relevance.double().numpy()
    k, th = inst.k, inst.theta
    best = -math.inf
    for S in itertools.combinations(range(inst.n), k):
        v = E[list(S)].sum(0)
        best = max(best, th * (k - 1) * c[list(S)].sum() + (1 - th) * (k - v @ v))
    return best


def test_auto_without_gurobi_is_bnb(monkeypatch):
    monkeypatch.setattr(exact, "available_solvers", lambda: ["scip", "highs"])
    inst = _instance(12, 4, 0.5, 1)
    r = solve_exact(inst, "auto")
    assert r.solver == "bnb" and r.proven_optimal
    assert r.objective == pytest.approx(_brute(inst), abs=1e-7)


@pytest.mark.skipif(not LIMITED, reason="needs gurobipy with the size-limited license")
def test_auto_beyond_the_licence_is_bnb_and_explicit_gurobi_is_refused(monkeypatch):
    # n = 201 binaries in a quadratic model: over the pip licence's 200
    inst = _instance(201, 2, 0.6, 4, d=6)
    with pytest.warns(RuntimeWarning, match=r"Gurobi skipped.*201 variables > 200.*bnb"):
        r = solve_exact(inst, "auto")
    assert r.solver == "bnb" and r.proven_optimal
    assert r.objective == pytest.approx(_brute(inst), abs=1e-7)
    # refused on its size, before an O(n^2) build (or any search)
    monkeypatch.setattr(exact, "_build", lambda *a, **k: pytest.fail("built a model the licence refuses"))
    monkeypatch.setattr(exact, "branch_and_bound", lambda *a, **k: pytest.fail("searched instead of refusing"))
    with pytest.raises(SolverRefused, match="size-limited"):
        solve_exact(inst, "gurobi")


@pytest.mark.skipif("gurobi" not in available_solvers(), reason="gurobipy not installed")
@pytest.mark.parametrize("theta", [0.0, 0.5, 0.9])
def test_auto_within_the_licence_is_gurobi_and_agrees_with_bnb(theta):
    inst = _instance(30, 5, theta, 7, d=8)
    g = solve_exact(inst, "auto")
    b = solve_exact(inst, "bnb")
    assert g.solver == "gurobi" and g.proven_optimal and b.proven_optimal
    assert b.objective == pytest.approx(g.objective, rel=1e-6, abs=1e-7)


def test_k1_rule_applies_to_bnb():
    inst = _instance(9, 1, 0.4, 2)
    r = solve_exact(inst, "bnb")
    assert r.solver == "rule" and r.proven_optimal
    assert r.indices.tolist() == [int(np.argmax(inst.relevance.numpy()))]


def test_time_limit_counts_from_the_callers_start():
    """The caller's 5 s before the call count against the 1 s limit (on a still fake clock, so
    the search's own time adds nothing and ``seconds`` is exactly the caller's 5 s)."""
    inst = _instance(40, 8, 0.3, 3, d=10)
    clock = FakeClock()
    out = branch_and_bound(inst, time_limit=1.0, stopwatch=Stopwatch(clock, started=clock() - 5.0))
    assert out.status == "time_limit" and out.seconds == 5.0 and out.nodes == 0
    assert out.bound >= out.objective
    r = solve_exact(inst, "bnb", time_limit=0.0)
    assert r.status == "time_limit" and not r.proven_optimal and r.gap > 0


def test_bnb_refuses_other_formulations():
    inst = _instance(8, 3, 0.5, 0)
    with pytest.raises(SolverRefused, match="qcr_dnn"):
        solve_exact(inst, "bnb", formulation="miqp")
    with pytest.raises(SolverRefused, match="qcr_dnn"):
        solve_exact(inst, "scip", formulation="qcr_dnn")


@pytest.mark.parametrize("theta", [0.3, 0.8])
def test_full_scale_certificate_with_bnb_on_the_survivors(theta):
    inst = _instance(15, 3, theta, 5, d=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cert = certify_full_scale(inst, exact_solver="bnb", max_exact=1000, time_limit=60)
    opt = _brute(inst)
    assert cert.certified and cert.info["exact_solver"] in ("bnb", "brute", "rule")
    assert cert.incumbent_objective == pytest.approx(opt, abs=1e-7)
    assert cert.upper_bound >= opt - 1e-9


def test_fullscale_bench_bad_input_is_exit_code_2(capsys):
    from divopt_rag.experiments.studies import bench_fullscale

    assert bench_fullscale.main(["--queries", "0"]) == 2
    err = capsys.readouterr().err
    assert "--queries" in err and "got 0" in err and "Traceback" not in err
