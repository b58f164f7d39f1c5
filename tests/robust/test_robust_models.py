"""Robust counterparts and cutting planes against brute-force enumeration and each other."""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from helpers.uset_vertices import vertices
from divopt_rag.models import Instance
from divopt_rag.models.runner import solve
from divopt_rag.models.solve_config import SolveConfig
from divopt_rag.robust.cutting_planes import LOG_COLUMNS, CuttingPlaneOptions, cutting_plane_ksparse
from divopt_rag.robust.models import (
    build_ksparse_lpdual_model,
    build_nominal_model,
    build_robust_model,
    build_robust_norm_model,
)
from divopt_rag.robust.oracles import similarity_upper_bounds
from divopt_rag.robust.relevance import worst_case_relevance
from divopt_rag.robust.sets import KSparse, NormBall

SOLVER = "highs"  # deterministic, no license limits


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _instance(seed, n=9, d=6):
    """A small cone of documents whose pairwise similarities straddle the cap."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=d)
    E = _unit(base + 0.8 * rng.normal(size=(n, d)))
    q = _unit(base + 0.4 * rng.normal(size=d))
    return Instance(E, q, k=4, theta=0.5)


def _params(inst, seed):
    """sparsity_penalty and rho_div at which both the penalty and the diversity cap bind."""
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    s = E @ q
    W = E @ E.T
    iu = np.triu_indices(inst.n, 1)
    rng = np.random.default_rng(seed)
    return dict(sparsity_penalty=float(np.quantile(s, rng.uniform(0.1, 0.4))),
                rho_div=float(np.quantile(W[iu], rng.uniform(0.3, 0.6))))


def _vertex_shift(uset, q, free_row, d):
    """h_i(q) = max over the extreme points of U_i of q^T delta (plain enumeration)."""
    rho = uset.rho_vec
    if isinstance(uset, NormBall) and uset.p == 2:
        return rho * math.sqrt(float(q @ q))  # Cauchy-Schwarz, attained at rho q/||q||
    best = 0.0
    if isinstance(uset, NormBall) and uset.p == 1:
        return max(rho * abs(v) for v in q)
    if isinstance(uset, NormBall):
        for signs in itertools.product((-1.0, 1.0), repeat=d):
            best = max(best, rho * float(q @ np.array(signs)))
        return best
    coords = [j for j in range(d) if free_row[j]]
    for size in range(min(uset.attack_budget, len(coords)) + 1):
        for J in itertools.combinations(coords, size):
            best = max(best, rho * sum(abs(q[j]) for j in J))
    return best


def _l2_worst_cosine(E, q, rho):
    """The l2 ball's worst-case cosine, written out: cos(min(pi, angle(q, mu) + arcsin(rho)))."""
    phi = np.arccos(np.clip(E @ q, -1.0, 1.0))
    return np.cos(np.minimum(math.pi, phi + math.asin(min(rho, 1.0))))


def _brute_force(inst, uset, *, sparsity_penalty, rho_div, similarity="cosine", max_size=None,
                 query_similarity="inner", relevance=None):
    """Enumerate every subset: robust value sum(r_i - lambda), feasibility from the bounds.

    r_i: s_i - h_i(q) by vertex enumeration ("inner"), the written-out l2 cap formula ("cosine",
    l2 ball), or the given ``relevance``. With uset None the similarities are the plain nominal
    ones (cosine or inner products).
    """
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    n, d = E.shape
    s = E @ q
    if uset is None:
        shift = np.zeros(n)
        Xn = E / np.linalg.norm(E, axis=1, keepdims=True)
        B = Xn @ Xn.T
    else:
        free = uset.free_mask(E, q)
        if relevance is not None:
            shift = s - relevance
        elif query_similarity == "inner":
            shift = np.array([_vertex_shift(uset, q, None if free is None else free[i], d) for i in range(n)])
        else:
            assert isinstance(uset, NormBall) and uset.p == 2
            shift = s - _l2_worst_cosine(E, q, uset.rho_vec)
        B = similarity_upper_bounds(E, uset, similarity, q=q)
    best, best_set = 0.0, ()
    cap = n if max_size is None else max_size
    for size in range(1, cap + 1):
        for S in itertools.combinations(range(n), size):
            if size >= 2:
                pairs = [B[i, j] for i, j in itertools.combinations(S, 2)]
                if sum(pairs) / len(pairs) > rho_div + 1e-12:
                    continue
            val = sum(s[i] - shift[i] - sparsity_penalty for i in S)
            if val > best + 1e-12:
                best, best_set = val, S
    return best, best_set


