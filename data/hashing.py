"""Content fingerprints: what dataset keys and cache checksums are made of.

In the manner of Hugging Face ``datasets``' fingerprints, DVC's content hashes and joblib's
argument hash, a key names the *content* a result was computed from, never where it lay:

* :func:`file_digest` / :func:`path_digest`: the bytes of a file, or of every file under a
  directory (relative names, sizes and bytes; names that start with "." are skipped),
  streamed in 8 MiB blocks through xxHash's XXH3-128 (about 11 GB/s on one core here, 20x
  BLAKE2b: a 4 GB embedding matrix is checked in about 0.4 s). The checksums guard against
  accidents (a flipped byte, a truncated or swapped file), not against a forger.
* :class:`Hasher` / :func:`fingerprint`: the same digest of Python values (None, bool, int,
  float, str, bytes, numpy arrays, lists, tuples, mappings, and the two dataset classes), each
  written with a type tag and a length so that no two different values share an encoding.
* :func:`stable_hash`: SHA-256 of the canonical JSON of a small mapping (config, key recipe).

A digest of a file is remembered for the life of the process by the file's identity (device,
inode, size, mtime and ctime in nanoseconds): a file is read once per process however often
it is checked, and any write, rename over, truncation or ``touch`` makes it read again (ctime
cannot be set back by a user). A file modified within :data:`RACY_SECONDS` of being hashed is
not remembered (git's "racy clean" rule: a timestamp's resolution may hide a second write in
the same tick), so a file written a moment ago is hashed again on each check.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import xxhash

from .files import open_regular

__all__ = ["Hasher", "fingerprint", "file_digest", "path_digest", "stable_hash", "DIGEST", "RACY_SECONDS"]

#: Name of the checksum recorded in manifests (the algorithm of :func:`file_digest`).
DIGEST = "xxh3_128"
#: A file whose mtime/ctime is this close to the moment it was hashed is hashed again next time.
RACY_SECONDS = 2.0
_BLOCK = 8 << 20  # bytes read per step: large enough for full speed, small enough for any RAM

_memo: dict[str, tuple[tuple[int, ...], str]] = {}
_memo_lock = threading.Lock()


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hex sha256 of the canonical JSON of ``obj`` (sorted keys; other values written as
    ``str``): equal inputs, equal hash. The one hash behind dataset keys, run keys and run ids."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _hash_file(path: str) -> str:
    h = xxhash.xxh3_128()
    buf = bytearray(_BLOCK)
    view = memoryview(buf)
    with open_regular(path, buffering=0) as fh:  # never blocks on a FIFO
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def file_digest(path: str | os.PathLike) -> str:
    """XXH3-128 hex digest of the bytes of the file at ``path`` (remembered per file identity;
    see the module docstring). OSError (naming the file) when it cannot be read."""
    real = os.path.realpath(path)
    before = os.stat(real)
    ident = _identity(before)
    with _memo_lock:
        hit = _memo.get(real)
    if hit is not None and hit[0] == ident:
        return hit[1]
    started = time.time_ns()
    digest = _hash_file(real)
    after = os.stat(real)
    racy = max(after.st_mtime_ns, after.st_ctime_ns) >= started - int(RACY_SECONDS * 1e9)
    if _identity(after) == ident and not racy:
        with _memo_lock:
            _memo[real] = (ident, digest)
    return digest


def _tree_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(Path(dirpath) / f for f in filenames if not f.startswith("."))
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def path_digest(path: str | os.PathLike) -> str:
    """Digest of the content at ``path``: a file's bytes (:func:`file_digest`), or for a
    directory every file below it (names starting with "." skipped) as (relative path, size,
    digest) in sorted order. The location itself never enters: a copy elsewhere has the same
    digest. FileNotFoundError when nothing is there."""
    p = Path(path)
    if p.is_file():
        return file_digest(p)
    if not p.is_dir():
        raise FileNotFoundError(f"no file or directory at {p}")
    h = Hasher()
    for f in _tree_files(p):
        h.update((f.relative_to(p).as_posix(), f.stat().st_size, file_digest(f)))
    return h.hexdigest()


class Hasher:
    """Streaming XXH3-128 of Python values in a canonical, unambiguous encoding.

    ``Hasher().update(a).update(b).hexdigest()``. Mappings are hashed in sorted key order
    (keys as ``str``), numpy arrays by dtype, shape and C-order bytes (large arrays and memory
    maps block by block), floats by their exact hex form. Other types raise TypeError: a value
    the hasher does not understand must not pass as "the same".
    """

    def __init__(self) -> None:
        self._h = xxhash.xxh3_128()

    def _tag(self, tag: bytes, n: int | None = None) -> None:
        self._h.update(tag if n is None else tag + n.to_bytes(8, "little"))

    def update(self, obj: Any) -> "Hasher":
        if obj is None or isinstance(obj, bool):
            self._tag(b"N" if obj is None else (b"T" if obj else b"F"))
        elif isinstance(obj, (int, np.integer)):
            self._tag(b"I")
            self._h.update(str(int(obj)).encode() + b";")
        elif isinstance(obj, (float, np.floating)):
            self._tag(b"R")
            self._h.update(float(obj).hex().encode() + b";")
        elif isinstance(obj, str):
            data = obj.encode("utf-8", "surrogatepass")
            self._tag(b"S", len(data))
            self._h.update(data)
        elif isinstance(obj, (bytes, bytearray, memoryview)):
            self._tag(b"Y", len(obj))
            self._h.update(obj)
        elif isinstance(obj, np.ndarray):
            self._array(obj)
        elif isinstance(obj, Mapping):
            self._tag(b"D", len(obj))
            for key in sorted(obj, key=str):
                self.update(str(key)).update(obj[key])
        elif isinstance(obj, (list, tuple)):
            self._sequence(obj)
        else:
            raise TypeError(f"cannot fingerprint a {type(obj).__name__}: expected None, bool, int, float, str, "
                            f"bytes, a numpy array, a list, a tuple or a mapping")
        return self

    def _sequence(self, seq: list | tuple) -> None:
        self._tag(b"L", len(seq))
        if seq and all(type(s) is str for s in seq):  # fast path: texts and ids
            for i in range(0, len(seq), 65536):
                enc = [s.encode("utf-8", "surrogatepass") for s in seq[i : i + 65536]]
                self._h.update(np.fromiter(map(len, enc), dtype="<i8", count=len(enc)).tobytes())
                self._h.update(b"".join(enc))
            return
        for item in seq:
            self.update(item)

    def _array(self, a: np.ndarray) -> None:
        if a.dtype.hasobject:
            raise TypeError("cannot fingerprint an object array")
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        self._tag(b"A", a.ndim)
        self._h.update(dt.str.encode() + b";" + ",".join(map(str, a.shape)).encode() + b";")
        if a.ndim == 0 or a.size == 0:
            self._h.update(np.ascontiguousarray(a, dtype=dt).tobytes())
            return
        rows = max(1, _BLOCK // max(1, a[0].nbytes))
        for i in range(0, a.shape[0], rows):
            self._h.update(memoryview(np.ascontiguousarray(a[i : i + rows], dtype=dt)).cast("B"))

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def fingerprint(obj: Any) -> str:
    """XXH3-128 hex digest of ``obj``'s content (:class:`Hasher`). A
    :class:`~divopt_rag.data.Dataset` or :class:`~divopt_rag.data.EmbeddedDataset` is hashed
    by its content fields (ids, texts, queries, labels, pools, embeddings), not by its name,
    key or ``meta`` (which hold locations)."""
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields is not None:
        obj = {f: getattr(obj, f) for f in fields if f not in ("name", "key", "meta")}
    return Hasher().update(obj).hexdigest()
