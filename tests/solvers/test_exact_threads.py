"""Exact solves from several threads at once (issue 48, item 3): Pyomo's interfaces capture the
solvers' output process-wide, so 4 threads solving n = 30, k = 4 used to raise "Captured output
... does not match sys.stdout" (Gurobi) or hang in "Deadlock closing capture_output" (HiGHS) with
the process's stdout and stderr left on pipes. Now every thread gets the optimum (the truth:
enumeration of the C(30, 4) sets) and the process's streams are the originals afterwards.

The probe runs in a child process: a regression would hang or redirect the output of this one
(pytest's own); the child's 600 s limit is a deadlock detector, not a bound on solve time."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from divopt_rag.models import Instance
from divopt_rag.models.solver_limits import available_solvers, process_streams_kept
from divopt_rag.solvers.exact import brute_force

PROBE = r"""
import json, os, sys, threading
import numpy as np
from divopt_rag.models import Instance
from divopt_rag.solvers.exact import solve_exact

solvers, path = sys.argv[1].split(","), sys.argv[2]
rng = np.random.default_rng(0)
E = rng.normal(size=(30, 6)); E /= np.linalg.norm(E, axis=1, keepdims=True)
q = rng.normal(size=6); q /= np.linalg.norm(q)
inst = Instance(E, q, k=4, theta=0.5)
streams, fds = (sys.stdout, sys.stderr), [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]
report = {}
for solver in solvers:
    got = [None] * 4
    def work(i):
        try:
            r = solve_exact(inst, solver, time_limit=300)
            got[i] = [r.status, r.objective, sorted(int(j) for j in r.indices)]
        except Exception as exc:
            got[i] = [type(exc).__name__ + ": " + str(exc)[:200]]
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    report[solver] = {"results": got, "streams_kept": (sys.stdout, sys.stderr) == streams,
                      "fds_kept": [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)] == fds}
with open(path, "w") as f:
    json.dump(report, f)
print("the probe's stdout still reaches its parent")
"""


def _instance():
    rng = np.random.default_rng(0)
    E = rng.normal(size=(30, 6))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.normal(size=6)
    return Instance(E, q / np.linalg.norm(q), k=4, theta=0.5)


@pytest.mark.slow
def test_four_threads_get_the_optimum_with_every_mip_solver_and_the_streams_are_kept(tmp_path):
    solvers = available_solvers()
    if not solvers:
        pytest.skip("no MIP solver installed")
    idx, opt = brute_force(_instance())
    path = tmp_path / "report.json"
    try:
        child = subprocess.run([sys.executable, "-c", PROBE, ",".join(solvers), str(path)], capture_output=True,
                               text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail("concurrent exact solves deadlocked (the child did not finish in 600 s)")
    assert child.returncode == 0, child.stderr[-2000:]
    assert "the probe's stdout still reaches its parent" in child.stdout
    report = json.loads(path.read_text())
    for solver in solvers:
        r = report[solver]
        assert r["streams_kept"] and r["fds_kept"], (solver, r)
        for got in r["results"]:
            assert got[0] == "optimal", (solver, got)
            assert got[1] == pytest.approx(opt, abs=1e-6) and got[2] == sorted(int(j) for j in idx), (solver, got)


def test_the_streams_are_restored_whatever_the_solve_did():
    """A solver interface that fails inside its capture leaves nothing redirected."""
    out, err = sys.stdout, sys.stderr
    before = [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]
    r, w = os.pipe()
    try:
        with pytest.raises(RuntimeError, match="inside the capture"):
            with process_streams_kept():
                os.dup2(w, 1)
                os.dup2(w, 2)
                sys.stdout = sys.stderr = open(os.devnull, "w")
                raise RuntimeError("failed inside the capture")
    finally:
        os.close(r)
        os.close(w)
    assert sys.stdout is out and sys.stderr is err
    assert [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)] == before