def _solve(model):
    r = solve(model, SOLVER)
    assert r.status == "optimal", r.message
    return r


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rho_zero_gives_the_nominal_optimum(seed):
    inst = _instance(seed)
    kw = _params(inst, seed)
    truth, _ = _brute_force(inst, None, **kw, max_size=5)
    for model in (
        build_nominal_model(inst, **kw, max_size=5),
        build_robust_model(inst, NormBall(2, 0.0), **kw, max_size=5),
        build_robust_model(inst, NormBall("inf", 0.0), **kw, max_size=5),
        build_ksparse_lpdual_model(inst, KSparse(0.0, 3, 1), **kw, max_size=5),
    ):
        assert _solve(model).objective == pytest.approx(truth, abs=1e-6)


SETS = [NormBall(1, 0.05), NormBall(2, 0.03), NormBall("inf", 0.01), KSparse(0.04, 2, None), KSparse(0.05, 3, 2)]


@pytest.mark.parametrize("uset", SETS, ids=lambda u: str(u.describe()))
def test_compact_robust_models_equal_brute_force(uset):
    """Inner-product relevance (exact oracle): model optimum = brute force; LP dual agrees."""
    for seed in (3, 4):
        inst = _instance(seed)
        kw = _params(inst, seed)
        truth, truth_set = _brute_force(inst, uset, **kw)
        r = _solve(build_robust_model(inst, uset, **kw, query_similarity="inner"))
        assert r.objective == pytest.approx(truth, abs=1e-6)
        if isinstance(uset, KSparse):
            r2 = _solve(build_ksparse_lpdual_model(inst, uset, **kw))
            assert r2.objective == pytest.approx(truth, abs=1e-6)


def _lpdual_cosine_plain(E, q, uset, free):
    """The LP dual's cosine bound written out: min over U_i's vertices of q^T x / ||q|| for the
    numerator, and the largest / smallest ||mu_i + delta|| over every support of <= K free
    coordinates, each coordinate at its extreme (+-rho, or -mu_ij when |mu_ij| <= rho)."""
    qh = q / np.linalg.norm(q)
    out = []
    for i, mu in enumerate(E):
        num = min(float(qh @ (mu + v)) for v in vertices(uset, len(mu), free[i]))
        coords = [j for j in range(len(mu)) if free[i, j]]
        lo, hi = float(mu @ mu), float(mu @ mu)
        for size in range(1, min(uset.attack_budget, len(coords)) + 1):
            for J in itertools.combinations(coords, size):
                up = sum(max((mu[j] + t) ** 2 - mu[j] ** 2 for t in (-uset.rho_vec, uset.rho_vec)) for j in J)
                down = sum(min((mu[j] + t) ** 2 - mu[j] ** 2 for t in (-uset.rho_vec, uset.rho_vec)
                               + ((-mu[j],) if abs(mu[j]) <= uset.rho_vec else ())) for j in J)
                hi, lo = max(hi, float(mu @ mu) + up), min(lo, float(mu @ mu) + down)
        out.append(num / math.sqrt(hi) if num >= 0 else num / math.sqrt(lo))
    return np.array(out)


