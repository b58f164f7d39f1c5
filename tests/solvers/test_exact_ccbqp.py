"""Exact CCBQP: every installed solver against brute-force enumeration, against each other,
MILP vs MIQP, and honest reporting under a time limit."""
import itertools
import math

import numpy as np
import pytest

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.mip_ccbqp import build_ccbqp, build_ccbqp_milp, build_ccbqp_miqp, build_ccbqp_miqp_lowrank, gram_factor
from divopt_rag.models.mip_common import as_gram
from divopt_rag.models.solver_limits import model_size, solver_refusal
from divopt_rag.solvers import Result, available_solvers, solve, solve_exact
from divopt_rag.solvers.exact import DEFAULT_FORMULATION

SOLVERS = available_solvers()
# (solver, formulation) pairs each installed solver accepts (size permitting).
PAIRS = [(s, f) for s in SOLVERS
         for f in (("milp", "milp_compact") if s == "highs" else ("miqp", "miqp_lowrank", "milp", "milp_compact"))]
DEFAULTS = [(s, DEFAULT_FORMULATION[s]) for s in SOLVERS]


def pairs_for(inst, pairs=PAIRS):
    """The pairs whose solver takes the built model (measured, as solve_exact does)."""
    return [(s, f) for s, f in pairs if solver_refusal(s, model_size(build_ccbqp(inst, f).model)) is None]


