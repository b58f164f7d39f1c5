"""Part files: the rows of one finished task, each file verified before any of it is used.

``OUT/parts/<key>.parquet`` (``<key>.error.parquet`` when the task raised) holds the rows of
the task with run key ``key``, written atomically by the driver as soon as the task returns
(a kill, SIGKILL included, loses only the tasks in flight). A part carries, inside:

* the **checksum of its own bytes**, XXH3-128 in the Parquet footer
  (:func:`divopt_rag.data.integrity.parquet_bytes`), as DVC and Hugging Face ``datasets`` keep
  a content hash of every file they reuse. Parquet's own page CRCs would not do: they cover the
  data pages, not the footer, where the schema, the pandas metadata and the run key live;
* its **run key**, in the Arrow schema metadata (:data:`KEY_METADATA`) and in the ``run_key``
  column of every row, so that a sound file copied over another, or renamed, is caught too.

Before a part is used (:func:`read_part`, :func:`verified_keys`) its bytes are read once,
checked against the checksum, and only then parsed, from those same bytes. A part that fails
(a flipped bit anywhere, a truncated, foreign, copied or unparsable file) is :class:`PartError`
naming the file and what is wrong; a run moves it to ``parts/rejected/`` (:func:`reject`, every
rejected copy kept) with a :class:`PartWarning` naming it, and runs its task again.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from divopt_rag.data import integrity
from divopt_rag.data.files import read_regular
from divopt_rag.data.names import is_hex_name
from divopt_rag.experiments.engine import store
from divopt_rag.experiments.engine.plan import KEY_LENGTH, Task

__all__ = ["PartError", "PartWarning", "KEY_METADATA", "part_paths", "write_part", "read_part", "part_from_bytes", "finished_keys",
           "reject", "verified_keys"]

#: Where a part file keeps its run key (Arrow schema metadata).
KEY_METADATA = b"divopt.run_key"
#: The folder of ``parts/`` where unusable parts are kept for inspection.
REJECTED = "rejected"


class PartError(ValueError):
    """A part file that cannot be used (unreadable, changed since it was written, or its inside
    does not match its name); the message names the file."""


class PartWarning(UserWarning):
    """A part file was set aside (moved to ``parts/rejected``) and its task runs again."""


def part_paths(parts: Path, key: str) -> tuple[Path, Path]:
    """The part file of run ``key`` and its error part."""
    return parts / f"{key}.parquet", parts / f"{key}.error.parquet"


def write_part(parts: Path, task: Task, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write the rows of ``task`` to its part file atomically, with the checksum of its bytes and
    its key inside (schema metadata and the ``run_key`` column); an error part when any row has
    status "error". A finished task replaces its error part."""
    ok = all(r.get("status") == "ok" for r in rows)
    frame = pd.DataFrame([{**task.columns(), **r, "run_key": task.key} for r in rows])
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), KEY_METADATA: task.key.encode()})
    data = integrity.parquet_bytes(table)
    good, bad = part_paths(parts, task.key)
    path = store.write_bytes(data, good if ok else bad)
    if ok:
        bad.unlink(missing_ok=True)
    return path


def _verified_table(data: bytes, key: str, path: Any, columns: list[str] | None = None) -> pa.Table:
    """The table of the part bytes ``data`` (only ``columns`` when given), parsed once they pass
    the checksum, after checking that it carries ``key``; PartError naming ``path`` otherwise."""
    try:
        integrity.verify_parquet_bytes(data, path)
    except integrity.CacheIntegrityError as exc:
        raise PartError(f"part file {exc}") from None
    try:
        part = pq.ParquetFile(pa.BufferReader(data))
        names = set(part.schema_arrow.names)
        table = part.read(columns=None if columns is None else [c for c in columns if c in names])
        # Arrow's full validation: offsets in range and strings valid UTF-8 (pandas' Arrow-backed
        # strings would decode a bad one lazily, wherever the value is first touched)
        table.validate(full=True)
    except Exception as exc:  # noqa: BLE001 (checksummed, yet not parsable: written broken)
        raise PartError(f"part file {path}: cannot be parsed ({type(exc).__name__}: {exc})") from None
    inside = (table.schema.metadata or {}).get(KEY_METADATA)
    if inside is None:
        raise PartError(f"part file {path}: carries no run key (not written by divopt's executor)")
    if inside != key.encode():
        raise PartError(f"part file {path}: holds the rows of run {inside.decode(errors='replace')}, not of run "
                        f"{key} (a part copied over another or renamed)")
    if table.num_rows:
        names = set(table.column("run_key").to_pylist()) if "run_key" in table.column_names else {None}
        if names != {key}:
            raise PartError(f"part file {path}: rows carry run keys {sorted(map(str, names))}, expected {key}")
    return table