@pytest.mark.parametrize("seed", (3, 4, 5))
def test_ksparse_lpdual_takes_the_reports_cosine_as_a_sound_bound(seed):
    """The LP dual with the report's cosine: its per-document value equals the bound written out
    here by enumeration, that bound is below every vertex's cosine (the exact worst case, attained at
    a vertex), and the model optimum equals brute force over all subsets with that relevance."""
    inst = _instance(seed)
    kw = _params(inst, seed)
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    for uset in (KSparse(0.05, 2), KSparse(0.15, 3, 2)):
        free = uset.free_mask(E, q)
        plain = _lpdual_cosine_plain(E, q, uset, free)
        model, info = build_ksparse_lpdual_model(inst, uset, **kw, query_similarity="cosine")
        assert info.scores - info.shift == pytest.approx(plain, abs=1e-12)
        for i in range(inst.n):
            worst = min(float(q @ (E[i] + v)) / np.linalg.norm(E[i] + v) for v in vertices(uset, inst.d, free[i]))
            assert plain[i] <= worst + 1e-12  # sound: never above the exact worst case
        truth, _ = _brute_force(inst, uset, **kw, relevance=plain)
        assert _solve(build_ksparse_lpdual_model(inst, uset, **kw, query_similarity="cosine")).objective == \
            pytest.approx(truth, abs=1e-6)
    # rho = 0: the nominal cosine
    model, info = build_ksparse_lpdual_model(inst, KSparse(0.0, 3), **kw, query_similarity="cosine")
    assert info.scores - info.shift == pytest.approx(E @ q, abs=1e-12)


def test_cosine_l2_model_equals_brute_force_with_the_written_out_worst_cosine():
    for seed in (3, 4, 5):
        inst = _instance(seed)
        kw = _params(inst, seed)
        for rho in (0.03, 0.1):
            truth, _ = _brute_force(inst, NormBall(2, rho), **kw, query_similarity="cosine")
            r = _solve(build_robust_model(inst, NormBall(2, rho), **kw))
            assert r.objective == pytest.approx(truth, abs=1e-6)


@pytest.mark.parametrize("uset", [NormBall(1, 0.05), NormBall("inf", 0.01), KSparse(0.04, 2, None), KSparse(0.05, 3, 2)],
                         ids=lambda u: str(u.describe()))
def test_cosine_polytope_models_solve_the_bound_problem_and_never_overstate(uset):
    """The model maximizes sum(r_i - lambda) with the oracle's sound r_i: brute force with those r_i
    equals the MILP; brute force with the (larger) vertex-minimum cosines bounds it from above."""
    inst = _instance(6)
    kw = _params(inst, 6)
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    wc = worst_case_relevance(inst, uset)
    r = _solve(build_robust_model(inst, uset, **kw))
    truth, _ = _brute_force(inst, uset, **kw, relevance=wc.values)
    assert r.objective == pytest.approx(truth, abs=1e-6)
    free = uset.free_mask(E, q)
    vmin = np.array([min(float(q @ (E[i] + v)) / np.linalg.norm(E[i] + v) for v in vertices(uset, inst.d, None if free is None else free[i]))
                     for i in range(inst.n)])
    assert np.all(wc.values <= vmin + 1e-12)
    upper, _ = _brute_force(inst, uset, **kw, relevance=vmin)
    assert r.objective <= upper + 1e-9
    assert upper - r.objective <= inst.n * max(0.0, float((vmin - wc.values)[vmin >= 0].max(initial=0.0))) + 1e-6


def test_inner_product_similarity_model_equals_brute_force():
    inst = _instance(5)
    kw = _params(inst, 5)
    for uset in (NormBall(2, 0.05), KSparse(0.05, 2, 1)):
        truth, _ = _brute_force(inst, uset, **kw, similarity="inner")
        r = _solve(build_robust_model(inst, uset, **kw, similarity="inner", query_similarity="inner"))
        assert r.objective == pytest.approx(truth, abs=1e-6)


