"""Loaders for open-domain QA datasets with structured answers: ASQA and QAMPARI, plus the
external passage corpora their papers retrieve from.

Formats (each checked against the dataset's public release; the sources are cited below):

* **ASQA** (Stelmakh et al., 2022; ``ASQA.json`` from
  https://storage.googleapis.com/gresearch/ASQA/ASQA.json, format as read by the release's
  builder ``tensorflow_datasets/datasets/asqa/asqa_dataset_builder.py``): one JSON object
  ``{split: {sample_id: sample}}`` with splits ``train`` and ``dev``; a sample has
  ``ambiguous_question``, ``qa_pairs`` (``question``, ``short_answers``, ``context`` --
  "No context provided" when there is none --, ``wikipage`` or null), ``wikipages``
  (``{index: {title, url}}``) and ``annotations`` (``long_answer``, ``knowledge``: a list of
  ``{content, wikipage}``, content may be null).
* **QAMPARI** (Amouyal et al., 2022; ``qampari.zip`` from
  https://aggreg-qa.s3.amazonaws.com/qampari.zip, files ``{train,dev,test}_data.jsonl``, as
  read by the authors' ``models/evaluation/reader_metrics.py`` and
  ``models/retrievers/BM25/simple_index.py``): one JSON object per line with ``qid``,
  ``question_text`` and ``answer_list``, each answer ``{answer_text, aliases, aid, proof}``,
  each proof ``{proof_text, found_in_url, pid}``; other fields are ignored.
* **DPR Wikipedia passages** (``psgs_w100.tsv``, Karpukhin et al., 2020: header
  ``id  text  title``, tab-separated, 100-word passages): the corpus behind pyserini's
  ``wikipedia-dpr-100w`` index, which the CCBQP paper's public code
  (``luqh357/CCBQP-RAG/encode_qampari.py``) searches with BM25 (top 3000 per question, union
  of all questions) to build its QAMPARI pool.

Answers become ``Dataset.answer_groups``: ASQA's parts are its disambiguated question-answer
pairs (each with its short answers as aliases), QAMPARI's parts its answers (``answer_text``
plus ``aliases``). The papers retrieve from Wikipedia; neither dataset ships that corpus, so
divopt's pool is the passages the files do carry (ASQA: the annotators' knowledge snippets
and the qa-pair contexts; QAMPARI: the answers' proof passages), judged relevant to their
question, plus an optional external corpus (``corpus=``: a DPR ``psgs_w100.tsv``, a BEIR
``corpus.jsonl`` or a text file with one passage per line) to pool over as the paper did
(e.g. :func:`divopt_rag.data.ccbqp_pool`). Malformed files raise :class:`DataFormatError`
naming file, line and field.
"""
from __future__ import annotations

import csv
import os
import sys
import urllib.parse
from pathlib import Path
from typing import Any, Iterable

from .dataset import DataFormatError, Dataset
from .jsonio import iter_object, read_text
from .loaders import _open_text, _read_jsonl

__all__ = ["load_asqa", "load_qampari", "load_passages", "PassagePool"]

_NO_CONTEXT = "No context provided"