def _pool(n, d, seed, duplicates=False):
    rng = np.random.default_rng(seed)
    if duplicates:  # near-duplicate clusters make diversity matter
        centers = rng.standard_normal((max(n // 3, 1), d))
        E = centers[rng.integers(0, centers.shape[0], n)] + 0.15 * rng.standard_normal((n, d))
    else:
        E = rng.standard_normal((n, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.standard_normal(d)
    return E, q / np.linalg.norm(q)


def _brute_force(inst):
    """Plain enumeration of all C(n, k) sets with the reference objective."""
    best, arg = -math.inf, None
    for s in itertools.combinations(range(inst.n), inst.k):
        v = ccbqp_objective(inst, list(s))
        if v > best:
            best, arg = v, s
    return best, np.asarray(arg)


def test_some_solver_installed():
    assert "highs" in SOLVERS, "highspy is a core dependency"


CASES = [(0, 12, 4, 0.5, False), (1, 14, 3, 0.2, True), (2, 10, 5, 0.8, True)]


@pytest.mark.parametrize(
    "solver,formulation,seed,n,k,theta,dup",
    # every formulation on the first case, each solver's default formulation on all of them
    [p + CASES[0] for p in PAIRS] + [p + c for p in DEFAULTS for c in CASES[1:]],
)
def test_optimum_equals_brute_force(solver, formulation, seed, n, k, theta, dup):
    E, q = _pool(n, 6, seed, dup)
    inst = Instance(E, q, k=k, theta=theta)
    best, _ = _brute_force(inst)
    r = solve_exact(inst, solver, formulation=formulation)
    assert r.status == "optimal" and r.proven_optimal
    assert r.solver == solver and r.info["formulation"] == formulation
    assert r.indices.size == k
    assert r.objective == pytest.approx(ccbqp_objective(inst, r.indices), abs=1e-12)
    assert r.objective == pytest.approx(best, abs=1e-6)
    assert r.bound >= best - 1e-6
    assert r.gap <= 1e-4


@pytest.mark.parametrize("theta", [1.0, 0.0])
def test_extreme_theta_against_brute_force(theta):
    E, q = _pool(11, 5, 7, True)
    inst = Instance(E, q, k=4, theta=theta)
    best, _ = _brute_force(inst)
    for s, f in DEFAULTS:
        r = solve_exact(inst, s, formulation=f)
        assert r.proven_optimal and r.objective == pytest.approx(best, abs=1e-6), (s, f)


def test_solvers_agree_on_n40():
    E, q = _pool(40, 12, 5, True)
    inst = Instance(E, q, k=5, theta=0.6)
    values = {}
    for s, f in pairs_for(inst, DEFAULTS + [("gurobi", "milp")]):
        r = solve_exact(inst, s, formulation=f, time_limit=60)
        assert r.proven_optimal, (s, f, r.status)
        values[(s, f)] = r.objective
    ref = next(iter(values.values()))
    for key, v in values.items():
        assert v == pytest.approx(ref, abs=1e-5 * max(1.0, abs(ref))), (key, values)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed, n, k, theta, dup", CASES + [(7, 11, 4, 0.0, True), (8, 11, 4, 1.0, False),
                                                       (9, 9, 8, 0.5, False), (10, 9, 2, 0.3, True)])
def test_compact_milp_optimum_equals_brute_force(solver, seed, n, k, theta, dup):
    """Glover's compact MILP (z_i for x_i s_i(x)) proves enumeration's optimum with every MIP
    solver, at the extreme thetas and at k = n - 1 (U_i then sums every other row entry)."""
    E, q = _pool(n, 6, seed, dup)
    inst = Instance(E, q, k=k, theta=theta)
    best, _ = _brute_force(inst)
    r = solve_exact(inst, solver, formulation="milp_compact")
    assert r.proven_optimal and r.info["formulation"] == "milp_compact"
    assert r.objective == pytest.approx(best, abs=1e-6) and r.bound >= best - 1e-6


def test_compact_milp_is_f_at_the_smallest_feasible_z():
    """At every binary k-set x the compact MILP's objective, with each z_i at the smallest value
    its two rows allow, is f(x) (the exactness argument of build_ccbqp_compact, checked on the
    built rows), and the bounds L, U hold for every k-set (with / without i)."""
    from divopt_rag.models.mip_ccbqp import build_ccbqp_compact, compact_bounds

    E, q = _pool(9, 5, 4, True)
    inst = Instance(E, q, k=3, theta=0.35)
    m = build_ccbqp_compact(inst).model
    W = as_gram(inst)
    L, U = compact_bounds(W, 3)
    for S in itertools.combinations(range(9), 3):
        for i in range(9):
            m.x[i].set_value(float(i in S))
        for i in range(9):
            s_i = sum(W[i, j] for j in S if j != i)
            assert (L[i] - 1e-12 <= s_i) if i in S else (s_i <= U[i] + 1e-12)
            t = max(s_i - U[i] * (i not in S), L[i] * (i in S))  # the smallest z_i the rows allow
            m.z[i].set_value(t)
            slacks = (m.z_link[i].slack(), m.z_floor[i].slack())
            assert min(slacks) >= -1e-12 and min(slacks) <= 1e-12  # feasible, and one row is tight
        assert m.obj.expr() == pytest.approx(ccbqp_objective(inst, list(S)), abs=1e-10)


def test_milp_and_miqp_same_optimum_and_objective_identity():
    """Both models evaluate to f on any binary point, and share the optimum."""
    E, q = _pool(16, 6, 11, True)
    inst = Instance(E, q, k=5, theta=0.4)
    miqp, milp = build_ccbqp_miqp(inst).model, build_ccbqp_milp(inst).model
    rng = np.random.default_rng(0)
    for _ in range(5):
        S = set(rng.choice(16, 5, replace=False).tolist())
        for i in range(16):
            miqp.x[i].set_value(float(i in S))
            milp.x[i].set_value(float(i in S))
        for (i, j) in milp.P:
            milp.y[i, j].set_value(float(i in S and j in S))
        f = ccbqp_objective(inst, sorted(S))
        assert miqp.obj.expr() == pytest.approx(f, abs=1e-10)
        assert milp.obj.expr() == pytest.approx(f, abs=1e-10)
    S = sorted(S)
    # n < d: W has full rank, so the diagonal shift u = lambda_min(W) is nonzero
    E2, q2 = _pool(8, 12, 12, True)
    inst2 = Instance(E2, q2, k=3, theta=0.3)
    for case, T in ((inst, S), (inst2, [1, 4, 6])):
        for shift in (True, False):
            lowrank, lr_info = build_ccbqp_miqp_lowrank(case, shift=shift)
            gram, gram_info = build_ccbqp_miqp(case, shift=shift)
            u = lr_info.details["shift"]
            assert u == gram_info.details["shift"] and (u > 0) == (shift and case is inst2)
            assert lr_info.kind == "ccbqp_miqp_lowrank" and lr_info.n_items == case.n
            F = gram_factor(as_gram(case) - u * np.eye(case.n))
            for i in range(case.n):
                lowrank.x[i].set_value(float(i in T))
                gram.x[i].set_value(float(i in T))
            for l in lowrank.v:
                lowrank.v[l].set_value(float(F[T, l].sum()))
            assert lowrank.obj.expr() == pytest.approx(ccbqp_objective(case, T), abs=1e-9)
            assert gram.obj.expr() == pytest.approx(ccbqp_objective(case, T), abs=1e-9)
    # the shift tightens the relaxation: at the uniform fractional point it lowers the value
    xs = np.full(inst2.n, inst2.k / inst2.n)
    vals = []
    for shift in (True, False):
        gram = build_ccbqp_miqp(inst2, shift=shift).model
        for i in range(inst2.n):
            gram.x[i].set_value(float(xs[i]))
        vals.append(gram.obj.expr())
    assert vals[0] < vals[1] - 1e-6
    for solver_q in [s for s in ("gurobi", "scip") if s in SOLVERS]:
        a = solve_exact(inst, solver_q, formulation="miqp")
        b = solve_exact(inst, solver_q, formulation="milp")
        assert a.proven_optimal and b.proven_optimal
        assert a.objective == pytest.approx(b.objective, abs=1e-6)
    c = solve_exact(inst, "highs", formulation="milp")
    assert c.proven_optimal and c.objective == pytest.approx(b.objective, abs=1e-6)


def test_time_limit_never_claims_optimal_without_proof():
    E, q = _pool(60, 16, 3)
    inst = Instance(E, q, k=10, theta=0.5)
    cut_off = 0
    truth = None
    for s, f in pairs_for(inst, DEFAULTS):
        r = solve_exact(inst, s, formulation=f, time_limit=0.05)
        assert isinstance(r, Result)
        if r.status == "optimal":
            # a claim of optimality must be backed by a closed gap
            assert r.gap <= 1e-4 and r.bound is not None
            truth = r.objective if truth is None else truth
        else:
            cut_off += 1
            assert r.status == "time_limit" and not r.proven_optimal
            assert "time limit" in r.message
            if r.objective is not None:
                assert r.indices.size == inst.k
                assert r.objective == pytest.approx(ccbqp_objective(inst, r.indices), abs=1e-12)
                assert r.bound is None or r.bound >= r.objective - 1e-9
            else:
                assert r.gap == math.inf and r.indices.size == 0
    assert cut_off >= 1, "0.05 s should cut off at least one solver on this instance"
    # the bounds reported under the time limit really are upper bounds: compare to the optimum
    ref = solve_exact(inst, SOLVERS[0], time_limit=120)
    assert ref.proven_optimal
    for s, f in pairs_for(inst, DEFAULTS):
        r = solve_exact(inst, s, formulation=f, time_limit=0.05)
        if r.bound is not None:
            assert r.bound >= ref.objective - 1e-6
        if r.objective is not None:
            assert r.objective <= ref.objective + 1e-9


def test_warm_start_from_selection_and_result():
    from divopt_rag.solvers import select

    E, q = _pool(20, 6, 4, True)
    inst = Instance(E, q, k=4, theta=0.5)
    sel = select(inst, "fw")
    best, _ = _brute_force(inst)
    for s, f in DEFAULTS:
        r = solve_exact(inst, s, formulation=f, warm_start=sel)
        assert r.proven_optimal and r.objective == pytest.approx(best, abs=1e-6)
        r2 = solve_exact(inst, s, formulation=f, warm_start=set(r.indices.tolist()))
        assert r2.proven_optimal and r2.objective == pytest.approx(best, abs=1e-6)
    with pytest.raises(ValueError, match="warm_start"):
        solve_exact(inst, "highs", warm_start=[0, 0, 1, 2])
    with pytest.raises(ValueError, match="warm_start"):
        solve_exact(inst, "highs", warm_start=[0, 99])


def test_bad_solver_and_formulation_names():
    E, q = _pool(8, 4, 0)
    inst = Instance(E, q, k=3, theta=0.5)
    with pytest.raises(ValueError, match="solver.*cplex"):
        solve_exact(inst, "cplex")
    with pytest.raises(ValueError, match="formulation"):
        solve_exact(inst, "highs", formulation="sdp")
    with pytest.raises(ValueError, match="HiGHS"):
        solve(build_ccbqp_miqp(inst), "highs")
    with pytest.raises(ValueError, match="time_limit"):
        solve_exact(inst, "highs", time_limit=-1)
    with pytest.raises(TypeError, match="Instance"):
        solve_exact(E, "highs")


def test_auto_picks_an_installed_solver_and_falls_back_past_the_gurobi_license():
    E, q = _pool(12, 5, 2)
    inst = Instance(E, q, k=3, theta=0.5)
    r = solve_exact(inst)
    assert r.solver == SOLVERS[0] and r.proven_optimal
    best, _ = _brute_force(inst)
    assert r.objective == pytest.approx(best, abs=1e-6)


def test_compact_milp_build_stops_at_a_passed_deadline():
    """The compact builder reads its deadline once per row: one already passed stops it."""
    import time

    from divopt_rag.models.mip_ccbqp import build_ccbqp_compact
    from divopt_rag.models.mip_common import BuildTimeout

    E, q = _pool(12, 5, 2, False)
    with pytest.raises(BuildTimeout):
        build_ccbqp_compact(Instance(E, q, k=3, theta=0.5), deadline=time.perf_counter() - 1.0)
    assert build_ccbqp_compact(Instance(E, q, k=3, theta=0.5), deadline=None).model.z_link is not None
