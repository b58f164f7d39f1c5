"""Solver selection: the size-limited Gurobi license, unknown/uninstalled solvers, "auto"."""
import warnings

import numpy as np
import pytest
from helpers.solvers_here import gurobi_is_size_limited, installed_solvers

import divopt_rag.models.runner as runner
from divopt_rag.models import Instance, domains, solver_limits
from divopt_rag.models.mip_knapsack import build_topk
from divopt_rag.solvers import SolveConfig, available_solvers, solve, solve_exact

SOLVERS = available_solvers()
# found without divopt (helpers.solvers_here): a broken licence detection fails the test below,
# never skips the licence tests
LIMITED = gurobi_is_size_limited()
needs_limited = pytest.mark.skipif(not LIMITED, reason="needs gurobipy with the size-limited license")


def test_available_solvers_are_known_and_ordered():
    assert set(SOLVERS) <= set(domains.SOLVERS)
    assert SOLVERS == [s for s in domains.SOLVERS if s in SOLVERS]


def test_the_detection_every_skip_condition_reads_is_the_machines():
    """The skip conditions of the solver tests read divopt's detection (``available_solvers``) or
    the independent one of ``helpers.solvers_here``; the two must agree, so a detection that
    wrongly finds no solver, or no licence limit, fails here instead of skipping those tests."""
    assert SOLVERS == list(installed_solvers())
    limits = solver_limits.gurobi_size_limits()
    assert (limits is not None) == gurobi_is_size_limited()
    if limits is not None:
        assert limits == {"max_vars": 2000, "max_constraints": 2000, "max_quadratic_vars": 200}


def test_unknown_solver_names_the_alternatives():
    m = build_topk(np.arange(5.0), 2)
    with pytest.raises(ValueError, match=r"solver.*'cplex'.*gurobi.*highs"):
        solve(m, "cplex")


def test_uninstalled_solver_is_an_import_error(monkeypatch):
    monkeypatch.setattr(runner, "available_solvers", lambda: ["highs"])
    m = build_topk(np.arange(5.0), 2)
    with pytest.raises(ImportError, match=r"'scip'.*highs"):
        solve(m, "scip")
    assert solve(m, "auto").solver == "highs"


@needs_limited
def test_explicit_gurobi_beyond_the_license_names_the_limit():
    s = np.random.default_rng(0).standard_normal(2001)
    with pytest.raises(ValueError, match=r"size-limited Gurobi license.*2000.*scip|highs"):
        solve(build_topk(s, 3), "gurobi")
    E = np.random.default_rng(1).standard_normal((201, 8))
    inst = Instance(E / np.linalg.norm(E, axis=1, keepdims=True), relevance=np.zeros(201), k=3, theta=0.5)
    with pytest.raises(ValueError, match=r"200 variables"):
        solve_exact(inst, "gurobi")


@needs_limited
def test_auto_falls_back_past_the_license_with_a_warning():
    rng = np.random.default_rng(2)
    s = rng.standard_normal(2001)
    with pytest.warns(RuntimeWarning, match="Gurobi skipped"):
        r = solve(build_topk(s, 3), "auto")
    assert r.solver != "gurobi" and r.proven_optimal
    np.testing.assert_array_equal(r.indices, np.sort(np.argsort(-s)[:3]))


@needs_limited
def test_license_error_raised_by_gurobi_itself_is_caught(monkeypatch):
    """Second line of defence: if the up-front size check lets a model through, Gurobi's own
    'Model too large for size-limited license' is turned into a fallback or a clear error."""
    monkeypatch.setattr(runner, "solver_refusal", lambda solver, size: None)
    s = np.random.default_rng(3).standard_normal(2001)
    with pytest.warns(RuntimeWarning, match="Gurobi refused"):
        r = solve(build_topk(s, 2), "auto")
    assert r.solver != "gurobi" and r.proven_optimal
    with pytest.raises(ValueError, match="size-limited"):
        solve(build_topk(s, 2), "gurobi")


def test_solve_needs_a_selection_variable():
    import pyomo.environ as pe

    m = pe.ConcreteModel()
    m.z = pe.Var(domain=pe.Binary)
    m.obj = pe.Objective(expr=m.z, sense=pe.maximize)
    with pytest.raises(ValueError, match="model.x"):
        solve(m, "highs")


