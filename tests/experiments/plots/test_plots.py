"""Plots: the data drawn equals hand-computed aggregates; PNG and SVG files are written."""
import json

import numpy as np
import pandas as pd
import pytest

from divopt_rag.experiments.plots import figures as P


def _check_files(paths):
    png, svg = paths
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]


def test_pareto_front_hand_case():
    x = [1, 2, 3, 2, 0.5, np.nan]
    y = [3, 2, 1, 1, 3, 9]
    # (2,1) is dominated by (2,2) and (3,1); (0.5,3) by (1,3); the NaN point never counts
    assert P.pareto_front(x, y).tolist() == [0, 1, 2]
    assert P.pareto_front([1, 1], [1, 1]).tolist() == [0, 1]  # equal points do not dominate each other


def test_pareto_plot_means_over_queries(tmp_path):
    df = pd.DataFrame({
        "method": ["a", "a", "a", "a", "b", "b", "b", "b", "exact", "x"],
        "theta": [0.5, 0.5, 0.9, 0.9, 0.5, 0.5, 0.9, 0.9, 0.5, 0.5],
        "query_id": ["q1", "q2"] * 5,
        "ilad": [0.4, 0.6, 0.2, 0.2, 0.9, 0.7, 0.1, 0.3, 0.5, 0.5],
        "recall": [0.5, 0.7, 0.9, 0.7, 0.2, 0.4, 0.1, 0.1, 0.6, 0.6],
        "status": ["ok"] * 9 + ["error"],
    })
    fig, data = P.plot_pareto(df)
    assert "x" not in set(data.method)  # error rows are not drawn
    a05 = data[(data.method == "a") & (data.theta == 0.5)].iloc[0]
    assert (a05.ilad, a05.recall) == pytest.approx((0.5, 0.6))
    # points: a(0.5,0.6) a(0.2,0.8) b(0.8,0.3) b(0.2,0.1) exact(0.5,0.6)
    front = data[data.pareto][["method", "theta"]].apply(tuple, axis=1).tolist()
    assert set(front) == {("a", 0.5), ("a", 0.9), ("b", 0.5), ("exact", 0.5)}
    _check_files(P.save_figure(fig, tmp_path, "pareto"))


def test_latency_plot_from_csv_and_json(tmp_path):
    rows = [dict(method=m, n=n, d=8, k=k, theta=t, seconds=s, gemv_seconds=1e-4, gemv_equivalents=s / 1e-4)
            for m, s0 in (("fw", 1e-3), ("mmr", 5e-3)) for n in (100, 1000) for k in (5, 10)
            for t, s in ((0.5, s0 * k), (0.9, s0 * k * 3))]
    pd.DataFrame(rows).to_csv(tmp_path / "latency.csv", index=False)
    (tmp_path / "latency.json").write_text(json.dumps({"rows": rows}))
    for f in ("latency.csv", "latency.json"):
        fig, data = P.plot_latency(P.read_table(tmp_path / f))
        # theta varies: each theta has its own panel, never averaged with the other
        for theta, want in ((0.5, 5e-3 * 10), (0.9, 5e-3 * 10 * 3)):
            cell = data[(data.method == "mmr") & (data.n == 1000) & (data.k == 10) & (data.theta == theta)]
            assert len(cell) == 1 and cell["seconds"].iloc[0] == pytest.approx(want)
        assert len(fig.axes) == 4  # one panel per (n, theta); d is one value
        titles = sorted(ax.get_title() for ax in fig.axes)
        assert titles == ["n=100, theta=0.5", "n=100, theta=0.9", "n=1000, theta=0.5", "n=1000, theta=0.9"]
        assert "one panel per n, theta" in fig._suptitle.get_text()
        one, _ = P.plot_latency(P.read_table(tmp_path / f), theta=0.9)
        assert len(one.axes) == 2
    _check_files(P.save_figure(fig, tmp_path, "lat"))
    with pytest.raises(ValueError, match="needs column"):
        P.plot_latency(pd.DataFrame({"method": ["a"]}))


