"""Where the runs of a sweep execute: in this process, on a local process pool, or on Ray.

Each backend takes chunks of :class:`~divopt_rag.experiments.grid.RunSpec` and calls
``on_rows(rows)`` in the driver as chunks finish (in completion order); the driver writes the
part files, so a backend never touches the output folder.

* :func:`run_inline`: in this process (``n_workers=0``), plugins imported here;
* :func:`run_local`: a pool of spawned processes; each memory-maps the dataset cache folder
  once (pages shared through the OS cache, nothing re-encoded or pickled per run);
* :func:`run_ray`: tasks on a Ray cluster (``address``) or a local ``ray.init``; the arrays are
  ``ray.put`` once and every task receives the same object reference (zero-copy reads).

Plugin modules of the config are imported in every worker, so they can register methods.

No orphans, no open doors:

* a pool worker dies with its driver, however the driver dies (SIGKILL included): on Linux the
  kernel signals it (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), elsewhere a watchdog thread sees
  the parent change and exits. A killed sweep leaves nothing running;
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
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import torch

from divopt_rag.data import EmbeddedDataset
from divopt_rag.experiments.rag.evaluator import make_evaluator
from divopt_rag.experiments.grid import RunSpec, SweepConfig
from divopt_rag.experiments.runs import execute_run

__all__ = ["import_plugins", "run_inline", "run_local", "run_ray", "start_local_ray", "ray_addresses",
           "die_with_parent", "LOOPBACK"]

#: The only address a local Ray cluster started by divopt listens on.
LOOPBACK = "127.0.0.1"

_Rows = list[dict[str, Any]]
_OnRows = Callable[[_Rows], None]


def import_plugins(plugins: Iterable[str]) -> None:
    """Import each module named in ``plugins`` (they register methods on import)."""
    for mod in plugins:
        importlib.import_module(mod)


def run_inline(chunks: list[list[RunSpec]], data: EmbeddedDataset, config: SweepConfig, on_rows: _OnRows) -> None:
    """Run every chunk in this process."""
    import_plugins(config.plugins)
    evaluator = make_evaluator(config.evaluator)
    for chunk in chunks:
        on_rows([execute_run(data, s, evaluator) for s in chunk])


# state of a pool worker: the memory-mapped dataset and the evaluator, built once per process
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


def _init_worker(parent: int, data_dir: str, plugins: list[str], evaluator_spec: Any) -> None:
    die_with_parent(parent)
    torch.set_num_threads(1)
    import_plugins(plugins)
    _WORKER["data"] = EmbeddedDataset.load(Path(data_dir), mmap=True)
    _WORKER["evaluator"] = make_evaluator(evaluator_spec)


def _run_chunk(specs: list[RunSpec]) -> _Rows:
    return [execute_run(_WORKER["data"], s, _WORKER["evaluator"]) for s in specs]


def run_local(chunks: list[list[RunSpec]], data_dir: Path, workers: int, config: SweepConfig, on_rows: _OnRows) -> None:
    """Run the chunks on ``workers`` spawned processes reading the dataset cache ``data_dir``."""
    # spawn, not fork: forking a process that already runs torch threads can deadlock
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=min(workers, len(chunks)), mp_context=ctx, initializer=_init_worker,
        initargs=(os.getpid(), str(data_dir), list(config.plugins), config.evaluator),
    ) as ex:
        futures = [ex.submit(_run_chunk, c) for c in chunks]
        try:
            for fut in as_completed(futures):
                on_rows(fut.result())
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _ray_chunk(data: EmbeddedDataset, specs: list[RunSpec], plugins: list[str], evaluator_spec: Any) -> _Rows:
    import_plugins(plugins)
    evaluator = make_evaluator(evaluator_spec)
    return [execute_run(data, s, evaluator) for s in specs]


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


def start_local_ray(ray: Any, num_cpus: int) -> None:
    """``ray.init`` a local cluster of ``num_cpus`` CPUs that listens on 127.0.0.1 only (no
    dashboard), and check the addresses Ray reports; RuntimeError (after shutting it down) if
    any is not loopback."""
    with _loopback_node(ray):
        ray.init(num_cpus=max(1, num_cpus), include_dashboard=False, log_to_driver=False, _node_ip_address=LOOPBACK)
    addresses = ray_addresses(ray)
    if any(a != LOOPBACK for a in addresses):
        ray.shutdown()
        raise RuntimeError(f"the local Ray cluster did not bind to {LOOPBACK} only (it reports {addresses}); "
                           f"refusing to send it work: start a cluster on a trusted network and pass its address")


def run_ray(chunks: list[list[RunSpec]], data: EmbeddedDataset, address: str | None, workers: int,
            config: SweepConfig, on_rows: _OnRows) -> None:
    """Run the chunks as Ray tasks (one CPU each). An already initialized Ray is used as it is;
    otherwise this connects to ``address`` (a cluster on a trusted network: see the module
    docstring) or starts a local Ray of ``workers`` CPUs on 127.0.0.1 (:func:`start_local_ray`),
    and shuts it down at the end."""
    import ray  # optional dependency: only this backend needs it

    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
            started = True
        else:
            start_local_ray(ray, workers)
            started = True
    try:
        # the arrays go to the object store once; every task gets the same reference
        local = EmbeddedDataset(**{**data.__dict__, "E": np.array(data.E), "Q": np.array(data.Q)})
        data_ref = ray.put(local)
        task = ray.remote(num_cpus=1)(_ray_chunk)
        pending = [task.remote(data_ref, c, list(config.plugins), config.evaluator) for c in chunks]
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                on_rows(ray.get(ready[0]))
        except BaseException:
            for ref in pending:
                ray.cancel(ref)
            raise
    finally:
        if started:
            ray.shutdown()
