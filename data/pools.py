"""Candidate pools: BM25 top-N per query (bm25s), dense top-N per query, and their union.

The CCBQP paper's pooling protocol: BM25 top-N per query, merged across queries and
de-duplicated, then dense embeddings of the merged pool (:func:`ccbqp_pool`). All pools are
positions (int64 indices into ``dataset.passage_ids``); per-query pools are ordered by
decreasing score, merged pools are sorted ascending.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .dataset import Dataset

__all__ = ["BM25Index", "bm25_pool", "dense_pool", "union_pool", "CandidatePool", "ccbqp_pool"]


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer (pool size per query), got {n!r}")
    return int(n)


def _query_ids(dataset: Dataset, query_ids: Iterable[str] | None) -> list[str]:
    qids = list(dataset.query_ids) if query_ids is None else [str(q) for q in query_ids]
    for q in qids:
        dataset.query_index(q)  # KeyError naming an unknown id
    return qids


class BM25Index:
    """A bm25s index over a dataset's passages (built once, queried many times).

    Scores are Lucene's BM25 (bm25s ``method="lucene"``):
        score(q, p) = sum_{t in q} idf(t) * tf(t,p) / (tf(t,p) + k1 (1 - b + b |p| / avgdl)),
        idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)).
    Tokens: lower-cased words of >= 2 word characters, English stopwords removed (bm25s).
    """

    def __init__(
        self,
        dataset: Dataset,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        stopwords: str | list[str] | None = "en",
        stemmer: Callable[[str], str] | None = None,
        with_titles: bool = True,
        show_progress: bool = False,
    ):
        try:
            import bm25s
        except ModuleNotFoundError as exc:
            if exc.name != "bm25s":
                raise
            raise ModuleNotFoundError('BM25 pools need bm25s: pip install "divopt-rag[bm25]"', name=exc.name) from None
        from bm25s.tokenization import Tokenizer

        self.dataset = dataset
        self.show_progress = show_progress
        self.tokenizer = Tokenizer(stopwords=stopwords or [], stemmer=stemmer)
        texts = dataset.passage_texts(with_titles=with_titles)
        tokens = self.tokenizer.tokenize(texts, return_as="ids", show_progress=show_progress)
        self.retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
        self.retriever.index(tokens, show_progress=show_progress)

    def search(self, queries: Sequence[str], n: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, scores), each (len(queries), min(n, n_passages)), best first."""
        n = min(_check_n(n), self.dataset.n_passages)
        qt = self.tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
        docs, scores = self.retriever.retrieve(qt, k=n, show_progress=self.show_progress, n_threads=0)
        return np.asarray(docs, dtype=np.int64), np.asarray(scores, dtype=np.float32)


def bm25_pool(
    dataset: Dataset,
    query_ids: Iterable[str] | None = None,
    n: int = 100,
    *,
    index: BM25Index | None = None,
    **index_kwargs: Any,
) -> dict[str, np.ndarray]:
    """BM25 top-``n`` passage positions per query id (all queries by default), best first.

    A query none of whose tokens occur in the corpus scores 0 everywhere; its pool is then an
    arbitrary set of n passages (bm25s order)."""
    qids = _query_ids(dataset, query_ids)
    index = index or BM25Index(dataset, **index_kwargs)
    docs, _ = index.search([dataset.query_text(q) for q in qids], n)
    return {q: docs[i] for i, q in enumerate(qids)}


