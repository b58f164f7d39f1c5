"""benchmarks/quality_ir_table.py: the IR measures of a quality run, averaged per (method, theta)
over its rows, and written into the README's table:quality-ir block (issue 49, item 6)."""
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("quality_ir_table", ROOT / "benchmarks" / "quality_ir_table.py")
qt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(qt)


def results(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for method in ("exact", "mmr", "topk"):
        for theta in (0.3, 0.9):
            for q in range(4):
                rows.append({"status": "ok", "method": method, "theta": theta, "k": 10, "query_id": f"q{q}",
                             **{f"{m}@10": float(rng.random()) for m in qt.MEASURES}})
    rows.append({**rows[0], "status": "error", "alpha_ndcg@10": 99.0})  # a failed row counts for nothing
    return pd.DataFrame(rows)


def test_means_per_method_and_theta_and_the_readme_block(tmp_path):
    df = results()
    table = qt.tidy(df)
    ok = df[df.status == "ok"]
    for (method, theta, measure), value in table.set_index(["method", "theta", "measure"])["mean"].items():
        want = ok[(ok.method == method) & (ok.theta == theta)][f"{measure}@10"].mean()
        assert value == pytest.approx(want)
    readme = tmp_path / "README.md"
    readme.write_text("| method | hit |\n<!-- table:quality -->\n| **topk** | 1 |\n| mmr | 0 |\n<!-- /table:quality -->\n"
                      "<!-- table:quality-ir -->\nold\n<!-- /table:quality-ir -->\nafter\n")
    qt.write_readme(readme, qt.markdown(table, readme))
    text = readme.read_text()
    assert "old" not in text and text.endswith("<!-- /table:quality-ir -->\nafter\n")
    body = text.split("<!-- table:quality-ir -->\n")[1]
    names = [line.split("|")[1].strip() for line in body.splitlines() if line.startswith("| ") and "θ" not in line]
    assert names == ["certified optimum", "topk", "mmr"]  # the quality table's order, the optimum first
    cell = table[(table.method == "mmr") & (table.theta == 0.3)].set_index("measure")["mean"]
    assert "/".join(qt._short(cell[m]) for m in qt.MEASURES) in body


def test_a_run_without_labels_or_with_several_k_is_refused():
    df = results()
    with pytest.raises(ValueError, match="no ndcg@10 column: its dataset carries no qrels"):
        qt.tidy(df.drop(columns=["ndcg@10"]))
    # qrels without subtopic labels: nDCG, and "–" where alpha-nDCG and S-recall would be
    unlabelled = qt.tidy(df.drop(columns=["alpha_ndcg@10", "s_recall@10"]))
    assert unlabelled.loc[unlabelled.measure == "ndcg", "queries"].gt(0).all()
    assert unlabelled.loc[unlabelled.measure != "ndcg", "queries"].eq(0).all()
    text = qt.markdown(unlabelled)
    assert "α-nDCG and S-recall: – (the dataset labels no subtopics)" in text and "–/." in text
    with pytest.raises(ValueError, match="several k"):
        qt.tidy(pd.concat([df, df.assign(k=5)]))


def test_bench_quality_writes_the_ir_table_for_another_dataset_with_qrels(tmp_path, capsys):
    """``divopt-rag bench quality --dataset NAME`` (issue 49, item 6): the small part on a dataset
    other than WordNet's, and the IR table of its rows in OUT/quality_ir.csv and .md, the mean of
    each measure per (method, theta) recomputed here from results.parquet."""
    from divopt_rag.experiments.cli.main import main
    from divopt_rag.experiments.measures import ir_table

    out = tmp_path / "q"
    rc = main(["bench", "quality", "--parts", "small", "--dataset", "synthetic", "--queries", "2", "--pool", "12",
               "--k", "3", "--theta", "0.5", "0.9", "--methods", "mmr", "topk", "--solver", "brute",
               "--out", str(out), "--no-progress"])
    assert rc == 0
    rows = pd.read_parquet(out / "small" / "results.parquet")
    assert rows["status"].eq("ok").all()  # brute enumeration with the bench's MIP gap: ignored, not an error
    table = pd.read_csv(out / "quality_ir.csv")
    assert set(table.method) == {"exact", "mmr", "topk"} and set(table.theta) == {0.5, 0.9}
    ok = rows[rows.status == "ok"]
    for r in table.itertuples():
        want = ok[(ok.method == r.method) & (ok.theta == r.theta)][f"{r.measure}@3"].mean()
        assert r.mean == pytest.approx(want) and r.queries == 2
    md = (out / "quality_ir.md").read_text()
    assert md.strip() == ir_table.markdown(ir_table.tidy(rows)).strip()
    assert "| certified optimum |" in md
    assert "quality_ir.csv" in capsys.readouterr().out.strip().splitlines()[-1]


def test_bench_quality_refuses_wordnet_flags_with_another_dataset(capsys, tmp_path):
    from divopt_rag.experiments.cli.main import main

    assert main(["bench", "quality", "--dataset", "toy", "--corpus-size", "50", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--corpus-size: expected --dataset wordnet_glosses" in err[0]
    assert not (tmp_path / "o").exists()


def test_bench_quality_exits_1_when_a_small_row_failed(tmp_path, capsys, monkeypatch):
    from divopt_rag.experiments.cli.main import main
    from divopt_rag.experiments.studies import runs, sweep

    real = runs.execute_run

    def exact_fails(data, task, *a, **kw):
        if task.method == "exact":
            raise RuntimeError("no exact solve")
        return real(data, task, *a, **kw)

    monkeypatch.setattr(sweep, "execute_run", exact_fails)
    rc = main(["bench", "quality", "--parts", "small", "--dataset", "synthetic", "--queries", "1", "--pool", "8",
               "--k", "2", "--theta", "0.5", "--methods", "topk", "--out", str(tmp_path / "q"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "divopt-rag bench quality (small): 1 of 2 runs failed" in err and "no exact solve" in err
