"""The documented robust sweep (docs/howto/robust.md, the block marked ``ci:robust-sweep``) runs as
written, at a small size, and produces the tables and plots the page describes."""
from __future__ import annotations

import json
import re
import shlex
import warnings
from pathlib import Path

import pandas as pd
import pytest

from divopt_rag.experiments.cli.main import main
from divopt_rag.experiments.studies.sweep import PoolSizeWarning
from divopt_rag.robust.records import TEN_SECOND_POOL

DOC = Path(__file__).resolve().parents[2] / "docs" / "howto" / "robust.md"
# the sizes the test shrinks (every other word runs as written): pool, queries, candidates
SMALL = {"n=200": "n=30", "n_queries=3": "n_queries=1", "candidates=20": "candidates=8"}


def _documented_commands() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- ci:robust-sweep -->\s*```bash\n(.*?)```", text, re.S)
    assert block, "docs/howto/robust.md lost its ci:robust-sweep block"
    return [shlex.split(line) for line in block.group(1).replace("\\\n", " ").strip().splitlines()]


@pytest.mark.slow  # a sweep of 20 solves and three figures: about 5 s on a quiet machine
def test_documented_robust_sweep_runs_and_writes_its_tables_and_plots(tmp_path, capsys, monkeypatch):
    commands = _documented_commands()
    assert [c[:2] for c in commands] == [["divopt-rag", "sweep"], ["divopt-rag", "plot"]]
    assert all(w in commands[0] for w in SMALL), "the documented sweep changed: update SMALL"
    methods = commands[0][commands[0].index("--methods") + 1:commands[0].index("--k")]
    # the documented pool is one each robust model proves within 10 s (no PoolSizeWarning at full size)
    assert all(20 <= TEN_SECOND_POOL[m] for m in methods if m in TEN_SECOND_POOL)
    monkeypatch.chdir(tmp_path)  # its relative --out folders land here
    small = [SMALL.get(w, w) for w in commands[0][1:]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*small, "--n-workers", "0", "--no-progress"]) == 0
    assert not [w for w in caught if issubclass(w.category, PoolSizeWarning)]
    out = capsys.readouterr().out
    assert out.startswith("axes (runs per query): robust_l2: ") and "mmr: k, theta (2)" in out
    assert "k is only the ranking metrics' cutoff of robust_l2, robust_linf, robust_ksparse_cp" in out
    table = pd.read_parquet(tmp_path / "results" / "robust" / "results.parquet")
    robust = table[table["method"] != "mmr"]
    # 3 rho x 2 lambda per robust model: theta and k never multiply them
    assert robust.groupby("method").size().to_dict() == {"robust_ksparse_cp": 6, "robust_l2": 6, "robust_linf": 6}
    assert robust["theta"].isna().all() and robust["k"].isna().all() and (table["status"] == "ok").all()
    for col in ("set_size", "nominal_relevance", "worst_case_relevance", "price_of_robustness",
                "worst_case_avg_similarity", "model_status", "model_bound", "model_gap", "recall@5", "set_recall"):
        assert robust[col].notna().any(), col
    assert robust["objective"].isna().all() and set(robust["objective_kind"]) == {"robust_sparsity"}
    assert all(isinstance(json.loads(i), dict) for i in robust["info"])
    long = pd.read_parquet(tmp_path / "results" / "robust" / "measures.parquet")
    assert {"price_of_robustness", "set_recall", "recall"} <= set(long["measure"])
    assert main(commands[1][1:]) == 0
    written = sorted(p.name for p in (tmp_path / "results" / "plots").iterdir())
    assert written == sorted(f"{n}.{e}" for n in ("robust_vs_rho_vec", "robust_vs_sparsity_penalty",
                                                  "robust_stability") for e in ("png", "svg"))