@pytest.mark.parametrize("seed", [6, 7, 8])
@pytest.mark.parametrize("cut_type,cut_support", [("multi", "selected"), ("single", "selected"), ("single", "pool")])
def test_cutting_plane_optimum_equals_lp_dual_compact(seed, cut_type, cut_support):
    inst = _instance(seed, n=10)
    kw = _params(inst, seed)
    U = KSparse(0.06, 2, 1)
    compact = _solve(build_ksparse_lpdual_model(inst, U, **kw, max_size=5))
    cp = cutting_plane_ksparse(inst, U, **kw, max_size=5, query_similarity="inner",
                               options=CuttingPlaneOptions(solver=SOLVER, cut_support=cut_support, cut_type=cut_type))
    assert cp.status == "optimal" and cp.proven_optimal
    assert cp.objective == pytest.approx(compact.objective, abs=1e-6)
    assert cp.bound >= cp.objective - 1e-9 and cp.abs_gap <= 1e-4 * max(1.0, abs(cp.objective)) + 1e-6
    # the log: one row per master, bounds never increase, incumbents never decrease
    assert list(cp.log.columns) == LOG_COLUMNS and len(cp.log) == cp.iterations
    assert (np.diff(cp.log["bound"].to_numpy()) <= 1e-12).all()
    assert (np.diff(cp.log["incumbent"].to_numpy()) >= -1e-12).all()
    # the first cut(s) come from the nominal top-5 set: one aggregated cut or one per document
    assert cp.log["cuts"].iloc[0] == (1 if cut_type == "single" else (5 if cut_support == "selected" else 10))
    if cut_type == "multi":  # at most one cut per document, hence at most n + 1 masters
        assert cp.cuts <= inst.n and cp.iterations <= inst.n + 1
    assert cp.log["violation"].iloc[-1] <= 1e-6


@pytest.mark.parametrize("seed", [6, 7])
@pytest.mark.parametrize("cut_type", ["multi", "single"])
def test_cosine_cutting_plane_brackets_the_compact_cosine_model(seed, cut_type):
    """Cuts come from real attacks (cosine >= the oracle bound), incumbents are valued by the bound:
    compact optimum (max of the bound objective) <= CP bound, and CP incumbent <= compact optimum."""
    inst = _instance(seed, n=10)
    kw = _params(inst, seed)
    U = KSparse(0.06, 2, 1)
    compact = _solve(build_robust_model(inst, U, **kw, max_size=5))
    cp = cutting_plane_ksparse(inst, U, **kw, max_size=5, options=CuttingPlaneOptions(solver=SOLVER, cut_type=cut_type))
    assert cp.status in ("optimal", "oracle_gap")
    assert cp.objective <= compact.objective + 1e-6
    assert cp.bound >= compact.objective - 1e-6
    wc = worst_case_relevance(inst, U)
    gap_cap = float((wc.attained - wc.values).max()) * 5 + 1e-6  # at most max_size documents
    assert cp.abs_gap <= gap_cap
    assert cp.objective == pytest.approx(float((wc.values[cp.indices] - kw["sparsity_penalty"]).sum()), abs=1e-12)


def test_cutting_plane_perturbation_is_feasible_and_leaves_protected_coordinates_alone():
    inst = _instance(9, n=10, d=7)
    kw = _params(inst, 9)
    U = KSparse(0.08, 3, 2)  # the top-2 coordinates of |q * mu_i| are protected
    cp = cutting_plane_ksparse(inst, U, **kw, query_similarity="inner",
                               options=CuttingPlaneOptions(solver=SOLVER, progress=True))
    E, q = inst.E.double().numpy(), inst.q.double().numpy()
    assert cp.indices.size >= 1
    for i in range(inst.n):
        contrib = np.abs(q * E[i])
        protected = sorted(range(inst.d), key=lambda j: -contrib[j])[:2]
        assert np.all(cp.perturbation[i, protected] == 0.0)
        if i not in cp.indices:
            assert np.all(cp.perturbation[i] == 0.0)
        else:
            assert np.count_nonzero(cp.perturbation[i]) <= 3
            assert np.abs(cp.perturbation[i]).max() <= 0.08 + 1e-15
    # the robust value is the perturbed relevance minus the penalty
    attacked = ((E[cp.indices] + cp.perturbation[cp.indices]) @ q).sum() - kw["sparsity_penalty"] * cp.indices.size
    assert cp.objective == pytest.approx(attacked, abs=1e-12)