def test_gap_plot_marks_upper_bounds(tmp_path):
    df = pd.DataFrame({
        "method": ["m1", "m1", "m2", "m2", "exact", "exact"],
        "theta": [0.5] * 6,
        "gap": [0.0, 0.2, 0.1, 0.3, 0.0, 0.0],
        "gap_kind": ["exact", "upper_bound", "exact", "exact", "exact", "upper_bound"],
        "exact_hit": pd.array([True, pd.NA, False, False, True, pd.NA], dtype="boolean"),
    })
    fig, data = P.plot_gaps(df)
    m1 = data[data.method == "m1"].iloc[0]
    assert m1.mean_gap == pytest.approx(0.1) and m1.unproven == 1 and m1.hit_rate == 1.0 and m1.rows == 2
    m2 = data[data.method == "m2"].iloc[0]
    assert m2.hit_rate == 0.0 and m2.unproven == 0 and m2.p95_gap == pytest.approx(0.1 + 0.95 * 0.2)
    assert "exact" not in set(data.method)
    _check_files(P.save_figure(fig, tmp_path, "gaps"))


def test_certified_and_param_plots(tmp_path):
    full = pd.DataFrame({"theta": [0.5, 0.5, 0.9], "certified": [True, False, True],
                         "bound_gap": [0.0, 0.25, 0.0], "n_survivors": [10, 300, 12]})
    fig, data = P.plot_certified(full)
    assert data.certified_fraction.tolist() == [0.5, 1.0]
    assert data.mean_bound_gap_uncertified.iloc[0] == pytest.approx(0.25)
    _check_files(P.save_figure(fig, tmp_path, "cert"))
    sweep = pd.DataFrame({"method": ["robust_fw"] * 4 + ["fw"], "rho_vec": [0.0, 0.0, 0.1, 0.1, np.nan],
                          "recall": [0.2, 0.4, 0.5, 0.5, 0.9], "ilad": [0.1, 0.1, 0.3, 0.5, 0.0],
                          "status": ["ok"] * 5})
    fig, data = P.plot_param_effect(sweep, "rho_vec", ("recall", "ilad", "missing_metric"))
    assert data.recall.tolist() == pytest.approx([0.3, 0.5]) and data.ilad.tolist() == pytest.approx([0.1, 0.4])
    assert "fw" not in set(data.method)
    _check_files(P.save_figure(fig, tmp_path, "rho"))


def test_cli_reads_files_only(tmp_path, capsys):
    from divopt_rag.experiments.cli.main import main

    df = pd.DataFrame({"method": ["a", "b"] * 2, "theta": [0.5, 0.5, 0.9, 0.9], "ilad": [0.1, 0.2, 0.3, 0.4],
                       "recall": [0.4, 0.3, 0.2, 0.1], "gap": [0.0, 0.1, 0.0, 0.2],
                       "sparsity_penalty": [0.1, 0.1, 0.2, 0.2], "objective": [1.0, 2.0, 3.0, 4.0]})
    df.to_parquet(tmp_path / "r.parquet")
    assert main(["plot", "all", "-i", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "out")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == sorted(f"{n}.{e}" for n in ("gaps", "pareto_recall_vs_ilad", "robust_sparsity_penalty")
                           for e in ("png", "svg"))
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"wrote 6 files in {tmp_path / 'out'}"
    assert main(["plot", "gaps", "-i", str(tmp_path / "nope.parquet"), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"divopt-rag plot: --input: expected an existing result file or folder, got '{tmp_path / 'nope.parquet'}' "
        f"(no such file or folder) (see divopt-rag plot --help)"]


def test_output_names_never_leave_the_out_folder(tmp_path, capsys):
    # `plot --x 'x/../../escaped'` wrote outside --out
    from divopt_rag.experiments.cli.main import main

    df = pd.DataFrame({"method": ["a", "b"], "theta": [0.5, 0.9], "ilad": [0.1, 0.2], "recall": [0.4, 0.3]})
    df.to_parquet(tmp_path / "r.parquet")
    assert main(["plot", "pareto", "-i", str(tmp_path / "r.parquet"), "--x", "x/../../escaped", "--out",
                 str(tmp_path / "deep" / "out")]) == 2
    assert "--x: expected a column or metric name, got 'x/../../escaped'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]
    from divopt_rag.experiments.engine.store import inside, safe_name

    assert safe_name("x/../../escaped") == "x_____escaped" and safe_name("../.hidden") == "__.hidden"
    assert safe_name("recall@10") == "recall@10"
    with pytest.raises(ValueError, match="outside its folder"):
        inside(tmp_path / "out", "../escaped.png")
