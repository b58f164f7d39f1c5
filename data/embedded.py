"""An embedded dataset: what experiments run on (embeddings, ids, labels, texts).

:class:`EmbeddedDataset` holds the unit embeddings of the passages ``E`` (N, d) and of the
queries ``Q`` (m, d) with their ids, optional per-query candidate pools, graded qrels,
subtopic labels and texts. :func:`divopt_rag.data.load` returns one for every registered dataset;
:meth:`EmbeddedDataset.save` / :meth:`EmbeddedDataset.load` keep it as ``.npy`` files that
worker processes memory-map (pages shared through the OS cache, nothing re-encoded).
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .dataset import Dataset

__all__ = ["EmbeddedDataset", "unit_rows"]

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
class EmbeddedDataset:
    """Embeddings and labels of one dataset, as experiments need them.

    ``E`` (N, d) float32 unit rows (the passages), ``Q`` (m, d) float32 unit queries;
    ``key`` identifies the dataset spec (:func:`divopt_rag.data.load` sets it; it names the cache).
    ``pools``: optional per-query candidate rows of E (e.g. one synthetic pool per query); None
    means every query ranks all of E.
    ``qrels``: query id to {doc id: grade}; ``subtopics``: query id to {doc id: label} (what
    alpha-nDCG and S-recall need); ``doc_texts`` / ``query_texts`` for text-based evaluators
    (LLM judges).
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

    def save(self, folder: str | os.PathLike) -> None:
        """Write to ``folder`` atomically (a temporary sibling folder, then a rename)."""
        folder = Path(folder)
        tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        np.save(tmp / "E.npy", np.ascontiguousarray(self.E, dtype=np.float32))
        np.save(tmp / "Q.npy", np.ascontiguousarray(self.Q, dtype=np.float32))
        if self.pools is not None:
            np.savez(tmp / "pools.npz", *self.pools)
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
        (tmp / "meta.json").write_text(json.dumps(meta))
        try:
            os.replace(tmp, folder)
        except OSError:  # another process saved it first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, folder: str | os.PathLike, mmap: bool = True) -> "EmbeddedDataset":
        """Read a folder written by :meth:`save` (E and Q memory-mapped read-only when ``mmap``)."""
        folder = Path(folder)
        meta = json.loads((folder / "meta.json").read_text())
        mode = "r" if mmap else None
        pools = None
        if (folder / "pools.npz").exists():
            with np.load(folder / "pools.npz") as z:
                pools = [z[f"arr_{i}"] for i in range(len(z.files))]
        return cls(
            name=meta["name"],
            key=meta["key"],
            E=np.load(folder / "E.npy", mmap_mode=mode),
            Q=np.load(folder / "Q.npy", mmap_mode=mode),
            query_ids=meta["query_ids"],
            doc_ids=np.asarray(meta["doc_ids"]),
            pools=pools,
            qrels=meta.get("qrels"),
            subtopics=meta.get("subtopics"),
            doc_texts=meta.get("doc_texts"),
            query_texts=meta.get("query_texts"),
        )