@pytest.mark.parametrize("make", [lambda r: NormBall(2, r), lambda r: NormBall("inf", r / 4),
                                  lambda r: NormBall(1, r), lambda r: KSparse(r, 3, 1)],
                         ids=["l2", "linf", "l1", "ksparse"])
def test_robust_optimum_is_nonincreasing_in_rho_vec(make):
    inst = _instance(10, n=10)
    kw = _params(inst, 10)
    values = []
    for rho in (0.0, 0.01, 0.03, 0.06, 0.1, 0.2):
        uset = make(rho)
        builder = build_ksparse_lpdual_model if isinstance(uset, KSparse) else build_robust_norm_model
        values.append(_solve(builder(inst, uset, **kw)).objective)
    assert all(b <= a + 1e-9 for a, b in zip(values, values[1:])), values
    assert values[-1] < values[0]  # the uncertainty actually costs something here


def test_statuses_are_honest_at_iteration_and_time_limits():
    inst = _instance(11, n=10)
    kw = _params(inst, 11)
    U = KSparse(0.06, 2, None)
    full = cutting_plane_ksparse(inst, U, **kw, query_similarity="inner",
                                 options=CuttingPlaneOptions(solver=SOLVER, cut_type="single"))
    assert full.status == "optimal"
    assert full.iterations > 1  # this instance needs several rounds
    if full.iterations > 1:
        one = cutting_plane_ksparse(inst, U, **kw, query_similarity="inner",
                                    options=CuttingPlaneOptions(solver=SOLVER, max_iter=1, cut_type="single"))
        assert one.status == "iteration_limit" and not one.proven_optimal
        assert one.bound >= full.objective - 1e-9 >= one.objective - 1e-9
        assert one.gap > 0 or one.objective == pytest.approx(full.objective)
    zero = cutting_plane_ksparse(inst, U, **kw, options=CuttingPlaneOptions(solver=SOLVER, time_limit=0.0))
    assert zero.status == "time_limit" and not zero.proven_optimal
    assert zero.iterations == 0 and math.isinf(zero.bound)
    assert zero.objective <= full.objective + 1e-9  # an incumbent (possibly the empty set) is kept


