"""An embedded dataset: what experiments run on (embeddings, ids, labels, texts).

:class:`EmbeddedDataset` holds the unit embeddings of the passages ``E`` (N, d) and of the
queries ``Q`` (m, d) with their ids, optional per-query candidate pools, graded qrels,
subtopic labels and texts. :func:`divopt_rag.data.load` returns one for every registered dataset;
:meth:`EmbeddedDataset.save` / :meth:`EmbeddedDataset.load` keep it as ``.npy`` files that
worker processes memory-map (pages shared through the OS cache, nothing re-encoded), with a
``manifest.json`` of their sizes and checksums that every load verifies first.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .dataset import Dataset, Judged
from .files import read_regular
from .integrity import CacheIntegrityError, load_npy, read_manifest, save_npy, verify, write_manifest
from .atomic import atomic_write

__all__ = ["EmbeddedDataset", "unit_rows"]

#: The manifest of a saved dataset folder, and the format it records.
MANIFEST = "manifest.json"
_FORMAT = "divopt-embedded-dataset/1"

# rows whose norm is within this of 1 are already unit at float32 precision: kept bit for bit
_UNIT_TOL = 1e-6


def unit_rows(a: Any, name: str) -> np.ndarray:
    """``a`` as float32 rows of norm 1: rows are divided by their norm unless every row is
    already unit within float32 rounding (then the array is returned unchanged, not copied).
    ValueError naming ``name`` for non-finite or zero rows."""
    a = np.asarray(a, dtype=np.float32)
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise ValueError(f"{name} must have finite, non-zero rows")
    if a.size and np.abs(norms - 1.0).max() <= _UNIT_TOL:
        return a
    return a / norms


@dataclass
class EmbeddedDataset(Judged):
    """Embeddings and labels of one dataset, as experiments need them.

    ``E`` (N, d) float32 unit rows (the passages), ``Q`` (m, d) float32 unit queries;
    ``key``: 16 hex digits fingerprinting the content the dataset was made from (corpus,
    queries, qrels/labels, embedding model id and revision, storage dtype, loader options;
    the recipe is :func:`divopt_rag.data.dataset_key`): the same content at another path has
    the same key, one changed byte another. :func:`divopt_rag.data.load` sets it and names its
    cache folder by it; a dataset built by hand has ``""`` (use
    :func:`divopt_rag.data.hashing.fingerprint` for a digest of its arrays and labels).
    ``pools``: optional per-query candidate rows of E (e.g. one synthetic pool per query); None
    means every query ranks all of E.
    ``qrels``: query id to {doc id: grade}; ``subtopics``: query id to {doc id: label} (what
    alpha-nDCG and S-recall need); ``doc_texts`` / ``query_texts`` for text-based evaluators
    (LLM judges). Like a :class:`~divopt_rag.data.Dataset` it gives ``qrels_frame()`` and
    ``relevant(query_id)`` (:class:`~divopt_rag.data.dataset.Judged`).
    """

    name: str
    key: str
    E: np.ndarray
    Q: np.ndarray
    query_ids: list[str]
    doc_ids: np.ndarray
    pools: list[np.ndarray] | None = None
    qrels: dict[str, dict[str, int]] | None = None
    subtopics: dict[str, dict[str, Any]] | None = None
    doc_texts: list[str] | None = None
    query_texts: list[str] | None = None

    def __post_init__(self) -> None:
        if self.E.ndim != 2 or self.Q.ndim != 2 or self.E.shape[1] != self.Q.shape[1]:
            raise ValueError(f"E must be (N, d) and Q (m, d) with the same d, got {self.E.shape} and {self.Q.shape}")
        self.query_ids = [str(q) for q in self.query_ids]
        if len(self.query_ids) != self.Q.shape[0]:
            raise ValueError(f"query_ids must have {self.Q.shape[0]} entries (rows of Q), got {len(self.query_ids)}")
        if len(set(self.query_ids)) != len(self.query_ids):
            raise ValueError("query_ids must be unique")
        self.doc_ids = np.asarray(self.doc_ids).astype(str)
        if self.doc_ids.shape != (self.E.shape[0],):
            raise ValueError(f"doc_ids must have {self.E.shape[0]} entries (rows of E), got {self.doc_ids.shape}")
        if self.pools is not None:
            if len(self.pools) != len(self.query_ids):
                raise ValueError(f"pools must have one entry per query ({len(self.query_ids)}), got {len(self.pools)}")
            self.pools = [np.asarray(p, dtype=np.int64) for p in self.pools]
            for qid, p in zip(self.query_ids, self.pools):
                if p.size == 0 or p.min() < 0 or p.max() >= self.E.shape[0]:
                    raise ValueError(f"pool of query {qid!r} must be non-empty rows of E in [0, {self.E.shape[0]})")

    @classmethod
    def from_dataset(cls, dataset: Dataset, E: np.ndarray, Q: np.ndarray) -> "EmbeddedDataset":
        """From a :class:`~divopt_rag.data.Dataset` and its passage / query embeddings (rows in the
        order of ``dataset.passage_ids`` / ``dataset.query_ids``)."""
        subs = None
        if dataset.query_subtopics or dataset.subtopics:
            subs = {q: dataset.subtopics_for(q) for q in dataset.query_ids}
        return cls(
            name=dataset.name, key="", E=E, Q=Q, query_ids=list(dataset.query_ids),
            doc_ids=np.asarray(dataset.passage_ids), qrels={q: dict(v) for q, v in dataset.qrels.items()} or None,
            subtopics=subs, doc_texts=list(dataset.texts), query_texts=list(dataset.queries),
        )

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def n_passages(self) -> int:
        return len(self.doc_ids)

    def save(self, folder: str | os.PathLike) -> None:
        """Write to ``folder`` atomically: ``E.npy``, ``Q.npy``, ``pools.npz`` (when there are
        pools) and ``meta.json`` in a temporary sibling folder, then ``manifest.json`` (key,
        name, and the size and checksum of each file; written last), then one rename. If another
        process saved the folder first, theirs is kept."""
        folder = Path(folder)
        tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        tmp.mkdir(parents=True)
        try:
            save_npy(tmp / "E.npy", np.ascontiguousarray(self.E, dtype=np.float32))
            save_npy(tmp / "Q.npy", np.ascontiguousarray(self.Q, dtype=np.float32))
            if self.pools is not None:
                atomic_write(tmp / "pools.npz", lambda fh: np.savez(fh, *self.pools))
            meta = {
                "name": self.name,
                "key": self.key,
                "query_ids": self.query_ids,
                "doc_ids": self.doc_ids.tolist(),
                "qrels": self.qrels,
                "subtopics": self.subtopics,
                "doc_texts": self.doc_texts,
                "query_texts": self.query_texts,
            }
            text = json.dumps(meta).encode()
            atomic_write(tmp / "meta.json", lambda fh: fh.write(text))
            files = {p.name: p for p in sorted(tmp.iterdir()) if not p.name.startswith(".")}
            write_manifest(tmp / MANIFEST, files, format=_FORMAT, key=self.key, name=self.name)
            os.replace(tmp, folder)
        except OSError:
            if not (folder / MANIFEST).exists():
                raise
            # another process saved it first: keep theirs
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, folder: str | os.PathLike, mmap: bool = True, *, key: str | None = None) -> "EmbeddedDataset":
        """Read a folder written by :meth:`save` (E and Q memory-mapped read-only when ``mmap``).

        Every file is first checked against ``manifest.json`` (size and checksum, once per
        process per file identity), and with ``key`` the manifest must record that key. A
        missing, corrupt, truncated, reordered or foreign file raises
        :class:`~divopt_rag.data.integrity.CacheIntegrityError` naming it; nothing unverified
        is returned."""
        folder = Path(folder)
        manifest = read_manifest(folder / MANIFEST, format=_FORMAT, **({} if key is None else {"key": key}))
        for name in ("E.npy", "Q.npy", "meta.json"):
            if name not in manifest["files"]:
                raise CacheIntegrityError(folder / MANIFEST, f"does not list {name}")
        verify(folder, manifest)
        try:
            meta = json.loads(read_regular(folder / "meta.json"))
        except ValueError as exc:
            raise CacheIntegrityError(folder / "meta.json", f"not JSON ({exc})") from None
        # the key may name the dataset's folder (a sweep's OUT/data/<key>, checked there): the one
        # the manifest records (and, with ``key``, the one asked for), nothing else
        if not isinstance(meta, dict) or meta.get("key") != manifest.get("key"):
            raise CacheIntegrityError(folder / "meta.json", f"records key {meta.get('key') if isinstance(meta, dict) else None!r}, "
                                      f"its manifest {manifest.get('key')!r}")
        pools = None
        if "pools.npz" in manifest["files"]:
            pools = _load_pools(folder / "pools.npz")
        return cls(
            name=meta["name"],
            key=meta["key"],
            E=load_npy(folder / "E.npy", mmap),
            Q=load_npy(folder / "Q.npy", mmap),
            query_ids=meta["query_ids"],
            doc_ids=np.asarray(meta["doc_ids"]),
            pools=pools,
            qrels=meta.get("qrels"),
            subtopics=meta.get("subtopics"),
            doc_texts=meta.get("doc_texts"),
            query_texts=meta.get("query_texts"),
        )


def _load_pools(path: Path) -> list[np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return [z[f"arr_{i}"] for i in range(len(z.files))]
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise CacheIntegrityError(path, f"not an archive of pool arrays ({type(exc).__name__})") from None
