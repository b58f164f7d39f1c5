"""The run store: how the engine writes what it keeps, written once.

* **Atomic writes** (:func:`write_parquet`, :func:`write_csv`, :func:`write_text`,
  :func:`write_bytes`, :func:`write_figure`): each through
  :func:`divopt_rag.data.atomic.write_atomically` (a hidden temporary sibling private to the
  writer, fsync'ed, then ``os.replace``'d), so a file is either complete or absent, whatever kills
  the process (checkpoints and resumable sweeps rely on this), and two writers never share a
  temporary file; :func:`divopt_rag.data.atomic.remove_stale_temporaries` deletes only those whose
  writer is provably gone.
* **Output folders** (:func:`output_lock`): a run that writes a folder holds an advisory lock on
  ``<folder>/.divopt.lock`` (``fcntl.flock``: released by the OS when the process dies, so a lock
  is never stale) with the holder's pid, host, start time and command in the file; a second run
  on the same folder is refused with :class:`OutputLocked` naming the holder.
* **Run ids** (:func:`run_id`): a hash of the configuration, so the same configuration gives the
  same id (and a resumed run finds its checkpoints); hashes come from
  :func:`divopt_rag.data.stable_hash` (sha256 of the canonical JSON).
* **Safe names** (:func:`safe_name`, :func:`inside`): a file named after a value (a metric, a
  column) stays one file name in its folder.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import socket
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the store imports, output_lock refuses
    fcntl = None

from divopt_rag.data import stable_hash
from divopt_rag.data.atomic import write_atomically

__all__ = [
    "write_parquet",
    "write_csv",
    "write_figure",
    "write_bytes",
    "write_text",
    "output_lock",
    "OutputLocked",
    "LOCK_NAME",
    "run_id",
    "RUN_ID_LENGTH",
    "safe_name",
    "inside",
]

#: Hex digits of a run id (:func:`run_id`); a run id read back from a file must have as many.
RUN_ID_LENGTH = 12


# --------------------------------------------------------------------------------------------
# atomic writes
# --------------------------------------------------------------------------------------------
def write_parquet(table: pd.DataFrame | pa.Table, path: str | os.PathLike) -> Path:
    """Write a table (pandas frame without its index, or an Arrow table) to ``path`` atomically."""
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    return write_atomically(Path(path), lambda tmp: pq.write_table(table, tmp))


def write_csv(table: pd.DataFrame, path: str | os.PathLike, index: bool = False) -> Path:
    """Write a pandas frame to ``path`` as CSV atomically (``index``: write the frame's index too)."""
    return write_atomically(Path(path), lambda tmp: table.to_csv(tmp, index=index))


def write_figure(fig: Any, path: str | os.PathLike, **savefig: Any) -> Path:
    """Save a matplotlib figure to ``path`` atomically (the format from the file's suffix)."""
    path = Path(path)
    return write_atomically(path, lambda tmp: fig.savefig(tmp, format=path.suffix.lstrip(".") or None, **savefig))


def write_bytes(data: bytes, path: str | os.PathLike) -> Path:
    """Write ``data`` to ``path`` atomically (files whose bytes are made in memory: checksummed parts)."""
    return write_atomically(Path(path), lambda tmp: Path(tmp).write_bytes(data))


def write_text(text: str, path: str | os.PathLike) -> Path:
    """Write ``text`` to ``path`` atomically (configs, JSON reports, caches)."""
    return write_atomically(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# output folders
# --------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------
# run ids and safe names
# --------------------------------------------------------------------------------------------
def run_id(config: Mapping[str, Any], exclude: Iterable[str] = ()) -> str:
    """The run id of a configuration: a 12-hex-digit hash of its canonical JSON (sorted keys;
    values that JSON cannot hold are written as ``str``). ``exclude``: keys that do not change
    the rows (output paths, caches)."""
    drop = set(exclude)
    return stable_hash({k: v for k, v in config.items() if k not in drop}, RUN_ID_LENGTH)


_UNSAFE = re.compile(r"[^A-Za-z0-9_@.+=,-]+")


def safe_name(text: str) -> str:
    """``text`` as one file name: every run of characters other than letters, digits and
    ``_ @ . + = , -`` becomes "_" (path separators included), no leading dot, no "..". A file
    named after a flag's value (a metric, a column) then stays in its folder."""
    name = _UNSAFE.sub("_", str(text)).replace("..", "_").lstrip(".")
    return name or "_"


def inside(folder: str | os.PathLike, name: str) -> Path:
    """``folder / name``, after checking that it stays inside ``folder`` (ValueError otherwise)."""
    base = Path(folder).resolve()
    path = (base / name).resolve()
    if path != base and base not in path.parents:
        raise ValueError(f"output file {name!r} would be written outside its folder {folder}")
    return Path(folder) / name
