"""The one executor of divopt: a run spec is planned into tasks, every finished task becomes a
part file, the parts are consolidated into one tidy table and the spec's post-steps run on it.

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
  ``exact`` rows, :func:`divopt_rag.experiments.harness.exact_gaps`).

**Run keys** (:func:`run_key`, one scheme for every command)::

    key = sha256(row config hash, data key, query_id, method, canonical params)[:20]

The data key is the content fingerprint of the dataset the task reads
(:attr:`divopt_rag.data.EmbeddedDataset.key`), so a changed corpus, embedding model or query set
gives new keys and its rows run again; nothing computed from other content is reused. Parameters
are canonical (:func:`divopt_rag.experiments.grid.canonical_params`: 1 and 1.0 are one theta), and
the pool a task chooses from is one of them (``pool`` or ``n``).

**An output folder** ``OUT``:

* ``config.json``: the command, its ``run_id``, its configuration and the content keys of the
  datasets it read. A folder holds one configuration: another one is refused, naming the
  differences, unless ``new_grid`` (``--new-grid``), which keeps the previous ``config.json`` and
  ``results.parquet`` beside as ``config.<run_id>.json`` and ``results.<run_id>.parquet`` and
  reuses every finished task both grids share (same key). A dataset whose content changed since
  the last run is named in the run's notes; its tasks have new keys and run again;
* ``parts/<key>.parquet`` (``<key>.error.parquet`` when the task raised): the rows of one
  finished task, written atomically by the driver (:func:`divopt_rag.experiments.harness.write_parquet`)
  as soon as the task returns, so a kill (SIGKILL included) loses only the tasks in flight. Each
  part carries its key inside, in the Arrow schema metadata (``divopt.run_key``) and in the
  ``run_key`` column of every row. A part whose inside does not match its name (a part copied
  over another, a foreign file) or that cannot be read (truncated) is never used: before a run
  it is moved to ``parts/rejected/`` with a warning naming it and its task runs again;
  consolidating without running (:func:`consolidate_only`) stops with an error naming it;
* ``results.parquet``: the consolidated table, one row per task row in plan order, stamped with
  ``run_id`` and ``run_index``, after the spec's post-steps;
* ``data/``: dataset caches of the specs that load one (memory-mapped by the workers).

A run holds the folder's lock for its whole duration
(:func:`divopt_rag.experiments.harness.output_lock`): a second run on the same folder stops at
once naming the first. A task that raises is an error row (``status == "error"`` and the
message), retried by ``retry_errors``; the exceptions a spec lists in :attr:`RunSpec.fatal`
(bad input found while running) stop the run instead.

Backends (:mod:`divopt_rag.experiments.backends`): ``inline`` (this process, in plan order: what
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

import abc
import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Iterable, Mapping, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from divopt_rag.data import stable_hash
from divopt_rag.experiments import backends, harness
from divopt_rag.experiments.arguments import add_run_arguments  # the flags of run_options (argparse only)
from divopt_rag.experiments.grid import canonical_params
from divopt_rag.models.validation import check_scalar

__all__ = [
    "Task",
    "Plan",
    "RunSpec",
    "RunResult",
    "PartError",
    "PartWarning",
    "run",
    "consolidate_only",
    "run_key",
    "make_task",
    "write_part",
    "read_part",
    "finished_keys",
    "check_folder",
    "error_summary",
    "report_errors",
    "add_run_arguments",
    "run_options",
    "BACKENDS",
    "KEY_METADATA",
]

#: Where a part file keeps its run key (Arrow schema metadata).
KEY_METADATA = b"divopt.run_key"
_RUN_ID_METADATA = b"divopt.run_id"
#: Backends a run can use.
BACKENDS = ("inline", "local", "ray")
_KEY_LENGTH = 20


# =============================================================================================
# Tasks and keys
# =============================================================================================
def run_key(config_hash: str, data_key: str, query_id: str, method: str, params: Mapping[str, Any]) -> str:
    """The key of one task: sha256 of (row config hash, data content key, query id, method,
    canonical params), 20 hex digits. The same task always has the same key (its part is found
    again); any change to what it reads or how it runs gives another key."""
    return stable_hash({"config": str(config_hash), "data": str(data_key), "query_id": str(query_id),
                        "method": str(method), "params": canonical_params(params)}, _KEY_LENGTH)


@dataclass(frozen=True)
class Task:
    """One unit of work of a run: a method with its parameters on one query of one dataset.

    ``extra`` holds the spec's own columns of the task's rows (``query_index``, ``seed``, ...);
    :meth:`columns` are the identity columns every row of the task carries.
    """

    index: int
    key: str
    dataset: str
    data_key: str
    query_id: str
    method: str
    params: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """Identity columns of this task's rows, in schema order."""
        return {"run_key": self.key, "run_index": self.index, "dataset": self.dataset, "data_key": self.data_key,
                "query_id": self.query_id, "method": self.method,
                "params": json.dumps(dict(self.params), sort_keys=True), **self.params, **self.extra}

    def label(self) -> str:
        """A short text for progress bars: query, method and parameters."""
        params = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())
        return f"{self.query_id} {self.method} {params}".strip()


