"""Runs that share an output folder (issue 16, item 1), with real processes:

* two sweeps on one folder: the second is refused while the first runs, naming it, and the
  first finishes with every row; the lock dies with its holder (SIGKILL);
* a different grid in a used folder is refused (or, with --new-grid, the old files are kept);
* atomic writers and the stale-file cleaner racing on one folder never break a write;
* a killed driver takes its pool workers with it.
Every process here is started by the test and killed by it if still alive at the end.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from divopt_rag.experiments.cli import main as cli
from divopt_rag.experiments.engine import store

TINY = {"name": "synthetic", "n": 40, "d": 8, "n_queries": 2, "seed": 3}

PLUGIN = textwrap.dedent(
    '''
    import os, time
    import numpy as np
    from divopt_rag.experiments.methods import register_method

    @register_method("slow_topk")
    def slow_topk(inst, *, delay=0.2):
        time.sleep(delay)
        c = inst.relevance.cpu().numpy()
        return {"indices": np.argsort(-c, kind="stable")[: inst.k]}

    @register_method("gated_topk")
    def gated_topk(inst):
        gate = os.environ["DIVOPT_TEST_GATE"]
        t = time.monotonic()
        while not os.path.exists(gate) and time.monotonic() - t < 120:  # held until the test opens the gate
            time.sleep(0.05)
        c = inst.relevance.cpu().numpy()
        return {"indices": np.argsort(-c, kind="stable")[: inst.k]}

    @register_method("pid_sleeper")
    def pid_sleeper(inst, *, delay=60.0):
        folder = os.environ["DIVOPT_TEST_PIDS"]
        open(os.path.join(folder, str(os.getpid())), "w").close()
        time.sleep(delay)
        return {"indices": np.arange(inst.k)}
    '''
)


@pytest.fixture
def plugin_env(tmp_path):
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "reliability_plugin.py").write_text(PLUGIN)
    (tmp_path / "pids").mkdir()
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'plug'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "DIVOPT_TEST_PIDS": str(tmp_path / "pids"), "DIVOPT_TEST_GATE": str(tmp_path / "gate")}
    return env


def _write_config(path: Path, **over) -> Path:
    cfg = {"dataset": TINY, "methods": {"slow_topk": {}}, "grid": {"k": [3], "theta": [0.2, 0.5, 0.8]},
           "plugins": ["reliability_plugin"], "seed": 1}
    cfg.update(over)
    path.write_text(json.dumps(cfg))
    return path


def _sweep(config: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "divopt_rag.experiments.cli", "sweep", "--config", str(config), "--out", str(out),
            "--n-workers", "0", "--no-progress", *extra]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped) counts as dead
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _holder(out: Path) -> dict:
    try:
        return json.loads((out / store.LOCK_NAME).read_text() or "{}")
    except (OSError, ValueError):
        return {}


@pytest.mark.slow
def test_two_sweeps_on_one_folder_the_second_is_refused_and_the_first_completes(tmp_path, plugin_env):
    cfg = _write_config(tmp_path / "cfg.json", methods={"gated_topk": {}}, grid={"k": [3], "theta": [0.2, 0.5]})
    out = tmp_path / "out"
    first = subprocess.Popen(_sweep(cfg, out), env=plugin_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        _wait(lambda: _holder(out).get("pid") == first.pid or first.poll() is not None, 120, "the first sweep's lock")
        assert first.poll() is None, first.communicate()[1][-2000:]
        second = subprocess.run(_sweep(cfg, out), env=plugin_env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        line = second.stderr.strip()
        assert "\n" not in line and "Traceback" not in line
        assert f"is in use by another run (pid {first.pid} on " in line and "divopt-rag sweep" in line
        assert first.poll() is None  # the first is still at work, untouched
        (tmp_path / "gate").touch()
        stdout, stderr = first.communicate(timeout=180)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode == 0, stderr[-2000:]
    table = pd.read_parquet(out / "results.parquet")
    assert len(table) == 2 * 2 and (table["status"] == "ok").all() and table["run_key"].is_unique
    assert _holder(out) == {}  # released: the record is cleared
    # nothing half-written left behind by either process
    assert not list((out / "parts").glob(".*.tmp")) and not list(out.glob(".*.tmp"))


def test_the_lock_names_its_holder_and_dies_with_it(tmp_path):
    folder = tmp_path / "out"
    code = ("import sys, time; from divopt_rag.experiments.engine.store import output_lock\n"
            "with output_lock(sys.argv[1], 'holder-test'):\n    print('held', flush=True); time.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(store.OutputLocked) as info:
            with store.output_lock(folder):
                pass
        assert info.value.holder["pid"] == holder.pid and info.value.holder["command"] == "holder-test"
        assert f"pid {holder.pid} on {info.value.holder['host']}" in str(info.value)
        os.kill(holder.pid, signal.SIGKILL)  # no cleanup code runs: the OS drops the lock
        holder.wait(timeout=30)
        with store.output_lock(folder) as record:
            assert record["pid"] == os.getpid()
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)


def test_a_different_grid_in_a_used_folder_is_refused_or_kept_beside(tmp_path, capsys):
    out = tmp_path / "out"
    run = lambda cfg, *extra: cli.main(["sweep", "--config", str(cfg), "--out", str(out), "--n-workers", "0",
                                        "--no-progress", *extra])
    base = {"methods": {"topk": {}}, "plugins": []}
    assert run(_write_config(tmp_path / "a.json", grid={"k": [3], "theta": [0.5]}, **base)) == 0
    old_id = json.loads((out / "config.json").read_text())["run_id"]
    old_table = pd.read_parquet(out / "results.parquet")
    capsys.readouterr()

    other = _write_config(tmp_path / "b.json", grid={"k": [3], "theta": [0.5, 0.9]}, **base)
    assert run(other) == 2
    err = capsys.readouterr().err
    assert f"holds sweep {old_id}" in err and "grid.theta: [0.5] -> [0.5, 0.9]" in err and err.count("\n") == 1
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), old_table)  # untouched

    assert run(other, "--new-grid") == 0
    assert "(2 already done, 2 run now" in capsys.readouterr().out  # the runs both grids share are reused
    pd.testing.assert_frame_equal(pd.read_parquet(out / f"results.{old_id}.parquet"), old_table)
    assert json.loads((out / f"config.{old_id}.json").read_text())["run_id"] == old_id
    assert len(pd.read_parquet(out / "results.parquet")) == 4
    other_id = json.loads((out / "config.json").read_text())["run_id"]

    # a setting that changes rows (the seed) is in every run key: sharing the folder reuses none
    # of the other seed's rows, whatever the grids share
    assert run(_write_config(tmp_path / "c.json", grid={"k": [3], "theta": [0.5, 0.9]}, seed=2, **base),
               "--new-grid") == 0
    assert "(0 already done, 4 run now" in capsys.readouterr().out
    seeded = pd.read_parquet(out / "results.parquet")
    assert not set(seeded["run_key"]) & set(pd.read_parquet(out / f"results.{other_id}.parquet")["run_key"])


def test_atomic_writers_and_the_stale_cleaner_race_without_losing_a_write(tmp_path):
    """Two writers of one file (threads of this process: under the old pid-only temporary names
    they collided) while another process cleans the folder's stale temporaries (before issue
    16, a starting sweep deleted a running one's): every write lands, none fails."""
    target = tmp_path / "parts" / "shared.parquet"
    target.parent.mkdir()
    cleaner = ("import sys, time; from divopt_rag.data.atomic import remove_stale_temporaries\n"
               "print('ready', flush=True)\nt = time.monotonic()\n"
               "while time.monotonic() - t < 2:\n    remove_stale_temporaries(sys.argv[1])\n")
    proc = subprocess.Popen([sys.executable, "-c", cleaner, str(target.parent)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    errors: list[BaseException] = []
    counts = {"a": 0, "b": 0}

    def write(name: str) -> None:
        try:
            while proc.poll() is None:
                store.write_parquet(pd.DataFrame({"w": [name], "i": [counts[name]]}), target)
                counts[name] += 1
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    try:
        assert proc.stdout.readline().strip() == "ready"
        threads = [threading.Thread(target=write, args=(w,)) for w in counts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, proc.stderr.read()[-2000:]
    assert not errors, errors
    assert min(counts.values()) > 5, counts  # both wrote while the cleaner ran
    final = pd.read_parquet(target)
    assert final["w"].iloc[0] in counts and int(final["i"].iloc[0]) == counts[final["w"].iloc[0]] - 1
    assert not list(target.parent.glob(".*.tmp"))


@pytest.mark.slow
def test_a_killed_driver_takes_its_pool_workers_with_it(tmp_path, plugin_env):
    cfg = _write_config(tmp_path / "cfg.json", methods={"pid_sleeper": {}}, grid={"k": [2], "theta": [0.5]})
    cmd = [sys.executable, "-m", "divopt_rag.experiments.cli", "sweep", "--config", str(cfg), "--out",
           str(tmp_path / "out"), "--n-workers", "2", "--chunk-size", "1", "--no-progress"]
    driver = subprocess.Popen(cmd, env=plugin_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    pids_dir = tmp_path / "pids"
    workers: list[int] = []
    try:
        _wait(lambda: len(list(pids_dir.iterdir())) == 2 or driver.poll() is not None, 180, "two busy workers")
        assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
        workers = [int(p.name) for p in pids_dir.iterdir()]
        assert all(_alive(w) for w in workers) and driver.pid not in workers
        os.kill(driver.pid, signal.SIGKILL)  # the driver only: no cleanup code of it runs
        driver.wait(timeout=30)
        _wait(lambda: not any(_alive(w) for w in workers), 20, f"workers {workers} to die with their driver")
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)


def test_certify_keeps_another_runs_table_beside_and_locks_its_output(tmp_path, capsys):
    out = tmp_path / "certify"
    base = ["certify", "--queries", "1", "--corpus-size", "60", "--dim", "6", "--n", "6", "--k", "2",
            "--methods", "topk", "--out", str(out), "--no-progress"]
    assert cli.main([*base, "--theta", "0.5"]) == 0
    first = pd.read_parquet(out / "results.parquet")
    old_id = first["run_id"].iloc[0]
    assert cli.main([*base, "--theta", "0.7"]) == 2  # another configuration: refused, nothing replaced
    assert f"holds certify {old_id}" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), first)
    assert cli.main([*base, "--theta", "0.7", "--new-grid"]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out / f"results.{old_id}.parquet"), first)
    assert pd.read_parquet(out / "results.parquet")["theta"].unique().tolist() == [0.7]
    with store.output_lock(out):  # another run holds the output
        assert cli.main([*base, "--theta", "0.7"]) == 2
    assert "is in use by another run" in capsys.readouterr().err
