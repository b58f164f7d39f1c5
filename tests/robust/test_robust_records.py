"""Sweep-ready record functions: tidy fields, agreement between formulations, the sweep contract."""
from __future__ import annotations

import inspect
import itertools
import json

import numpy as np
import pandas as pd
import pytest

from divopt_rag.models import Instance
from divopt_rag.robust import MODEL_PARAMETERS, ROBUST_MODELS, NormBall, worst_case_relevance
from divopt_rag.robust.records import robust_ksparse, robust_ksparse_cp, robust_ksparse_lpdual, robust_l2

REQUIRED = {"model", "status", "proven_optimal", "objective", "bound", "gap", "seconds", "indices", "selected",
            "n_selected", "worst_case_relevance", "worst_case_avg_similarity", "nominal_avg_similarity",
            "sparsity_penalty", "rho_div", "rho_vec", "solver"}


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _instance(seed=0, n=14, d=8):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=d)
    E = _unit(base + 0.8 * rng.normal(size=(n, d)))
    q = _unit(base + 0.4 * rng.normal(size=d))
    return Instance(E, q, k=4, theta=0.5, ids=np.array([f"doc{i}" for i in range(n)]))


def _kwargs(name, inst):
    s = (inst.E.double() @ inst.q.double()).numpy()
    kw = dict(sparsity_penalty=float(np.quantile(s, 0.3)), rho_div=0.6, solver="highs", candidates=10)
    if name != "nominal_sparsity":
        kw["rho_vec"] = 0.03
    if "ksparse" in name:
        kw.update(attack_budget=3, protected=1)
    return kw


def test_every_model_returns_a_tidy_record_with_an_exact_objective():
    inst = _instance()
    s = (inst.E.double() @ inst.q.double()).numpy()
    rows = []
    for name, fn in ROBUST_MODELS.items():
        kw = _kwargs(name, inst)
        rec = fn(inst, **kw)
        assert REQUIRED <= set(rec), REQUIRED - set(rec)
        assert rec["status"] in ("optimal", "oracle_gap") and rec["proven_optimal"] == (rec["status"] == "optimal")
        assert rec["query_similarity"] == ("inner" if name == "robust_ksparse_lpdual" else "cosine")
        assert rec["max_size"] is None  # the sparsity penalty sizes the set by default
        idx = np.asarray(rec["indices"])
        top10 = set(np.argsort(-s, kind="stable")[:10].tolist())
        assert set(idx.tolist()) <= top10  # rows of the given instance, within the candidates
        assert rec["n_selected"] == idx.size
        assert rec["selected_ids"] == [f"doc{i}" for i in idx]  # the set, ranked
        if name == "robust_l2":  # ranked by decreasing worst-case cosine (exact for the l2 ball)
            r = worst_case_relevance(inst, NormBall(2, kw["rho_vec"])).values[idx]
            assert np.all(np.diff(r) <= 1e-12)
        if idx.size:
            assert rec["worst_case_relevance"] <= rec["attacked_relevance"] + 1e-12
        # the objective is the worst-case value: perturbed relevance of the selection minus the penalty
        assert rec["objective"] == pytest.approx(
            idx.size * (rec["worst_case_relevance"] - kw["sparsity_penalty"]) if idx.size else 0.0, abs=1e-9)
        if idx.size >= 2:
            assert rec["worst_case_avg_similarity"] <= kw["rho_div"] + 1e-9  # the robust cap holds
            assert rec["worst_case_avg_similarity"] >= rec["nominal_avg_similarity"] - 1e-12
        assert rec["bound"] >= rec["objective"] - 1e-6
        assert set(MODEL_PARAMETERS[name]) <= set(inspect.signature(fn).parameters)
        rows.append(rec)
    df = pd.DataFrame(rows)  # one tidy row per run
    assert len(df) == len(ROBUST_MODELS)
    by = df.set_index("model")["objective"]
    # cosine: the cutting plane's incumbent never beats the compact optimum; uncertainty never helps
    assert by["robust_ksparse_cp"] <= by["robust_ksparse"] + 1e-6
    for name in ("robust_l1", "robust_l2", "robust_linf", "robust_ksparse"):
        assert by[name] <= by["nominal_sparsity"] + 1e-9
    # with the inner product the three k-sparse formulations agree exactly
    kw = _kwargs("robust_ksparse", inst)
    inner = {name: ROBUST_MODELS[name](inst, **kw, query_similarity="inner")["objective"]
             for name in ("robust_ksparse", "robust_ksparse_lpdual", "robust_ksparse_cp")}
    assert inner["robust_ksparse"] == pytest.approx(inner["robust_ksparse_lpdual"], abs=1e-6)
    assert inner["robust_ksparse"] == pytest.approx(inner["robust_ksparse_cp"], abs=1e-6)


