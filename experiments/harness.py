"""The experiment harness: what every experiment shares, written once.

* **Quality against an exact solve** (:func:`gap_record`, :func:`best_known`,
  :func:`quality_summary`): the one definition of the normalized gap and of an exact hit, used
  by ``divopt-rag certify``, ``divopt-rag bench quality``, the plots and the notebooks. The rule:

  - the reference value is the best feasible value known, ``optimum = max(exact incumbent,
    every method's value)`` (:func:`best_known`). It is a lower bound on OPT; a MIP solver's
    "optimal" is proven only within its relative gap, so a fast method may beat its incumbent
    by a hair, and OPT is then at least that method's value;
  - when the exact solve is **proven** optimal, ``gap = (optimum - f) / (k (k-1))``
    (:func:`divopt_rag.models.ccbqp.normalized_gap`), ``gap_kind = "exact"`` and
    ``exact_hit = gap <= tol`` (:func:`divopt_rag.models.ccbqp.exact_hit`);
  - when it is **not** proven (time limit), the gap is measured against the solver's proven
    upper bound, ``gap = (bound - f) / (k (k-1))``, and labelled ``gap_kind = "upper_bound"``:
    an upper bound on the true gap, never called exact. ``exact_hit`` is then True only when
    f meets the bound (provably optimal) and otherwise unknown (``<NA>``), never False;
  - ``bound_gap = (bound - f) / (k (k-1))`` on every row: a valid upper bound on the true gap
    even when "proven" means proven within the solver's relative gap (the name the full-scale
    certificates use for the same quantity; ``ccbqp.normalized_gap`` is the function behind both).

  Gaps are clipped at 0 (values within rounding of the reference). The tolerance is the one of
  the whole project, :data:`divopt_rag.models.ccbqp.EXACT_HIT_TOL` = 1e-9 of k(k-1): far above the
  float64 rounding of f (|f| <= k(k-1), about 1e-14 of it) and far below the smallest real
  difference between two k-sets seen in the recorded benchmarks (no gap lies in (0, 1e-6) in the
  1,200 rows behind the README's quality table), so a hit means "the same value as the best
  known", never "close". :func:`exact_gaps` applies this rule to a consolidated table, the
  post-step of every run whose grid holds the ``exact`` method.
* **Atomic writes** (:func:`write_parquet`, :func:`write_csv`, :func:`write_text`,
  :func:`write_figure`): a hidden temporary sibling
  private to the writer (``.<name>.<pid>-<host>-<random>.tmp``), fsync'ed, then
  ``os.replace``'d, so a file is either complete or absent, whatever kills the process
  (checkpoints and resumable sweeps rely on this), and two writers never share a temporary
  file. :func:`remove_stale_temporaries` deletes only those whose writer is provably gone (a
  process of this host that no longer exists).
* **Output folders** (:func:`output_lock`, :func:`check_output_path`): a run that writes a
  folder holds an advisory lock on ``<folder>/.divopt.lock`` (``fcntl.flock``: released by the
  OS when the process dies, so a lock is never stale) with the holder's pid, host, start time
  and command in the file; a second run on the same folder is refused with
  :class:`OutputLocked` naming the holder. Output paths are checked (a folder, writable) before
  any work starts.
* **Run ids** (:func:`run_id`): a hash of the configuration, so the same configuration gives the
  same id (and a resumed run finds its checkpoints); hashes come from
  :func:`divopt_rag.data.stable_hash` (sha256 of the canonical JSON).
* **Query instances** (:func:`query_instance`): query ``i`` of an
  :class:`~divopt_rag.data.EmbeddedDataset` as a :class:`~divopt_rag.models.Instance` over its pool.
* **Settings of a table** (:func:`varying_settings`): the columns of a result table that define
  its settings (dataset, k, theta, pool, every parameter) and take several values there; summaries
  and plots group or facet by every one of them, never average over it.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import math
import os
import re
import socket
import sys
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the harness imports, output_lock refuses
    fcntl = None

from divopt_rag.data import EmbeddedDataset, stable_hash
from divopt_rag.experiments.arguments import check_output_path
from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import EXACT_HIT_TOL, exact_hit, normalized_gap, objective_scale

__all__ = [
    "best_known",
    "gap_record",
    "exact_gaps",
    "INSTANCE_COLUMNS",
    "GAP_COLUMNS",
    "quality_summary",
    "varying_settings",
    "SETTING_COLUMNS",
    "write_parquet",
    "write_csv",
    "write_figure",
    "write_bytes",
    "write_text",
    "remove_stale_temporaries",
    "format_table",
    "output_lock",
    "OutputLocked",
    "LOCK_NAME",
    "check_output_path",
    "run_id",
    "query_instance",
]

_RUN_ID_LENGTH = 12


# --------------------------------------------------------------------------------------------
# quality against an exact solve
# --------------------------------------------------------------------------------------------
def best_known(exact_value: float | None, values: Iterable[float | None] = ()) -> float:
    """The best feasible value known: max of the exact incumbent and every method's value
    (None / NaN ignored; -inf when none is known)."""
    vals = [float(v) for v in (exact_value, *values) if v is not None and not math.isnan(float(v))]
    return max(vals, default=-math.inf)


def gap_record(value: float | None, *, optimum: float, bound: float | None, proven: bool, k: int,
               tol: float = EXACT_HIT_TOL) -> dict[str, Any]:
    """``gap``, ``gap_kind``, ``bound_gap`` and ``exact_hit`` of a selection of value f =
    ``value`` (the rule is in the module docstring).

    optimum : best feasible value known (:func:`best_known`); bound : proven upper bound on OPT
    (None: none known); proven : whether the exact solve proved optimality; tol : normalized gap
    still counted as a hit (default :data:`divopt_rag.models.ccbqp.EXACT_HIT_TOL`). A missing value
    (a failed method) gives NaN gaps, an empty kind and an unknown hit.
    """
    if value is None or math.isnan(float(value)):
        return {"gap": math.nan, "gap_kind": "", "bound_gap": math.nan, "exact_hit": pd.NA}
    f = float(value)
    ub = math.inf if bound is None or math.isnan(float(bound)) else float(bound)
    to_bound = max(0.0, (ub - f) / objective_scale(k))
    if proven:
        return {"gap": max(0.0, normalized_gap(optimum, f, k)), "gap_kind": "exact", "bound_gap": to_bound,
                "exact_hit": exact_hit(optimum, f, k, tol)}
    return {"gap": to_bound, "gap_kind": "upper_bound", "bound_gap": to_bound,
            "exact_hit": True if to_bound <= tol else pd.NA}


#: Columns that identify one CCBQP instance in a result table: the rows of every method on the
#: same (data, query, k, theta, pool) compare with that instance's ``exact`` row.
INSTANCE_COLUMNS = ("data_key", "query_id", "k", "theta", "pool", "n")
#: What :func:`exact_gaps` writes on every row.
GAP_COLUMNS = ("optimum", "bound", "proven_optimal", "exact_status", "exact_solver", "gap", "gap_kind", "bound_gap",
               "exact_hit")


def _value(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def exact_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """The post-step of a run whose grid holds the ``exact`` method: the gap columns of every row.

    Rows are grouped by the instance they ran on (:data:`INSTANCE_COLUMNS` present in the
    table); in a group with a finished ``exact`` row, every row gets ``optimum`` (the best value
    known, :func:`best_known` over the exact incumbent and every method's f), the exact row's
    ``bound``, ``proven_optimal``, ``exact_status`` and ``exact_solver``, and ``gap``,
    ``gap_kind``, ``bound_gap``, ``exact_hit`` by :func:`gap_record`. Rows of an instance without
    a finished exact row (it failed, or it was not in the grid) keep what they had (NaN gaps, or
    a full-scale certificate's own ``bound_gap``); an error row has NaN gaps. Returns a new
    table; ``exact_hit`` and ``proven_optimal`` are nullable booleans (NA: unknown).
    """
    if table.empty or "method" not in table or not (table["method"] == "exact").any():
        return table
    out = table.copy()
    ok = out["status"].eq("ok") if "status" in out else pd.Series(True, index=out.index)
    keys = [c for c in INSTANCE_COLUMNS if c in out]
    # the reference of every row: its instance's exact row (merged on the instance columns) and
    # the best value any finished row of the instance reached
    ref_cols = ["objective", "bound", "proven_optimal", "exact_status", "exact_solver"]
    exact_rows = out.loc[(out["method"] == "exact") & ok, keys + [c for c in ref_cols if c in out]]
    exact_rows = exact_rows.drop_duplicates(keys).rename(columns={c: f"_ref_{c}" for c in ref_cols})
    ref = out[keys].astype(object).merge(exact_rows.astype({c: object for c in keys}), on=keys, how="left")
    best = out["objective"].where(ok).groupby([out[c].astype(object) for c in keys], dropna=False).transform("max")
    has_ref = ref["_ref_exact_status"].notna().to_numpy() if "_ref_exact_status" in ref else np.zeros(len(out), bool)
    records = {c: list(out[c]) if c in out else [pd.NA] * len(out) for c in GAP_COLUMNS}
    for i in np.flatnonzero(has_ref):
        optimum = best_known(_value(ref.at[i, "_ref_objective"]), [_value(best.iat[i])])
        bound = _value(ref.at[i, "_ref_bound"])
        proven = bool(ref.at[i, "_ref_proven_optimal"]) if pd.notna(ref.at[i, "_ref_proven_optimal"]) else False
        value = _value(out["objective"].iat[i]) if ok.iat[i] else None
        rec = gap_record(value, optimum=optimum, bound=bound, proven=proven, k=int(out["k"].iat[i]))
        rec.update(optimum=optimum, bound=math.nan if bound is None else bound, proven_optimal=proven,
                   exact_status=ref.at[i, "_ref_exact_status"], exact_solver=ref.at[i, "_ref_exact_solver"])
        for c, v in rec.items():
            records[c][i] = v
    for c in GAP_COLUMNS:
        out[c] = records[c]
    for c in ("optimum", "bound", "gap", "bound_gap"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    out["proven_optimal"] = out["proven_optimal"].astype("boolean")
    out["exact_hit"] = out["exact_hit"].astype("boolean")
    out["gap_kind"] = out["gap_kind"].fillna("").astype(str)
    return out


def quality_summary(df: pd.DataFrame, by: str | list[str] = "method") -> pd.DataFrame:
    """Per group of ``by``: rows, unproven rows (gap only an upper bound), exact-hit rate (over
    the rows whose hit is known), mean / p95 / max normalized gap and, with a ``seconds``
    column, mean / median seconds. Reads the columns :func:`gap_record` writes."""
    keys = [by] if isinstance(by, str) else list(by)
    g = df.groupby(keys, sort=True)
    cols = {
        "rows": g.size(),
        "unproven": g["gap_kind"].apply(lambda s: int((s == "upper_bound").sum())),
        "hit_rate": g["exact_hit"].apply(lambda s: float(s.astype("Float64").mean()) if s.notna().any() else math.nan),
        "mean_gap": g["gap"].mean(),
        "p95_gap": g["gap"].quantile(0.95),
        "max_gap": g["gap"].max(),
    }
    if "seconds" in df:
        cols.update(mean_seconds=g["seconds"].mean(), median_seconds=g["seconds"].median())
    return pd.DataFrame(cols).reset_index()


#: Columns that define the settings of a result table (besides ``method`` and the parameters
#: listed in its ``params`` column): summaries and plots never average over one that varies.
SETTING_COLUMNS = ("dataset", "data_key", "model", "n", "d", "k", "pool", "theta")


def varying_settings(table: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """The setting columns of ``table`` that take more than one value (NaN / None counts as one).

    Settings are :data:`SETTING_COLUMNS` and every parameter named in the table's ``params``
    column (JSON of each row's parameters, as the executor writes it). ``data_key`` is left out
    when ``dataset`` already separates the same rows. ``n`` (the pool a method chose from) is a
    setting only where the table has no ``pool`` column of its own. Ordered as found.
    """
    skip = set(exclude)
    names = [c for c in SETTING_COLUMNS if c in table]
    if "params" in table:
        for text in table["params"].dropna().unique():
            try:
                names += [p for p in json.loads(text) if p not in names]
            except (TypeError, ValueError):
                continue
    if "pool" in table:
        skip.add("n")  # the pool size follows from the pool setting (and the query's candidates)
    out = []
    for c in names:
        if c in skip or c not in table:
            continue
        if table[c].astype(str).nunique() > 1:
            out.append(c)
    if "dataset" in out and "data_key" in out and table.groupby("dataset")["data_key"].nunique().max() == 1:
        out.remove("data_key")
    return out


# --------------------------------------------------------------------------------------------
# atomic writes and run ids
# --------------------------------------------------------------------------------------------
def _host_tag() -> str:
    """8 hex digits naming this host in temporary file names (a hash: host names hold dots)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


# .<target name>.<pid>-<host tag>-<random>.tmp
_TMP_NAME = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)-(?P<host>[0-9a-f]{8})-[0-9a-f]{8}\.tmp$")


def _temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}-{_host_tag()}-{uuid.uuid4().hex[:8]}.tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files of :func:`write_parquet` / :func:`write_text` in ``folder``
    whose writer is provably gone: written on this host by a process that no longer exists.

    A temporary file of a live writer, of another host (its process cannot be probed from
    here) or of an unknown name pattern is kept: deleting it could break a write in flight.
    (A recycled pid only keeps a dead writer's file longer, never deletes a live one's.)
    Returns the deleted paths.
    """
    folder = Path(folder)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    host = _host_tag()
    for p in folder.glob(".*.tmp"):
        m = _TMP_NAME.match(p.name)
        if m is None or m["host"] != host or _pid_alive(int(m["pid"])):
            continue
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(p)
    return removed


def _replace_atomically(path: Path, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary_name(path)  # private to this writer: a concurrent writer never touches it
    try:
        write(tmp)
        with open(tmp, "rb") as fh:  # the bytes reach the disk before the name appears
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_parquet(table: pd.DataFrame | pa.Table, path: str | os.PathLike) -> Path:
    """Write a table (pandas frame without its index, or an Arrow table) to ``path`` atomically."""
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    return _replace_atomically(Path(path), lambda tmp: pq.write_table(table, tmp))


def write_csv(table: pd.DataFrame, path: str | os.PathLike, index: bool = False) -> Path:
    """Write a pandas frame to ``path`` as CSV atomically (``index``: write the frame's index too)."""
    return _replace_atomically(Path(path), lambda tmp: table.to_csv(tmp, index=index))


def write_figure(fig: Any, path: str | os.PathLike, **savefig: Any) -> Path:
    """Save a matplotlib figure to ``path`` atomically (the format from the file's suffix)."""
    path = Path(path)
    return _replace_atomically(path, lambda tmp: fig.savefig(tmp, format=path.suffix.lstrip(".") or None, **savefig))


def write_bytes(data: bytes, path: str | os.PathLike) -> Path:
    """Write ``data`` to ``path`` atomically (files whose bytes are made in memory: checksummed parts)."""
    return _replace_atomically(Path(path), lambda tmp: Path(tmp).write_bytes(data))


def write_text(text: str, path: str | os.PathLike) -> Path:
    """Write ``text`` to ``path`` atomically (configs, JSON reports, caches)."""
    return _replace_atomically(Path(path), lambda tmp: Path(tmp).write_text(text))


#: The lock file of an output folder (see :func:`output_lock`).
LOCK_NAME = ".divopt.lock"


class OutputLocked(OSError):
    """Another run holds the output folder (:func:`output_lock`); the message names it.

    ``holder``: the lock file's record (pid, host, started, command), empty if unreadable."""

    def __init__(self, folder: Path, holder: Mapping[str, Any]) -> None:
        who = (f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: "
               f"{holder.get('command')}") if holder else "a process that has not written its record yet"
        super().__init__(f"output folder {folder} is in use by another run ({who}); wait for it to finish "
                         f"or choose another output folder")
        self.folder, self.holder = folder, dict(holder)


def _make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; the ones this call made, top-most first (each
    ``mkdir`` is atomic: a folder another process made at the same time is not counted)."""
    missing = []
    p = folder.absolute()
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    made = []
    for p in reversed(missing):
        try:
            p.mkdir()
            made.append(p)
        except FileExistsError:
            pass
    return made


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike, command: str | None = None) -> Iterator[dict[str, Any]]:
    """Hold the advisory lock of output folder ``folder`` for the duration of the block.

    The lock is ``fcntl.flock`` on ``<folder>/.divopt.lock`` (the mechanism of the filelock
    package's UnixFileLock): the OS releases it when the holding process dies, however it dies, so a lock is
    never stale and nothing needs cleaning up after a kill. The holder may remove the file (a
    refused run leaves nothing behind): a contender always locks the file the folder holds now.
    While held, the file records the
    holder (pid, host, start time, command line); a second run on the folder gets
    :class:`OutputLocked` naming it, immediately (no waiting). Works on local file systems and
    on NFS (Linux maps flock to NFS byte-range locks); POSIX only.

    Yields the holder record written to the lock file, with two entries more for a caller that
    must leave the folder as it found it: ``created`` (the folders this call made, top-most
    first) and ``created_lock_file`` (whether it made the lock file).
    """
    if fcntl is None:  # pragma: no cover - Windows
        raise OSError("output folder locks need fcntl (POSIX); this platform has none")
    folder = Path(folder)
    path = folder / LOCK_NAME
    created: list[Path] = []
    while True:
        created += _make_folders(folder)
        # no O_TRUNC: a contender that loses must not erase the holder's record
        try:
            fd, created_lock_file = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            fd, created_lock_file = os.open(path, os.O_RDWR | os.O_CREAT, 0o644), False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = json.loads(os.pread(fd, 1 << 16, 0).decode() or "{}")
            except (ValueError, UnicodeDecodeError):
                holder = {}
            os.close(fd)
            raise OutputLocked(folder, holder) from None
        except BaseException:
            os.close(fd)
            raise
        # a run refused while preparing removes the lock file it created (holding the lock): a
        # contender that opened that file before it went holds a lock on a file no longer
        # there, so it locks the one that is there now
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": command or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        yield {**record, "created": created, "created_lock_file": created_lock_file}
    finally:
        # the file stays: it is the folder's lock for the next run (a refused run, which created it,
        # removes it while it holds the lock; contenders then lock the new file, see above)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def format_table(table: pd.DataFrame, *, index: bool = False, digits: int = 4, tol: float = EXACT_HIT_TOL) -> str:
    """The one text form of a result table printed by a command: numbers with ``digits``
    significant digits, and in a gap column (a name holding "gap": ``gap``, ``mean_gap``,
    ``bound_gap``, ``relative_gap``, ...) a value within ``tol`` of 0 (default the hit tolerance
    :data:`divopt_rag.models.ccbqp.EXACT_HIT_TOL`) as 0: a gap of 7e-17 is 0 up to rounding, the
    rule :func:`divopt_rag.models.ccbqp.exact_hit` counts as a hit. ``index``: print the index
    too (pivot tables)."""

    def number(v: float) -> str:
        return f"{v:.{digits}g}"

    def gap(v: float) -> str:
        return "0" if abs(v) <= tol else number(v)

    formatters = {c: gap if "gap" in str(c).lower() else number for c in table.columns
                  if pd.api.types.is_float_dtype(table[c])}
    with pd.option_context("display.width", 200, "display.max_columns", 60):
        return table.to_string(index=index, formatters=formatters, na_rep="NaN")


def run_id(config: Mapping[str, Any], exclude: Iterable[str] = ()) -> str:
    """The run id of a configuration: a 12-hex-digit hash of its canonical JSON (sorted keys;
    values that JSON cannot hold are written as ``str``). ``exclude``: keys that do not change
    the rows (output paths, caches)."""
    drop = set(exclude)
    return stable_hash({k: v for k, v in config.items() if k not in drop}, _RUN_ID_LENGTH)


# --------------------------------------------------------------------------------------------
# query instances
# --------------------------------------------------------------------------------------------
def query_instance(data: EmbeddedDataset, query_index: int, pool: int | None = None) -> tuple[Instance, np.ndarray]:
    """Query ``query_index`` of ``data`` as an Instance (k=1, theta=1: set them with ``replace``)
    over its candidate rows, and those rows of ``data.E``.

    The candidates are the query's pool (``data.pools``) or all of E; ``pool`` keeps the top
    ``pool`` of them by relevance c = E q (ties by position). The Instance's ids are the doc ids.
    """
    rows = data.pools[query_index] if data.pools is not None else np.arange(data.E.shape[0])
    q = np.array(data.Q[query_index], dtype=np.float32)
    if data.pools is None and (pool is None or pool >= rows.size):
        E = np.asarray(data.E, dtype=np.float32)
        Erows = E if E.flags.writeable else np.array(E)  # torch wants a writable array (not a read-only mmap)
    else:
        Erows = np.asarray(data.E[rows], dtype=np.float32)  # fancy indexing copies: a writable array
    if pool is not None and pool < rows.size:
        top = np.argsort(-(Erows @ q), kind="stable")[:pool]
        rows, Erows = rows[top], np.ascontiguousarray(Erows[top])
    inst = Instance(torch.from_numpy(Erows), torch.from_numpy(q), k=1, theta=1.0, ids=data.doc_ids[rows])
    return inst, rows
