"""LongBench QA tasks, each sample's context chunked into w-word passages (DF-RAG's protocol).

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
"""
from __future__ import annotations

import os
from pathlib import Path

from .chunking import _check_sizes, chunk_words
from .dataset import DataFormatError, Dataset
from .loaders import _read_jsonl
from .qa import _check_limit, _get, _locate, _strings

__all__ = ["LONGBENCH_QA_TASKS", "load_longbench"]

#: LongBench's English single- and multi-document QA tasks (the ones DF-RAG evaluates on are
#: among these: hotpotqa, 2wikimqa, musique, multifieldqa_en, ...).
LONGBENCH_QA_TASKS = ("narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique")


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
    pids: list[str] = []
    texts: list[str] = []
    qids: list[str] = []
    queries: list[str] = []
    groups: dict[str, list[list[str]]] = {}
    candidates: dict[str, list[str]] = {}
    info: dict[str, dict] = {}
    for lineno, obj in _read_jsonl(p):
        if limit is not None and len(qids) >= limit:
            break
        qid = str(_get(obj, "_id", p, lineno, "_id", (str, int)))
        if qid in candidates:
            raise DataFormatError(p, lineno, "_id", f"duplicate sample id {qid!r}")
        question = _get(obj, "input", p, lineno, "input")
        context = _get(obj, "context", p, lineno, "context")
        answers = _strings(_get(obj, "answers", p, lineno, "answers", (list,)), p, lineno, "answers", non_empty=True)
        length = _get(obj, "length", p, lineno, "length", (int,), required=False)
        dataset = _get(obj, "dataset", p, lineno, "dataset", required=False)
        language = _get(obj, "language", p, lineno, "language", required=False)
        classes = obj.get("all_classes")
        if classes is not None:
            _strings(classes, p, lineno, "all_classes")
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
        info[qid] = {"length": length, "dataset": dataset, "language": language, "all_classes": classes,
                     "context_words": len(context.split())}
    name = task or p.stem
    return Dataset(
        name=f"longbench-{name}-w{words}",
        passage_ids=pids,
        texts=texts,
        query_ids=qids,
        queries=queries,
        answer_groups=groups,
        candidates=candidates,
        meta={"format": "longbench", "path": str(p), "task": name, "words": words, "overlap": overlap,
              "samples": info},
    )
