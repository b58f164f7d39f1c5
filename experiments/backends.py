"""Where the runs of a sweep execute: in this process, on a local process pool, or on Ray.

Each backend takes chunks of :class:`~divopt.experiments.grid.RunSpec` and calls
``on_rows(rows)`` in the driver as chunks finish (in completion order); the driver writes the
part files, so a backend never touches the output folder.

* :func:`run_inline`: in this process (``n_workers=0``), plugins imported here;
* :func:`run_local`: a pool of spawned processes; each memory-maps the dataset cache folder
  once (pages shared through the OS cache, nothing re-encoded or pickled per run);
* :func:`run_ray`: tasks on a Ray cluster (``address``) or a local ``ray.init``; the arrays are
  ``ray.put`` once and every task receives the same object reference (zero-copy reads).

Plugin modules of the config are imported in every worker, so they can register methods.
"""
from __future__ import annotations

import importlib
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

from divopt.data import EmbeddedDataset
from divopt.experiments.evaluator import make_evaluator
from divopt.experiments.grid import RunSpec, SweepConfig
from divopt.experiments.runs import execute_run

__all__ = ["import_plugins", "run_inline", "run_local", "run_ray"]

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


def _init_worker(data_dir: str, plugins: list[str], evaluator_spec: Any) -> None:
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
        initargs=(str(data_dir), list(config.plugins), config.evaluator),
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


def run_ray(chunks: list[list[RunSpec]], data: EmbeddedDataset, address: str | None, workers: int,
            config: SweepConfig, on_rows: _OnRows) -> None:
    """Run the chunks as Ray tasks (one CPU each). An already initialized Ray is used as it is;
    otherwise this connects to ``address`` or starts a local Ray of ``workers`` CPUs, and shuts
    it down at the end."""
    import ray  # optional dependency: only this backend needs it

    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
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
