"""Values of the wrong type are refused where the API takes them (issue 48, item 7): one
TypeError or ValueError naming the argument, from the one declaration (theta's range and the
thread bound of :mod:`divopt_rag.models.domains`), before any work. They used to run: ``theta="0.5"``
and ``theta=True`` were accepted, ``time_limit=True`` ran as 1 s, ``normalize="no"`` counted as
true, ``subset([1, 2, 100])`` raised torch's "index out of range in self", ``threads=100000``
hung HiGHS creating them, and Gurobi at n = 400 in the MILP returned "time_limit" instead of the
documented SolverRefused."""
from __future__ import annotations

import numpy as np
import pytest

from divopt_rag.models import Instance
from divopt_rag.models.domains import THREADS_MAX
from divopt_rag.models.solve_config import SolveConfig
from divopt_rag.models.solver_limits import SolverRefused
from divopt_rag.solvers.exact import licence_refusal, solve_exact

rng = np.random.default_rng(0)
E = rng.normal(size=(12, 4))
E /= np.linalg.norm(E, axis=1, keepdims=True)


def inst(**kw):
    return Instance(E, E[0], **{"k": 3, "theta": 0.5, **kw})


def one_line(exc_info, name):
    text = str(exc_info.value)
    assert "\n" not in text and name in text, text
    return text


@pytest.mark.parametrize("value", ["0.5", True, np.bool_(False), b"1"])
def test_theta_must_be_a_number(value):
    with pytest.raises(TypeError) as e:
        inst(theta=value)
    assert "theta must be a number in [0, 1], got" in one_line(e, "theta")
    with pytest.raises(TypeError):
        inst().replace(theta=value)
    assert inst(theta=np.float32(0.5)).theta == 0.5 and inst(theta=1).theta == 1.0  # numbers still are


@pytest.mark.parametrize("value", ["no", 0, 1, None, "False"])
def test_normalize_must_be_a_bool(value):
    with pytest.raises(TypeError) as e:
        Instance(E * 2, E[0] * 3, k=3, theta=0.5, normalize=value)
    assert "normalize must be True or False" in one_line(e, "normalize")
    assert Instance(E * 2, E[0] * 3, k=3, theta=0.5, normalize=np.bool_(True)).n == 12


def test_subset_names_its_argument():
    with pytest.raises(ValueError) as e:
        inst().subset([1, 2, 100])
    assert one_line(e, "indices") == "indices must lie in [0, 12), got 100"
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 12\), got -1"):
        inst().subset([-1, 2])
    with pytest.raises(TypeError, match="indices must hold integers"):
        inst().subset([1.5, 2.0])
    sub = inst(k=2).subset([4, 1, 4])  # a row may repeat, as before
    assert sub.n == 3 and np.allclose(sub.E.numpy(), E[[4, 1, 4]])


@pytest.mark.parametrize("name, value, kind", [("time_limit", "5", TypeError), ("time_limit", True, TypeError),
                                               ("mip_gap", "0.1", TypeError), ("mip_gap", False, TypeError)])
def test_time_limit_and_mip_gap_must_be_numbers(name, value, kind):
    with pytest.raises(kind) as e:
        solve_exact(inst(), "bnb", **{name: value})
    assert f"{name} must be a number, got" in one_line(e, name)
    with pytest.raises(kind):
        SolveConfig(**{name: value})


@pytest.mark.parametrize("threads", [-1, 0, THREADS_MAX + 1, 100_000, 10**6])
@pytest.mark.parametrize("solver", ["gurobi", "scip", "highs", "bnb"])
def test_threads_lie_in_one_to_the_machines_cpus(threads, solver):
    """Refused before any solver starts (so no solver needs to be installed for this test)."""
    with pytest.raises(ValueError) as e:
        solve_exact(inst(), solver, threads=threads)
    assert one_line(e, "threads") == (f"threads must be an integer in [1, {THREADS_MAX}] (1 to this machine's CPUs, "
                                      f"divopt_rag.models.domains.THREADS_MAX), got {threads}")
    with pytest.raises(TypeError, match="threads must be an integer, got bool True"):
        solve_exact(inst(), solver, threads=True)
    assert SolveConfig(threads=THREADS_MAX).threads == THREADS_MAX


def test_the_experiments_thread_bound_is_the_one_declaration():
    from divopt_rag.experiments import methods
    from divopt_rag.experiments.cli import flag_types

    assert flag_types.CPUS == THREADS_MAX
    with pytest.raises(ValueError, match="threads"):
        methods.method_parameters("exact").validate({"threads": THREADS_MAX + 1})


def test_gurobi_refuses_the_milp_at_n_400_before_building_it(monkeypatch):
    """The licence is known from the size alone: SolverRefused naming it, even with a 3 s limit
    (the build's time estimate used to come first and return "time_limit")."""
    from divopt_rag.models import solver_limits
    from divopt_rag.solvers import exact as X

    monkeypatch.setattr(solver_limits, "gurobi_size_limits",
                        lambda: {"max_vars": 2000, "max_constraints": 2000, "max_quadratic_vars": 200})
    monkeypatch.setattr(X, "available_solvers", lambda: ["gurobi", "scip", "highs"])  # whatever is installed here
    monkeypatch.setattr(X, "_build", lambda *a, **k: pytest.fail("the model was built"))
    E4 = rng.normal(size=(400, 8))
    E4 /= np.linalg.norm(E4, axis=1, keepdims=True)
    big = Instance(E4, E4[0], k=5, theta=0.5)
    with pytest.raises(SolverRefused) as e:
        solve_exact(big, "gurobi", formulation="milp", time_limit=3)
    assert "80200 variables > 2000" in one_line(e, "gurobi")
    # the milp's size is its builder's: n + n(n-1)/2 variables (counted here by hand)
    assert "80200 variables" in licence_refusal("gurobi", 400, 0.5, "milp")
    assert licence_refusal("gurobi", 40, 0.5, "milp") is None  # 40 + 780 = 820 variables, 1 + 1560 + 40 rows
    assert "variables > 200 in a quadratic model" in licence_refusal("gurobi", 201, 0.5, "miqp_lowrank")
    assert licence_refusal("gurobi", 400, 1.0, "miqp") is None  # linear at theta = 1: 400 binaries fit
    # Glover's compact MILP: 2n variables, 2n + 1 rows, linear: the licence takes n = 999, not 1000
    assert licence_refusal("gurobi", 999, 0.5, "milp_compact") is None
    assert "2001 constraints > 2000" in licence_refusal("gurobi", 1000, 0.5, "milp_compact")


@pytest.mark.slow
def test_the_milps_counted_size_is_the_built_models():
    """An independent count: the built Pyomo model, measured by the runner's model_size."""
    from divopt_rag.models.mip_ccbqp import build_ccbqp
    from divopt_rag.models.mip_sizing import ccbqp_counts
    from divopt_rag.models.solver_limits import model_size

    for rlt in (True, False):
        size = model_size(build_ccbqp(inst(), "milp", rlt=rlt).model)
        c = ccbqp_counts(12, 4, 0.5, "milp", rlt=rlt)
        assert (size.n_vars, size.n_integer, size.n_constraints) == (c.n_vars, c.n_integer, c.n_constraints)
        assert not size.quadratic
