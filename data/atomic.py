"""Atomic file writes: the one way divopt writes a file that is read back.

:func:`write_atomically` has the file written to a hidden temporary sibling private to the
writer (``.<name>.<pid>-<host>-<random>.tmp``), fsync'ed, then ``os.replace``'d, so a file is
either complete or absent, whatever kills the process (checkpoints, caches, resumable sweeps and
downloads rely on this), and two writers never share a temporary file.
:func:`remove_stale_temporaries` deletes only those whose writer is provably gone (a process of
this host that no longer exists).

Every writer goes through it: the caches of :mod:`divopt_rag.data` (:func:`atomic_write`, which
hands the writer an open file), downloads, and the result files, parts, figures and run files of
:mod:`divopt_rag.experiments` (:mod:`divopt_rag.experiments.engine.store`). It lives here, in the
package every other one may import, because ``data`` imports nothing else of divopt.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import uuid
from pathlib import Path
from typing import Any, BinaryIO, Callable

__all__ = ["write_atomically", "atomic_write", "remove_stale_temporaries"]


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
    """Delete the temporary files of :func:`write_atomically` in ``folder`` whose writer is
    provably gone: written on this host by a process that no longer exists.

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


def write_atomically(path: str | os.PathLike, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` to write the file ``path`` through a temporary sibling ``tmp``
    private to this writer, fsync it, then rename it to ``path`` (made with its missing
    parents); the temporary is removed if ``write`` fails. Returns ``path``."""
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


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> Path:
    """:func:`write_atomically` for a writer of an open binary file: ``write(fh)``."""

    def to_file(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            write(fh)

    return write_atomically(path, to_file)
