"""The one dataset shape every loader returns.

A :class:`Dataset` is a passage pool (ids, texts, optional titles), a list of queries (ids,
texts), graded relevance judgments ``qrels[query_id][passage_id] = grade`` (grade 0 means
judged non-relevant, as in TREC) and optional subtopic labels:

* ``subtopics[passage_id] = label``: one global label per passage (synthetic corpora);
* ``query_subtopics[query_id][passage_id] = label``: labels that depend on the query
  (WordNet senses of the query word, RGB's answer groups). A passage shared by two queries
  may belong to different subtopics of each.

``subtopics_for(query_id)`` gives the labels a metric such as alpha-nDCG or subtopic recall
needs, whichever of the two the dataset carries. Positions (``int`` indices into
``passage_ids``) are what pools, embeddings and solvers use; ids are what files use.

Answers (QA datasets):

* ``answers[query_id]``: a flat list of gold answer strings (any one is correct), the shape
  every loader has always returned;
* ``answer_groups[query_id]``: structured answers, a list of *parts*, each a list of
  aliases. A question is fully answered when every part is matched by one of its aliases
  (RGB's information-integration questions, QAMPARI's answer lists, ASQA's disambiguated
  question-answer pairs). When only ``answer_groups`` is given, ``answers`` is its
  flattening; :meth:`Dataset.answer_groups_for` falls back to one part holding every flat
  answer as an alias.

``candidates[query_id]``: the passage ids a query retrieves from when it has a pool of its
own (LongBench: the chunks of its own context; RGB: its own positives and negatives); absent
means the whole pool.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["Dataset", "DataFormatError", "Judged"]


class DataFormatError(ValueError):
    """A malformed input file: the message names the file, the line (or row) and the field."""

    def __init__(self, file: Any, line: int | None, field: str | None, problem: str, *, unit: str = "line"):
        self.file, self.line, self.field, self.problem = str(file), line, field, problem
        # text files: "file:LINE:"; tables (parquet): "file: row ROW:"
        where = self.file if line is None else (f"{self.file}:{line}" if unit == "line" else f"{self.file}: {unit} {line}")
        what = "" if field is None else f" field {field!r}:"
        super().__init__(f"{where}:{what} {problem}")


class Judged:
    """What both dataset types (:class:`Dataset`, and the :class:`~divopt_rag.data.EmbeddedDataset`
    that :func:`~divopt_rag.data.load` returns) answer about their judgments, from ``qrels``
    (query id -> {passage id: grade}) and ``query_ids``."""

    qrels: Mapping[str, Mapping[str, int]] | None
    query_ids: list[str]

    def qrels_frame(self):
        """qrels as a tidy pandas frame (query_id, doc_id, relevance), the ir-measures/ranx shape.

        The id columns are object dtype under pandas 2 and 3 alike (pandas 3 would infer its
        string dtype, which ``ranx.Qrels.from_df`` refuses); ``relevance`` is int64.
        """
        import pandas as pd

        rows = [(q, p, int(g)) for q, judged in (self.qrels or {}).items() for p, g in judged.items()]
        frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])
        return frame.astype({"query_id": object, "doc_id": object, "relevance": "int64"})

    def relevant(self, query_id: str, min_grade: int = 1) -> dict[str, int]:
        """Judged passages of ``query_id`` with grade >= ``min_grade`` (KeyError naming an unknown id)."""
        if str(query_id) not in self.query_ids:
            raise KeyError(f"unknown query id {query_id!r} in dataset {getattr(self, 'name', '')!r}")
        return {p: g for p, g in (self.qrels or {}).get(str(query_id), {}).items() if g >= min_grade}


@dataclass
class Dataset(Judged):
    """Passages, queries, graded qrels and optional subtopic labels (see module docstring)."""

    name: str
    passage_ids: list[str]
    texts: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    titles: list[str] | None = None
    subtopics: dict[str, str] | None = None
    query_subtopics: dict[str, dict[str, str]] | None = None
    answers: dict[str, list[str]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    answer_groups: dict[str, list[list[str]]] | None = None
    candidates: dict[str, list[str]] | None = None

    def __post_init__(self) -> None:
        self.passage_ids = [str(p) for p in self.passage_ids]
        self.query_ids = [str(q) for q in self.query_ids]
        self.texts = list(self.texts)
        self.queries = list(self.queries)
        if len(self.texts) != len(self.passage_ids):
            raise ValueError(
                f"texts must have one entry per passage id: expected {len(self.passage_ids)}, got {len(self.texts)}"
            )
        if self.titles is not None and len(self.titles) != len(self.passage_ids):
            raise ValueError(
                f"titles must have one entry per passage id: expected {len(self.passage_ids)}, got {len(self.titles)}"
            )
        if len(self.queries) != len(self.query_ids):
            raise ValueError(
                f"queries must have one entry per query id: expected {len(self.query_ids)}, got {len(self.queries)}"
            )
        self._pindex = _unique_index(self.passage_ids, "passage_ids")
        self._qindex = _unique_index(self.query_ids, "query_ids")
        for qid, judged in self.qrels.items():
            self._check_refs(qid, judged, "qrels")
        for qid, labels in (self.query_subtopics or {}).items():
            self._check_refs(qid, labels, "query_subtopics")
        for pid in self.subtopics or {}:
            if pid not in self._pindex:
                raise ValueError(f"subtopics refers to unknown passage id {pid!r}")
        if self.answer_groups is not None:
            self.answer_groups = {str(q): _check_groups(q, g) for q, g in self.answer_groups.items()}
            for qid in self.answer_groups:
                if qid not in self._qindex:
                    raise ValueError(f"answer_groups refers to unknown query id {qid!r}")
            if self.answers is None:  # backward compatibility: the flat list every reader knows
                self.answers = {q: [a for part in g for a in part] for q, g in self.answer_groups.items()}
        if self.candidates is not None:
            self.candidates = {str(q): [str(p) for p in pids] for q, pids in self.candidates.items()}
            for qid, pids in self.candidates.items():
                self._check_refs(qid, dict.fromkeys(pids), "candidates")

    def _check_refs(self, qid: str, mapping: Mapping[str, Any], what: str) -> None:
        if qid not in self._qindex:
            raise ValueError(f"{what} refers to unknown query id {qid!r}")
        for pid in mapping:
            if pid not in self._pindex:
                raise ValueError(f"{what}[{qid!r}] refers to unknown passage id {pid!r}")

    # ---- sizes and look-ups -------------------------------------------------------------
    @property
    def n_passages(self) -> int:
        return len(self.passage_ids)

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def __len__(self) -> int:
        return self.n_passages

    def __repr__(self) -> str:
        labels = "query_subtopics" if self.query_subtopics else ("subtopics" if self.subtopics else "no subtopics")
        n_judged = sum(len(v) for v in self.qrels.values())
        return (
            f"Dataset({self.name!r}: {self.n_passages} passages, {self.n_queries} queries, "
            f"{n_judged} judgments, {labels})"
        )

    def passage_index(self, passage_id: str) -> int:
        """Position of ``passage_id`` in the pool (KeyError naming the id if unknown)."""
        try:
            return self._pindex[str(passage_id)]
        except KeyError:
            raise KeyError(f"unknown passage id {passage_id!r} in dataset {self.name!r}") from None

    def passage_indices(self, passage_ids: Iterable[str]) -> np.ndarray:
        return np.array([self.passage_index(p) for p in passage_ids], dtype=np.int64)

    def query_index(self, query_id: str) -> int:
        try:
            return self._qindex[str(query_id)]
        except KeyError:
            raise KeyError(f"unknown query id {query_id!r} in dataset {self.name!r}") from None

    def query_text(self, query_id: str) -> str:
        return self.queries[self.query_index(query_id)]

    def passage_texts(self, indices: Iterable[int] | None = None, *, with_titles: bool = False) -> list[str]:
        """Texts at ``indices`` (all by default); ``with_titles`` prefixes "title: " when known."""
        idx = range(self.n_passages) if indices is None else [int(i) for i in indices]
        if with_titles and self.titles is not None:
            return [f"{self.titles[i]}: {self.texts[i]}" if self.titles[i] else self.texts[i] for i in idx]
        return [self.texts[i] for i in idx]

    def subtopics_for(self, query_id: str) -> dict[str, str]:
        """Subtopic label of each labelled passage for ``query_id`` (query-specific if present)."""
        self.query_index(query_id)
        if self.query_subtopics is not None and str(query_id) in self.query_subtopics:
            return dict(self.query_subtopics[str(query_id)])
        return dict(self.subtopics or {})

    def subtopic_array(self, query_id: str, indices: Sequence[int]) -> list[str | None]:
        """Subtopic label (or None when unlabelled) of the passages at ``indices``."""
        labels = self.subtopics_for(query_id)
        return [labels.get(self.passage_ids[int(i)]) for i in indices]

    def answer_groups_for(self, query_id: str) -> list[list[str]]:
        """The answer parts of ``query_id``, each a list of aliases (see module docstring);
        without structured answers, one part whose aliases are the flat answers; [] if none."""
        self.query_index(query_id)
        qid = str(query_id)
        if self.answer_groups is not None and qid in self.answer_groups:
            return [list(part) for part in self.answer_groups[qid]]
        flat = (self.answers or {}).get(qid) or []
        return [list(flat)] if flat else []

    def candidate_indices(self, query_id: str) -> np.ndarray:
        """Positions of the passages ``query_id`` retrieves from: its own ``candidates`` when
        the dataset has them, else the whole pool."""
        self.query_index(query_id)
        if self.candidates is not None and str(query_id) in self.candidates:
            return self.passage_indices(self.candidates[str(query_id)])
        return np.arange(self.n_passages, dtype=np.int64)

    def restrict(self, indices: Iterable[int], name: str | None = None) -> "Dataset":
        """The dataset on the passages at ``indices`` (e.g. a candidate pool), in that order;
        qrels and subtopic labels keep only those passages, queries are all kept."""
        idx = [int(i) for i in indices]
        keep = [self.passage_ids[i] for i in idx]
        kept = set(keep)
        return Dataset(
            name=name or f"{self.name}[{len(idx)}]",
            passage_ids=keep,
            texts=[self.texts[i] for i in idx],
            titles=None if self.titles is None else [self.titles[i] for i in idx],
            query_ids=list(self.query_ids),
            queries=list(self.queries),
            qrels={q: {p: g for p, g in j.items() if p in kept} for q, j in self.qrels.items()},
            subtopics=None if self.subtopics is None else {p: l for p, l in self.subtopics.items() if p in kept},
            query_subtopics=None
            if self.query_subtopics is None
            else {q: {p: l for p, l in m.items() if p in kept} for q, m in self.query_subtopics.items()},
            answers=None if self.answers is None else dict(self.answers),
            answer_groups=None if self.answer_groups is None else dict(self.answer_groups),
            candidates=None
            if self.candidates is None
            else {q: [p for p in c if p in kept] for q, c in self.candidates.items()},
            meta={**self.meta, "restricted_from": self.name},
        )


def _check_groups(qid: Any, groups: Any) -> list[list[str]]:
    if not isinstance(groups, (list, tuple)):
        raise ValueError(f"answer_groups[{qid!r}] must be a list of answer parts, got {type(groups).__name__}")
    out = []
    for i, part in enumerate(groups):
        if isinstance(part, str) or not isinstance(part, (list, tuple)) or not part \
                or not all(isinstance(a, str) for a in part):
            raise ValueError(f"answer_groups[{qid!r}][{i}] must be a non-empty list of alias strings, got {part!r}")
        out.append(list(part))
    return out


def _unique_index(ids: list[str], name: str) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, pid in enumerate(ids):
        if pid in index:
            raise ValueError(f"{name} must be unique: {pid!r} appears at positions {index[pid]} and {i}")
        index[pid] = i
    return index
