"""divopt-rag certify on instances small enough for brute force; honest rows; resume after a kill."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from divopt_rag.data import load
from divopt_rag.experiments.studies import certify as C, runs, sweep as sweep_module
from divopt_rag.models import ccbqp_objective
from divopt_rag.models.solve_results import Result
from divopt_rag.solvers import exact as X, instance_methods

CFG = dict(dataset="synthetic", n=10, k=3, thetas=(0.4, 0.9), queries=2, corpus_size=120, dim=8,
           methods=("topk", "mmr", "fw"), solver="brute")


def _brute(inst):
    return max(ccbqp_objective(inst, list(s)) for s in itertools.combinations(range(inst.n), inst.k))


def _pools(cfg):
    """Every query's top-n pool (the pool setting of a sweep), rebuilt from the dataset without the executor."""
    data = load(C.dataset_spec(cfg))
    for i, qid in enumerate(data.query_ids):
        yield qid, runs.query_instance(data, i, pool=cfg.n)[0]


def test_certify_rows_match_brute_force(tmp_path):
    cfg = C.CertifyConfig(**CFG)
    df = C.run_certify(cfg, tmp_path / "c", progress=False).table
    assert len(df) == 2 * 2 * 4  # queries x thetas x (3 methods + exact)
    assert set(df.method) == {"topk", "mmr", "fw", "exact"}
    assert df.run_id.nunique() == 1 and df.run_key.is_unique
    # independent truth: rebuild each pool and enumerate
    for qid, pool in _pools(cfg):
        for theta in cfg.thetas:
            inst = pool.replace(k=cfg.k, theta=theta)
            opt = _brute(inst)
            sub = df[(df.query_id == qid) & (df.theta == theta)]
            assert sub.optimum.to_numpy() == pytest.approx(opt)
            assert sub.proven_optimal.all() and (sub.gap_kind == "exact").all()
            for _, r in sub.iterrows():
                idx = [int(pool.ids.tolist().index(i)) for i in r.selected]
                f = ccbqp_objective(inst, idx)
                assert r.objective == pytest.approx(f)
                assert r.gap == pytest.approx((opt - f) / (cfg.k * (cfg.k - 1)), abs=1e-12)
                assert bool(r.exact_hit) == (f >= opt - 1e-9)
                assert r.bound_gap == pytest.approx(r.gap, abs=1e-12)  # brute force: bound == OPT
    exact_rows = df[df.method == "exact"]
    assert (exact_rows.gap.abs() < 1e-12).all() and exact_rows.exact_hit.all()
    assert pd.read_parquet(tmp_path / "c" / "results.parquet").shape == df.shape
    s = C.summarize(df)
    assert set(s.columns) >= {"theta", "method", "mean_gap", "p95_gap", "hit_rate"}
    assert len(s) == 2 * 3
    assert {"recall@3", "ndcg@3", "ilad", "alpha_ndcg@3", "s_recall@3"} <= set(df.columns)


def test_unproven_exact_solve_reports_gap_against_bound(tmp_path, monkeypatch):
    """A time-limited exact solve: the gap is an upper bound and never called exact."""
    real = X.exact_optimum

    def time_limited(inst, solver="auto", time_limit=None, warm_start=None, **kw):
        r = real(inst, "brute")
        f = ccbqp_objective(inst, warm_start)
        return Result(indices=np.asarray(warm_start), objective=f, bound=r.objective + 0.5, gap=math.inf,
                      status="time_limit", seconds=0.0, solver="fake")

    monkeypatch.setattr(X, "exact_optimum", time_limited)
    cfg = C.CertifyConfig(**{**CFG, "queries": 1, "thetas": (0.5,)})
    df = C.run_certify(cfg, tmp_path / "c", progress=False).table
    assert not df.proven_optimal.any()
    assert (df.gap_kind == "upper_bound").all()
    assert (df.gap == ((df.bound - df.objective) / 6).clip(lower=0)).all()
    assert (df.gap == df.bound_gap).all()
    assert df.exact_hit.isna().all()  # unknown, not False and not True
    assert (df.exact_status == "time_limit").all()


def test_resume_after_kill_loses_nothing(tmp_path, monkeypatch):
    cfg = C.CertifyConfig(**{**CFG, "queries": 3, "thetas": (0.7,)})
    out = tmp_path / "c"
    calls = []
    real = runs.execute_run

    def dies_on_ninth(data, task, *a, **kw):
        calls.append(task.key)
        if len(calls) == 9:
            raise KeyboardInterrupt("killed")
        return real(data, task, *a, **kw)

    monkeypatch.setattr(sweep_module, "execute_run", dies_on_ninth)  # what every task of the run calls
    with pytest.raises(KeyboardInterrupt):
        C.run_certify(cfg, out, progress=False)
    assert not (out / "results.parquet").exists()
    assert len(list((out / "parts").glob("*.parquet"))) == 8  # every finished run is on disk
    done_first = set(calls[:8])
    calls.clear()
    monkeypatch.setattr(sweep_module, "execute_run", lambda data, task, *a, **kw: (calls.append(task.key),
                                                                                   real(data, task, *a, **kw))[1])
    df = C.run_certify(cfg, out, progress=False).table
    assert len(calls) == 3 * 4 - 8 and not set(calls) & done_first  # only the unfinished runs ran again
    fresh = C.run_certify(cfg, tmp_path / "fresh", progress=False).table
    cols = ["query_id", "theta", "method", "objective", "optimum", "gap"]
    pd.testing.assert_frame_equal(df[cols].reset_index(drop=True), fresh[cols].reset_index(drop=True))


