"""divopt-rag sweep: grid expansion, run keys, atomic parts, resume (also after SIGKILL), backends."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from divopt_rag.data import EmbeddedDataset, register_dataset, load as load_dataset, atomic
from divopt_rag.data.synthetic import narrow_cone, synthetic_dataset
from divopt_rag.experiments.engine.parts import finished_keys
from divopt_rag.experiments.engine.plan import run_key, canonical_params
from divopt_rag.experiments.measures import tables
from divopt_rag.experiments.methods import register_method
from divopt_rag.experiments.studies import runs, sweep as sw
from divopt_rag.experiments.studies.grid import SweepConfig, derive_seed
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers import select

TINY = {"name": "synthetic", "n": 60, "d": 16, "n_queries": 3, "seed": 5}


def _config(**over) -> SweepConfig:
    d = {
        "dataset": TINY,
        "methods": {"fw": {}, "mmr": {}, "topk": {}},
        "grid": {"k": [4], "theta": [0.3, 0.8]},
        "seed": 11,
    }
    d.update(over)
    return SweepConfig.from_dict(d)


def _comparable(table: pd.DataFrame) -> pd.DataFrame:
    """Rows without wall-clock columns, in run order, as plain Python values."""
    t = table.drop(columns=[c for c in sw.TIMING_COLUMNS if c in table]).sort_values("run_index")
    t = t.reset_index(drop=True)
    t["selected"] = t["selected"].map(list)
    return t


# --------------------------------------------------------------------------------------------
# Grid and keys
# --------------------------------------------------------------------------------------------
def test_run_key_is_canonical_and_distinguishes_runs():
    a = run_key("cfg", "ds", "q1", "fw", {"theta": 1, "k": 5})
    assert a == run_key("cfg", "ds", "q1", "fw", {"k": 5, "theta": 1.0})  # order and int/float do not matter
    assert a != run_key("cfg", "ds", "q1", "fw", {"k": 5, "theta": 0.5})
    assert a != run_key("cfg", "ds", "q2", "fw", {"k": 5, "theta": 1.0})
    assert a != run_key("cfg", "ds", "q1", "mmr", {"k": 5, "theta": 1.0})
    assert a != run_key("cfg", "other", "q1", "fw", {"k": 5, "theta": 1.0})  # other data content
    assert a != run_key("cfg2", "ds", "q1", "fw", {"k": 5, "theta": 1.0})  # other row settings (seed, ...)
    assert a != run_key("cfg", "ds", "q1", "fw", {"k": 5, "theta": 1.0, "pool": 20})  # the pool is in the key
    assert derive_seed(0, a) == derive_seed(0, a) != derive_seed(1, a)
    with pytest.raises(ValueError, match="theta"):
        canonical_params({"theta": 1.5})
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        canonical_params({"k": 0})


def test_expand_grid_product_and_method_specific_axes():
    cfg = SweepConfig.from_dict({
        "methods": {"a": {}, "b": {"rho_vec": [0.0, 0.1, 0.2]}},
        "grid": {"k": [3, 5], "theta": [0.2, 0.5, 0.9], "sigma": [0.1, 0.2]},
    })
    accepts = {("a", "sigma"): True, ("b", "sigma"): False, ("b", "rho_vec"): True}
    specs = sw.expand_grid(cfg, [(0, "q0"), (4, "q4")], lambda m, p: accepts.get((m, p), False), data_key="ds")
    # a: k x theta x sigma = 12 ; b: k x theta x rho_vec = 18 (sigma does not expand b); x 2 queries
    assert len(specs) == 2 * (12 + 18)
    assert len({s.key for s in specs}) == len(specs)
    assert [s.index for s in specs] == list(range(len(specs)))
    assert {s.extra["query_index"] for s in specs} == {0, 4}
    assert all("sigma" not in s.params for s in specs if s.method == "b")
    assert all(s.extra["seed"] == derive_seed(0, s.key) for s in specs)
    with pytest.raises(ValueError, match="does not accept parameter 'rho_vec'"):
        sw.expand_grid(cfg, [(0, "q0")], lambda m, p: m == "a", data_key="ds")


def test_config_validation_and_files(tmp_path):
    with pytest.raises(ValueError, match="unknown sweep config keys"):
        SweepConfig.from_dict({"methodz": ["fw"]})
    with pytest.raises(ValueError, match="empty list"):
        SweepConfig.from_dict({"grid": {"k": [], "theta": [0.5]}})
    p = tmp_path / "s.toml"
    p.write_text('[sweep]\nmethods = ["fw"]\nseed = 3\n[sweep.grid]\nk = [2]\ntheta = [0.5, 1]\n')
    cfg = SweepConfig.from_file(p)
    assert cfg.methods == {"fw": {}} and cfg.grid["theta"] == [0.5, 1] and cfg.seed == 3
    q = tmp_path / "s.json"
    q.write_text(json.dumps(cfg.to_dict()))
    assert SweepConfig.from_file(q).run_id == cfg.run_id


def test_unknown_method_fails_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        sw.run_sweep(_config(methods=["fw", "nope"]), tmp_path, n_workers=0, progress=False)
    assert not list((tmp_path / "parts").glob("*.parquet"))


# --------------------------------------------------------------------------------------------
# Rows against an independent truth: the selectors called directly on narrow_cone pools
# --------------------------------------------------------------------------------------------
def test_rows_match_direct_selector_calls(tmp_path):
    cfg = _config()
    res = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False)
    t = res.table
    assert len(t) == res.n_runs == 3 * 3 * 2 and res.n_errors == 0
    assert (t["status"] == "ok").all() and t["run_key"].is_unique
    for _, row in t.iterrows():
        j = int(row["query_index"])
        ds, E, q = synthetic_dataset(60, 16, seed=5 + j)
        labels = [int(lab[1:]) for lab in ds.subtopics_for("q0").values()]
        relevant = set(ds.meta["relevant_clusters"])
        inst = Instance(E, q, k=4, theta=float(row["theta"]))  # the generated pool, as the sweep runs it
        sel = select(inst, row["method"], **({"seed": int(row["seed"])} if row["method"] == "fw" else {}))  # only fw takes a seed
        assert list(row["selected"]) == [f"q{j}-d{i}" for i in sel.indices]
        assert row["objective"] == pytest.approx(sel.objective, rel=1e-6, abs=1e-6)
        # recall and S-recall by plain loops over the planted relevant clusters
        picked = [labels[int(s.split("-d")[1])] for s in row["selected"]]
        n_relevant_items = sum(lab in relevant for lab in labels)
        assert row["recall@4"] == pytest.approx(sum(lab in relevant for lab in picked) / n_relevant_items)
        assert row["s_recall@4"] == pytest.approx(len(set(picked) & relevant) / len(relevant))
    assert Path(res.path).exists()
    assert len(pd.read_parquet(res.path)) == len(t)


def test_same_seed_same_table_and_resume_skips_finished(tmp_path):
    cfg = _config(methods={"fw": {"init": ["random"]}})
    a = sw.run_sweep(cfg, tmp_path / "a", n_workers=0, progress=False).table
    b = sw.run_sweep(cfg, tmp_path / "b", n_workers=0, progress=False).table
    pd.testing.assert_frame_equal(_comparable(a), _comparable(b))
    other = sw.run_sweep(_config(methods={"fw": {"init": ["random"]}}, seed=12), tmp_path / "c", n_workers=0,
                         progress=False).table
    assert (other["seed"].to_numpy() != a["seed"].to_numpy()).all()

    # resume: delete some parts, leave a half-written temporary file: only the missing runs run
    parts = sorted((tmp_path / "a" / "parts").glob("*.parquet"))
    for p in parts[::2]:
        p.unlink()
    # a half-written part of a killed writer (a pid of this host that no longer exists) goes;
    # one of a live writer, or of an unknown name pattern, stays: it may be a write in flight
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    tag = atomic._host_tag()
    stale = tmp_path / "a" / "parts" / f".junk.parquet.{dead}-{tag}-0123abcd.tmp"
    live = tmp_path / "a" / "parts" / f".busy.parquet.{os.getpid()}-{tag}-0123abcd.tmp"
    foreign = tmp_path / "a" / "parts" / ".junk.parquet.123.tmp"
    for p in (stale, live, foreign):
        p.write_bytes(b"PAR1 half written")
    res = sw.run_sweep(cfg, tmp_path / "a", n_workers=0, progress=False)
    assert res.n_executed == len(parts[::2]) and res.n_skipped == len(parts) - len(parts[::2])
    assert sorted((tmp_path / "a" / "parts").glob(".*.tmp")) == sorted([live, foreign])
    pd.testing.assert_frame_equal(_comparable(res.table), _comparable(a))
    again = sw.run_sweep(cfg, tmp_path / "a", n_workers=0, progress=False)
    assert again.n_executed == 0 and len(again.table) == len(a)


def test_error_rows_are_recorded_and_retried(tmp_path):
    calls = {"n": 0}

    @register_method("_flaky_test_method")
    def flaky(inst, **params):
        calls["n"] += 1
        if calls["n"] <= 3:
            raise RuntimeError("boom")
        return {"indices": np.arange(inst.k)}

    cfg = _config(methods=["_flaky_test_method"], grid={"k": [3], "theta": [0.5]})
    res = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False)
    assert res.n_errors == 3 and (res.table["status"] == "error").all()
    assert res.table["error"].str.contains("RuntimeError: boom").all()
    res2 = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False)  # errors count as finished
    assert res2.n_executed == 0
    res3 = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False, retry_errors=True)
    assert res3.n_executed == 3 and (res3.table["status"] == "ok").all() and len(res3.table) == 3
    assert not list((tmp_path / "parts").glob("*.error.parquet"))
    # the default objective of an extra method is the CCBQP objective of its indices
    E, q, _ = narrow_cone(60, 16, seed=5)
    assert res3.table["objective"].iloc[0] == pytest.approx(
        ccbqp_objective(Instance(E, q, k=3, theta=0.5), np.arange(3)), rel=1e-6)


# --------------------------------------------------------------------------------------------
# Kill a running `divopt-rag sweep` with SIGKILL, restart the same command
# --------------------------------------------------------------------------------------------
PLUGIN = textwrap.dedent(
    '''
    """Test plugin: a slow top-k (so a sweep can be killed midway)."""
    import time
    import numpy as np
    from divopt_rag.experiments.methods import register_method

    @register_method("slow_topk")
    def slow_topk(inst, *, delay=0.15):
        time.sleep(delay)
        c = inst.relevance.cpu().numpy()
        return {"indices": np.argsort(-c, kind="stable")[: inst.k]}
    '''
)


@pytest.mark.slow
def test_kill_midway_and_resume_with_the_same_command(tmp_path):
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "sweep_test_plugin.py").write_text(PLUGIN)
    cfg = {
        "dataset": TINY,
        "methods": {"slow_topk": {}, "fw": {}},
        "grid": {"k": [3], "theta": [0.2, 0.5, 0.9]},
        "plugins": ["sweep_test_plugin"],
        "evaluator": {"name": "coverage", "top": 20},  # built in every pool worker
        "seed": 7,
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'plug'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "divopt_rag.experiments.cli", "sweep", "--config", str(tmp_path / "cfg.json"),
           "--out", str(out), "--n-workers", "1", "--chunk-size", "1", "--no-progress"]
    n_total = 3 * 2 * 3

    # the uninterrupted reference, in this process
    sys.path.insert(0, str(tmp_path / "plug"))
    try:
        ref = sw.run_sweep(SweepConfig.from_dict(cfg), tmp_path / "ref", n_workers=0, progress=False).table
    finally:
        sys.path.remove(str(tmp_path / "plug"))
    assert len(ref) == n_total

    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    parts = out / "parts"
    deadline = time.monotonic() + 180  # generous: the CI machine may be loaded
    while time.monotonic() < deadline and len(finished_keys(parts)) < 3 and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its pool workers (its own process group)
    proc.wait(timeout=30)
    n_killed = len(finished_keys(parts))
    assert 3 <= n_killed < n_total, n_killed
    assert not (out / "results.parquet").exists()

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{n_killed} already done" in done.stdout
    final = pd.read_parquet(out / "results.parquet")
    assert len(final) == n_total and final["run_key"].is_unique
    assert set(final["run_key"]) == set(ref["run_key"]) and final["eval_score"].notna().all()
    pd.testing.assert_frame_equal(_comparable(final), _comparable(ref))


# --------------------------------------------------------------------------------------------
# Ray backend on a local cluster
# --------------------------------------------------------------------------------------------
@pytest.mark.ray
@pytest.mark.slow
def test_ray_backend_matches_local(tmp_path):
    ray = pytest.importorskip("ray")
    psutil = pytest.importorskip("psutil")
    from divopt_rag.experiments.engine.backends import LOOPBACK, ray_addresses, start_local_ray

    cfg = _config(methods={"fw": {}, "mmr": {}, "dpp": {}})
    local = sw.run_sweep(cfg, tmp_path / "local", n_workers=0, progress=False).table
    reaper = start_local_ray(ray, 1)  # what run_sweep(backend="ray") starts when no Ray is running
    try:
        # the local cluster listens on loopback only: the addresses Ray reports, and the
        # listening sockets of every process it started (GCS, raylet, workers)
        assert ray_addresses(ray) and set(ray_addresses(ray)) == {LOOPBACK}
        listening = [c.laddr.ip for p in psutil.Process().children(recursive=True)
                     for c in _connections(p) if c.status == psutil.CONN_LISTEN]
        assert listening and set(listening) <= {LOOPBACK, "::ffff:127.0.0.1", "::1"}, listening
        res = sw.run_sweep(cfg, tmp_path / "ray", backend="ray", chunk_size=6, progress=False)
        assert ray.is_initialized()  # an existing cluster is used as it is, not shut down
        # the watchdog recognizes every process of the cluster, the agents whose process titles
        # overwrite the environment it reads the mark from included
        from divopt_rag.experiments.engine.reaper import marked_processes

        cluster = {p.pid for p in psutil.Process().children(recursive=True)
                   if p.pid != reaper.process.pid and p.status() != psutil.STATUS_ZOMBIE}
        assert len(cluster) >= 4 and cluster <= set(marked_processes(reaper.mark, reaper.temp_dir)), cluster
    finally:
        ray.shutdown()
        reaper.stop()
    # the watchdog removed whatever the shutdown left: no process of the session, no folder
    assert marked_processes(reaper.mark) == [] and not Path(reaper.temp_dir).exists()
    assert res.n_executed == len(local) and res.n_errors == 0
    pd.testing.assert_frame_equal(_comparable(res.table), _comparable(local))


def _connections(proc):
    import psutil

    try:
        return proc.net_connections(kind="inet")
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def test_ray_backend_starts_its_own_cluster_on_loopback(monkeypatch):
    """Without a running Ray and without --address, run_ray starts the loopback-only cluster
    (start_local_ray) and shuts it down; with an address it connects there (a fake ray module
    records the calls: no cluster is started)."""
    import types

    from divopt_rag.experiments.engine import backends

    calls = []
    fake = types.SimpleNamespace(
        is_initialized=lambda: False,
        init=lambda **kw: calls.append(("init", kw)),
        shutdown=lambda: calls.append(("shutdown", {})),
        put=lambda x: x, wait=None, get=None, cancel=None, remote=lambda **kw: (lambda fn: fn),
    )
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(backends, "start_local_ray", lambda ray, n: calls.append(("local", {"num_cpus": n})))
    data = load_dataset(TINY)
    spec = sw.SweepSpec(_config())
    backends.run_ray(spec, data, [], None, 3, lambda rows: None)
    assert calls == [("local", {"num_cpus": 3}), ("shutdown", {})]
    calls.clear()
    backends.run_ray(spec, data, [], "ray://trusted-head:10001", 3, lambda rows: None)
    assert calls == [("init", {"address": "ray://trusted-head:10001", "log_to_driver": False}), ("shutdown", {})]


def test_cli_flags_override_config(tmp_path, capsys):
    from divopt_rag.experiments.cli.main import main

    (tmp_path / "c.json").write_text(json.dumps({"dataset": TINY, "methods": ["fw"], "grid": {"k": [3], "theta": [0.5]}}))
    rc = main(["sweep", "--config", str(tmp_path / "c.json"), "--out", str(tmp_path / "o"), "--methods", "topk", "mmr",
               "--theta", "0.1", "0.9", "--queries", "2", "--n-workers", "0", "--no-progress",
               "--evaluator", "coverage", "--adaptive-metric", "s_recall"])
    assert rc == 0
    t = pd.read_parquet(tmp_path / "o" / "results.parquet")
    assert set(t["method"]) == {"topk", "mmr"} and set(t["theta"]) == {0.1, 0.9} and set(t["query_id"]) == {"q0", "q1"}
    assert len(t) == 2 * 2 * 2 and t["eval_score"].notna().all()
    assert (tmp_path / "o" / "adaptive.parquet").exists()
    assert "oracle" in capsys.readouterr().out
    rc = main(["sweep", "--out", str(tmp_path / "o2"), "--methods", "nope", "--n-workers", "0"])
    assert rc == 2


def test_text_dataset_adapter_qrels_texts_and_evaluator(tmp_path):
    from divopt_rag.data.synthetic import toy_dataset

    ds = toy_dataset()
    rng = np.random.default_rng(0)
    E = rng.standard_normal((len(ds.passage_ids), 8))
    Q = rng.standard_normal((1, 8))

    @register_dataset("_toy_random_test")
    def loader():
        return EmbeddedDataset.from_dataset(ds, E, Q)

    cfg = SweepConfig.from_dict({
        "dataset": {"name": "_toy_random_test"}, "methods": ["topk"], "grid": {"k": [5], "theta": [1.0]},
        "evaluator": {"name": "metric", "metric": "recall"},
    })
    row = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False).table.iloc[0]
    # plain loop: the 5 largest cosines; recall = relevant among them / all relevant
    En = E / np.linalg.norm(E, axis=1, keepdims=True)
    cos = En @ (Q[0] / np.linalg.norm(Q[0]))
    ids = [ds.passage_ids[i] for i in sorted(range(len(cos)), key=lambda i: -cos[i])[:5]]
    relevant = {p for p, g in ds.qrels["q0"].items() if g > 0}
    assert list(row["selected"]) == ids
    assert row["recall@5"] == pytest.approx(len(relevant & set(ids)) / len(relevant))
    assert row["eval_score"] == row["recall@5"] and row["eval_name"] == "metric:recall"
    data = load_dataset({"name": "_toy_random_test"}, cache_dir=tmp_path / "data")  # the sweep's cached copy
    assert data.key == row["data_key"] and data.name == row["dataset"] and isinstance(data.E, np.memmap)
    ctx = runs.query_context(data, 0)
    assert ctx.query_text == ds.queries[0] and list(ctx.passages) == list(ds.texts)
    assert ctx.subtopics == ds.subtopics_for("q0")


def test_robust_models_in_the_grid_match_direct_record_calls(tmp_path):
    from divopt_rag.robust import ROBUST_MODELS

    grid = {"k": [4], "theta": [0.5], "rho_vec": [0.0, 0.05], "sparsity_penalty": [0.1], "rho_div": [0.9],
            "candidates": [10]}
    # a parameter that none of the chosen methods takes is refused, never silently dropped
    unused = SweepConfig.from_dict({"dataset": {**TINY, "n_queries": 1}, "methods": ["robust_l2", "mmr"],
                                    "grid": {**grid, "attack_budget": [2]}})
    with pytest.raises(ValueError, match=r"grid parameter 'attack_budget' is taken by none of the methods"):
        sw.run_sweep(unused, tmp_path / "unused", n_workers=0, progress=False)
    # theta and k do not apply to a robust model: two thetas double mmr's runs, not robust_l2's
    cfg = SweepConfig.from_dict({"dataset": {**TINY, "n_queries": 1}, "methods": ["robust_l2", "mmr"],
                                 "grid": {**grid, "theta": [0.5, 0.9]}})
    assert sw.axes_summary(cfg) == ("axes (runs per query): robust_l2: candidates, rho_div, rho_vec, "
                                    "sparsity_penalty (2); mmr: k, theta (2); k is only the ranking metrics' "
                                    "cutoff of robust_l2 (it sizes its own set)")
    res = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False)
    t = res.table
    assert sorted(t["method"]) == ["mmr", "mmr", "robust_l2", "robust_l2"]
    assert (t["status"] == "ok").all(), t["error"].tolist()
    rob = t[t["method"] == "robust_l2"]
    # the axes that do not apply are empty on its rows, and not named in its params
    assert rob["k"].isna().all() and rob["theta"].isna().all()
    assert all("theta" not in json.loads(p) and "k" not in json.loads(p) for p in rob["params"])
    assert tables.varying_settings(t, exclude=("method",)) == ["theta", "rho_vec"]  # k: one value where it applies
    ds, E, q = synthetic_dataset(60, 16, seed=5)
    qrels = ds.qrels["q0"]
    relevant = {f"q0-d{d[1:]}" for d, g in qrels.items() if g > 0}  # passage s<i> is the sweep's q0-d<i>
    inst = Instance(E, q, k=4, theta=0.5, ids=np.array([f"q0-d{i}" for i in range(60)]))
    for _, row in rob.iterrows():
        rec = ROBUST_MODELS["robust_l2"](inst, rho_vec=row["rho_vec"], sparsity_penalty=0.1, rho_div=0.9, candidates=10)
        assert list(row["selected"]) == [f"q0-d{i}" for i in rec["indices"]]
        assert row["model_objective"] == pytest.approx(rec["objective"], rel=1e-6, abs=1e-6)
        # no CCBQP objective for a set the model sized itself, and a column that says which one it has
        assert np.isnan(row["objective"]) and row["objective_kind"] == "robust_sparsity"
        assert row["model_status"] == rec["status"] and row["model_gap"] == pytest.approx(rec["gap"])
        assert row["set_size"] == len(rec["indices"])
        assert row["price_of_robustness"] == pytest.approx(rec["nominal_relevance"] - rec["worst_case_relevance"])
        # recall at the cutoff it names (the first 4 of the ranked set) and of the whole set, by plain counting
        picked = list(row["selected"])
        assert row["recall@4"] == pytest.approx(len(relevant & set(picked[:4])) / len(relevant))
        assert row["set_recall"] == pytest.approx(len(relevant & set(picked)) / len(relevant))
        assert row["set_precision"] == pytest.approx(len(relevant & set(picked)) / len(picked))
        assert "info_status" not in row and json.loads(row["info"])["uncertainty"] == "l2"
    for _, row in t[t["method"] == "mmr"].iterrows():
        assert row["objective_kind"] == "ccbqp" and row["set_size"] == 4
        assert row["objective"] == pytest.approx(row["model_objective"])
    # the long measures table beside the wide one: one row per (row, measure), cutoffs split out
    long = pd.read_parquet(tmp_path / "measures.parquet")
    assert list(long.columns) == ["run_id", "run_key", "dataset", "query_id", "method", "measure", "cutoff", "value"]
    for _, row in t.iterrows():
        mine = long[long["run_key"] == row["run_key"]]
        assert mine.loc[(mine["measure"] == "recall") & (mine["cutoff"] == 4), "value"].item() == row["recall@4"]
        assert mine.loc[mine["measure"] == "set_size", "value"].item() == row["set_size"]
        assert not ({"k", "theta", "seed", "rho_vec"} & set(mine["measure"]))
    assert (long.loc[long["measure"] == "price_of_robustness", "method"] == "robust_l2").all()
    # a required parameter no axis gives is refused before any work (it used to make every run an error row)
    with pytest.raises(ValueError, match=r"^The 'rho_div' parameter of robust_l2 is required: it must be a float"):
        sw.run_sweep(SweepConfig.from_dict({"dataset": {**TINY, "n_queries": 1}, "methods": ["robust_l2"],
                                            "grid": {"k": [4], "theta": [0.5], "rho_vec": [0.1], "sparsity_penalty": [0.1]}}),
                     tmp_path / "bad", n_workers=0, progress=False)
    assert not (tmp_path / "bad").exists()
