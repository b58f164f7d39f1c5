"""`divopt-rag bench exact` on a stand-in corpus: tidy rows, proven optima equal brute force."""
import argparse
import itertools

import numpy as np
import pandas as pd
import pytest

import divopt_rag.experiments.studies.bench_exact as bench
from divopt_rag.experiments.cli import arguments
from divopt_rag.models import Instance, ccbqp_objective


def _fake_corpus(n_queries, extra, seed, cache_dir):
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((40, 6))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    Q = rng.standard_normal((n_queries, 6))
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    return P, Q, [f"w{i}" for i in range(n_queries)], 40


def _args(tmp_path, **kw):
    p = argparse.ArgumentParser()
    arguments.bench_exact(p)
    argv = ["--n", "10", "--k", "3", "--theta", "0.4", "0.9", "--queries", "2", "--time-limit", "30",
            "--out", str(tmp_path / "b"), "--no-progress"]
    for key, val in kw.items():
        argv += [f"--{key.replace('_', '-')}"] + ([str(v) for v in val] if isinstance(val, list) else [str(val)])
    return p.parse_args(argv)


def test_bench_rows_match_brute_force(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "load_corpus", _fake_corpus)
    args = _args(tmp_path)
    assert bench.main(args) == 0
    df = pd.read_parquet(tmp_path / "b" / "results.parquet")
    assert (tmp_path / "b" / "results.csv").exists()
    solvers = bench.available_solvers() + ["bnb"]  # divopt's own engine is always there
    assert len(df) == 2 * 2 * len(solvers) and set(df["method"]) == {"exact"} and set(df["solver"]) == set(solvers)
    assert df["run_id"].nunique() == 1
    assert set(df["exact_status"]) == {"optimal"} and df["proven_optimal"].all() and df["agrees"].all()
    P, Q, _, _ = _fake_corpus(2, 0, 0, None)
    for (qi, theta), g in df.groupby([df["query_id"].str[1:].astype(int), "theta"]):
        inst, orig = Instance(P, Q[qi], k=3, theta=theta).top_n(10)
        best = max(ccbqp_objective(inst, list(s)) for s in itertools.combinations(range(10), 3))
        np.testing.assert_allclose(g["objective"].to_numpy(float), best, atol=1e-6)
        # 'selected' holds corpus row ids; re-scoring them on the full pool gives the optimum
        full = Instance(P, Q[qi], k=3, theta=theta)
        for sel in g["selected"]:
            assert ccbqp_objective(full, [int(t) for t in sel]) == pytest.approx(best, abs=1e-6)
    out = capsys.readouterr().out
    assert "median_seconds" in out and "wrote" in out


def test_bench_bad_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "load_corpus", _fake_corpus)
    with pytest.raises(ValueError, match="--solvers"):
        bench.run(_args(tmp_path, solvers=["cplex"]))
    with pytest.raises(SystemExit):  # the flag's type refuses it (argparse's exit 2)
        _args(tmp_path, time_limit=0)
    assert "--time-limit: expected a number > 0, got '0'" in capsys.readouterr().err
    args = _args(tmp_path)
    args.time_limit = 0  # the spec checks it too (API users)
    with pytest.raises(ValueError, match="--time-limit must be > 0"):
        bench.run(args)
    assert not (tmp_path / "b").exists()
