"""The demo and latency commands produce the tidy files they promise (no timing assertions)."""
import json

import numpy as np
import pytest
import pandas as pd
import pytest

from divopt_rag.experiments.cli.main import main
from divopt_rag.solvers import instance_methods


def test_demo_writes_one_row_per_method_and_a_plot(tmp_path):
    assert main(["demo", "--n", "2000", "--d", "32", "--k", "6", "--out", str(tmp_path)]) == 0
    df = pd.read_parquet(tmp_path / "demo.parquet")
    assert sorted(df["method"]) == instance_methods()
    assert (tmp_path / "demo.png").stat().st_size > 1000 and (tmp_path / "demo.svg").exists()
    assert df["selected"].map(len).eq(6).all() and df["run_id"].nunique() == 1
    # recomputed here from narrow_cone's own labels and the planted clusters of synthetic_dataset's qrels
    from divopt_rag.data.synthetic import narrow_cone, synthetic_dataset
    from divopt_rag.models import Instance, ccbqp_objective

    E, q, labels = narrow_cone(2000, 32, seed=0)
    ds, _, _ = synthetic_dataset(2000, 32, seed=0)
    relevant_rows = {int(p[1:]) for p in ds.qrels["q0"]}
    inst = Instance(E, q, k=6, theta=0.7)
    for _, r in df.iterrows():
        idx = np.array([int(p.rsplit("-d", 1)[1]) for p in r["selected"]])  # passage ids "q0-d<row>"
        # the reported objective is the CCBQP objective of the reported indices
        assert abs(ccbqp_objective(inst, idx) - r["objective"]) < 1e-9
        assert r["clusters"] == len(set(labels[idx]))
        assert r["relevant_clusters"] == len({labels[i] for i in idx if i in relevant_rows})
        assert r["relevance"] == pytest.approx(float((E[idx] @ q).mean()), abs=1e-6)
    assert (df["relevant_planted"] == len({labels[i] for i in relevant_rows})).all()