def make_task(index: int, *, config_hash: str, data_key: str, query_id: Any, method: str,
              params: Mapping[str, Any], dataset: str = "", **extra: Any) -> Task:
    """A :class:`Task` with canonical parameters and its :func:`run_key`."""
    params = canonical_params(params)
    return Task(index=int(index), key=run_key(config_hash, data_key, str(query_id), method, params),
                dataset=str(dataset), data_key=str(data_key), query_id=str(query_id), method=str(method),
                params=params, extra=dict(extra))


@dataclass
class Plan:
    """What :meth:`RunSpec.plan` returns: the tasks in order, the dataset the workers share
    (``data``, an :class:`~divopt_rag.data.EmbeddedDataset`, and ``data_dir``, the folder the
    local pool's workers memory-map; None when the spec builds its own data), the content key of
    every dataset read (``data_keys``: label -> key, recorded in ``config.json``) and notes to
    print (datasets skipped, ...)."""

    tasks: list[Task]
    data: Any = None
    data_dir: Path | None = None
    data_keys: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class RunSpec(abc.ABC):
    """What one command runs (module docstring). Subclasses are small, picklable objects (the
    local pool and Ray send them to workers) with a class attribute ``command``."""

    command: ClassVar[str] = ""
    #: Backends this spec can run on; the first is its default.
    backends: ClassVar[tuple[str, ...]] = ("inline",)
    #: Exceptions that stop the run (bad input found while running) instead of becoming error rows.
    fatal: ClassVar[tuple[type[BaseException], ...]] = ()
    #: Run error parts again on every run (not only with ``retry_errors``).
    always_retry_errors: ClassVar[bool] = False

    def config(self) -> dict[str, Any]:
        """Everything that determines the run (JSON-able): its hash is the run id, and
        ``config.json`` records it. Default, for a dataclass spec: its fields, except those
        marked ``field(metadata={"config": False})`` (where files go, not what runs)."""
        if not dataclasses.is_dataclass(self):
            raise NotImplementedError(f"{type(self).__name__} must define config()")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("config", True)}

    def row_config(self) -> dict[str, Any]:
        """The settings that change a task's rows beyond its dataset content, query, method and
        parameters (a base seed, an evaluator, solver settings): hashed into every run key."""
        return {}

    def check(self) -> None:
        """Validate the configuration before any work (cheap; ValueError naming the problem)."""

    @abc.abstractmethod
    def plan(self, out: Path) -> Plan:
        """Load (or reuse from ``out/data``) what the run reads and list its tasks."""

    def open(self, data: Any) -> Any:
        """The state one worker runs tasks with (built once per worker from the plan's data)."""
        return data

    @abc.abstractmethod
    def execute(self, state: Any, task: Task) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        """The measurement columns of the task's row(s) (the identity columns are added)."""

    def finish(self, table: pd.DataFrame, out: Path) -> pd.DataFrame:
        """Post-steps over the consolidated table (may write further files into ``out``)."""
        return table

    @property
    def run_id(self) -> str:
        return harness.run_id(self.config())

    @property
    def config_hash(self) -> str:
        return stable_hash(self.row_config(), _KEY_LENGTH)


@dataclass
class RunResult:
    """The consolidated ``table`` (as ``results.parquet`` holds it) and what this invocation did."""

    table: pd.DataFrame
    path: Path
    run_id: str
    n_runs: int
    n_skipped: int
    n_executed: int
    n_errors: int
    tasks: list[Task] = field(repr=False, default_factory=list)
    notes: list[str] = field(default_factory=list)


# =============================================================================================
# Part files
# =============================================================================================
class PartError(ValueError):
    """A part file that cannot be used (unreadable, or its inside does not match its name)."""


class PartWarning(UserWarning):
    """A part file was set aside (moved to ``parts/rejected``) and its task runs again."""


