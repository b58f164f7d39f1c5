"""Where the tasks of a run execute: in this process, on a local process pool, or on Ray.

Each backend takes the run's :class:`~divopt_rag.experiments.engine.plan.RunSpec` and its
:class:`~divopt_rag.experiments.engine.plan.Task` s (in chunks for the pools), builds the worker state
once per worker (``spec.open(data)``), runs every task through :func:`run_task` and calls
``on_done([(task, rows), ...])`` in the driver as tasks finish (in completion order); the driver
writes the part files, so a backend never touches the output folder.

* :func:`run_inline`: in this process, in plan order, one task at a time (timing benchmarks);
* :func:`run_local`: a pool of spawned processes; each memory-maps the plan's dataset folder
  once (pages shared through the OS cache, nothing re-encoded or pickled per task);
* :func:`run_ray`: tasks on a Ray cluster (``address``) or a local ``ray.init``; the arrays are
  ``ray.put`` once and every task receives the same object reference (zero-copy reads).

A spec imports what it needs (plugin modules that register methods) in ``open``, so it runs in
every worker.

Threads belong to the workers, not to the library calls they make (no ``torch.set_num_threads``
inside a method or a run): a pool worker sets its own process to one thread when it starts, a Ray
task runs inside :func:`worker_threads` (threadpoolctl's ``threadpool_limits``: torch's OpenMP and
MKL pools, and numpy's BLAS, restored afterwards), and inline runs do the same when the spec asks
for it (``task_threads``, a class attribute; the sweep's is 1, so its floating-point results do not
depend on the backend; the timing benchmarks leave the driver's threads as the user set them).

No orphans, no open doors:

* a pool worker dies with its driver, however the driver dies (SIGKILL included): on Linux the
  kernel signals it (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), elsewhere a watchdog thread sees
  the parent change and exits. A killed sweep leaves nothing running;
* the local Ray cluster that :func:`run_ray` starts goes with its driver too: a watchdog
  process (:mod:`divopt_rag.experiments.engine.reaper`) kills every process of the cluster (GCS,
  raylet, DashboardAgent, RuntimeEnvAgent, workers) as soon as the driver is gone, SIGKILL
  included (Ray's own agents outlived a killed driver by 50 s and more);
* the local Ray cluster that :func:`run_ray` starts listens on 127.0.0.1 only (GCS, raylet,
  workers; no dashboard) and :func:`run_ray` checks the address Ray reports before sending it
  any work (else it shuts Ray down and raises). Anyone who can reach a Ray cluster can run code
  on it (Ray's security model: https://docs.ray.io/en/latest/ray-security/index.html): an
  ``address`` must name a cluster on a trusted network, ideally with Ray's token authentication.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Iterator, Mapping

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from divopt_rag.data import EmbeddedDataset
from divopt_rag.experiments.engine.plan import RunSpec, Task
from divopt_rag.experiments.engine.reaper import Reaper
from divopt_rag.models.extras import require

__all__ = ["import_plugins", "run_task", "run_inline", "run_local", "run_ray", "start_local_ray", "ray_addresses",
           "die_with_parent", "worker_threads", "LOOPBACK"]

#: The only address a local Ray cluster started by divopt listens on.
LOOPBACK = "127.0.0.1"

_Done = list[tuple["Task", list[dict[str, Any]]]]
_OnDone = Callable[[_Done], None]


def import_plugins(plugins: Iterable[str]) -> None:
    """Import each module named in ``plugins`` (they register methods on import)."""
    for mod in plugins:
        importlib.import_module(mod)


def run_task(spec: "RunSpec", state: Any, task: "Task") -> list[dict[str, Any]]:
    """The rows of one task: ``spec.execute(state, task)`` with ``status`` "ok", or one row with
    status "error" and the message when it raised (a failed run is a row too: visible in the
    table, retried with ``retry_errors``). The spec's ``fatal`` exceptions propagate."""
    try:
        rows = spec.execute(state, task)
    except spec.fatal:
        raise
    except Exception as exc:  # noqa: BLE001  (recorded in the row, never lost)
        return [{"status": "error", "error": f"{type(exc).__name__}: {exc}"}]
    rows = [rows] if isinstance(rows, Mapping) else list(rows)
    return [{"status": "ok", "error": "", **r} for r in rows]


def worker_threads(limit: int | None) -> ContextManager[Any]:
    """Inside the block, the thread pools the tasks use (torch's OpenMP and MKL, numpy's BLAS)
    run at most ``limit`` threads, for the calling thread, as they were afterwards
    (``threadpoolctl.threadpool_limits``); None leaves them as they are."""
    return contextlib.nullcontext() if limit is None else threadpool_limits(limits=int(limit))


def run_inline(spec: "RunSpec", data: Any, tasks: list["Task"], on_done: _OnDone) -> None:
    """Run the tasks in this process, in order, reporting each as it finishes; within the spec's
    ``task_threads`` (module docstring), if it has one."""
    with worker_threads(getattr(spec, "task_threads", None)):
        state = spec.open(data)
        for task in tasks:
            on_done([(task, run_task(spec, state, task))])


# state of a pool worker: the spec and its worker state, built once per process
_WORKER: dict[str, Any] = {}


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:  # re-parented: the driver is gone
            os._exit(1)
        time.sleep(0.5)


def die_with_parent(parent: int) -> str:
    """Make this process exit when process ``parent`` (its parent) dies, however it dies.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, delivered by the kernel at the parent's death;
    elsewhere (or if prctl fails) a daemon thread polls ``os.getppid()`` twice a second. If the
    parent is already gone, exit now. Returns the mechanism used ("prctl" or "watchdog").
    """
    how = "watchdog"
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                how = "prctl"
    if os.getppid() != parent:  # died before the request could take effect
        os._exit(1)
    if how == "watchdog":
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="divopt-parent-watch").start()
    return how


