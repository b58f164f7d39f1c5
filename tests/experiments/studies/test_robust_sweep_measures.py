"""Robust sweeps a researcher can read: axes that apply, measures that apply, typed method
results, the long measures table, the robust plots and the feasible start of the robust MILPs.
Each truth is independent: brute-force enumeration, plain counting, hand-computed means."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from divopt_rag.experiments import methods
from divopt_rag.experiments.measures import tables
from divopt_rag.experiments.measures.metrics import ilad, row_metrics
from divopt_rag.experiments.measures.tables import measures_table
from divopt_rag.experiments.method_result import MethodResult, robust_result
from divopt_rag.experiments.methods import run_method
from divopt_rag.experiments.plots import robust as plots_robust
from divopt_rag.experiments.studies import sweep as sw
from divopt_rag.experiments.studies.grid import SweepConfig, instance_axes, metric_cutoffs
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.robust.heuristic import peel


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------------
# the feasible start of the robust MILPs, against brute force
# --------------------------------------------------------------------------------------------
def _brute(w, a, max_size=None):
    """max sum w over sets S with sum_{i<j in S} a_ij <= 0 (or |S| <= 1), |S| <= max_size."""
    n, best = len(w), 0.0
    for m in range(1, n + 1 if max_size is None else max_size + 1):
        for S in itertools.combinations(range(n), m):
            if m >= 2 and sum(a[i, j] for i, j in itertools.combinations(S, 2)) > 1e-12:
                continue
            best = max(best, float(w[list(S)].sum()))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_peel_is_feasible_and_never_beats_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 9
    w = rng.normal(0.2, 0.3, n)
    a = rng.normal(0.05 * (seed - 2), 0.3, (n, n))
    a = (a + a.T) / 2
    for cap in (None, 3):
        S = peel(w, a, cap)
        pairs = sum(a[i, j] for i, j in itertools.combinations(S, 2))
        assert S.size <= 1 or pairs <= 1e-12  # robustly feasible
        assert cap is None or S.size <= cap
        assert np.all(w[S] > 0) and float(w[S].sum()) <= _brute(w, a, cap) + 1e-12
    # when every valuable document fits, the start is the optimum itself
    S = peel(np.abs(w) + 0.1, -np.abs(a))
    assert S.tolist() == list(range(n)) and _brute(np.abs(w) + 0.1, -np.abs(a)) == pytest.approx((np.abs(w) + 0.1).sum())


# --------------------------------------------------------------------------------------------
# axes that apply
# --------------------------------------------------------------------------------------------
def _cfg(**grid):
    base = {"k": [5, 10], "theta": [0.5, 0.7], "rho_vec": [0.0, 0.1], "rho_div": [0.8], "sparsity_penalty": [0.1]}
    return SweepConfig(dataset={"name": "synthetic", "n": 30, "d": 8, "n_queries": 1},
                       methods=["robust_l2", "mmr"], grid={**base, **grid})


def test_axes_a_robust_model_does_not_read_neither_multiply_nor_show():
    assert instance_axes("mmr") == ("k", "theta", "pool")
    assert instance_axes("robust_l2") == ("pool",) and instance_axes("robust_l2", {"max_size": "k"}) == ("k", "pool")
    tasks = sw.expand_grid(_cfg(), [(0, "q")], methods.method_accepts)
    robust = [t for t in tasks if t.method == "robust_l2"]
    mmr = [t for t in tasks if t.method == "mmr"]
    assert len(mmr) == 4 and len(robust) == 2  # k x theta for MMR; rho_vec only for the robust model
    assert all(set(t.params) == {"rho_div", "rho_vec", "sparsity_penalty"} for t in robust)
    assert all("rho_vec" not in t.params for t in mmr)
    assert metric_cutoffs(_cfg(), "robust_l2") == [5, 10]
    # its metrics are measured at the grid's k values, so another k grid is another run
    other = sw.expand_grid(_cfg(k=[5]), [(0, "q")], methods.method_accepts)
    assert {t.key for t in robust}.isdisjoint(t.key for t in other if t.method == "robust_l2")
    assert {t.key for t in mmr if t.params["k"] == 5} <= {t.key for t in other}  # MMR at k=5 is the same run
    # a cap at k makes k an axis of the robust model (theta still is not)
    capped = [t for t in sw.expand_grid(_cfg(max_size=["k"]), [(0, "q")], methods.method_accepts) if t.method == "robust_l2"]
    assert len(capped) == 4 and all("k" in t.params and "theta" not in t.params for t in capped)


def test_varying_settings_ignore_rows_of_methods_without_the_parameter():
    t = pd.DataFrame({"method": ["mmr", "mmr", "robust_l2", "robust_l2"], "k": [5, 5, np.nan, np.nan],
                      "theta": [0.5, 0.5, np.nan, np.nan], "rho_vec": [np.nan, np.nan, 0.0, 0.1],
                      "candidates": [np.nan, np.nan, None, None],
                      "params": [json.dumps({"k": 5, "theta": 0.5})] * 2
                      + [json.dumps({"rho_vec": r, "candidates": None}) for r in (0.0, 0.1)]})
    assert tables.varying_settings(t) == ["rho_vec"]  # k, theta: one value where they apply
    t.loc[3, "candidates"] = 20  # None (the whole pool) and 20 are two settings
    t.loc[3, "params"] = json.dumps({"rho_vec": 0.1, "candidates": 20})
    assert tables.varying_settings(t) == ["candidates", "rho_vec"]


# --------------------------------------------------------------------------------------------
# measures that apply
# --------------------------------------------------------------------------------------------
def _instance(n=12, d=6, seed=0):
    rng = np.random.default_rng(seed)
    E = _unit(rng.normal(size=(n, d)) + 1.0)
    q = _unit(rng.normal(size=d) + 1.0)
    return Instance(E, q, k=3, theta=0.6, ids=np.array([f"p{i}" for i in range(n)]))


def test_row_metrics_at_the_cutoffs_they_name_and_of_the_whole_set():
    inst = _instance()
    relevant = {"p1", "p4", "p7", "p9"}
    qrels = {f"p{i}": int(f"p{i}" in relevant) for i in range(inst.n)}
    subtopics = {f"p{i}": i % 3 for i in range(inst.n)}
    sel = [4, 2, 9, 5, 1]
    m = row_metrics(inst, sel, cutoffs=[2, 3, 8], qrels=qrels, subtopics=subtopics)
    ids = [f"p{i}" for i in sel]
    for c in (2, 3, 8):  # plain counting over the first c of the ranking
        assert m[f"recall@{c}"] == pytest.approx(len(relevant & set(ids[:c])) / len(relevant))
        assert m[f"s_recall@{c}"] == pytest.approx(len({int(i[1:]) % 3 for i in ids[:c]}) / 3)
    assert m["set_size"] == 5
    assert m["set_recall"] == pytest.approx(3 / 4) and m["set_precision"] == pytest.approx(3 / 5)
    assert m["set_s_recall"] == 1.0
    assert m["ilad"] == pytest.approx(ilad(inst.E, sel)) and "objective" not in m and "recall" not in m
    one = row_metrics(inst, [4], cutoffs=[3], qrels=qrels)
    assert math.isnan(one["ilad"]) and one["set_size"] == 1 and one["recall@3"] == pytest.approx(1 / 4)
    empty = row_metrics(inst, [], cutoffs=[3], qrels=qrels)
    assert empty["set_size"] == 0 and empty["recall@3"] == 0.0 and empty["set_recall"] == 0.0
    assert math.isnan(empty["set_precision"])


def test_method_results_of_every_kind_and_the_ccbqp_objective_only_at_k():
    inst = _instance()
    sel = run_method(inst, "mmr", {}, seed=0)
    assert sel.kind == "selector" and sel.objective_kind == "ccbqp" and sel.set_size == 3
    assert sel.objective == pytest.approx(ccbqp_objective(inst, sel.indices)) == sel.model_objective
    ex = run_method(inst, "exact", {"solver": "brute"}, seed=0)
    assert ex.kind == "extra" and ex.measures["proven_optimal"] and ex.objective >= sel.objective - 1e-12
    rec = {"indices": np.array([3, 1]), "objective": 0.7, "status": "optimal", "bound": 0.7, "gap": 0.0,
           "nominal_relevance": 0.5, "worst_case_relevance": 0.35, "uncertainty": "l2", "message": "",
           "n_selected": 2, "ccbqp_objective": -9.0, "cuts": 4}
    r = robust_result("robust_l2", rec, rec["indices"], 1.5)
    assert math.isnan(r.objective) and r.objective_kind == "robust_sparsity" and r.model_objective == 0.7
    assert r.measures["price_of_robustness"] == pytest.approx(0.15) and r.measures["model_status"] == "optimal"
    row = r.row()
    assert row["set_size"] == 2 and math.isnan(row["objective"])
    assert json.loads(row["info"]) == {"cuts": 4, "message": "", "uncertainty": "l2"}
    nominal = robust_result("nominal_sparsity", {**rec, "uncertainty": "none"}, rec["indices"], 1.0)
    assert nominal.objective_kind == "nominal_sparsity"
    with pytest.raises(ValueError, match="overwrite"):
        MethodResult("m", "extra", np.arange(2), 0.1, measures={"seconds": 1.0})


def test_measures_table_is_the_long_form_of_the_wide_one():
    wide = pd.DataFrame({
        "run_id": ["r", "r"], "run_key": ["a", "b"], "dataset": ["d", "d"], "query_id": ["q1", "q1"],
        "method": ["mmr", "robust_l2"], "params": [json.dumps({"k": 5, "theta": 0.5}), json.dumps({"rho_vec": 0.1})],
        "k": [5, np.nan], "theta": [0.5, np.nan], "rho_vec": [np.nan, 0.1], "seed": [1, 2], "status": ["ok", "ok"],
        "objective": [2.0, np.nan], "set_size": [5, 1], "recall@5": [0.5, 0.25], "ilad": [0.3, np.nan],
        "model_proven_optimal": pd.array([pd.NA, True], dtype="boolean"), "model_status": [None, "optimal"],
    })
    long = measures_table(wide)
    got = {(r.run_key, r.measure, None if pd.isna(r.cutoff) else int(r.cutoff)): r.value for r in long.itertuples()}
    assert got == {("a", "objective", None): 2.0, ("a", "set_size", None): 5.0, ("a", "recall", 5): 0.5,
                   ("a", "ilad", None): 0.3, ("b", "set_size", None): 1.0, ("b", "recall", 5): 0.25,
                   ("b", "model_proven_optimal", None): 1.0}


# --------------------------------------------------------------------------------------------
# plots: what is drawn equals hand-computed means; stability equals hand-computed Jaccard
# --------------------------------------------------------------------------------------------
def _robust_table():
    rows = []
    sets = {(0.0, "q1"): ["a", "b", "c"], (0.1, "q1"): ["a", "b"], (0.2, "q1"): ["a"],
            (0.0, "q2"): ["x", "y"], (0.1, "q2"): ["x", "y"], (0.2, "q2"): []}
    for (rho, q), s in sets.items():
        rows.append(dict(method="robust_l2", query_id=q, rho_vec=rho, sparsity_penalty=0.1, rho_div=0.8,
                         objective_kind="robust_sparsity", status="ok", selected=s, set_size=len(s),
                         nominal_relevance=0.6 - rho if s else np.nan, worst_case_relevance=0.6 - 2 * rho if s else np.nan,
                         price_of_robustness=rho if s else np.nan,
                         worst_case_avg_similarity=0.5 + rho if len(s) >= 2 else np.nan,
                         model_proven_optimal=(q == "q1" or rho == 0.0), model_gap=0.0 if q == "q1" else 0.2,
                         params=json.dumps({"rho_vec": rho, "sparsity_penalty": 0.1, "rho_div": 0.8})))
    rows.append(dict(method="mmr", query_id="q1", objective_kind="ccbqp", status="ok", selected=["a"], set_size=1,
                     params=json.dumps({"k": 1, "theta": 0.5})))
    return pd.DataFrame(rows)


def test_robust_plot_draws_means_over_queries_and_counts_undefined_similarity(tmp_path):
    from divopt_rag.experiments.plots.figures import save_figure

    fig, data = plots_robust.plot_robust(_robust_table(), "rho_vec")
    assert set(data["method"]) == {"robust_l2"}  # only robust rows
    cell = data.set_index("rho_vec")
    assert cell.loc[0.1, "set_size"] == 2.0 and cell.loc[0.1, "worst_case_avg_similarity"] == pytest.approx(0.6)
    assert cell.loc[0.2, "undefined_similarity"] == 2 and math.isnan(cell.loc[0.2, "worst_case_avg_similarity"])
    assert cell.loc[0.1, "model_proven_optimal"] == 0.5 and cell.loc[0.1, "unproven_gap_median"] == pytest.approx(0.2)
    assert len(fig.axes) == 6 and all(ax.get_title() for ax in fig.axes)  # one facet: nothing else varies
    assert "x: undefined, |S| < 2 (2 of 6 solves)" in fig.axes[3].get_title()
    save_figure(fig, tmp_path, "robust")
    with pytest.raises(ValueError, match="sets 'sparsity_penalty'"):
        plots_robust.plot_robust(_robust_table().drop(columns="sparsity_penalty"), "sparsity_penalty")


def test_stability_is_the_jaccard_distance_between_neighbouring_settings():
    t = plots_robust.stability_table(_robust_table(), "rho_vec")
    got = {(q, a, b): d for q, a, b, d in zip(t["query_id"], t["from"], t["to"], t["jaccard_distance"])}
    assert got == {("q1", 0.0, 0.1): pytest.approx(1 / 3), ("q1", 0.1, 0.2): pytest.approx(1 / 2),
                   ("q2", 0.0, 0.1): 0.0, ("q2", 0.1, 0.2): 1.0}
    fig, mean = plots_robust.plot_stability(_robust_table())
    assert mean.set_index("from")["jaccard_distance"].to_dict() == pytest.approx({0.0: 1 / 6, 0.1: 3 / 4})
    assert fig.axes[0].get_xlabel().startswith("neighbouring rho_vec")


def test_sweep_says_up_front_when_a_robust_pool_exceeds_what_it_proves_in_10_s(tmp_path):
    from divopt_rag.robust.records import TEN_SECOND_POOL

    cfg = _cfg()  # synthetic pools of 30 candidates
    cap = TEN_SECOND_POOL["robust_l2"]
    big = SweepConfig(dataset={"name": "synthetic", "n": cap + 5, "d": 8, "n_queries": 1},
                      methods=["robust_l2", "mmr"], grid=cfg.grid)
    with pytest.warns(sw.PoolSizeWarning, match=rf"robust_l2 will solve pools of {cap + 5} candidates.*"
                                                 rf"--param candidates={cap} "):
        sw.SweepSpec(big).plan(tmp_path / "big")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", sw.PoolSizeWarning)
        sw.SweepSpec(SweepConfig(dataset=big.dataset, methods=["robust_l2"],
                                 grid={**cfg.grid, "candidates": [cap]})).plan(tmp_path / "capped")
