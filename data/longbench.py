"""LongBench QA tasks and InfiniteBench En.QA, each sample's context chunked into w-word passages
(DF-RAG's protocol, Khan et al., arXiv:2601.17212v1, Sec. 3.5).

Format (THUDM/LongBench README, "Data Format"; the ``data.zip`` of the Hugging Face dataset
``THUDM/LongBench``): one JSON object per line of ``<task>.jsonl`` (``<task>_e.jsonl`` for
LongBench-E) with ``input`` (the question), ``context`` (the long document), ``answers``
(all true answers), ``length`` (words of the first three fields for English), ``dataset``,
``language``, ``all_classes`` (null except for classification tasks) and ``_id``.

DF-RAG (Khan et al., 2026) answers the QA tasks (HotpotQA, 2WikiMQA, MuSiQue,
MultiFieldQA-en, ...) by retrieving k chunks from the sample's own context cut into w-word
chunks, w in {100, 200, 300} (:mod:`divopt_rag.data.chunking`). So every sample has its own
pool: the dataset's passages are all chunks (ids ``<_id>:<j>``) and ``candidates[_id]`` lists
the sample's own chunks, in document order. LongBench has no relevance judgments (qrels are
empty); its answers are alternatives, so ``answer_groups[_id]`` is one part with every
answer as an alias.

InfiniteBench (Zhang et al., 2024; the ``xinrongzhang2022/InfiniteBench`` dataset files, read by
its ``src/eval_utils.py``): En.QA is ``longbook_qa_eng.jsonl``, one JSON object per line with
``id``, ``context`` (a whole book), ``input`` (the question), ``answer`` (a list of true
answers) and ``options`` (empty). :func:`load_infinitebench_qa` reads it like a LongBench task:
chunks ``<id>:<j>`` of the sample's own context, every answer an alias of one part.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .chunking import _check_sizes, chunk_words
from .dataset import DataFormatError, Dataset
from .loaders import _read_jsonl
from .qa import _check_limit, _get, _locate, _strings

__all__ = ["LONGBENCH_QA_TASKS", "INFINITEBENCH_QA_TASKS", "load_longbench", "load_infinitebench_qa"]

#: LongBench's English single- and multi-document QA tasks (the ones DF-RAG evaluates on are
#: among these: hotpotqa, 2wikimqa, musique, multifieldqa_en, ...).
LONGBENCH_QA_TASKS = ("narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique")
#: InfiniteBench's English QA task (DF-RAG's "En.QA") and its file name.
INFINITEBENCH_QA_TASKS = {"en_qa": "longbook_qa_eng.jsonl"}


def load_longbench(
    path: str | os.PathLike,
    task: str | None = None,
    *,
    words: int = 100,
    overlap: int = 0,
    limit: int | None = None,
) -> Dataset:
    """Load one LongBench task file and chunk each context into ``words``-word passages.

    path : a ``<task>.jsonl`` file, or the folder of LongBench's ``data.zip`` (then ``task``
        names the file, e.g. ``"hotpotqa"`` or ``"hotpotqa_e"``).
    words, overlap : chunk size and overlap in words (DF-RAG: 100/200/300 and 0).
    limit : load the first ``limit`` samples only.
    """
    limit = _check_limit(limit)
    _check_sizes(words, overlap)
    if task is None and Path(path).is_dir():
        raise ValueError(f"task is required when path is a folder ({path}); e.g. task='hotpotqa'")
    p = _locate(path, [f"{task}.jsonl", f"data/{task}.jsonl"], f"LongBench task {task!r}") if task else Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"LongBench file not found: {p}")

    sample = _reader(p, id_field="_id", answers_field="answers", list_field="all_classes",
                     extra=(("length", (int,)), ("dataset", (str,)), ("language", (str,))))
    name = task or p.stem
    return _chunked(p, sample, words=words, overlap=overlap, limit=limit, name=f"longbench-{name}-w{words}",
                    meta={"format": "longbench", "path": str(p), "task": name, "words": words, "overlap": overlap})


def load_infinitebench_qa(
    path: str | os.PathLike,
    *,
    words: int = 100,
    overlap: int = 0,
    limit: int | None = None,
) -> Dataset:
    """Load InfiniteBench's En.QA (``longbook_qa_eng.jsonl``) and chunk each book into
    ``words``-word passages, as :func:`load_longbench` does for a LongBench task.

    path : the ``longbook_qa_eng.jsonl`` file or a folder holding it (or one level below).
    words, overlap : chunk size and overlap in words (DF-RAG: 100/200/300 and 0).
    limit : load the first ``limit`` samples only.
    """
    limit = _check_limit(limit)
    _check_sizes(words, overlap)
    fname = INFINITEBENCH_QA_TASKS["en_qa"]
    p = _locate(path, [fname, f"data/{fname}"], "InfiniteBench En.QA")

    sample = _reader(p, id_field="id", answers_field="answer", list_field="options")
    return _chunked(p, sample, words=words, overlap=overlap, limit=limit, name=f"infinitebench-en_qa-w{words}",
                    meta={"format": "infinitebench", "path": str(p), "task": "en_qa", "words": words,
                          "overlap": overlap})


def _reader(p: Path, *, id_field: str, answers_field: str, list_field: str, extra: tuple = ()):
    """``sample(obj, lineno) -> (id, question, context, answers, info)`` for one file's layout: the
    sample id, ``input`` and ``context`` (required), the non-empty answer list, an optional list of
    strings (``list_field``, kept in info) and optional typed ``extra`` fields (kept in info)."""
    def sample(obj: Any, lineno: int):
        qid = str(_get(obj, id_field, p, lineno, id_field, (str, int)))
        answers = _strings(_get(obj, answers_field, p, lineno, answers_field, (list,)), p, lineno, answers_field,
                           non_empty=True)
        listed = obj.get(list_field)
        if listed is not None:
            _strings(listed, p, lineno, list_field)
        info = {f: _get(obj, f, p, lineno, f, types, required=False) for f, types in extra}
        info[list_field] = listed
        return qid, _get(obj, "input", p, lineno, "input"), _get(obj, "context", p, lineno, "context"), answers, info

    sample.id_field = id_field
    return sample


def _chunked(p: Path, sample, *, words: int, overlap: int, limit: int | None, name: str, meta: dict) -> Dataset:
    """One Dataset from a JSON-lines file whose samples carry their own long context:
    ``sample(obj, lineno) -> (id, question, context, answers, info)``."""
    pids: list[str] = []
    texts: list[str] = []
    qids: list[str] = []
    queries: list[str] = []
    groups: dict[str, list[list[str]]] = {}
    candidates: dict[str, list[str]] = {}
    info: dict[str, dict] = {}
    id_field = sample.id_field
    for lineno, obj in _read_jsonl(p):
        if limit is not None and len(qids) >= limit:
            break
        qid, question, context, answers, extra = sample(obj, lineno)
        if qid in candidates:
            raise DataFormatError(p, lineno, id_field, f"duplicate sample id {qid!r}")
        own = []
        for j, chunk in enumerate(chunk_words(context, words, overlap)):
            pid = f"{qid}:{j}"
            pids.append(pid)
            texts.append(chunk)
            own.append(pid)
        qids.append(qid)
        queries.append(question)
        groups[qid] = [[a for a in answers if a.strip()]]
        candidates[qid] = own
        info[qid] = {**extra, "context_words": len(context.split())}
    return Dataset(
        name=name,
        passage_ids=pids,
        texts=texts,
        query_ids=qids,
        queries=queries,
        answer_groups=groups,
        candidates=candidates,
        meta={**meta, "samples": info},
    )
