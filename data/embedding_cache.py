"""The on-disk embedding cache: checksummed shards of unit vectors keyed by text hash, and the
folder they live in by default.

Where (:func:`embedding_cache_dir`): ``cache_dir=None`` (what :func:`~divopt_rag.data.embed` and
:func:`~divopt_rag.data.load` pass when you name nothing) is ``<user cache>/embeddings``, the
user's cache folder as `platformdirs <https://platformdirs.readthedocs.io>`_ gives it
(``~/.cache/divopt-rag`` on Linux, ``~/Library/Caches/divopt-rag`` on macOS,
``%LOCALAPPDATA%\\divopt-rag\\Cache`` on Windows). The environment variable
``DIVOPT_RAG_CACHE_DIR`` moves that folder (``DIVOPT_RAG_CACHE_DIR=/scratch/divopt``) or turns the
default off (``off``, ``none``, ``0`` or ``false``); ``cache_dir=False`` turns it off for one
call; a path names the folder for one call.

Layout and keys: see :mod:`divopt_rag.data.embed` (a folder per model id and revision, a shard
per encoded chunk, each text keyed by the BLAKE2b hash of (prompt, text)).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .atomic import atomic_write
from .hashing import stable_hash
from .integrity import CacheIntegrityError, discarded, load_npy, read_manifest, save_npy, verify, write_manifest

__all__ = ["EmbeddingCache", "text_keys", "model_slug", "as_output", "embedding_cache_dir", "CACHE_ENV"]

_KEY_DTYPE = np.dtype("S16")
_SHARD_FORMAT = "divopt-embedding-shard/1"
#: The environment variable that moves divopt's cache folder, or turns the default cache off.
CACHE_ENV = "DIVOPT_RAG_CACHE_DIR"
_OFF = frozenset({"off", "none", "0", "false"})


def embedding_cache_dir(cache_dir: str | os.PathLike | bool | None = None) -> Path | None:
    """The embedding cache folder a call uses, or None for no cache.

    ``None``: the default, ``<root>/embeddings`` where ``<root>`` is :data:`CACHE_ENV` when set
    (no cache when it says ``off``, ``none``, ``0`` or ``false``), else the user's cache folder
    for ``divopt-rag`` (platformdirs' ``user_cache_path``); ``False``: no cache; a path: that
    folder (``~`` expanded). ``True`` is refused (say which folder, or None for the default).
    """
    if cache_dir is False:
        return None
    if cache_dir is True or not (cache_dir is None or isinstance(cache_dir, (str, os.PathLike))):
        raise TypeError(f"cache_dir must be None (the default folder), False (no cache) or a path, got {cache_dir!r}")
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV, "").strip()
    if env.lower() in _OFF:
        return None
    if env:
        return Path(env).expanduser() / "embeddings"
    import platformdirs  # a small pure-Python module, needed only when the default folder is used

    return platformdirs.user_cache_path("divopt-rag", appauthor=False) / "embeddings"


def text_keys(texts: Sequence[str], prompt: str = "") -> np.ndarray:
    """128-bit BLAKE2b key of each (prompt, text) as an (n,) ``S16`` array."""
    pre = prompt.encode("utf-8") + b"\x00"
    out = np.empty(len(texts), dtype=_KEY_DTYPE)
    for i, t in enumerate(texts):
        out[i] = hashlib.blake2b(pre + t.encode("utf-8"), digest_size=16).digest()
    return out


def model_slug(model_id: str, revision: str = "") -> str:
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id.rstrip("/").split("/")[-1])[:48] or "model"
    return f"{tail}-{stable_hash({'model_id': model_id, 'revision': revision}, 10)}"


class EmbeddingCache:
    """Checksummed shards of embeddings keyed by text hash, for one model (id and revision)
    and one storage dtype.

    A shard is three files: ``shard-<uuid>.npy`` (rows, d), ``shard-<uuid>.keys.npy`` (rows,)
    and the manifest ``shard-<uuid>.json`` (model id, revision, dtype, rows, d, and the size
    and XXH3-128 checksum of the two arrays), written last: a shard without its manifest is
    not visible. :meth:`reload` verifies every keys file; a data file is verified the first
    time a lookup hits it (once per process per file identity). A shard whose manifest is
    unreadable or names another shard or model, or whose files differ from their checksums
    (bytes flipped, rows permuted, truncated, replaced), is discarded with a
    :class:`~divopt_rag.data.integrity.CacheWarning` naming the file, and its texts are
    encoded again; it is never read.
    """

    def __init__(self, cache_dir: str | os.PathLike, model_id: str, storage_dtype=np.float32, revision: str = ""):
        self.storage_dtype = np.dtype(storage_dtype)
        if self.storage_dtype not in (np.dtype(np.float16), np.dtype(np.float32)):
            raise ValueError(f"storage_dtype must be float16 or float32, got {self.storage_dtype}")
        self.model_id, self.revision = model_id, revision
        self.root = Path(cache_dir).expanduser() / model_slug(model_id, revision) / self.storage_dtype.name
        self.root.mkdir(parents=True, exist_ok=True)
        meta = self.root.parent / "model.json"
        if not meta.exists():
            text = json.dumps({"model_id": model_id, "revision": revision}).encode()
            atomic_write(meta, lambda fh: fh.write(text))
        self.reload()

    def _identity(self, name: str) -> dict[str, Any]:
        """What a shard's manifest must record to belong to this cache."""
        return {"format": _SHARD_FORMAT, "shard": name, "model_id": self.model_id, "revision": self.revision,
                "dtype": self.storage_dtype.name}

    def _open_shard(self, manifest_path: Path) -> tuple[np.ndarray, dict]:
        """The verified keys of one shard and its manifest (CacheIntegrityError naming the file)."""
        name = manifest_path.name[: -len(".json")]
        manifest = read_manifest(manifest_path, **self._identity(name))
        data, keys = f"{name}.npy", f"{name}.keys.npy"
        rows = manifest.get("rows")
        if set(manifest["files"]) != {data, keys} or not isinstance(rows, int) or not isinstance(manifest.get("dim"), int):
            raise CacheIntegrityError(manifest_path, "not a shard manifest (files, rows or dim missing)")
        verify(self.root, manifest, [keys])
        k = load_npy(self.root / keys)
        if k.dtype != _KEY_DTYPE or k.shape != (rows,):
            raise CacheIntegrityError(self.root / keys, f"holds {k.dtype} {k.shape}, expected {_KEY_DTYPE} ({rows},)")
        want = manifest["files"][data]
        size = (self.root / data).stat().st_size if (self.root / data).exists() else None
        if not isinstance(want, dict) or size != want.get("size"):  # cheap now; the checksum on first use
            verify(self.root, manifest, [data])
        return k, manifest

    def reload(self) -> None:
        """Re-read the shard manifests and key files (16 bytes per cached text), verifying each
        keys file; shards that fail are discarded with a warning."""
        self.shards: list[Path] = []
        self._manifests: list[dict] = []
        keys, shard_of, row_of = [], [], []
        for mf in sorted(self.root.glob("shard-*.json")):
            try:
                k, manifest = self._open_shard(mf)
            except CacheIntegrityError as exc:
                self._discard(mf, exc)
                continue
            keys.append(k)
            shard_of.append(np.full(len(k), len(self.shards), dtype=np.int32))
            row_of.append(np.arange(len(k), dtype=np.int64))
            self.shards.append(self.root / f"{manifest['shard']}.npy")
            self._manifests.append(manifest)
        if keys:
            allk = np.concatenate(keys)
            order = np.argsort(allk, kind="stable")
            self._keys = allk[order]
            self._shard = np.concatenate(shard_of)[order]
            self._row = np.concatenate(row_of)[order]
        else:
            self._keys = np.empty(0, dtype=_KEY_DTYPE)
            self._shard = np.empty(0, dtype=np.int32)
            self._row = np.empty(0, dtype=np.int64)
        self._mmaps: dict[int, np.ndarray] = {}
        self._bad: set[int] = set()

    def _discard(self, manifest_path: Path, exc: CacheIntegrityError) -> None:
        """Remove a shard that failed its check (manifest first: it stops being visible)."""
        discarded(exc, "its texts will be encoded again")
        name = manifest_path.name[: -len(".json")]
        for path in (manifest_path, self.root / f"{name}.npy", self.root / f"{name}.keys.npy"):
            path.unlink(missing_ok=True)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def dim(self) -> int | None:
        return int(self._manifests[0]["dim"]) if self._manifests else None

    def _shard_array(self, s: int) -> np.ndarray:
        """Shard ``s``, verified against its manifest on first use (CacheIntegrityError)."""
        if s not in self._mmaps:
            manifest = self._manifests[s]
            path = self.shards[s]
            verify(self.root, manifest, [path.name])
            arr = load_npy(path, mmap=True)
            want = (manifest["rows"], manifest["dim"])
            if arr.shape != want or arr.dtype != self.storage_dtype:
                raise CacheIntegrityError(path, f"holds {arr.dtype} {arr.shape}, expected {self.storage_dtype} {want}")
            self._mmaps[s] = arr
        return self._mmaps[s]

    def _usable(self, s: int) -> bool:
        """Whether shard ``s`` passes its check (a failing shard is discarded, once)."""
        if s in self._bad:
            return False
        try:
            self._shard_array(s)
            return True
        except CacheIntegrityError as exc:
            self._bad.add(s)
            self._discard(self.root / f"{self._manifests[s]['shard']}.json", exc)
            return False

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(found mask, shard index, row) for each key; shard/row are -1 where not found.
        Only verified shards count: a key found in a shard that fails its check is missing."""
        if not len(self._keys):
            none = np.full(len(keys), -1, dtype=np.int64)
            return np.zeros(len(keys), bool), none, none.copy()
        pos = np.searchsorted(self._keys, keys)
        pos_c = np.minimum(pos, len(self._keys) - 1)
        found = (pos < len(self._keys)) & (self._keys[pos_c] == keys)
        shard = np.where(found, self._shard[pos_c], -1)
        for s in np.unique(shard[found]):
            if not self._usable(int(s)):
                found &= shard != s
        shard = np.where(found, shard, -1)
        row = np.where(found, self._row[pos_c], -1)
        return found, shard, row

    def read_into(self, out: np.ndarray, positions: np.ndarray, shard: np.ndarray, row: np.ndarray, dtype) -> None:
        """out[positions] = cached rows (re-normalized when widening from float16)."""
        for s in np.unique(shard):
            sel = shard == s
            rows = row[sel]
            order = np.argsort(rows, kind="stable")  # sequential reads from the memory map
            block = self._shard_array(int(s))[rows[order]]
            out[positions[sel][order]] = as_output(block, dtype)

    def write(self, keys: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """Store one shard (data, keys, then its manifest); returns the stored vectors."""
        stored = np.ascontiguousarray(vectors, dtype=self.storage_dtype)
        name = f"shard-{uuid.uuid4().hex}"
        data, kfile = self.root / f"{name}.npy", self.root / f"{name}.keys.npy"
        save_npy(data, stored)
        save_npy(kfile, np.asarray(keys, dtype=_KEY_DTYPE))
        write_manifest(self.root / f"{name}.json", {data.name: data, kfile.name: kfile}, **self._identity(name),
                       rows=int(stored.shape[0]), dim=int(stored.shape[1]))
        return stored


def as_output(block: np.ndarray, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if block.dtype == dtype:
        return block
    if np.dtype(block.dtype).itemsize < dtype.itemsize:
        # widening from float16 storage: re-normalize so rows are unit at the output precision
        b = block.astype(np.float64 if dtype == np.float64 else np.float32)
        return (b / np.linalg.norm(b, axis=1, keepdims=True)).astype(dtype, copy=False)
    return block.astype(dtype)
