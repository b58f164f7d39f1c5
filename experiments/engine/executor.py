"""The one executor of divopt: a run spec is planned into tasks, every finished task becomes a
part file, the parts are consolidated into one tidy table and the spec's post-steps run on it.

Its concepts live in their own modules of :mod:`divopt_rag.experiments.engine`, and this one
runs them: :mod:`~divopt_rag.experiments.engine.plan` (tasks, run keys, the :class:`RunSpec`),
:mod:`~divopt_rag.experiments.engine.parts` (checksummed part files),
:mod:`~divopt_rag.experiments.engine.folder` (the output folder's one configuration),
:mod:`~divopt_rag.experiments.engine.consolidate` (the table, never lost),
:mod:`~divopt_rag.experiments.engine.store` (atomic writes, the folder's lock, run ids) and
:mod:`~divopt_rag.experiments.engine.options` (:class:`RunOptions`, how a run runs: what the
command line's flags give the engine, which never reads them itself).

Every command (``sweep``, ``certify``, ``bench latency|quality|exact``, ``reproduce``, the
benchmark scripts) is a :class:`RunSpec` handed to :func:`run`, as Snakemake rules, Ray Tune
trainables or ``joblib.Parallel`` calls are handed to their engine; the commands differ only in
their specs and in what they print. A spec says

* what determines the run (:meth:`RunSpec.config`, hashed into the ``run_id``) and which of its
  settings change a task's rows (:meth:`RunSpec.row_config`, hashed into every run key);
* its grid (:meth:`RunSpec.plan`: the datasets it reads, a list of :class:`Task`);
* how one task becomes tidy row(s) (:meth:`RunSpec.execute`, in a worker whose state
  :meth:`RunSpec.open` built once);
* its post-steps over the consolidated table (:meth:`RunSpec.finish`: e.g. the gaps against the
  ``exact`` rows, :func:`divopt_rag.experiments.measures.quality.exact_gaps`).

**Run keys** (:func:`run_key`, one scheme for every command)::

    key = sha256(row config hash, data key, query_id, method, canonical params)[:20]

The data key is the content fingerprint of the dataset the task reads
(:attr:`divopt_rag.data.EmbeddedDataset.key`), so a changed corpus, embedding model or query set
gives new keys and its rows run again; nothing computed from other content is reused. Parameters
are canonical (:func:`divopt_rag.experiments.engine.plan.canonical_params`: 1 and 1.0 are one theta), and
the pool a task chooses from is one of them (``pool`` or ``n``).

**An output folder** ``OUT``:

* ``config.json``: the command, its ``run_id``, its configuration and the content keys of the
  datasets it read. A folder holds one configuration: another one is refused, naming the
  differences, unless ``new_grid`` (``--new-grid``), which keeps the previous ``config.json`` and
  ``results.parquet`` beside as ``config.<run_id>.json`` and ``results.<run_id>.parquet`` and
  reuses every finished task both grids share (same key). A dataset whose content changed since
  the last run is named in the run's notes; its tasks have new keys and run again;
* ``parts/<key>.parquet`` (``<key>.error.parquet`` when the task raised): the rows of one
  finished task (:mod:`divopt_rag.experiments.engine.parts`), written atomically by the driver as soon
  as the task returns, so a kill (SIGKILL included) loses only the tasks in flight. Each part
  carries the checksum of its own bytes and its key inside (Arrow schema metadata
  ``divopt.run_key`` and the ``run_key`` column of every row). A part that fails its checksum (a
  flipped bit anywhere, its footer and pandas metadata included), whose inside does not match its
  name (a part copied over another, a foreign file) or that cannot be read (truncated) is never
  used: a run moves it to ``parts/rejected/`` (every rejected copy kept) with a warning naming
  it, and its task runs again; consolidating without running (:func:`consolidate_only`) stops
  with an error naming it;
* ``results.parquet``: the consolidated table (:mod:`divopt_rag.experiments.engine.consolidate`), one
  row per task row in plan order, stamped with ``run_id`` and ``run_index``, after the spec's
  post-steps. It is never lost: :func:`consolidate_only` refuses, naming why and keeping the
  file, when a dataset changed since the run or when the new table would lack rows it holds;
* ``measures.parquet``: the same measurements in long form, one row per (task row, measure):
  ``run_id, run_key, dataset, query_id, method, measure, cutoff, value``
  (:func:`divopt_rag.experiments.measures.tables.measures_table`; parameters are a ``run_key`` join away);
* ``data/``: dataset caches of the specs that load one (memory-mapped by the workers).

A run holds the folder's lock for its whole duration
(:func:`divopt_rag.experiments.engine.store.output_lock`): a second run on the same folder stops at
once naming the first. A task that raises is an error row (``status == "error"`` and the
message), retried by ``retry_errors``; the exceptions a spec lists in :attr:`RunSpec.fatal`
(bad input found while running) stop the run instead.

Backends (:mod:`divopt_rag.experiments.engine.backends`): ``inline`` (this process, in plan order: what
timing benchmarks use, sequentially), ``local`` (a pool of spawned processes that die with the
driver) and ``ray`` (a cluster, or a local one bound to 127.0.0.1). A spec names the backends it
supports (:attr:`RunSpec.backends`).

The tidy schema every spec writes (identity columns first, then the spec's measurements)::

    run_id, run_key, run_index, dataset, data_key, query_id, method, params (JSON), <one column
    per parameter: k, theta, pool / n, ...>, <the spec's task columns: query_index, seed, ...>,
    status, error, objective, seconds, iterations, n, selected, <metrics: ilad, recall@10, ...>,
    <post-steps: optimum, bound, proven_optimal, gap, gap_kind, bound_gap, exact_hit>

Times are in seconds everywhere (column names say so: ``seconds``, ``gemv_seconds``, ...).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from tqdm.auto import tqdm

from divopt_rag.data.atomic import remove_stale_temporaries
from divopt_rag.experiments.engine import backends
from divopt_rag.experiments.engine.consolidate import consolidate, refuse_changed_data, refuse_losing_rows, write_results
from divopt_rag.experiments.engine.folder import Footprint, check_folder, data_changes, keep_previous, read_config
from divopt_rag.experiments.engine.options import BACKENDS, RunOptions
from divopt_rag.experiments.engine.parts import PartError, finished_keys, reject, verified_keys, write_part
from divopt_rag.experiments.engine.plan import Plan, RunResult, RunSpec, Task
from divopt_rag.experiments.engine.store import output_lock, write_text
from divopt_rag.models.validation import check_scalar

__all__ = ["run", "consolidate_only"]


@dataclass(frozen=True)
class _Backend:
    """Where the tasks run: ``name`` ("inline", "local", "ray") and its settings."""

    name: str
    n_workers: int | None = None
    address: str | None = None
    chunk_size: int | None = None


def run(spec: RunSpec, out: str | os.PathLike, options: RunOptions | None = None, **fields: Any) -> RunResult:
    """Run (or resume) ``spec`` into the folder ``out`` and return the consolidated table.

    options : how it runs (:class:`~divopt_rag.experiments.engine.options.RunOptions`: backend,
        n_workers, address, chunk_size, progress, retry_errors, new_grid; default: the defaults);
        ``fields``: the same fields as keywords, replacing those of ``options``
        (``run(spec, out, progress=False)``).

    Raises :class:`~divopt_rag.experiments.engine.store.OutputLocked` when another run holds the folder.
    """
    opts = dataclasses.replace(options or RunOptions(), **fields)
    backend, n_workers, address, chunk_size = opts.backend, opts.n_workers, opts.address, opts.chunk_size
    progress, retry_errors, new_grid = opts.progress, opts.retry_errors, opts.new_grid
    backend = spec.backends[0] if backend is None else backend
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {list(BACKENDS)}")
    n_workers = check_scalar(n_workers, "n_workers", int, min_val=0, allow_none=True)
    if backend == "local" and not n_workers:  # None or 0: in this process (one default, every command)
        backend = "inline"
    if backend not in spec.backends:
        raise ValueError(f"{spec.command} runs on the {'/'.join(spec.backends)} backend, not {backend!r}")
    if chunk_size is not None:
        chunk_size = check_scalar(chunk_size, "chunk_size", int, min_val=1)
    out = Path(out)
    spec.check()  # names and values first: a typo is reported as such, before anything is written
    with output_lock(out) as holder:
        return _run_locked(spec, out, _Backend(backend, n_workers, address, chunk_size), progress,
                           retry_errors or spec.always_retry_errors, new_grid, Footprint(out, holder))


def _prepare(spec: RunSpec, out: Path, new_grid: bool) -> tuple[Plan, dict[str, Any] | None, str | None]:
    previous = check_folder(out, spec, new_grid)  # a refusal costs nothing
    old = read_config(out)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(parts)  # half-written parts of a killed run (never a live writer's)
    remove_stale_temporaries(out)
    plan = spec.plan(out)
    if not plan.tasks:
        raise ValueError(f"{spec.command}: the run has no tasks (an empty dataset or grid)")
    keys = [t.key for t in plan.tasks]
    if len(set(keys)) != len(keys):
        seen: set[str] = set()
        dup = next(t for t in plan.tasks if t.key in seen or seen.add(t.key))
        raise ValueError(f"{spec.command}: duplicated run: method {dup.method!r} with {dict(dup.params)} on query "
                         f"{dup.query_id!r}")
    return plan, old, previous


def _run_locked(spec: RunSpec, out: Path, backend: _Backend, progress: bool, retry_errors: bool, new_grid: bool,
                footprint: Footprint) -> RunResult:
    try:
        plan, old, previous = _prepare(spec, out, new_grid)
    except BaseException:
        footprint.undo()  # a refused run leaves nothing behind
        raise
    if previous is not None:
        keep_previous(out, previous)
    write_text(json.dumps({"command": spec.command, "run_id": spec.run_id, "config": spec.config(),
                           "data": plan.data_keys, "n_runs": len(plan.tasks)}, indent=2, default=str),
                       out / "config.json")
    parts = out / "parts"
    done = verified_keys(parts, plan.tasks, retry_errors)
    notes = [*plan.notes, *data_changes(old if previous is None else None, plan.data_keys, out, plan.tasks, done)]
    todo = [t for t in plan.tasks if t.key not in done]
    n_errors = _execute(spec, plan, todo, backend, progress, len(plan.tasks) - len(todo), parts)
    # every part is verified again as it is read: one that fails now (changed since it was
    # checked, or written broken) is set aside and its task runs again, once
    again: list[Task] = []

    def unusable(task: Task, path: Path, exc: PartError) -> None:
        reject(parts, path, str(exc), stacklevel=5)
        again.append(task)

    table = consolidate(out, plan.tasks, spec.run_id, on_unusable=unusable)
    if again:
        n_errors += _execute(spec, plan, again, backend, progress, len(plan.tasks) - len(again), parts)
        table = consolidate(out, plan.tasks, spec.run_id)
    table = write_results(out, spec.finish(table, out))
    executed = {t.key for t in todo} | {t.key for t in again}
    return RunResult(table=table, path=out / "results.parquet", run_id=spec.run_id, n_runs=len(plan.tasks),
                     n_skipped=len(plan.tasks) - len(executed), n_executed=len(executed), n_errors=n_errors,
                     tasks=plan.tasks, notes=notes)


def _execute(spec: RunSpec, plan: Plan, todo: list[Task], backend: _Backend, progress: bool, n_done: int,
             parts: Path) -> int:
    """Run ``todo`` on ``backend``, writing each task's part as soon as it returns (a progress bar
    counts from the ``n_done`` tasks already finished); the number of tasks that ended in an error."""
    bar = tqdm(total=n_done + len(todo), initial=n_done, desc=spec.command, unit="run", disable=not progress)
    n_errors = 0

    def on_done(results: Iterable[tuple[Task, list[dict[str, Any]]]]) -> None:
        nonlocal n_errors
        for task, rows in results:
            write_part(parts, task, rows)
            n_errors += any(r.get("status") != "ok" for r in rows)
            bar.update(1)
            bar.set_postfix_str(task.label()[:60], refresh=False)

    try:
        if not todo:
            return 0
        if backend.name == "inline":
            backends.run_inline(spec, plan.data, todo, on_done)
            return n_errors
        workers = (os.cpu_count() or 1) if backend.n_workers is None else int(backend.n_workers)
        chunk_size = backend.chunk_size
        if chunk_size is None:
            chunk_size = max(1, min(16, math.ceil(len(todo) / max(1, 4 * max(1, workers)))))
        chunks = [todo[i:i + chunk_size] for i in range(0, len(todo), chunk_size)]
        if backend.name == "ray":
            backends.run_ray(spec, plan.data, chunks, backend.address, workers, on_done)
        else:
            backends.run_local(spec, plan.data_dir, chunks, workers, on_done)
        return n_errors
    finally:
        bar.close()


def consolidate_only(spec: RunSpec, out: str | os.PathLike) -> RunResult:
    """Rebuild ``out/results.parquet`` from the parts of ``spec``'s plan, running nothing.

    The folder must hold this very configuration. It refuses, naming why, writing nothing and
    keeping ``results.parquet``: when a dataset changed since the folder's run
    (:func:`~divopt_rag.experiments.engine.consolidate.refuse_changed_data`), when a part cannot be used
    (:class:`PartError` naming it) and when the new table would lack rows the old one holds
    (:func:`~divopt_rag.experiments.engine.consolidate.refuse_losing_rows`)."""
    out = Path(out)
    spec.check()
    with output_lock(out) as holder:
        footprint = Footprint(out, holder)
        try:
            old = read_config(out)
            if old is None:
                raise ValueError(f"{out} holds no {spec.command} run (no config.json): nothing to consolidate")
            plan, _, _ = _prepare(spec, out, new_grid=False)
            refuse_changed_data(out, old, plan.data_keys)
            table = consolidate(out, plan.tasks, spec.run_id)
            refuse_losing_rows(out, table)
        except BaseException:
            footprint.undo()
            raise
        table = write_results(out, spec.finish(table, out))
    done = len(finished_keys(out / "parts") & {t.key for t in plan.tasks})
    return RunResult(table=table, path=out / "results.parquet", run_id=spec.run_id, n_runs=len(plan.tasks),
                     n_skipped=done, n_executed=0, n_errors=0, tasks=plan.tasks, notes=list(plan.notes))