def test_time_limited_exact_solve_is_not_called_optimal():
    """A 40-document pool with a binding cap takes HiGHS seconds; 0.05 s must not say optimal."""
    rng = np.random.default_rng(12)
    d = 16
    base = rng.normal(size=d)
    E = _unit(base + 0.6 * rng.normal(size=(40, d)))
    q = _unit(base + 0.3 * rng.normal(size=d))
    inst = Instance(E, q, k=10, theta=0.5)
    kw = _params(inst, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = solve(build_robust_model(inst, NormBall(2, 0.02), **kw, max_size=10), SOLVER, SolveConfig(time_limit=0.05))
    if r.status == "optimal":  # pragma: no cover - only if HiGHS proves it in 50 ms
        assert r.gap <= 1e-4
    else:
        assert r.status == "time_limit" and not r.proven_optimal


def test_builders_return_models_without_solving_and_validate_inputs():
    inst = _instance(0)
    m, info = build_robust_model(inst, NormBall(2, 0.1), sparsity_penalty=0.3, rho_div=0.5)
    assert all(m.x[i].value is None for i in m.x)  # nothing was solved
    assert len(m.x) == inst.n == info.n_items
    assert not hasattr(m, "robust_meta")  # builder data travels in the info, not on the model
    assert info.kind == m.name and info.sparsity_penalty == 0.3 and info.bounds.shape == (inst.n, inst.n)
    assert info.query_similarity == "cosine"  # the report's relevance by default
    assert build_ksparse_lpdual_model(inst, KSparse(0.1, 2), sparsity_penalty=0.1, rho_div=0.5).info.query_similarity == "inner"
    with pytest.raises(ValueError, match="sparsity_penalty"):
        build_robust_model(inst, NormBall(2, 0.1), sparsity_penalty=-1, rho_div=0.5)
    with pytest.raises(TypeError, match="rho_div"):
        build_robust_model(inst, NormBall(2, 0.1), sparsity_penalty=0.1, rho_div="high")
    with pytest.raises(ValueError, match="max_size"):
        build_robust_model(inst, NormBall(2, 0.1), sparsity_penalty=0.1, rho_div=0.5, max_size=0)
    with pytest.raises(TypeError, match="KSparse"):
        build_ksparse_lpdual_model(inst, NormBall(2, 0.1), sparsity_penalty=0.1, rho_div=0.5)
    # the report's cosine is accepted (a sound bound, tested below); a set reaching the origin is refused
    assert build_ksparse_lpdual_model(inst, KSparse(0.1, 2), sparsity_penalty=0.1, rho_div=0.5,
                                      query_similarity="cosine").info.query_similarity == "cosine"
    with pytest.raises(ValueError, match="reaches the origin"):
        build_ksparse_lpdual_model(inst, KSparse(5.0, inst.d), sparsity_penalty=0.1, rho_div=0.5,
                                   query_similarity="cosine")
    with pytest.raises(ValueError, match="query_similarity"):
        build_robust_model(inst, NormBall(2, 0.1), sparsity_penalty=0.1, rho_div=0.5, query_similarity="dot")
    with pytest.raises(TypeError, match="NormBall"):
        build_robust_norm_model(inst, KSparse(0.1, 2), sparsity_penalty=0.1, rho_div=0.5)
    with pytest.raises(ValueError, match="cut_support"):
        cutting_plane_ksparse(inst, KSparse(0.1, 2), sparsity_penalty=0.1, rho_div=0.5,
                              options=CuttingPlaneOptions(cut_support="all"))


@pytest.mark.parametrize("seed", [13, 14])
def test_rho_zero_matches_the_exact_engineers_nominal_sparsity_builder(seed):
    """Cross-check with divopt_rag.models.mip_sparsity.build_sparsity (full McCormick, independent code)."""
    from divopt_rag.models.mip_sparsity import build_sparsity

    inst = _instance(seed, n=10)
    kw = _params(inst, seed)
    nominal = _solve(build_sparsity(inst, kw["sparsity_penalty"], k_max=5, rho_div=kw["rho_div"]))
    for uset in (None, NormBall(1, 0.0), KSparse(0.0, 4, 2)):
        ours = _solve(build_robust_model(inst, uset, **kw, max_size=5))
        assert ours.objective == pytest.approx(nominal.objective, abs=1e-6)
    # and a positive radius never does better than the nominal model
    robust = _solve(build_robust_model(inst, NormBall(2, 0.02), **kw, max_size=5))
    assert robust.objective <= nominal.objective + 1e-9


def test_cutting_plane_starts_from_the_heuristic_top_k():
    """The MIO report's start (Sec. 4.2): the first scenario separates at the start_k most relevant
    documents (they alone are perturbed in it), and that set is the first incumbent when feasible."""
    inst = _instance(6, n=9, d=6)
    kw = _params(inst, 6)
    s = inst.E.double().numpy() @ inst.q.double().numpy()
    for start in (1, 3, 9):
        cp = cutting_plane_ksparse(inst, KSparse(0.05, 2), **kw, query_similarity="inner",
                                   options=CuttingPlaneOptions(start_k=start, solver=SOLVER))
        first = set(np.flatnonzero(cp.scenarios[0]).tolist())
        assert first == set(np.argsort(-s, kind="stable")[:start].tolist())
    default = cutting_plane_ksparse(inst, KSparse(0.05, 2), **kw, query_similarity="inner",
                                    options=CuttingPlaneOptions(solver=SOLVER))
    assert set(np.flatnonzero(default.scenarios[0]).tolist()) == set(np.argsort(-s, kind="stable")[:inst.k].tolist())
    with pytest.raises(ValueError, match="start_k"):
        cutting_plane_ksparse(inst, KSparse(0.05, 2), **kw, options=CuttingPlaneOptions(start_k=0, solver=SOLVER))