def _part_paths(parts: Path, key: str) -> tuple[Path, Path]:
    return parts / f"{key}.parquet", parts / f"{key}.error.parquet"


def write_part(parts: Path, task: Task, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write the rows of ``task`` to its part file atomically, its key inside (schema metadata and
    the ``run_key`` column); an error part when any row has status "error". A finished task
    replaces its error part."""
    ok = all(r.get("status") == "ok" for r in rows)
    frame = pd.DataFrame([{**task.columns(), **r, "run_key": task.key} for r in rows])
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), KEY_METADATA: task.key.encode()})
    good, bad = _part_paths(parts, task.key)
    path = harness.write_parquet(table, good if ok else bad)
    if ok:
        bad.unlink(missing_ok=True)
    return path


def _check_part(path: Path, key: str, keys_only: bool = False) -> pa.Table:
    """The part's table (with ``keys_only``, its ``run_key`` column alone: the footer and one
    column are read) after checking that it carries ``key``; PartError naming the file."""
    try:
        if keys_only:
            names = pq.read_schema(path).names
            table = pq.read_table(path, columns=["run_key"] if "run_key" in names else [])
        else:
            table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise PartError(f"part file {path}: cannot be read ({exc}); a truncated or foreign file") from None
    inside = (table.schema.metadata or {}).get(KEY_METADATA)
    if inside is None:
        raise PartError(f"part file {path}: carries no run key (not written by divopt's executor)")
    if inside.decode() != key:
        raise PartError(f"part file {path}: holds the rows of run {inside.decode()}, not of run {key} (a part copied "
                        f"over another or renamed)")
    if table.num_rows:
        names = set(table.column("run_key").to_pylist()) if "run_key" in table.column_names else {None}
        if names != {key}:
            raise PartError(f"part file {path}: rows carry run keys {sorted(map(str, names))}, expected {key}")
    return table


def read_part(path: str | os.PathLike, key: str) -> pd.DataFrame:
    """The rows of the part file ``path`` of run ``key``, after checking that the file is whole
    and carries ``key`` inside (metadata and every row); :class:`PartError` naming it otherwise."""
    return _check_part(Path(path), key).to_pandas()


def finished_keys(parts: str | os.PathLike, include_errors: bool = True) -> set[str]:
    """Keys with a part file (by name only, nothing is read): ``<key>.parquet`` and, with
    ``include_errors``, ``<key>.error.parquet``."""
    parts = Path(parts)
    if not parts.is_dir():
        return set()
    done = set()
    for p in parts.glob("*.parquet"):
        if p.name.startswith("."):
            continue
        key, _, rest = p.name.partition(".")
        if rest == "parquet" or (include_errors and rest == "error.parquet"):
            done.add(key)
    return done


def _reject(parts: Path, path: Path, problem: str) -> None:
    """Move an unusable part to ``parts/rejected/`` (kept for inspection, never read again)."""
    dest = parts / "rejected" / path.name
    dest.parent.mkdir(exist_ok=True)
    os.replace(path, dest)
    warnings.warn(f"{problem}; moved to {dest}, its run is computed again", PartWarning, stacklevel=4)


def _verified_done(parts: Path, tasks: Sequence[Task], retry_errors: bool) -> set[str]:
    """Keys of the tasks whose part is there and sound (error parts unless ``retry_errors``);
    unsound parts are rejected (:func:`_reject`) so that their tasks run again."""
    done = set()
    for t in tasks:
        for path in _part_paths(parts, t.key):
            if not path.exists() or (retry_errors and path.name.endswith(".error.parquet")):
                continue
            try:
                _check_part(path, t.key, keys_only=True)
            except PartError as exc:
                _reject(parts, path, str(exc))
                continue
            done.add(t.key)
            break
    return done


def _consolidate(out: Path, tasks: Sequence[Task], run_id: str) -> pd.DataFrame:
    """The rows of every finished task, in plan order, stamped with ``run_id`` and ``run_index``
    (a part reused from another grid keeps its rows but takes this plan's index)."""
    parts = out / "parts"
    frames = []
    for t in tasks:
        good, bad = _part_paths(parts, t.key)
        path = good if good.exists() else bad if bad.exists() else None
        if path is None:
            continue
        frame = read_part(path, t.key)
        if len(frame):
            frames.append(frame.assign(run_index=t.index))
    if not frames:
        return pd.DataFrame()
    # concatenated in run order: the dtypes (of columns some methods lack too) are then the
    # same however the parts were produced
    table = pd.concat(frames, ignore_index=True, sort=False)
    table.insert(0, "run_id", run_id)
    return table[_schema_order(table.columns, tasks)]


def _schema_order(columns: Sequence[str], tasks: Sequence[Task]) -> list[str]:
    """Identity columns first (run, dataset, query, method, every parameter, the tasks' own
    columns, status), then the measurements in the order they appeared."""
    params = list(dict.fromkeys(p for t in tasks for p in t.params))
    extra = list(dict.fromkeys(e for t in tasks for e in t.extra))
    head = ["run_id", "run_key", "run_index", "dataset", "data_key", "query_id", "method", "params", *params, *extra,
            "status", "error"]
    head = [c for c in dict.fromkeys(head) if c in set(columns)]
    return head + [c for c in columns if c not in set(head)]


def _write_results(out: Path, table: pd.DataFrame) -> pd.DataFrame:
    harness.write_parquet(table, out / "results.parquet")
    # what the file holds (missing values of bool / str columns read back as None)
    return pq.read_table(out / "results.parquet").to_pandas()


# =============================================================================================
# The folder's configuration
# =============================================================================================
def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): d}


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = 4) -> str:
    a, b = _flat(json.loads(json.dumps(old, default=str))), _flat(json.loads(json.dumps(new, default=str)))
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k, "<absent>") != b.get(k, "<absent>")]
    text = "; ".join(f"{k}: {a.get(k, '<absent>')!r} -> {b.get(k, '<absent>')!r}" for k in keys[:limit])
    return text + (f"; and {len(keys) - limit} more" if len(keys) > limit else "")


