"""Checksummed cache files: every file a cache writes is listed, with its size and digest, in
a small JSON manifest written atomically *after* the data, and is verified before it is read.

* :func:`save_npy` and every file written here go through :func:`divopt_rag.data.atomic.atomic_write`
  (a hidden temporary name in the same folder, fsync, then ``os.replace``): a reader sees the old
  file or the whole new one.
* :func:`checksum` / :func:`write_manifest`: ``{"size": bytes, "xxh3_128": hex}`` per file,
  plus whatever identifies the cache entry (its key, its model), in ``<name>.json``.
* :func:`read_manifest` / :func:`verify`: a missing, unreadable, foreign or mismatching file
  raises :class:`CacheIntegrityError` whose one-line message names the file and what is wrong
  (``E.npy: 1000 bytes, the manifest records 4096 (truncated or replaced)``).
* :func:`load_npy`: ``np.load`` (memory-mapped or not, never unpickling) whose failures name
  the file instead of "mmap length is greater than file size" or "allow_pickle".
* :func:`parquet_bytes` / :func:`verify_parquet_bytes`: a Parquet file that carries the checksum
  of its own bytes (below), for files that travel alone (the executor's part files), where a
  manifest beside them could be separated from them.

**A Parquet file that checks itself.** Parquet's page CRCs (``write_page_checksum``) cover the
data pages only: not the footer, which holds the schema, the pandas metadata and any key-value
metadata (a flipped bit there renames a column, changes a type or breaks the pandas JSON), nor
the page headers' value counts. So the whole file is checksummed instead: the footer's key-value
metadata holds ``divopt.xxh3_128``, the XXH3-128 of every byte of the file with those 32 hex
digits read as ``0`` (:data:`PARQUET_CHECKSUM_KEY`; written last, as the ELF build-id or a
tar header's checksum are). :func:`verify_parquet_bytes` checks it before a byte is parsed; a
reader parses the very bytes it checked (read once into memory), so a file changed in between
is never half-trusted.

Verification costs one read of each file per process (digests are remembered per file
identity, :func:`~divopt_rag.data.hashing.file_digest`).
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from .atomic import atomic_write
from .dataset import DataFormatError
from .files import open_regular, read_regular
from .hashing import DIGEST, file_digest
from .names import UnsafeName, checked_name

__all__ = [
    "CacheIntegrityError",
    "CacheWarning",
    "save_npy",
    "checksum",
    "write_manifest",
    "read_manifest",
    "verify",
    "load_npy",
    "discarded",
    "PARQUET_CHECKSUM_KEY",
    "parquet_bytes",
    "verify_parquet_bytes",
]

#: The key-value metadata entry of a self-checksummed Parquet file (:func:`parquet_bytes`).
PARQUET_CHECKSUM_KEY = b"divopt.xxh3_128"
_DIGEST_CHARS = 32  # an XXH3-128 in hex
_PLACEHOLDER = b"0" * _DIGEST_CHARS
# the entry as Thrift's compact protocol writes it in the footer's KeyValue list: field 1 (binary)
# of length 15, the key, field 2 (binary) of length 32, then the 32 digits
_ENTRY = b"\x18" + bytes([len(PARQUET_CHECKSUM_KEY)]) + PARQUET_CHECKSUM_KEY + b"\x18" + bytes([_DIGEST_CHARS])
_MAGIC = b"PAR1"


class CacheIntegrityError(DataFormatError):
    """A cache file that is missing, corrupt, truncated, foreign or not what its manifest
    records; the message names the file (``<file>: <problem>``)."""

    def __init__(self, file: Any, problem: str) -> None:
        super().__init__(file, None, None, problem)


class CacheWarning(UserWarning):
    """A cache file was discarded (and its content is recomputed); the message names it."""


def discarded(exc: CacheIntegrityError, what: str) -> None:
    """Warn that the file of ``exc`` was discarded and ``what`` happens instead."""
    warnings.warn(f"{exc}; discarded, {what}", CacheWarning, stacklevel=3)


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    """``np.save`` through :func:`atomic_write` (never pickles)."""
    atomic_write(path, lambda fh: np.save(fh, array, allow_pickle=False))


def checksum(path: str | os.PathLike) -> dict[str, Any]:
    """``{"size": bytes, "xxh3_128": hex digest}`` of the file at ``path``."""
    return {"size": os.path.getsize(path), DIGEST: file_digest(path)}


def write_manifest(path: str | os.PathLike, files: Mapping[str, str | os.PathLike], **fields: Any) -> dict:
    """Write the manifest ``path`` (JSON, atomically) listing the :func:`checksum` of each file
    of ``files`` (name as recorded -> its path) and ``fields``; returns what was written."""
    manifest = {**fields, "files": {name: checksum(p) for name, p in files.items()}}
    text = json.dumps(manifest, sort_keys=True, indent=1).encode()
    atomic_write(path, lambda fh: fh.write(text))
    return manifest


def read_manifest(path: str | os.PathLike, **expected: Any) -> dict:
    """The manifest at ``path``; :class:`CacheIntegrityError` naming it when it is missing, is
    not a manifest, or a field differs from ``expected`` (e.g. ``key=...``: a foreign entry)."""
    path = Path(path)
    try:
        manifest = json.loads(read_regular(path))
    except FileNotFoundError:
        raise CacheIntegrityError(path, "missing: the cache entry is incomplete or was written without checksums") from None
    except (OSError, ValueError) as exc:
        raise CacheIntegrityError(path, f"not a readable manifest ({type(exc).__name__}: {exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise CacheIntegrityError(path, "not a manifest (no 'files' table)")
    for name, want in expected.items():
        if manifest.get(name) != want:
            raise CacheIntegrityError(path, f"records {name} {manifest.get(name)!r}, expected {want!r} "
                                      f"(a file of another cache entry)")
    return manifest


def verify(folder: str | os.PathLike, manifest: Mapping[str, Any], names: list[str] | None = None) -> None:
    """Check the files of ``manifest`` (those in ``names``, default all) in ``folder`` against
    their recorded size and digest; :class:`CacheIntegrityError` naming the first that differs."""
    folder = Path(folder)
    files = manifest["files"]
    for name in files if names is None else names:
        # a name the manifest lists is joined to the folder: one file name, never a path
        try:
            path = folder / checked_name(name, "file name", "its manifest")
        except UnsafeName as exc:
            raise CacheIntegrityError(folder, str(exc)) from None
        want = files.get(name)
        if not isinstance(want, dict):
            raise CacheIntegrityError(path, "not listed in the manifest")
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            raise CacheIntegrityError(path, "missing (the manifest lists it)") from None
        if size != want.get("size"):
            raise CacheIntegrityError(path, f"{size} bytes, the manifest records {want.get('size')} (truncated or replaced)")
        try:
            digest = file_digest(path)
        except OSError as exc:  # a FIFO or a folder in its place (never waited on), or unreadable
            raise CacheIntegrityError(path, f"cannot be read ({exc})") from None
        if digest != want.get(DIGEST):
            raise CacheIntegrityError(path, f"content differs from the manifest's {DIGEST} checksum "
                                      f"(corrupted, reordered or replaced)")


def load_npy(path: str | os.PathLike, mmap: bool = False) -> np.ndarray:
    """``np.load`` of a ``.npy`` array (read-only memory map when ``mmap``), never unpickling;
    :class:`CacheIntegrityError` naming the file when it is not a readable array."""
    try:
        with open_regular(path) as fh:
            if fh.read(6) != b"\x93NUMPY":
                raise CacheIntegrityError(path, "not a .npy array (no numpy header)")
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except CacheIntegrityError:
        raise
    except FileNotFoundError:
        raise CacheIntegrityError(path, "missing") from None
    except ValueError as exc:
        raise CacheIntegrityError(path, _npy_problem(str(exc))) from None
    except (OSError, EOFError) as exc:
        raise CacheIntegrityError(path, f"unreadable .npy file ({type(exc).__name__}: {exc})") from None


def _npy_problem(message: str) -> str:
    """numpy's reason for refusing a .npy file, in the words of the file's problem."""
    if "pickle" in message or "Python objects" in message:
        return "holds pickled Python objects, not a numeric array"
    if "mmap length" in message or "reshape" in message or "read" in message.lower():
        return "shorter than the shape and dtype its header records (truncated)"
    return "not a .npy array (its header is not numpy's)"


# --- Parquet files that carry the checksum of their own bytes ---------------------------------
def _digest_span(data: bytes) -> tuple[int, int] | str:
    """Where the 32 digits of the checksum lie in ``data`` (start, end), or what is wrong."""
    if len(data) < 12 or data[:4] != _MAGIC or data[-4:] != _MAGIC:
        return f"not a whole Parquet file ({len(data)} bytes; truncated or foreign)"
    footer_length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_length
    if start < 4:
        return f"not a whole Parquet file (its footer claims {footer_length} bytes of {len(data)})"
    footer = data[start:-8]
    if footer.count(_ENTRY) != 1:
        return "carries no checksum of its content (written without one, or its footer is damaged)"
    at = start + footer.index(_ENTRY) + len(_ENTRY)
    return at, at + _DIGEST_CHARS


def _content_digest(data: bytes, span: tuple[int, int]) -> str:
    h = xxhash.xxh3_128()
    h.update(memoryview(data)[: span[0]])
    h.update(_PLACEHOLDER)
    h.update(memoryview(data)[span[1]:])
    return h.hexdigest()


def parquet_bytes(table: pa.Table) -> bytes:
    """The Parquet file of ``table`` (Arrow schema and its metadata kept), carrying the XXH3-128
    of its own bytes in the footer (module docstring). Column statistics are not written: the
    file is read whole, and the footer then holds no copy of the data."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, write_statistics=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({PARQUET_CHECKSUM_KEY: _PLACEHOLDER})
    data = bytearray(sink.getvalue().to_pybytes())
    span = _digest_span(bytes(data))
    if isinstance(span, str):  # pyarrow wrote the footer in another way: never write a file that cannot be checked
        raise RuntimeError(f"cannot place the checksum in the Parquet footer: {span}")
    data[span[0] : span[1]] = _content_digest(bytes(data), span).encode()
    return bytes(data)


def verify_parquet_bytes(data: bytes, path: Any = "<bytes>") -> None:
    """Check the bytes of a file written by :func:`parquet_bytes` against the checksum they carry;
    :class:`CacheIntegrityError` naming ``path`` and what is wrong otherwise. Nothing is parsed."""
    span = _digest_span(data)
    if isinstance(span, str):
        raise CacheIntegrityError(path, span)
    recorded = data[span[0] : span[1]]
    if recorded != _content_digest(data, span).encode():
        raise CacheIntegrityError(path, f"content differs from its {DIGEST} checksum (a changed byte: corrupted or "
                                  f"edited)")
