"""Science QA datasets of the VRSD paper (Gao & Zhang, 2024): ARC-DA, OpenBookQA and SciQ.

Formats (AI2's releases; field lists checked against public readers of the same files):

* **ARC-DA** (Bhakthavatsalam et al., 2021; ``ARC-DA-v1.1.zip`` from
  https://aristo-data-public.s3-us-west-2.amazonaws.com/arc-da/ARC-DA-v1.1.zip, files
  ``{train,dev,test}.jsonl``): one JSON object per line, e.g. ``{"question_id":
  "ARCEZ_MCAS_1998_4_7", "tag": "EASY-TEST", "question": "...", "answers": ["plates shifting",
  ...]}``; ``answers`` are alternative valid answers.
* **OpenBookQA** (Mihaylov et al., 2018; ``OpenBookQA-V1-Sep2018.zip`` from
  https://s3-us-west-2.amazonaws.com/ai2-website/data/OpenBookQA-V1-Sep2018.zip):
  ``Data/Main/{train,dev,test}.jsonl`` lines ``{"id", "question": {"stem", "choices": [{"text",
  "label"}]}, "answerKey"}``; ``Data/Additional/*_complete.jsonl`` add ``fact1`` (the core
  fact the question was written from), ``humanScore``, ``clarity``, ``turkIdAnonymized``;
  ``Data/Main/openbook.txt`` is the open book, 1,326 quoted facts, one per line. The Hugging
  Face conversion (``allenai/openbookqa``: ``question_stem``, ``choices: {text: [...], label:
  [...]}``) is read too.
* **SciQ** (Welbl et al., 2017; ``SciQ.zip`` from
  https://s3-us-west-2.amazonaws.com/ai2-website/data/SciQ.zip, files
  ``{train,valid,test}.json``): one JSON array of ``{"question", "distractor1",
  "distractor2", "distractor3", "correct_answer", "support"}`` (support may be empty).

Passage pools. None of the three is a retrieval collection, and the VRSD paper's candidate
pool construction could not be verified from a public copy (its text beyond the abstract
is not available here), so divopt documents its own choice:

* ARC-DA ships no passages: the pool is an external corpus given as ``corpus=`` (ARC's own
  14M-sentence ARC Corpus, ``ARC_Corpus.txt``, is the natural one), unjudged; without it the
  pool is empty and only answer-level metrics apply.
* OpenBookQA: the open book's facts (``openbook.txt``, found next to the data or given as
  ``book=``) plus each question's ``fact1`` when the Additional files are read; a question's
  ``fact1`` is its relevant passage (grade 1).
* SciQ: the questions' ``support`` paragraphs (de-duplicated; empty ones skipped), each
  relevant (grade 1) to its question.

Every question has one answer part: ARC-DA's alternatives as aliases, OpenBookQA's correct
choice text, SciQ's ``correct_answer``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .dataset import DataFormatError, Dataset
from .jsonio import iter_array, read_text
from .loaders import _read_jsonl
from .qa import PassagePool, _check_limit, _get, _locate, _show, _strings, load_passages

__all__ = ["load_arc_da", "load_openbookqa", "load_sciq"]


# ---- ARC-DA -------------------------------------------------------------------------------
def load_arc_da(
    path: str | os.PathLike,
    split: str = "test",
    *,
    corpus: str | os.PathLike | None = None,
    limit: int | None = None,
) -> Dataset:
    """Load ARC-DA (``<split>.jsonl`` or the release folder); see the module docstring.

    Query ids: ``question_id``; ``answer_groups``: one part with every valid answer as an
    alias; ``meta["tags"]``: the question's ``tag`` (e.g. ``EASY-TEST``). ``corpus``: the
    passage pool (:func:`~divopt_rag.data.qa.load_passages`), else an empty pool.
    """
    limit = _check_limit(limit)
    p = _locate(path, [f"{split}.jsonl", f"{split}.jsonl.gz"], f"ARC-DA {split} file")
    qids, queries, groups, tags = [], [], {}, {}
    for lineno, obj in _read_jsonl(p):
        if limit is not None and len(qids) >= limit:
            break
        qid = str(_get(obj, "question_id", p, lineno, "question_id", (str, int)))
        if qid in groups:
            raise DataFormatError(p, lineno, "question_id", f"duplicate question id {qid!r}")
        question = _get(obj, "question", p, lineno, "question")
        answers = _strings(_get(obj, "answers", p, lineno, "answers", (list,)), p, lineno, "answers", non_empty=True)
        qids.append(qid)
        queries.append(question)
        groups[qid] = [[a.strip() for a in answers if a.strip()]]
        tags[qid] = _get(obj, "tag", p, lineno, "tag", required=False, default="")
    meta = {"format": "arc-da", "path": str(p), "split": split, "tags": tags,
            "corpus": None if corpus is None else str(corpus)}
    return PassagePool("arcda").dataset(f"arc-da-{split}", qids, queries, {}, groups, meta, corpus=corpus)


# ---- OpenBookQA ---------------------------------------------------------------------------
def _obqa_choices(obj: dict, p: Path, lineno: int) -> tuple[str, list[tuple[str, str]]]:
    """(stem, [(label, text), ...]) from either the release's or Hugging Face's layout."""
    if "question" in obj:
        q = _get(obj, "question", p, lineno, "question", (dict,))
        stem = _get(q, "stem", p, lineno, "question.stem")
        raw = _get(q, "choices", p, lineno, "question.choices", (list,))
        choices = []
        for i, c in enumerate(raw):
            choices.append((_get(c, "label", p, lineno, f"question.choices[{i}].label"),
                            _get(c, "text", p, lineno, f"question.choices[{i}].text")))
        return stem, choices
    stem = _get(obj, "question_stem", p, lineno, "question_stem")
    raw = _get(obj, "choices", p, lineno, "choices", (dict,))
    labels = _strings(_get(raw, "label", p, lineno, "choices.label", (list,)), p, lineno, "choices.label")
    texts = _strings(_get(raw, "text", p, lineno, "choices.text", (list,)), p, lineno, "choices.text")
    if len(labels) != len(texts):
        raise DataFormatError(p, lineno, "choices", f"{len(labels)} labels but {len(texts)} texts")
    return stem, list(zip(labels, texts))


def load_openbookqa(
    path: str | os.PathLike,
    split: str = "test",
    *,
    book: str | os.PathLike | None = None,
    additional: bool | None = None,
    limit: int | None = None,
) -> Dataset:
    """Load OpenBookQA; see the module docstring.

    path : a ``.jsonl`` file, or the release folder (``OpenBookQA-V1-Sep2018`` or its
        ``Data``), where ``split`` (``train``/``dev``/``test``; ``validation`` means ``dev``)
        picks ``Additional/<split>_complete.jsonl`` when ``additional`` (default: when it
        exists) else ``Main/<split>.jsonl``.
    book : ``openbook.txt`` (default: found under the folder); its facts form the pool.
    Queries: the question stems (ids: ``id``); ``answer_groups``: the text of the choice
    labelled ``answerKey``; ``meta["choices"]``: every choice text.
    """
    limit = _check_limit(limit)
    split = "dev" if split == "validation" else split
    root = Path(path)
    if root.is_file():
        p = root
    else:
        names = [f"Main/{split}.jsonl", f"Data/Main/{split}.jsonl", f"{split}.jsonl"]
        extra = [f"Additional/{split}_complete.jsonl", f"Data/Additional/{split}_complete.jsonl"]
        if additional is None:
            try:
                p = _locate(root, extra, "")
            except FileNotFoundError:
                p = _locate(root, names, f"OpenBookQA {split} file")
        else:
            p = _locate(root, extra if additional else names, f"OpenBookQA {split} file")
        if book is None:
            found = sorted(root.rglob("openbook.txt"))
            book = found[0] if found else None
    pool = PassagePool("obqa")
    if book is not None:
        pool.extend(*load_passages(book))
    qids, queries, groups, qrels, choices = [], [], {}, {}, {}
    for lineno, obj in _read_jsonl(p):
        if limit is not None and len(qids) >= limit:
            break
        qid = str(_get(obj, "id", p, lineno, "id", (str, int)))
        if qid in groups:
            raise DataFormatError(p, lineno, "id", f"duplicate question id {qid!r}")
        stem, options = _obqa_choices(obj, p, lineno)
        key = _get(obj, "answerKey", p, lineno, "answerKey")
        correct = [t for label, t in options if label == key]
        if len(correct) != 1:
            raise DataFormatError(p, lineno, "answerKey",
                                  f"{key!r} must name exactly one choice label, labels are {[lb for lb, _ in options]}")
        fact = _get(obj, "fact1", p, lineno, "fact1", required=False)
        if fact is not None and fact.strip():
            qrels[qid] = {pool.add(fact.strip().strip('"')): 1}
        qids.append(qid)
        queries.append(stem)
        groups[qid] = [correct]
        choices[qid] = [t for _, t in options]
    meta = {"format": "openbookqa", "path": str(p), "split": split, "book": None if book is None else str(book),
            "choices": choices}
    return pool.dataset(f"openbookqa-{split}", qids, queries, qrels, groups, meta)


# ---- SciQ ---------------------------------------------------------------------------------
def load_sciq(path: str | os.PathLike, split: str = "test", *, limit: int | None = None) -> Dataset:
    """Load SciQ (``<split>.json``, or the release folder; ``validation`` means ``valid``).

    SciQ has no ids: query ids are ``<split>-<position>``. ``answer_groups``: the
    ``correct_answer``; ``meta["distractors"]``: the three distractors. Pool: the support
    paragraphs, each relevant (grade 1) to the questions it supports.
    """
    limit = _check_limit(limit)
    split = "valid" if split in ("validation", "dev") else split
    p = _locate(path, [f"{split}.json", f"{split}.json.gz"], f"SciQ {split} file")
    text = read_text(p)
    pool = PassagePool("sciq")
    qids, queries, groups, qrels, distractors = [], [], {}, {}, {}
    for i, (line, rec) in enumerate(iter_array(p, text)):
        if limit is not None and len(qids) >= limit:
            break
        if not isinstance(rec, dict):
            raise DataFormatError(p, line, None, f"expected a JSON object, got {_show(rec)}")
        question = _get(rec, "question", p, line, "question")
        answer = _get(rec, "correct_answer", p, line, "correct_answer")
        if not answer.strip():
            raise DataFormatError(p, line, "correct_answer", "empty answer")
        wrong: list[Any] = [_get(rec, f"distractor{j}", p, line, f"distractor{j}", required=False, default="")
                            for j in (1, 2, 3)]
        support = _get(rec, "support", p, line, "support", required=False, default="")
        qid = f"{split}-{i}"
        if support.strip():
            qrels[qid] = {pool.add(support): 1}
        qids.append(qid)
        queries.append(question)
        groups[qid] = [[answer.strip()]]
        distractors[qid] = wrong
    meta = {"format": "sciq", "path": str(p), "split": split, "distractors": distractors}
    return pool.dataset(f"sciq-{split}", qids, queries, qrels, groups, meta)