def _read_config(out: Path) -> dict[str, Any] | None:
    path = out / "config.json"
    if not path.exists():
        return None
    try:
        old = json.loads(path.read_text())
        str(old["run_id"])
        return old
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a divopt-rag run config ({exc}); use another output folder") from None


def check_folder(out: str | os.PathLike, spec: RunSpec, new_grid: bool = False) -> str | None:
    """Refuse to run ``spec`` in a folder that holds another configuration (its ``config.json``
    has another run id), naming the differences; with ``new_grid`` that is allowed and the
    previous run id is returned (the caller keeps its files beside). A folder of another command
    is always refused. None when the folder is new or holds this very configuration."""
    out = Path(out)
    old = _read_config(out)
    if old is None:
        return None
    old_id, old_command = str(old["run_id"]), old.get("command", "")
    if old_command != spec.command:
        raise ValueError(f"{out} holds a {old_command or 'divopt-rag'} run ({old_id}), not a {spec.command} run: "
                         f"use another output folder")
    if old_id == spec.run_id:
        return None
    diff = _differences(old.get("config", {}), spec.config())
    if not new_grid:
        raise ValueError(f"{out} holds {spec.command} {old_id} (config.json) with another configuration ({diff}); "
                         f"its results.parquet would be replaced: use another output folder, or --new-grid "
                         f"(new_grid=True) to run this grid here and keep the previous files as "
                         f"config.{old_id}.json and results.{old_id}.parquet")
    return old_id


def _keep_previous(out: Path, old_id: str) -> None:
    for name, kept in (("config.json", f"config.{old_id}.json"), ("results.parquet", f"results.{old_id}.parquet")):
        if (out / name).exists():
            os.replace(out / name, out / kept)


def _data_changes(old: Mapping[str, Any] | None, keys: Mapping[str, str], out: Path,
                  tasks: Sequence[Task] = (), done: Collection[str] = ()) -> list[str]:
    """Notes naming every dataset whose content key changed since the folder's last run, and how
    many of its runs keep their rows: a run's key hashes the content it reads, so a run whose own
    content did not change (another query changed, or an earlier ``--limit`` ran fewer queries) is
    reused, and only the others run again."""
    before = (old or {}).get("data", {}) or {}
    notes = []
    for label, key in keys.items():
        if label in before and before[label] != key:
            mine = [t for t in tasks if label == t.dataset or label.startswith(f"{t.dataset} [")] or list(tasks)
            reused = sum(t.key in done for t in mine)
            notes.append(f"dataset {label!r}: its content differs from the last run in {out}, or other queries of "
                         f"it run (content key {before[label]} -> {key}); {reused} of its {len(mine)} runs read "
                         f"content this folder already holds and keep their rows, the others run")
    return notes


