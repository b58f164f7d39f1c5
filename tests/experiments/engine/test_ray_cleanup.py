"""Every process of the local Ray cluster a sweep started is gone within seconds of its driver's
death by ``kill -9`` (issue 33, item 5: the DashboardAgent and RuntimeEnvAgent outlived a killed
driver by 50 s and more).

The sweep runs in a subprocess with its own ``TMPDIR`` (a short folder of this test): every
process of its Ray session inherits that environment, so the test finds them all, GCS, raylet,
agents and workers, by ``TMPDIR=<folder>`` in ``/proc/<pid>/environ``; the session's files live
under that folder too (``divopt-ray-*``).

No assertion is on speed: what shows that divopt's watchdog, not Ray's own teardown, ended the
session is that its folder is gone (the watchdog removes it after its last kill; Ray's agents,
left alone, outlive the driver by 50 s and more and leave it). The 30 s the test waits is a
hang guard that Ray's own teardown cannot meet; the watchdog takes 1-2 s (printed).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")]

PLUGIN = '''
import time
from divopt_rag.experiments.methods import register_method

@register_method("_sleepy_ray_cleanup")
def sleepy(inst, *, nap=0.4):
    time.sleep(nap)
    return {"indices": list(range(inst.k))}
'''


def _session(folder: str) -> list[int]:
    """Live processes (zombies aside) whose environment holds TMPDIR=folder."""
    token = f"TMPDIR={folder}".encode()
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry.name}/environ").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and token in env.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def _describe(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:150]
            marked = b"DIVOPT_RAY_SESSION=" in Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            cmd, marked = "(gone)", None
        out.append(f"{pid} marked={marked}: {cmd}")
    return out


@pytest.fixture
def short_tmp():
    # Ray keeps unix sockets under its temporary folder: the path must stay short (<108 bytes)
    folder = tempfile.mkdtemp(prefix="dr", dir="/tmp" if os.path.isdir("/tmp") else None)
    yield folder
    for pid in _session(folder):  # never leave anything behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def test_a_killed_ray_sweep_leaves_no_process(tmp_path, short_tmp):
    pytest.importorskip("ray")
    (tmp_path / "_sleepy_ray_cleanup_plugin.py").write_text(PLUGIN)
    out = tmp_path / "out"
    env = {**os.environ, "TMPDIR": short_tmp,
           "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)}
    argv = [sys.executable, "-m", "divopt_rag.experiments.cli", "sweep", "--dataset", "synthetic",
            "--dataset-opt", "n=30", "--dataset-opt", "d=4", "--dataset-opt", "n_queries=4",
            "--methods", "_sleepy_ray_cleanup", "--plugin", "_sleepy_ray_cleanup_plugin", "--k", "2",
            "--theta", "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9", "--backend", "ray", "--n-workers", "1",
            "--chunk-size", "1", "--no-progress", "--out", str(out)]
    driver = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not list((out / "parts").glob("*.parquet")):  # Ray is up and running tasks
            assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the Ray sweep did not start within 240 s"
            time.sleep(0.2)
        before = _session(short_tmp)
        assert len(before) >= 4, before  # the driver, GCS, raylet, agents, a worker: a real session
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        killed = time.monotonic()
        while _session(short_tmp) and time.monotonic() - killed < 30:
            time.sleep(0.1)
        left = _session(short_tmp)
        took = time.monotonic() - killed
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.stderr.close()
    assert not left, f"Ray processes alive {took:.1f} s after the driver was killed: {_describe(left)}"
    assert not list(Path(short_tmp).glob("divopt-ray-*")), "the Ray session's temporary folder is left behind"
    print(f"every Ray process of the killed sweep ({len(before)} with the driver) gone {took:.2f} s after kill -9")