def dense_pool(
    E: np.ndarray,
    Q: np.ndarray,
    n: int,
    *,
    query_ids: Sequence[str] | None = None,
    block_rows: int = 1 << 16,
) -> dict[Any, np.ndarray]:
    """Dense top-``n`` positions per query by inner product c = E q, best first.

    E (num_passages, d) may be a memory map: it is scanned ``block_rows`` rows at a time and
    only a running top-n per query is kept. Q is (m, d) (or (d,) for one query). Keys are
    ``query_ids`` when given, else 0..m-1. Ties are broken by the smaller position."""
    n = _check_n(n)
    E = np.asarray(E) if not isinstance(E, np.memmap) else E
    Q = np.atleast_2d(np.asarray(Q, dtype=np.float32))
    if E.ndim != 2 or Q.shape[1] != E.shape[1]:
        raise ValueError(f"E must be (num_passages, d) and Q (m, d) with the same d, got E {E.shape} and Q {Q.shape}")
    keys = list(range(Q.shape[0])) if query_ids is None else [str(q) for q in query_ids]
    if len(keys) != Q.shape[0]:
        raise ValueError(f"query_ids must have one id per row of Q: expected {Q.shape[0]}, got {len(keys)}")
    n = min(n, E.shape[0])
    best_s = np.full((Q.shape[0], 0), -np.inf, dtype=np.float32)
    best_i = np.empty((Q.shape[0], 0), dtype=np.int64)
    for start in range(0, E.shape[0], block_rows):
        blk = np.asarray(E[start : start + block_rows], dtype=np.float32)
        s = np.concatenate([best_s, Q @ blk.T], axis=1)
        i = np.concatenate([best_i, np.broadcast_to(np.arange(start, start + len(blk)), (Q.shape[0], len(blk)))], axis=1)
        # sort by (-score, position): stable lexsort keeps ties deterministic
        order = np.lexsort((i, -s), axis=1)[:, :n]
        best_s = np.take_along_axis(s, order, axis=1)
        best_i = np.take_along_axis(i, order, axis=1)
    return {k: best_i[r].copy() for r, k in enumerate(keys)}


def union_pool(pools: Mapping[Any, np.ndarray] | Iterable[np.ndarray]) -> np.ndarray:
    """Merged, de-duplicated positions of several per-query pools (sorted ascending)."""
    arrays = list(pools.values()) if isinstance(pools, Mapping) else list(pools)
    if not arrays:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.concatenate([np.asarray(a, dtype=np.int64).ravel() for a in arrays]))


@dataclass
class CandidatePool:
    """A merged candidate pool with its dense embeddings.

    indices: positions in the dataset (ascending); E: (len(indices), d) unit rows, row r is
    passage indices[r]; per_query: each query's own top-N (dataset positions, best first);
    Q: {query id: unit query vector}."""

    indices: np.ndarray
    E: np.ndarray
    per_query: dict[str, np.ndarray]
    Q: dict[str, np.ndarray] = field(default_factory=dict)

    def local(self, positions: Iterable[int]) -> np.ndarray:
        """Rows of E (pool-local indices) of dataset ``positions``."""
        pos = np.asarray(list(positions), dtype=np.int64)
        where = np.searchsorted(self.indices, pos)
        ok = (where < len(self.indices)) & (self.indices[np.minimum(where, len(self.indices) - 1)] == pos)
        if not ok.all():
            raise KeyError(f"positions not in the pool: {pos[~ok][:5].tolist()}")
        return where


def ccbqp_pool(
    dataset: Dataset,
    query_ids: Iterable[str] | None = None,
    n: int = 100,
    *,
    model: Any = None,
    cache_dir=None,
    index: BM25Index | None = None,
    embed_kwargs: Mapping[str, Any] | None = None,
) -> CandidatePool:
    """The CCBQP paper's pool: BM25 top-``n`` per query, merged and de-duplicated, then dense
    embeddings (default offline all-MiniLM-L6-v2, cached under ``cache_dir``) of the merged
    passages and of the queries."""
    from .embed import embed, embed_queries

    qids = _query_ids(dataset, query_ids)
    per_query = bm25_pool(dataset, qids, n, index=index)
    indices = union_pool(per_query)
    kw = dict(embed_kwargs or {})
    E = embed(dataset.passage_texts(indices), model, cache_dir, **kw)
    Qm = embed_queries([dataset.query_text(q) for q in qids], model, cache_dir, **kw)
    return CandidatePool(indices=indices, E=E, per_query=per_query, Q={q: Qm[i] for i, q in enumerate(qids)})
