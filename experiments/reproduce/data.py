"""The data a recipe runs on: a text :class:`~divopt_rag.data.Dataset` (answers, candidate pools)
with its embeddings, or an embedded analogue, as one :class:`Prepared`.

``divopt_rag.data.load`` returns an :class:`~divopt_rag.data.EmbeddedDataset`, which keeps what the
selectors and retrieval metrics need but not the answers nor the per-query candidates of the
QA datasets; a recipe needs both, so :func:`prepare_text` keeps the Dataset beside the
embedded view (embeddings come from :func:`divopt_rag.data.embed_dataset` and its on-disk cache,
so a resumed run encodes nothing).

Analogues (offline, never the paper's experiment; their label says "analogue"):

* ``wordnet``: the WordNet ambiguity benchmark (:func:`divopt_rag.data.load_wordnet`): a query is
  an ambiguous noun, its answer parts are its senses, a passage covers the sense it is labelled
  with; "answer recall" becomes the fraction of senses covered (S-recall).
* ``synthetic``: planted-cluster narrow cones (:func:`divopt_rag.data.synthetic_pools`), one pool
  per query; the relevant clusters play the answer parts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from divopt_rag.data import Dataset, EmbeddedDataset, embed_dataset, load_wordnet, stable_hash, synthetic_pools, unit_rows

from .spec import Options, ReproduceError

__all__ = ["Prepared", "DatasetPlan", "prepare_text", "wordnet_analogue", "synthetic_analogue", "first_queries",
           "subset_queries"]


@dataclass
class Prepared:
    """One dataset of a recipe, ready to run.

    label : the dataset column of the tables ("qampari-dev", "wordnet (analogue)").
    key : hash of everything that fixes its rows (spec, embedding model, pool-changing limit).
    data : the embedded view (E, Q, per-query ``pools``, qrels, subtopics, texts).
    dataset : the text Dataset (answers, candidates, meta); None for embedded-only analogues.
    queries : positions of the queries to run (the first ``limit`` ones).
    """

    label: str
    key: str
    data: EmbeddedDataset
    dataset: Dataset | None = None
    analogue: bool = False
    queries: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def answer_groups(self, query_id: str) -> list[list[str]]:
        """The query's answer parts (aliases each); [] when the dataset has none."""
        if self.dataset is None:
            return []
        return self.dataset.answer_groups_for(query_id)

    def question(self, query_index: int) -> str:
        if self.data.query_texts is None:
            raise ReproduceError(f"dataset {self.label!r} has no question texts (an embedded analogue): "
                                 "this step needs texts")
        return self.data.query_texts[query_index]

    def texts(self, rows: Any) -> list[str]:
        if self.data.doc_texts is None:
            raise ReproduceError(f"dataset {self.label!r} has no passage texts (an embedded analogue): "
                                 "this step needs texts")
        return [self.data.doc_texts[int(r)] for r in rows]


@dataclass(frozen=True)
class DatasetPlan:
    """A dataset a recipe will build: its label and a builder ``build(options) -> Prepared``."""

    label: str
    build: Callable[[Options], Prepared]


def first_queries(n_queries: int, limit: int | None) -> list[int]:
    return list(range(n_queries if limit is None else min(limit, n_queries)))


def prepare_text(ds: Dataset, options: Options, *, label: str, spec: dict[str, Any], with_titles: bool = False,
                 model: Any = None, analogue: bool = False) -> Prepared:
    """Embed a text Dataset (cached) and wrap it: per-query pools from ``ds.candidates`` (the
    query's own passages, LongBench / RGB), else every query ranks the whole pool."""
    m = options.model if model is None else model
    E, Q = embed_dataset(ds, m, options.cache_dir, with_titles=with_titles, show_progress=options.progress)
    data = EmbeddedDataset.from_dataset(ds, unit_rows(E, f"{label} passages"), unit_rows(Q, f"{label} queries"))
    if ds.candidates is not None:
        data.pools = [ds.candidate_indices(q) for q in ds.query_ids]
        empty = [q for q, p in zip(ds.query_ids, data.pools) if p.size == 0]
        if empty:
            raise ReproduceError(f"dataset {label!r}: query {empty[0]!r} has no candidate passages")
    key = f"{label}-{stable_hash({**spec, 'model': options.model_id(m), 'titles': with_titles}, 10)}"
    data.key = key
    return Prepared(label=label, key=key, data=data, dataset=ds, analogue=analogue,
                    queries=first_queries(ds.n_queries, options.limit))


def wordnet_analogue(options: Options, n_words: int | None = None, model: Any = None) -> Prepared:
    """The WordNet ambiguity benchmark (default 20 words) as an analogue: queries are the words,
    answer parts their senses (labels), the pool every word's passages. The limit keeps the
    first words as queries and the whole pool, so limited rows equal full-run rows."""
    try:
        ds = load_wordnet(n_words=n_words) if n_words else load_wordnet()
    except FileNotFoundError as exc:
        raise ReproduceError(f"the wordnet analogue needs WordNet's database (apt-get install wordnet-base): {exc}") from None
    return prepare_text(ds, options, label="wordnet (analogue)", spec={"name": "wordnet", "n_words": n_words},
                        model=model, analogue=True)


def synthetic_analogue(options: Options, *, n: int = 400, d: int = 64, n_queries: int = 16,
                       n_relevant_clusters: int = 5, seed: int = 0) -> Prepared:
    """Planted-cluster pools (one per query, :func:`divopt_rag.data.synthetic_pools`) as an analogue:
    the relevant clusters are the answer parts."""
    data = synthetic_pools(n=n, d=d, n_queries=n_queries, n_relevant_clusters=n_relevant_clusters, seed=seed)
    data.E = unit_rows(data.E, "synthetic E")
    data.Q = unit_rows(data.Q, "synthetic Q")
    spec = {"name": "synthetic", "n": n, "d": d, "n_queries": n_queries, "relevant": n_relevant_clusters, "seed": seed}
    key = f"synthetic-{stable_hash(spec, 10)}"
    data.key = key
    return Prepared(label="synthetic (analogue)", key=key, data=data, analogue=True,
                    queries=first_queries(data.n_queries, options.limit))


def subset_queries(ds: Dataset, n: int | None) -> Dataset:
    """The first ``n`` queries of a Dataset whose queries have their own candidates (RGB), with
    the passages cut to theirs: the same per-query pools as the full file."""
    if n is None or n >= ds.n_queries or ds.candidates is None:
        return ds
    qids = ds.query_ids[:n]
    keep = sorted({int(i) for q in qids for i in ds.candidate_indices(q)})
    sub = ds.restrict(keep, name=ds.name)
    return Dataset(
        name=sub.name, passage_ids=sub.passage_ids, texts=sub.texts, titles=sub.titles, query_ids=qids,
        queries=[ds.query_text(q) for q in qids], qrels={q: sub.qrels.get(q, {}) for q in qids},
        subtopics=sub.subtopics,
        query_subtopics=None if sub.query_subtopics is None else {q: v for q, v in sub.query_subtopics.items() if q in qids},
        answers=None if sub.answers is None else {q: sub.answers[q] for q in qids if q in sub.answers},
        answer_groups=None if sub.answer_groups is None else {q: sub.answer_groups[q] for q in qids if q in sub.answer_groups},
        candidates={q: sub.candidates[q] for q in qids}, meta=sub.meta,
    )
