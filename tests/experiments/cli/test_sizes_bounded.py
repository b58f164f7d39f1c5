"""Sizes bounded up front (issue 48, item 9): what cannot run is exit 2 before any work.

* a sweep grid is counted before it is expanded (3e7 runs were still planning after 45 s at
  786 MiB): more than RUNS_MAX runs is refused naming the count and the bound;
* ``bench exact --n 100000000`` recorded 1e8 and ran 2002; ``bench latency --repeats 1e9``,
  ``bench quality --corpus-size 1e8`` and ``--pool 1e9`` were accepted: each flag's type carries
  the bound declared in models/domains.py;
* a ``results.parquet`` that is a folder was found only after every run: found before any.
"""
from __future__ import annotations

import json

import pytest

from divopt_rag.experiments.cli import main as cli
from divopt_rag.experiments.methods import method_accepts
from divopt_rag.experiments.studies.grid import SweepConfig
from divopt_rag.experiments.studies import sweep
from divopt_rag.experiments.studies.sweep import grid_runs
from divopt_rag.models.domains import CORPUS_MAX, EXACT_N_MAX, REPEATS_MAX, RUNS_MAX

TINY = {"name": "synthetic", "n": 30, "d": 8, "n_queries": 1, "seed": 3}


def test_a_grid_of_3e7_runs_is_refused_before_it_is_expanded(tmp_path, capsys, monkeypatch):
    config = tmp_path / "big.json"
    grid = {"k": list(range(1, 3001)), "theta": [i / 10_000 for i in range(10_000)]}
    config.write_text(json.dumps({"dataset": TINY, "methods": ["topk"], "grid": grid}))
    # the count is a product of the axes' lengths: expanding the grid is never needed to refuse it
    def no_expansion(*a, **k):
        raise AssertionError("the grid was expanded before it was counted")

    monkeypatch.setattr(sweep, "expand_grid", no_expansion)
    out = tmp_path / "out"
    assert cli.main(["sweep", "--config", str(config), "--out", str(out), "--n-workers", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "30,000,000 runs" in err and f"{RUNS_MAX:,}" in err, err
    assert not out.exists()


def test_the_count_is_what_the_grid_expands_to():
    cfg = SweepConfig.from_dict({"dataset": TINY, "methods": {"mmr": {}, "topk": {}},
                                 "grid": {"k": [2, 3], "theta": [0.1, 0.5, 0.9]}})
    assert grid_runs(cfg, method_accepts) == 2 * 3 * 2


@pytest.mark.parametrize("argv, flag, bound", [
    (["bench", "exact", "--n", "100000000"], "--n", EXACT_N_MAX),
    (["bench", "latency", "--repeats", "1000000000"], "--repeats", REPEATS_MAX),
    (["bench", "quality", "--corpus-size", "100000000"], "--corpus-size", CORPUS_MAX),
    (["bench", "quality", "--pool", "1000000000"], "--pool", EXACT_N_MAX),
])
def test_sizes_that_cannot_run_are_refused_by_their_flag(tmp_path, capsys, argv, flag, bound):
    out = tmp_path / "out"
    assert cli.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag}: expected an integer in" in err and f", {bound}]" in err, err
    assert not out.exists()


def test_a_results_parquet_that_is_a_folder_is_found_before_any_run(tmp_path, capsys):
    config = tmp_path / "s.json"
    config.write_text(json.dumps({"dataset": TINY, "methods": ["topk"], "grid": {"k": [3], "theta": [0.5]}}))
    out = tmp_path / "out"
    (out / "results.parquet").mkdir(parents=True)
    assert cli.main(["sweep", "--config", str(config), "--out", str(out), "--n-workers", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "results.parquet: is not a file" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["results.parquet"]  # no part, no config: no run was made