def _init_worker(parent: int, spec: "RunSpec", data_dir: str | None) -> None:
    die_with_parent(parent)
    # the worker process's own setting, at its start: parallel workers must not oversubscribe the
    # cores, and every backend computes with one thread
    torch.set_num_threads(1)
    threadpool_limits(limits=1)
    data = None if data_dir is None else EmbeddedDataset.load(Path(data_dir), mmap=True)
    _WORKER["spec"], _WORKER["state"] = spec, spec.open(data)


def _run_chunk(tasks: list["Task"]) -> _Done:
    spec, state = _WORKER["spec"], _WORKER["state"]
    return [(t, run_task(spec, state, t)) for t in tasks]


def run_local(spec: "RunSpec", data_dir: Path | None, chunks: list[list["Task"]], workers: int,
              on_done: _OnDone) -> None:
    """Run the chunks on ``workers`` spawned processes; each builds ``spec.open`` once from the
    dataset folder ``data_dir`` (memory-mapped; None: the spec builds its own data)."""
    # spawn, not fork: forking a process that already runs torch threads can deadlock
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=min(workers, len(chunks)), mp_context=ctx, initializer=_init_worker,
        initargs=(os.getpid(), spec, None if data_dir is None else str(data_dir)),
    ) as ex:
        futures = [ex.submit(_run_chunk, c) for c in chunks]
        try:
            for fut in as_completed(futures):
                on_done(fut.result())
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _ray_chunk(spec: "RunSpec", data: Any, tasks: list["Task"]) -> _Done:
    with worker_threads(1):  # a Ray worker process is reused by other tasks: leave it as found
        state = spec.open(data)
        return [(t, run_task(spec, state, t)) for t in tasks]


@contextlib.contextmanager
def _loopback_node(ray: Any) -> Iterator[None]:
    """While Ray starts a local node: take 127.0.0.1 as this node's address.

    Ray replaces a loopback ``_node_ip_address`` by the machine's routable address, and then
    binds its GCS, raylet and workers there, unless clusters are disabled
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, Ray's own switch for single-machine use; read
    when Ray is imported, so the module's value is set too). :func:`run_ray` verifies the
    result, so a Ray release that ignores the switch fails closed.
    """
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    old_env = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    old_const = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if old_const is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = old_env
        if old_const is not None:
            constants.ENABLE_RAY_CLUSTER = old_const


def ray_addresses(ray: Any) -> list[str]:
    """The addresses the running Ray reports: every node's manager address and the GCS's host."""
    hosts = [str(n.get("NodeManagerAddress")) for n in ray.nodes()]
    gcs = ray.get_runtime_context().gcs_address
    return hosts + [str(gcs).rsplit(":", 1)[0]]


def start_local_ray(ray: Any, num_cpus: int) -> Reaper:
    """``ray.init`` a local cluster of ``num_cpus`` CPUs that listens on 127.0.0.1 only (no
    dashboard), and check the addresses Ray reports; RuntimeError (after shutting it down) if
    any is not loopback.

    The cluster lives in a temporary folder of its own (``divopt-ray-*`` under ``RAY_TMPDIR``
    or the system's temporary folder) and is watched by a :class:`~divopt_rag.experiments.engine.reaper.Reaper`:
    every process it starts (GCS, raylet, agents, workers) is killed within a second or two of
    the driver's death, however the driver dies. Returns the reaper: call its ``stop()`` after
    ``ray.shutdown()`` (it then removes what is left, the folder included)."""
    base = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
    temp_dir = tempfile.mkdtemp(prefix="divopt-ray-", dir=base)  # short: Ray's socket paths live in it
    reaper = Reaper(temp_dir)
    try:
        with _loopback_node(ray), reaper.marked():
            ray.init(num_cpus=max(1, num_cpus), include_dashboard=False, log_to_driver=False,
                     _node_ip_address=LOOPBACK, _temp_dir=temp_dir)
        addresses = ray_addresses(ray)
        if any(a != LOOPBACK for a in addresses):
            raise RuntimeError(f"the local Ray cluster did not bind to {LOOPBACK} only (it reports {addresses}); "
                               f"refusing to send it work: start a cluster on a trusted network and pass its address")
    except BaseException:
        if ray.is_initialized():
            ray.shutdown()
        reaper.stop()
        raise
    return reaper


def run_ray(spec: "RunSpec", data: Any, chunks: list[list["Task"]], address: str | None, workers: int,
            on_done: _OnDone) -> None:
    """Run the chunks as Ray tasks (one CPU each). An already initialized Ray is used as it is;
    otherwise this connects to ``address`` (a cluster on a trusted network: see the module
    docstring) or starts a local Ray of ``workers`` CPUs on 127.0.0.1 (:func:`start_local_ray`),
    and shuts it down at the end."""
    ray = require("ray", "the Ray backend")  # optional dependency: only this backend needs it

    started, reaper = False, None
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            reaper = start_local_ray(ray, workers)
        started = True
    try:
        # the arrays go to the object store once; every task gets the same reference
        if isinstance(data, EmbeddedDataset):  # a memory map is a file of this machine: send the arrays
            data = EmbeddedDataset(**{**data.__dict__, "E": np.array(data.E), "Q": np.array(data.Q)})
        data_ref = ray.put(data)
        remote = ray.remote(num_cpus=1)(_ray_chunk)
        pending = [remote.remote(spec, data_ref, c) for c in chunks]
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                on_done(ray.get(ready[0]))
        except BaseException:
            for ref in pending:
                ray.cancel(ref)
            raise
    finally:
        if started:
            ray.shutdown()
        if reaper is not None:
            reaper.stop()