def error_summary(table: pd.DataFrame, limit: int = 3) -> tuple[int, list[tuple[str, int]]]:
    """(number of error rows, the ``limit`` most frequent error messages with their counts)."""
    if table.empty or "status" not in table:
        return 0, []
    errors = table.loc[table["status"] != "ok", "error"].fillna("").astype(str)
    return int(errors.size), Counter(errors).most_common(limit)


def report_errors(prog: str, table: pd.DataFrame, n_runs: int | None = None, what: str = "runs") -> int:
    """Print on stderr how many runs of ``table`` failed and their most frequent reasons
    (:func:`error_summary`); the exit code of the command: 1 if any failed, else 0."""
    n_failed, reasons = error_summary(table)
    if not n_failed:
        return 0
    n_runs = len(table) if n_runs is None else n_runs
    counted = f"every {what.removesuffix('s')}" if n_failed == n_runs else f"{n_failed} of {n_runs} {what}"
    print(f"{prog}: {counted} failed (status 'error'; --retry-errors runs them again). Most frequent reasons:",
          file=sys.stderr)
    for text, count in reasons:
        print(f"  {count} x {text}", file=sys.stderr)
    return 1


# =============================================================================================
# Running
# =============================================================================================
def run(spec: RunSpec, out: str | os.PathLike, *, backend: str | None = None, n_workers: int | None = None,
        address: str | None = None, chunk_size: int | None = None, progress: bool = True,
        retry_errors: bool = False, new_grid: bool = False) -> RunResult:
    """Run (or resume) ``spec`` into the folder ``out`` and return the consolidated table.

    backend : "inline" (this process, plan order), "local" (``n_workers`` spawned processes;
        ``n_workers=0`` runs inline) or "ray" (``address`` of a trusted cluster, else a local Ray
        on 127.0.0.1); default: the spec's first. chunk_size : tasks per worker call (default:
        about 4 calls per worker, at most 16 tasks). retry_errors : run the error parts again.
        new_grid : accept a configuration other than the one ``out`` holds (:func:`check_folder`).

    Raises :class:`~divopt_rag.experiments.harness.OutputLocked` when another run holds the folder.
    """
    backend = spec.backends[0] if backend is None else backend
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {list(BACKENDS)}")
    n_workers = check_scalar(n_workers, "n_workers", int, min_val=0, allow_none=True)
    if backend == "local" and n_workers == 0:
        backend = "inline"
    if backend not in spec.backends:
        raise ValueError(f"{spec.command} runs on the {'/'.join(spec.backends)} backend, not {backend!r}")
    if chunk_size is not None:
        chunk_size = check_scalar(chunk_size, "chunk_size", int, min_val=1)
    out = Path(out)
    spec.check()  # names and values first: a typo is reported as such, before anything is written
    with harness.output_lock(out) as holder:
        return _run_locked(spec, out, backend, n_workers, address, chunk_size, progress,
                           retry_errors or spec.always_retry_errors, new_grid, _Footprint(out, holder))


class _Footprint:
    """What an output folder held when its lock was taken, so that a run refused while it is
    being prepared (another configuration in the folder, a dataset that cannot be loaded, an
    empty grid) removes exactly what it created (the folders and the lock file the lock made,
    ``parts/`` and ``data/`` entries) and leaves the user's files as they were. Taken under the
    lock: nothing another run wrote is ever removed."""

    _SUBFOLDERS = ("", "parts", "data")

    def __init__(self, out: Path, holder: Mapping[str, Any]) -> None:
        self.out = out
        self.created = list(holder.get("created", ()))
        self.lock_file = out / harness.LOCK_NAME if holder.get("created_lock_file") else None
        self.entries = {sub: set(os.listdir(out / sub)) if (out / sub).is_dir() else None for sub in self._SUBFOLDERS}

    def undo(self) -> None:
        """Remove what was created since (call it while holding the folder's lock)."""
        if self.created:
            shutil.rmtree(self.created[0], ignore_errors=True)
            return
        if self.lock_file is not None:
            self.lock_file.unlink(missing_ok=True)
        for sub in self._SUBFOLDERS:
            before, folder = self.entries.get(sub), self.out / sub
            if before is None or not folder.is_dir():
                continue  # a new subfolder is an entry of its parent
            for name in set(os.listdir(folder)) - before:
                path = folder / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)


def _prepare(spec: RunSpec, out: Path, new_grid: bool) -> tuple[Plan, dict[str, Any] | None, str | None]:
    previous = check_folder(out, spec, new_grid)  # a refusal costs nothing
    old = _read_config(out)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    harness.remove_stale_temporaries(parts)  # half-written parts of a killed run (never a live writer's)
    harness.remove_stale_temporaries(out)
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