def test_defaults_use_the_whole_pool_and_no_size_cap_unless_asked():
    inst = _instance(seed=1, n=12)
    kw = dict(rho_vec=0.01, sparsity_penalty=0.0, rho_div=0.99, solver="highs")
    free = robust_l2(inst, **kw)
    # lambda = 0 and a loose cap: every document with a positive worst-case cosine is worth taking
    assert free["candidates_used"] == inst.n and free["candidates"] is None
    assert free["n_selected"] > inst.k
    capped = robust_l2(inst, **kw, max_size="k", candidates=8)
    assert capped["n_selected"] <= inst.k and capped["candidates_used"] == 8
    assert capped["max_size"] == inst.k


def test_sweep_grid_of_the_issue_runs_and_is_monotone_in_rho_vec():
    """The issue's grid on one small query: rho_vec x sparsity_penalty x rho_div x attack_budget."""
    inst = _instance(seed=3, n=12, d=10)
    recs = []
    for rho, lam, rd, K in itertools.product((0.02, 0.05), (0.5, 0.65, 0.72), (0.8, 0.9), (20, 40, 80)):
        recs.append(robust_ksparse(inst, rho_vec=rho, attack_budget=K, sparsity_penalty=lam, rho_div=rd,
                                   solver="highs", candidates=8))
    df = pd.DataFrame(recs)
    assert len(df) == 36 and (df["status"] == "optimal").all()
    wide = df.pivot_table(index=["sparsity_penalty", "rho_div", "attack_budget"], columns="rho_vec", values="objective")
    assert (wide[0.05] <= wide[0.02] + 1e-9).all()
    assert set(df["query_similarity"]) == {"cosine"}


def test_records_validate_parameters():
    inst = _instance()
    with pytest.raises(TypeError):
        robust_l2(inst, rho_vec=0.1, sparsity_penalty=0.1, rho_div=0.5, attack_budget=3)  # not an l2 parameter
    with pytest.raises(ValueError, match="rho_vec"):
        robust_l2(inst, rho_vec=-0.1, sparsity_penalty=0.1, rho_div=0.5, solver="highs")
    with pytest.raises(ValueError, match="attack_budget"):
        robust_ksparse_lpdual(inst, rho_vec=0.1, attack_budget=-2, sparsity_penalty=0.1, rho_div=0.5)
    with pytest.raises(ValueError, match="candidates"):
        robust_l2(inst, rho_vec=0.1, sparsity_penalty=0.1, rho_div=0.5, candidates=0)
    no_query = Instance(inst.E, relevance=np.ones(inst.n), k=3, theta=0.5)
    with pytest.raises(ValueError, match="query vector q"):
        robust_l2(no_query, rho_vec=0.1, sparsity_penalty=0.1, rho_div=0.5, solver="highs")


def test_cutting_plane_record_reports_time_limit_honestly():
    inst = _instance(seed=4)
    rec = robust_ksparse_cp(inst, rho_vec=0.03, attack_budget=3, sparsity_penalty=0.0, rho_div=0.6,
                            solver="highs", time_limit=0.0)
    assert rec["status"] == "time_limit" and not rec["proven_optimal"]
    assert np.isnan(rec["bound"]) and rec["iterations"] == 0


def test_sweep_runner_accepts_the_registry():
    sweep = pytest.importorskip("divopt_rag.experiments.methods")
    inst = _instance(seed=5)
    assert "robust_ksparse_cp" in sweep.available_methods()
    assert sweep.method_accepts("robust_ksparse", "attack_budget")
    assert not sweep.method_accepts("robust_l2", "attack_budget")  # the grid projects per model
    params = dict(rho_vec=0.02, sparsity_penalty=0.2, rho_div=0.6, solver="highs")
    out = sweep.run_method(inst, "robust_l2", params, seed=0)
    rec = robust_l2(inst, **params)
    assert out.kind == "robust" and out.measures["model_status"] == rec["status"] == "optimal"
    assert out.indices.tolist() == list(rec["indices"]) and out.set_size == rec["n_selected"]
    # the robust objective is the model's; the CCBQP objective is undefined (no theta, no k)
    assert out.objective_kind == "robust_sparsity" and np.isnan(out.objective)
    assert out.model_objective == pytest.approx(rec["objective"], abs=1e-12)
    assert out.model_objective == pytest.approx(out.info["solver_objective"], abs=1e-6)
    assert out.measures["price_of_robustness"] == pytest.approx(
        rec["nominal_relevance"] - rec["worst_case_relevance"], abs=1e-12)
    row = out.row()
    assert row["model_bound"] == rec["bound"] and row["model_gap"] == rec["gap"]
    assert "ccbqp_objective" not in json.loads(row["info"]) and not any(c.startswith("info_") for c in row)