class PassagePool:
    """Passages collected while loading: de-duplicated by (title, stripped text), ids given
    in order of first appearance (``{prefix}{position}``) unless the file has its own."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.titles: list[str] = []
        self._by_key: dict[tuple[str, str], str] = {}
        self._known: set[str] = set()

    def add(self, text: str, title: str = "", pid: str | None = None) -> str:
        key = (title or "", text.strip())
        if key in self._by_key:
            return self._by_key[key]
        pid = f"{self.prefix}{len(self.ids)}" if pid is None or pid in self._known else str(pid)
        self._by_key[key] = pid
        self._known.add(pid)
        self.ids.append(pid)
        self.texts.append(key[1])
        self.titles.append(key[0])
        return pid

    def extend(self, ids: Iterable[str], texts: Iterable[str], titles: Iterable[str]) -> None:
        for pid, text, title in zip(ids, texts, titles):
            self.add(text, title, pid)

    def dataset(self, name: str, query_ids: list[str], queries: list[str], qrels: dict, answer_groups: dict,
                meta: dict, *, subtopics: dict | None = None, corpus: str | os.PathLike | None = None) -> Dataset:
        """The loaded questions over this pool; ``corpus`` (:func:`load_passages`) is added to
        the pool first, unjudged. Titles are kept when any passage has one."""
        if corpus is not None:
            self.extend(*load_passages(corpus))
        return Dataset(name=name, passage_ids=self.ids, texts=self.texts,
                       titles=self.titles if any(self.titles) else None, query_ids=query_ids, queries=queries,
                       qrels=qrels, query_subtopics=subtopics or None, answer_groups=answer_groups, meta=meta)


def _strings(val: Any, path: Path, line: int, field: str, *, non_empty: bool = False) -> list[str]:
    if not isinstance(val, list) or not all(isinstance(x, str) for x in val):
        raise DataFormatError(path, line, field, f"expected a list of strings, got {_show(val)}")
    if non_empty and not [x for x in val if x.strip()]:
        raise DataFormatError(path, line, field, "expected at least one non-empty string")
    return val


def _show(val: Any) -> str:
    return f"{type(val).__name__} {val!r:.60}"


def _get(obj: Any, key: str, path: Path, line: int, where: str, types=(str,), *, required: bool = True,
         default: Any = None) -> Any:
    """obj[key] checked against ``types``; the error names the dotted field ``where``."""
    if not isinstance(obj, dict):
        raise DataFormatError(path, line, where.rsplit(".", 1)[0] or where, f"expected a JSON object, got {_show(obj)}")
    val = obj.get(key)
    if val is None:
        if required:
            raise DataFormatError(path, line, where, "missing")
        return default
    if not isinstance(val, types) or isinstance(val, bool):
        names = " or ".join(t.__name__ for t in types)
        raise DataFormatError(path, line, where, f"expected {names}, got {_show(val)}")
    return val


def _locate(path: str | os.PathLike, names: list[str], what: str) -> Path:
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir():
        for name in names:
            for cand in (p / name, *sorted(p.glob(f"*/{name}"))):
                if cand.is_file():
                    return cand
    raise FileNotFoundError(f"{what} not found at {p}: looked for {names} (in the folder and one level below)")


def _check_limit(limit: Any) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be None or an integer >= 1 (questions to load), got {limit!r}")
    return limit


# ---- external corpora -------------------------------------------------------------------------
def load_passages(path: str | os.PathLike, *, limit: int | None = None) -> tuple[list[str], list[str], list[str]]:
    """Read an external passage corpus: ``(ids, texts, titles)``.

    * ``.tsv`` (optionally ``.gz``): DPR's ``psgs_w100.tsv`` (header ``id text title``);
    * ``.jsonl``: BEIR ``corpus.jsonl`` lines ``{"_id" | "id", "text", "title"?}``;
    * anything else: plain text, one passage per non-empty line (ids ``line<N>``), e.g. the
      ARC Corpus (``ARC_Corpus.txt``) or OpenBookQA's ``openbook.txt``.
    ``limit`` keeps the first passages only (a quick look at a 21M-passage file).
    """
    limit = _check_limit(limit)
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"passage corpus not found: {p}")
    suffixes = [s for s in p.suffixes if s != ".gz"]
    ids: list[str] = []
    texts: list[str] = []
    titles: list[str] = []
    if suffixes[-1:] == [".tsv"]:
        csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        with _open_text(p) as fh:
            for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
                if lineno == 1 and row[:1] == ["id"]:
                    continue
                if not row:
                    continue
                if len(row) < 2:
                    raise DataFormatError(p, lineno, "text", f"expected tab-separated id, text, title; got {len(row)} field(s)")
                ids.append(row[0])
                texts.append(row[1])
                titles.append(row[2] if len(row) > 2 else "")
                if limit and len(ids) >= limit:
                    break
    elif suffixes[-1:] == [".jsonl"]:
        for lineno, obj in _read_jsonl(p):
            pid = obj.get("_id", obj.get("id"))
            if pid is None or isinstance(pid, (bool, dict, list)):
                raise DataFormatError(p, lineno, "_id", "missing (expected '_id' or 'id')")
            ids.append(str(pid))
            texts.append(_get(obj, "text", p, lineno, "text"))
            titles.append(_get(obj, "title", p, lineno, "title", required=False, default=""))
            if limit and len(ids) >= limit:
                break
    else:
        with _open_text(p) as fh:
            for lineno, line in enumerate(fh, 1):
                text = line.strip()
                if len(text) >= 2 and text[0] == text[-1] == '"':
                    text = text[1:-1]  # openbook.txt quotes every fact
                if text:
                    ids.append(f"line{lineno}")
                    texts.append(text)
                    titles.append("")
                    if limit and len(ids) >= limit:
                        break
    seen: dict[str, int] = {}
    for i, pid in enumerate(ids):
        if pid in seen:
            raise DataFormatError(p, None, "id", f"duplicate passage id {pid!r} (passages {seen[pid] + 1} and {i + 1})")
        seen[pid] = i
    return ids, texts, titles


# ---- ASQA ---------------------------------------------------------------------------------
def load_asqa(
    path: str | os.PathLike,
    split: str = "dev",
    *,
    corpus: str | os.PathLike | None = None,
    limit: int | None = None,
) -> Dataset:
    """Load ASQA (``ASQA.json``, or a folder holding it); see the module docstring.

    Queries are the ambiguous questions (ids: the sample ids); ``answer_groups`` has one
    part per disambiguated qa pair with its short answers as aliases (ASQA's STR-EM counts
    the parts an answer covers); ``meta["long_answers"]`` keeps the annotators' long answers.
    Pool: every knowledge snippet and qa-pair context of the loaded questions (titles: their
    Wikipedia page), judged relevant (grade 1) to their question; a qa pair's context is
    labelled with its pair (``query_subtopics``: ``pair<i>``). ``corpus`` adds an external
    corpus (:func:`load_passages`) to the pool, unjudged.
    """
    limit = _check_limit(limit)
    p = _locate(path, ["ASQA.json", "ASQA.json.gz"], "ASQA file")
    text = read_text(p)
    pool = PassagePool("asqa")
    qids: list[str] = []
    queries: list[str] = []
    groups: dict[str, list[list[str]]] = {}
    long_answers: dict[str, list[str]] = {}
    qrels: dict[str, dict[str, int]] = {}
    labels: dict[str, dict[str, str]] = {}
    splits = []
    for key, _, start, value in iter_object(p, text):
        splits.append(key)
        if key != split:
            continue
        if not isinstance(value, dict):
            raise DataFormatError(p, None, split, f"expected an object sample_id -> sample, got {_show(value)}")
        for qid, line, _, sample in iter_object(p, text, start):
            if limit is not None and len(qids) >= limit:
                break
            question = _get(sample, "ambiguous_question", p, line, "ambiguous_question")
            pairs = _get(sample, "qa_pairs", p, line, "qa_pairs", (list,))
            if not pairs:
                raise DataFormatError(p, line, "qa_pairs", "expected at least one qa pair")
            judged: dict[str, int] = {}
            sub: dict[str, str] = {}
            parts = []
            for i, pair in enumerate(pairs):
                where = f"qa_pairs[{i}]"
                _get(pair, "question", p, line, f"{where}.question")
                answers = _strings(_get(pair, "short_answers", p, line, f"{where}.short_answers", (list,)), p, line,
                                   f"{where}.short_answers", non_empty=True)
                parts.append([a for a in answers if a.strip()])
                context = _get(pair, "context", p, line, f"{where}.context", required=False, default="")
                page = _get(pair, "wikipage", p, line, f"{where}.wikipage", required=False, default="")
                if context.strip() and context.strip() != _NO_CONTEXT:
                    pid = pool.add(context, page)
                    judged[pid] = 1
                    sub.setdefault(pid, f"pair{i}")
            annotations = _get(sample, "annotations", p, line, "annotations", (list,), required=False, default=[])
            longs = []
            for a, ann in enumerate(annotations):
                longs.append(_get(ann, "long_answer", p, line, f"annotations[{a}].long_answer", required=False,
                                  default=""))
                knowledge = _get(ann, "knowledge", p, line, f"annotations[{a}].knowledge", (list,), required=False,
                                 default=[])
                for j, piece in enumerate(knowledge):
                    where = f"annotations[{a}].knowledge[{j}]"
                    content = _get(piece, "content", p, line, f"{where}.content", required=False, default="")
                    page = _get(piece, "wikipage", p, line, f"{where}.wikipage", required=False, default="")
                    if content.strip():
                        judged[pool.add(content, page)] = 1
            wikipages = sample.get("wikipages")
            if wikipages is not None and not isinstance(wikipages, (dict, list)):
                raise DataFormatError(p, line, "wikipages", f"expected an object or a list, got {_show(wikipages)}")
            if qid in groups:
                raise DataFormatError(p, line, "sample_id", f"duplicate sample id {qid!r}")
            qids.append(qid)
            queries.append(question)
            groups[qid] = parts
            long_answers[qid] = longs
            qrels[qid] = judged
            if sub:
                labels[qid] = sub
    if split not in splits:
        raise ValueError(f"split {split!r} not in {p.name}; available: {splits}")
    meta = {"format": "asqa", "path": str(p), "split": split, "long_answers": long_answers,
            "corpus": None if corpus is None else str(corpus)}
    return pool.dataset(f"asqa-{split}", qids, queries, qrels, groups, meta, subtopics=labels, corpus=corpus)


# ---- QAMPARI ------------------------------------------------------------------------------
def _title_from_url(url: str) -> str:
    name = urllib.parse.unquote(url.rstrip("/").rsplit("/", 1)[-1]) if url else ""
    return name.replace("_", " ")


def load_qampari(
    path: str | os.PathLike,
    split: str = "dev",
    *,
    corpus: str | os.PathLike | None = None,
    limit: int | None = None,
) -> Dataset:
    """Load QAMPARI (``<split>_data.jsonl``, or a folder holding it); see the module docstring.

    Queries: ``question_text`` (ids: ``qid``). ``answer_groups``: one part per answer,
    ``[answer_text] + aliases`` (de-duplicated, order kept) -- the CCBQP paper's answer recall
    counts an answer found when any of these is contained in the retrieved text. Pool: the
    proof passages (ids: the proof ``pid``; titles from ``found_in_url``), relevant (grade 1)
    to their question and labelled with the answer they prove (``query_subtopics``: the
    answer's ``aid``, else ``answer<j>``). ``corpus`` adds an external corpus
    (:func:`load_passages`; the paper's is DPR's ``psgs_w100.tsv``), unjudged.
    """
    limit = _check_limit(limit)
    p = _locate(path, [f"{split}_data.jsonl", f"{split}_data.jsonl.gz", f"{split}.jsonl"], f"QAMPARI {split} file")
    pool = PassagePool("qampari")
    qids: list[str] = []
    queries: list[str] = []
    groups: dict[str, list[list[str]]] = {}
    qrels: dict[str, dict[str, int]] = {}
    labels: dict[str, dict[str, str]] = {}
    for lineno, obj in _read_jsonl(p):
        if limit is not None and len(qids) >= limit:
            break
        qid = str(_get(obj, "qid", p, lineno, "qid", (str, int)))
        if qid in groups:
            raise DataFormatError(p, lineno, "qid", f"duplicate question id {qid!r}")
        question = _get(obj, "question_text", p, lineno, "question_text")
        answer_list = _get(obj, "answer_list", p, lineno, "answer_list", (list,))
        if not answer_list:
            raise DataFormatError(p, lineno, "answer_list", "expected at least one answer")
        parts: list[list[str]] = []
        judged: dict[str, int] = {}
        sub: dict[str, str] = {}
        for j, ans in enumerate(answer_list):
            where = f"answer_list[{j}]"
            text = _get(ans, "answer_text", p, lineno, f"{where}.answer_text")
            aliases = _strings(_get(ans, "aliases", p, lineno, f"{where}.aliases", (list,), required=False,
                                    default=[]), p, lineno, f"{where}.aliases")
            part = list(dict.fromkeys(a for a in [text, *aliases] if a.strip()))
            if not part:
                raise DataFormatError(p, lineno, f"{where}.answer_text", "empty answer with no aliases")
            parts.append(part)
            aid = str(_get(ans, "aid", p, lineno, f"{where}.aid", (str, int), required=False, default=f"answer{j}"))
            proofs = _get(ans, "proof", p, lineno, f"{where}.proof", (list,), required=False, default=[])
            for k, proof in enumerate(proofs):
                pwhere = f"{where}.proof[{k}]"
                ptext = _get(proof, "proof_text", p, lineno, f"{pwhere}.proof_text")
                url = _get(proof, "found_in_url", p, lineno, f"{pwhere}.found_in_url", required=False, default="")
                ppid = _get(proof, "pid", p, lineno, f"{pwhere}.pid", (str, int), required=False)
                if ptext.strip():
                    pid = pool.add(ptext, _title_from_url(url), None if ppid is None else str(ppid))
                    judged[pid] = 1
                    sub.setdefault(pid, aid)
        qids.append(qid)
        queries.append(question)
        groups[qid] = parts
        qrels[qid] = judged
        if sub:
            labels[qid] = sub
    meta = {"format": "qampari", "path": str(p), "split": split, "corpus": None if corpus is None else str(corpus)}
    return pool.dataset(f"qampari-{split}", qids, queries, qrels, groups, meta, subtopics=labels, corpus=corpus)