def _read_bytes(path: Path) -> bytes:
    try:
        return read_regular(path)  # a FIFO or a folder in its place is refused, never waited on
    except OSError as exc:
        raise PartError(f"part file {path}: cannot be read ({type(exc).__name__}: {exc})") from None


def part_from_bytes(data: bytes, key: str, path: Any = "<bytes>") -> pd.DataFrame:
    """The rows of a part of run ``key`` from its bytes ``data`` (what :func:`read_part` does once
    it has read the file ``path``): checksum first, nothing parsed before it holds, then the key
    inside (metadata and every row), then the pandas conversion; :class:`PartError` naming
    ``path`` when any step fails."""
    table = _verified_table(data, key, path)
    try:
        return table.to_pandas()
    except (ValueError, TypeError, KeyError, pa.ArrowException) as exc:  # JSON and UTF-8 errors are ValueErrors
        raise PartError(f"part file {path}: its rows cannot be read ({type(exc).__name__}: {exc})") from None


def read_part(path: str | os.PathLike, key: str) -> pd.DataFrame:
    """The rows of the part file ``path`` of run ``key``, read once into memory and checked
    (:func:`part_from_bytes`); :class:`PartError` naming the file otherwise."""
    path = Path(path)
    return part_from_bytes(_read_bytes(path), key, path)


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
        if not is_hex_name(key, KEY_LENGTH):  # a run key is a hash; any other name is not a part
            continue
        if rest == "parquet" or (include_errors and rest == "error.parquet"):
            done.add(key)
    return done


def reject(parts: Path, path: Path, problem: str, stacklevel: int = 3, warn: bool = True) -> Path:
    """Move an unusable part to ``parts/rejected/`` (kept for inspection, never read again) with
    a :class:`PartWarning` naming it (unless ``warn`` is false: the caller sums them up). Every
    copy is kept: a name already taken there gets a number (``<key>.2.parquet``, ...). Called
    under the folder's lock (no other run moves parts)."""
    folder = parts / REJECTED
    folder.mkdir(exist_ok=True)
    stem = path.name.removesuffix(".parquet")
    dest, n = folder / path.name, 1
    while dest.exists():
        n += 1
        dest = folder / f"{stem}.{n}.parquet"
    os.replace(path, dest)
    if warn:
        warnings.warn(f"{problem}; moved to {dest}, its run is computed again", PartWarning, stacklevel=stacklevel)
    return dest


#: Rejections a run names one by one; beyond them, one warning sums up the rest.
NAMED_REJECTIONS = 5


def verified_keys(parts: Path, tasks: Sequence[Task], retry_errors: bool) -> set[str]:
    """Keys of the tasks whose part is there and sound (error parts unless ``retry_errors``):
    its checksum holds and it carries its key (the ``run_key`` column alone is parsed). Unsound
    parts are rejected (:func:`reject`) so that their tasks run again: the first
    :data:`NAMED_REJECTIONS` with a warning each, the others in one warning that counts them
    (a folder of parts written before checksums would otherwise print a line per part)."""
    done, rejected = set(), []
    for t in tasks:
        for path in part_paths(parts, t.key):
            if not path.exists() or (retry_errors and path.name.endswith(".error.parquet")):
                continue
            try:
                _verified_table(_read_bytes(path), t.key, path, columns=["run_key"])
            except PartError as exc:
                rejected.append(reject(parts, path, str(exc), stacklevel=4, warn=len(rejected) < NAMED_REJECTIONS))
                continue
            done.add(t.key)
            break
    if len(rejected) > NAMED_REJECTIONS:
        more = len(rejected) - NAMED_REJECTIONS
        warnings.warn(f"{more} more part file{'s' if more > 1 else ''} failed their checks (e.g. {rejected[-1].name}); "
                      f"moved to {parts / REJECTED}, their runs are computed again", PartWarning, stacklevel=3)
    return done