def test_random_set_reference_is_the_pool_average():
    """Expected ILAD and relevance of a random k-set, against enumeration of every pair."""
    from itertools import combinations

    from divopt_rag.experiments.studies.demo import random_set_reference

    rng = np.random.default_rng(3)
    E = rng.standard_normal((25, 7))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.standard_normal(7)
    q /= np.linalg.norm(q)
    pairs = [1.0 - float(E[i] @ E[j]) for i, j in combinations(range(25), 2)]
    ilad_, rel = random_set_reference(E, q)
    assert ilad_ == pytest.approx(np.mean(pairs), abs=1e-12)
    assert rel == pytest.approx(float(np.mean(E @ q)), abs=1e-12)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_demo_figure_labels_do_not_overlap_and_axes_start_at_zero(tmp_path):
    """Render the picture and measure it: no two texts of the relevance-diversity panel overlap,
    no two leader lines cross, every axis starts at 0, every method is named once."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Annotation, Text

    from divopt_rag.experiments.studies.demo import _crosses, demo_figure, run_demo

    df = run_demo(n=1500, d=24, k=5, theta=0.6, seed=4)
    # two extra methods with the set of "topk" and one crowding point: labels must still separate
    extra = df[df["method"] == "topk"].assign(method="topk_copy")
    fig = demo_figure(pd.concat([df, extra], ignore_index=True))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    scatter, clusters, gap = fig.axes
    notes = [t for t in scatter.texts if isinstance(t, Annotation)]
    named = " ".join(t.get_text() for t in notes)
    assert all(m in named for m in instance_methods() + ["topk_copy"])
    boxes = [Text.get_window_extent(t, renderer) for t in scatter.texts]  # the text, not its leader line
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    lines = [(t.xy, scatter.transData.inverted().transform(scatter.transAxes.transform(t.xyann))) for t in notes]
    assert not any(_crosses(p1, q1, p2, q2) for i, (p1, q1) in enumerate(lines) for p2, q2 in lines[i + 1:])
    for ax in (scatter, clusters, gap):
        assert ax.get_xlim()[0] == 0
    assert scatter.get_ylim()[0] == 0


@pytest.mark.parametrize("seed", range(20))
def test_label_spread_keeps_labels_apart_and_inside(seed):
    from divopt_rag.experiments.studies.demo import _spread

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 12))
    targets = np.sort(rng.uniform(0, 1, m))[::-1]
    heights = rng.uniform(0.02, 0.08, m)
    y = _spread(targets, heights, lo=0.02, hi=0.98)
    gaps = (y[:-1] - heights[:-1] / 2) - (y[1:] + heights[1:] / 2)
    assert (gaps >= -1e-12).all()
    assert y[0] + heights[0] / 2 <= 0.98 + 1e-12 and y[-1] - heights[-1] / 2 >= 0.02 - 1e-12


def test_bench_latency_tiny_grid(tmp_path):
    rc = main(["bench", "latency", "--n", "3000", "--d", "16", "--k", "5", "--theta", "0.5,0.9",
               "--repeats", "1", "--langchain", "500,5", "--out", str(tmp_path)])
    assert rc == 0
    df = pd.read_csv(tmp_path / "latency.csv")
    methods = set(instance_methods())  # the registry: every selector that runs on an Instance alone
    assert set(df["method"]) == methods
    assert len(df) == len(methods) * 2 and (df["seconds"] > 0).all() and (df["gemv_seconds"] > 0).all()
    np.testing.assert_allclose(df["gemv_equivalents"], df["seconds"] / df["gemv_seconds"])
    meta = json.loads((tmp_path / "latency.json").read_text())
    assert meta["langchain"]["mmr"]["same_selection"] is True and meta["langchain"]["mmr_lazy"]["same_selection"] is True
    assert {"fw_gemv_equivalents", "dpp_over_mmr", "mmr_over_langchain", "mmr_lazy_over_langchain", "fw_ws_ms/fw",
            "fw_ws_ms/mmr"} <= set(meta["targets"])
    assert meta["targets"]["fw_ws_ms/fw"]["per_cell"]["cells"] == 2
    ratios = pd.read_csv(tmp_path / "latency_ratios.csv")
    np.testing.assert_allclose(ratios["fw_ws_ms/fw"], ratios["fw_ws_ms_seconds"] / ratios["fw_seconds"])
    assert meta["env"]["cpu_count"] >= 1 and "load_average" in meta["env"]
    # the one-pass floor: a GEMV where the default's last certificate compared < n/4 rows, else the
    # pass that compares every row, over MMR's time in the same cell
    d = df[df.method == "fw_ws_ms"].set_index("theta")
    assert (df["dense_pass_seconds"] > 0).all() and (d["compared"] >= 0).all()
    floor = np.where(d["compared"] >= 3000 / 4, d["dense_pass_seconds"], d["gemv_seconds"])
    mmr = df[df.method == "mmr"].set_index("theta")["seconds"]
    np.testing.assert_allclose(ratios.set_index("theta")["one_pass/mmr"], floor / mmr.loc[d.index].to_numpy())
    assert meta["targets"]["one_pass/mmr"]["cells"] == 2


def test_unknown_command_exits_with_usage(capsys):
    assert main(["nope"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "divopt-rag: COMMAND: invalid choice: 'nope' (choose from 'demo', 'bench', 'certify', 'sweep', 'plot', "
        "'reproduce', 'lib') (see divopt-rag --help)"]


def test_bench_quality_small_rows_match_brute_force(tmp_path, monkeypatch):
    import itertools

    import divopt_rag.experiments.studies.bench_quality as bq
    from divopt_rag.data import load
    from divopt_rag.models import Instance, ccbqp_objective

    import divopt_rag.experiments.studies.sweep as sweep_module

    data = load("synthetic", n=30, d=6, n_queries=2, seed=1)
    real = sweep_module.load_dataset
    # a stand-in for the WordNet glosses (the small part's dataset)
    monkeypatch.setattr(sweep_module, "load_dataset", lambda spec, **kw: data if spec["name"] == "wordnet_glosses"
                        else real(spec, **kw))
    assert main(["bench", "quality", "--parts", "small", "--methods", "topk,mmr,fw,fw_ms", "--queries", "2",
                 "--pool", "8", "--k", "3", "--theta", "0.5,0.9", "--cache-dir", str(tmp_path / "cache"),
                 "--out", str(tmp_path / "q")]) == 0
    df = pd.read_parquet(tmp_path / "q" / "small" / "results.parquet")
    df = df[df.method != "exact"]
    assert len(df) == 2 * 2 * 4 and df["run_id"].nunique() == 1 and df["proven_optimal"].all()
    for (qid, theta), g in df.groupby(["query_id", "theta"]):
        j = data.query_ids.index(qid)
        rows = data.pools[j]
        E, q = data.E[rows], data.Q[j]
        top = sorted(range(len(rows)), key=lambda i: (-float(E[i] @ q), i))[:8]
        inst = Instance(E[top], q, k=3, theta=theta)
        opt = max(ccbqp_objective(inst, list(s)) for s in itertools.combinations(range(8), 3))
        for r in g.itertuples():
            assert r.optimum == pytest.approx(opt, abs=1e-7) and r.gap_kind == "exact"
            assert r.gap == pytest.approx(max(0.0, (opt - r.objective) / 6), abs=1e-7)
            assert bool(r.exact_hit) == (r.gap <= 1e-7)
    summary = pd.read_csv(tmp_path / "q" / "quality_summary.csv").set_index(["theta", "method"])
    for (m, theta), g in df.groupby(["method", "theta"]):  # per theta: the summary never mixes two
        assert summary.loc[(theta, m), "hit_rate"] == pytest.approx(g["exact_hit"].astype(float).mean())
        assert summary.loc[(theta, m), "rows"] == 2


def test_bench_quality_large_and_batch_parts_tiny(tmp_path):
    out = tmp_path / "q"
    assert main(["bench", "quality", "--parts", "large,batch", "--large-n", "3000", "--batch-n", "3000",
                 "--large-d", "16", "--large-k", "5", "--large-queries", "1", "--large-theta", "0.4,0.9",
                 "--large-methods", "fw,fw_ls,fw_ws_ms,mmr", "--repeats", "1", "--batch-queries", "2",
                 "--batch-thetas", "0.3,0.8", "--out", str(out)]) == 0
    df = pd.read_csv(out / "large" / "results.csv")
    assert set(df["method"]) == {"fw", "fw_ls", "fw_ws_ms", "mmr"} and len(df) == 4 * 2
    for (_, _, _), cell in df.groupby(["query_id", "k", "theta"]):  # the win flag agrees with the objectives
        f = cell.set_index("method")["objective"]
        wins = bool((f["fw_ws_ms"] >= f.drop("fw_ws_ms") - 1e-9 * 20).all())
        assert (cell["default_wins"] == wins).all()
    np.testing.assert_allclose(df[df.method == "fw"]["ratio_to_fw"], 1.0)
    meta = json.loads((out / "quality.json").read_text())
    batch = next(b for b in meta["batch"] if b["method"] == "batched_default")
    assert batch["single_method"] == "fw_ws_ms" and batch["same_sets"] == 4
    assert {"time<=3x_fw(per cell)", "f>=every_other_method", "batched_default>=10x_singles"} <= set(meta["targets"])


def test_demo_bounds_its_work_by_the_size_rule():
    """Every selector at the default size; above n k^2 = DEMO_WORK_MAX only the light ones
    (issue 46: n = 5000, k = 4000 used to run every selector for minutes)."""
    from divopt_rag.experiments.studies.demo import DEMO_WORK_MAX, LIGHT, demo_methods

    run, skipped = demo_methods(20_000, 10)
    assert run == instance_methods() and skipped == []
    run, skipped = demo_methods(5000, 4000)
    assert set(run) == LIGHT and sorted(run + skipped) == instance_methods()
    assert demo_methods(2000, 316)[1] == [] and 2000 * 316**2 <= DEMO_WORK_MAX < 2000 * 317**2


def test_demo_above_the_bound_runs_the_light_selectors_and_prints_one_line(capsys):
    from divopt_rag.experiments.studies.demo import LIGHT, run_demo

    df = run_demo(n=300, d=8, k=3, theta=0.6, seed=1, work_max=0)
    assert set(df["method"]) == LIGHT
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("demo: skipped")]
    assert len(lines) == 1 and all(m in lines[0] for m in instance_methods() if m not in LIGHT)
    assert "n k^2 = 2.7e+03 > 0" in lines[0]


def test_demo_help_states_the_rule_the_code_applies():
    from divopt_rag.experiments.cli import main as cli
    from divopt_rag.experiments.studies.demo import DEMO_WORK_MAX, LIGHT

    text = " ".join(cli.build_parser(("demo",)).format_help().split())
    assert f"n k^2 <= {DEMO_WORK_MAX:.0e}".replace("e+0", "e") in text
    assert all(m in text for m in LIGHT)
