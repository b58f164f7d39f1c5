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
    with pytest.raises(ValueError, match="no alpha_ndcg@10"):
        qt.tidy(df.drop(columns=["alpha_ndcg@10"]))
    with pytest.raises(ValueError, match="several k"):
        qt.tidy(pd.concat([df, df.assign(k=5)]))