def _run_locked(spec: RunSpec, out: Path, backend: str, n_workers: int | None, address: str | None,
                chunk_size: int | None, progress: bool, retry_errors: bool, new_grid: bool,
                footprint: _Footprint) -> RunResult:
    try:
        plan, old, previous = _prepare(spec, out, new_grid)
    except BaseException:
        footprint.undo()  # a refused run leaves nothing behind
        raise
    if previous is not None:
        _keep_previous(out, previous)
    harness.write_text(json.dumps({"command": spec.command, "run_id": spec.run_id, "config": spec.config(),
                                   "data": plan.data_keys, "n_runs": len(plan.tasks)}, indent=2, default=str),
                       out / "config.json")
    parts = out / "parts"
    done = _verified_done(parts, plan.tasks, retry_errors)
    notes = [*plan.notes, *_data_changes(old if previous is None else None, plan.data_keys, out, plan.tasks, done)]
    todo = [t for t in plan.tasks if t.key not in done]
    bar = tqdm(total=len(plan.tasks), initial=len(plan.tasks) - len(todo), desc=spec.command, unit="run",
               disable=not progress)
    n_errors = 0

    def on_done(results: Iterable[tuple[Task, list[dict[str, Any]]]]) -> None:
        nonlocal n_errors
        for task, rows in results:
            write_part(parts, task, rows)
            n_errors += any(r.get("status") != "ok" for r in rows)
            bar.update(1)
            bar.set_postfix_str(task.label()[:60], refresh=False)

    try:
        if todo:
            _execute(spec, plan, todo, backend, n_workers, address, chunk_size, on_done)
    finally:
        bar.close()
    table = _consolidate(out, plan.tasks, spec.run_id)
    table = _write_results(out, spec.finish(table, out))
    return RunResult(table=table, path=out / "results.parquet", run_id=spec.run_id, n_runs=len(plan.tasks),
                     n_skipped=len(plan.tasks) - len(todo), n_executed=len(todo), n_errors=n_errors,
                     tasks=plan.tasks, notes=notes)


def _execute(spec: RunSpec, plan: Plan, todo: list[Task], backend: str, n_workers: int | None, address: str | None,
             chunk_size: int | None, on_done: Callable) -> None:
    if backend == "inline":
        backends.run_inline(spec, plan.data, todo, on_done)
        return
    workers = (os.cpu_count() or 1) if n_workers is None else int(n_workers)
    if chunk_size is None:
        chunk_size = max(1, min(16, math.ceil(len(todo) / max(1, 4 * max(1, workers)))))
    chunks = [todo[i:i + chunk_size] for i in range(0, len(todo), chunk_size)]
    if backend == "ray":
        backends.run_ray(spec, plan.data, chunks, address, workers, on_done)
    else:
        backends.run_local(spec, plan.data_dir, chunks, workers, on_done)


def consolidate_only(spec: RunSpec, out: str | os.PathLike) -> RunResult:
    """Rebuild ``out/results.parquet`` from the parts of ``spec``'s plan, running nothing. The
    folder must hold this very configuration; a part that cannot be used is an error naming it."""
    out = Path(out)
    spec.check()
    with harness.output_lock(out) as holder:
        footprint = _Footprint(out, holder)
        try:
            if _read_config(out) is None:
                raise ValueError(f"{out} holds no {spec.command} run (no config.json): nothing to consolidate")
            plan, _, _ = _prepare(spec, out, new_grid=False)
        except BaseException:
            footprint.undo()
            raise
        table = _write_results(out, spec.finish(_consolidate(out, plan.tasks, spec.run_id), out))
    done = len(finished_keys(out / "parts") & {t.key for t in plan.tasks})
    return RunResult(table=table, path=out / "results.parquet", run_id=spec.run_id, n_runs=len(plan.tasks),
                     n_skipped=done, n_executed=0, n_errors=0, tasks=plan.tasks, notes=list(plan.notes))


# =============================================================================================
# Command-line options every command shares
# =============================================================================================
def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`run` from the flags of :func:`add_run_arguments`."""
    opts: dict[str, Any] = {"retry_errors": args.retry_errors, "new_grid": args.new_grid,
                            "progress": not args.no_progress}
    if hasattr(args, "backend"):
        opts.update(backend=args.backend, n_workers=args.n_workers, address=args.address, chunk_size=args.chunk_size)
    return opts