def test_cli_runs_every_selector_and_full_scale(tmp_path, capsys):
    from divopt_rag.experiments.cli.main import main

    out = tmp_path / "cli"
    rc = main(["certify", "--queries", "1", "--corpus-size", "150", "--dim", "8", "--n", "8", "--k", "3",
               "--theta", "0.95", "--solver", "brute", "--full-scale", "--max-exact", "40", "--out", str(out),
               "--no-progress"])
    assert rc == 0
    df = pd.read_parquet(out / "results.parquet")
    assert set(df.method) == set(instance_methods()) | {"exact", "full_scale"}
    full = df[df.method == "full_scale"]
    assert len(full) == 1 and full.bound.iloc[0] >= full.objective.iloc[0] - 1e-9
    assert full.n.iloc[0] == 150  # the query's whole pool, not the top-n
    # the pool optimum can never beat a certified full-scale optimum
    if full.certified.iloc[0]:
        assert full.objective.iloc[0] >= full.pool_optimum.iloc[0] - 1e-9
    text = capsys.readouterr().out
    assert "mean_gap" in text and "certified_fraction" in text
    assert text.strip().splitlines()[-1] == f"wrote {out / 'results.parquet'}"  # where the output went, last


def test_bad_input_names_the_problem(tmp_path):
    with pytest.raises(ValueError, match="unknown method"):
        C.run_certify(C.CertifyConfig(**{**CFG, "methods": ("nope",)}), tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="theta"):
        C.run_certify(C.CertifyConfig(**{**CFG, "thetas": (1.5,)}), tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="k must be <= n"):
        C.CertifyConfig(**{**CFG, "k": 11})
    with pytest.raises(ValueError, match="unknown dataset"):
        C.run_certify(C.CertifyConfig(**{**CFG, "dataset": "nope:x"}), tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="unknown dataset"):
        C.run_certify(C.CertifyConfig(**{**CFG, "dataset": "nope"}), tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="needs a path"):
        C.run_certify(C.CertifyConfig(**{**CFG, "dataset": "beir"}), tmp_path / "x", progress=False)
    assert not (tmp_path / "x" / "parts").exists() or not list((tmp_path / "x" / "parts").iterdir())


# --------------------------------------------------------------------------------------------
# a failed exact solve is never hidden (issue 48, item 2)
# --------------------------------------------------------------------------------------------
PIP_LICENCE = {"max_vars": 2000, "max_constraints": 2000, "max_quadratic_vars": 200}


def test_a_licence_that_cannot_take_the_pool_is_exit_2_before_any_work(tmp_path, capsys, monkeypatch):
    """The command of the issue: Gurobi's size-limited licence refuses the 400-binary MIQP, which
    is known from n alone; it used to exit 0 with a clean table (unproven 0, hit rate NaN)."""
    from divopt_rag.experiments.cli.main import main
    from divopt_rag.models import solver_limits

    monkeypatch.setattr(solver_limits, "gurobi_size_limits", lambda: PIP_LICENCE)  # whatever this machine has
    out = tmp_path / "c"
    rc = main(["certify", "--n", "400", "--k", "10", "--theta", "0.5", "--queries", "1", "--corpus-size", "1000",
               "--dim", "8", "--solver", "gurobi", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "--solver" in err[0] and "400 variables > 200" in err[0]
    assert not (out / "parts").exists() or not list((out / "parts").iterdir())  # no work was done
    # at theta = 1 the model is linear, 400 binaries fit, and the same rule lets it through
    assert C.check_exact_solver(C.CertifyConfig(**{**CFG, "n": 400, "k": 10, "corpus_size": 1000,
                                                   "thetas": (1.0,), "solver": "gurobi"})) is None


def test_an_exact_solve_that_fails_during_the_run_is_exit_1_with_its_reason(tmp_path, capsys, monkeypatch):
    from divopt_rag.experiments.cli.main import main

    def broken(*args, **kwargs):
        raise RuntimeError("the solver process died (injected)")

    monkeypatch.setattr(X, "exact_optimum", broken)
    rc = main(["certify", "--queries", "1", "--corpus-size", "60", "--dim", "8", "--n", "8", "--k", "3",
               "--theta", "0.5", "--methods", "mmr", "--out", str(tmp_path / "c"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "1 of 2 runs failed" in err and "the solver process died (injected)" in err