def test_generic_model_with_extra_variables_and_mip_gap():
    """solve() works on any model with x and obj (e.g. robust counterparts with extra variables)."""
    import pyomo.environ as pe

    rng = np.random.default_rng(4)
    s = rng.uniform(0, 1, 10)
    m = build_topk(s, 3).model
    m.t = pe.Var(bounds=(0, 10))  # epigraph variable: t <= s_i for every selected i
    m.cut = pe.Constraint(range(10), rule=lambda m, i: m.t <= s[i] + 10 * (1 - m.x[i]))
    m.del_component("obj")
    m.obj = pe.Objective(expr=m.t, sense=pe.maximize)  # best worst-selected score = 3rd largest
    for solver in SOLVERS:
        r = solve(m, solver)
        assert r.proven_optimal and r.objective == pytest.approx(np.sort(s)[-3], abs=1e-6)
    r = solve(m, "highs", SolveConfig(mip_gap=0.5))
    assert r.status in ("optimal", "gap_limit")
    if r.status == "gap_limit":
        assert not r.proven_optimal and "gap" in r.message


@pytest.mark.parametrize("solver", SOLVERS)
def test_warm_start_on_a_model_with_extra_discrete_variables(solver):
    """Warm start sets x only; extra discrete variables without values must not break a solve."""
    import pyomo.environ as pe

    s = np.arange(6.0)
    m = build_topk(s, 2).model
    m.z = pe.Var(domain=pe.Binary)
    m.link = pe.Constraint(expr=m.z <= m.x[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = solve(m, solver, warm_start=[0, 1])
    assert r.proven_optimal
    np.testing.assert_array_equal(r.indices, [4, 5])


def test_model_info_names_the_selection_variable_and_the_infeasibility_message():
    """The runner reads what it needs from the builder's ModelInfo, nothing from the model."""
    import pyomo.environ as pe

    from divopt_rag.models.mip_common import ModelInfo

    m = pe.ConcreteModel()
    m.pick = pe.Var(range(4), domain=pe.Binary)
    m.card = pe.Constraint(expr=sum(m.pick[i] for i in range(4)) == 2)
    m.obj = pe.Objective(expr=sum(float(i) * m.pick[i] for i in range(4)), sense=pe.maximize)
    info = ModelInfo(kind="toy", n_items=4, item_var="pick", infeasible_message="no 2-set fits")
    r = solve(m, "highs", info=info)
    assert r.proven_optimal and r.indices.tolist() == [2, 3] and r.info["model"] == "toy"
    with pytest.raises(ValueError, match="model.x"):
        solve(m, "highs")  # without the info the runner looks for model.x
    with pytest.raises(ValueError, match="n_items"):
        solve(m, "highs", info=ModelInfo(kind="toy", n_items=5, item_var="pick"))
    m.card.set_value(sum(m.pick[i] for i in range(4)) == 5)  # infeasible: 4 binaries
    r = solve(m, "highs", info=info)
    assert r.status == "infeasible" and r.message == "no 2-set fits" and r.indices.size == 0


@needs_limited
def test_solve_exact_auto_measures_the_built_model_and_falls_back():
    """n = 201 > 200 binaries in a quadratic model: Gurobi is skipped on the measured size and
    the next solver proves the optimum (checked against enumeration of all pairs)."""
    rng = np.random.default_rng(5)
    E = rng.standard_normal((201, 6))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    c = rng.uniform(0, 1, 201)
    inst = Instance(E, relevance=c, k=2, theta=0.5)
    with pytest.warns(RuntimeWarning, match=r"Gurobi skipped.*201 variables > 200"):
        r = solve_exact(inst, "auto")
    assert r.solver != "gurobi" and r.proven_optimal and r.info["n_vars"] >= 201
    # f({i, j}) = theta (c_i + c_j) + (1 - theta)(2 - ||e_i + e_j||^2) over every pair i < j
    i, j = np.triu_indices(201, 1)
    f = 0.5 * (c[i] + c[j]) + 0.5 * (2 - ((E[i] + E[j]) ** 2).sum(1))
    assert r.objective == pytest.approx(f.max(), abs=1e-6)
