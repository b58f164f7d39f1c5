"""Loaders for the corpus layouts the field uses, all returning one :class:`Dataset`.

* BEIR: ``corpus.jsonl`` ({"_id", "title", "text"}), ``queries.jsonl`` ({"_id", "text"}),
  ``qrels/<split>.tsv`` (header ``query-id  corpus-id  score``; graded integer scores).
* rag-mini-wikipedia (Hugging Face ``rag-datasets/rag-mini-wikipedia``): passages parquet
  (columns ``passage``, ``id``) and question-answer parquet (``question``, ``answer``, ``id``),
  in either of the repository's layouts (``data/passages.parquet/part.*.parquet`` and
  ``data/test.parquet/...``, or ``text-corpus/passages/*.parquet`` and
  ``question-answer/test/*.parquet``), or CSV exports of the two tables given as
  ``passages=`` / ``questions=`` (the MIO report's ``rag-mini-wikipedia_document.csv`` and
  ``rag-mini-wikipedia_q_and_a.csv``). The dataset has no relevance judgments; see
  ``answer_qrels``.
* RGB (Chen et al., 2024, ``chen700564/RGB``): JSON lines with ``id``, ``query``, ``answer``,
  ``positive`` and ``negative`` passage lists. The pool is the merged, de-duplicated passages
  of all queries; a query's positives are relevant (grade 1), its negatives judged
  non-relevant (grade 0). In the information-integration file (``en_int.json``) ``positive``
  is a list of lists, one per answer part: those groups become the query's subtopics. The
  counterfactual file (``en_fact.json``) adds ``positive_wrong`` (the positives rewritten
  around the wrong ``fakeanswer``) and ``en_refine.json`` is the authors' corrected ``en``
  (same fields). ``answer`` follows RGB's ``evalue.py`` (``checkanswer``): a string, or a
  list whose items are each a required part -- a string, or a list of aliases.
* Your own embeddings (:func:`divopt_rag.data.npz_files.load_npz`): an ``.npz`` with ``E`` (N, d) and ``Q`` (m, d),
  optional ``doc_ids`` / ``query_ids``, and optional TREC qrels (``qid iter docid grade`` lines,
  :func:`read_trec_qrels`, parsed by ``ir_measures``).
* Any `ir_datasets` collection by its id (:func:`load_ir_datasets`, e.g. ``"beir/scifact/test"``):
  ir_datasets downloads it once (this needs a network) and reads its cache afterwards.

Apart from :func:`load_ir_datasets`'s first download, only local files are read. Malformed input raises :class:`DataFormatError` naming the file,
the line (or parquet row) and the field.
"""
from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path
from typing import Any, Iterator


from .dataset import DataFormatError, Dataset

__all__ = ["load_beir", "load_ir_datasets", "load_mini_wikipedia", "load_rgb", "read_trec_qrels"]


class _TextFile:
    """A UTF-8 text file (gzip-compressed if it ends in ``.gz``) read line by line, whose
    undecodable bytes or broken compression raise :class:`DataFormatError` naming the file
    (and the last line read), instead of a bare UnicodeDecodeError that names nothing."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.fh = gzip.open(path, "rt", encoding="utf-8") if self.path.suffix == ".gz" else open(path, encoding="utf-8")
        self.lines = 0

    def __enter__(self) -> "_TextFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.fh.close()

    def _error(self, exc: Exception) -> DataFormatError:
        where = f" after line {self.lines}" if self.lines else ""
        if isinstance(exc, UnicodeDecodeError):
            return DataFormatError(self.path, None, None, f"not UTF-8 text ({exc.reason}){where}")
        return DataFormatError(self.path, None, None, f"not a readable gzip file ({exc}){where}")

    def __iter__(self) -> Iterator[str]:
        while True:
            try:
                line = next(self.fh)
            except StopIteration:
                return
            except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
                raise self._error(exc) from None
            self.lines += 1
            yield line

    def read(self) -> str:
        try:
            return self.fh.read()
        except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
            raise self._error(exc) from None


def _open_text(path: Path) -> _TextFile:
    return _TextFile(path)


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(path, lineno, None, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(obj, dict):
                raise DataFormatError(path, lineno, None, f"expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def _field(obj: dict, key: str, path: Path, lineno: int, *, types=(str,), required: bool = True, default: Any = None):
    if key not in obj or obj[key] is None:
        if required:
            raise DataFormatError(path, lineno, key, "missing")
        return default
    val = obj[key]
    if isinstance(val, (int, float)) and not isinstance(val, bool) and str in types and key.endswith("id"):
        return str(val)  # numeric ids are common; ids are strings in a Dataset
    if not isinstance(val, types):
        names = " or ".join(t.__name__ for t in types)
        raise DataFormatError(path, lineno, key, f"expected {names}, got {type(val).__name__}")
    return val


def _find(root: Path, names: list[str], what: str) -> Path:
    for name in names:
        p = root / name
        if p.exists():
            return p
    raise FileNotFoundError(f"{what} not found in {root}: looked for {names}")


# ---- BEIR -----------------------------------------------------------------------------------
def load_beir(path: str | os.PathLike, split: str = "test", *, strict: bool = True, keep_unjudged_queries: bool = False) -> Dataset:
    """Load a BEIR-layout dataset directory.

    split: the qrels file ``qrels/<split>.tsv`` (when that split is absent and exactly one
        qrels file exists, that one is used).
    strict: qrels rows naming an unknown query or passage id are errors (False: skipped and
        counted in ``meta["skipped_qrels"]``).
    keep_unjudged_queries: keep queries without qrels in this split (BEIR drops them).
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"BEIR dataset directory not found: {root}")
    corpus_path = _find(root, ["corpus.jsonl", "corpus.jsonl.gz"], "BEIR corpus")
    queries_path = _find(root, ["queries.jsonl", "queries.jsonl.gz"], "BEIR queries")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        found = sorted((root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        if len(found) != 1:
            raise FileNotFoundError(f"BEIR qrels {qrels_path} not found (available: {[f.name for f in found]})")
        qrels_path = found[0]

    pids, texts, titles, seen = [], [], [], {}
    for lineno, obj in _read_jsonl(corpus_path):
        pid = _field(obj, "_id", corpus_path, lineno)
        if pid in seen:
            raise DataFormatError(corpus_path, lineno, "_id", f"duplicate passage id {pid!r} (first on line {seen[pid]})")
        seen[pid] = lineno
        pids.append(pid)
        texts.append(_field(obj, "text", corpus_path, lineno))
        titles.append(_field(obj, "title", corpus_path, lineno, required=False, default=""))
    if not pids:
        raise DataFormatError(corpus_path, None, None, "no passages: the corpus is empty")

    qids, qtexts, qseen = [], [], {}
    for lineno, obj in _read_jsonl(queries_path):
        qid = _field(obj, "_id", queries_path, lineno)
        if qid in qseen:
            raise DataFormatError(queries_path, lineno, "_id", f"duplicate query id {qid!r} (first on line {qseen[qid]})")
        qseen[qid] = lineno
        qids.append(qid)
        qtexts.append(_field(obj, "text", queries_path, lineno))
    if not qids:
        raise DataFormatError(queries_path, None, None, "no queries: the file is empty")

    qrels: dict[str, dict[str, int]] = {}
    skipped = 0
    with _open_text(qrels_path) as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if lineno == 1 and row[0].strip().lower() in ("query-id", "query_id", "qid"):
                continue  # header
            if len(row) != 3:
                raise DataFormatError(qrels_path, lineno, "score", f"expected 3 tab-separated fields (query-id, corpus-id, score), got {len(row)}")
            qid, pid, score = (c.strip() for c in row)
            try:
                grade = int(float(score)) if float(score).is_integer() else None
            except ValueError:
                grade = None
            if grade is None:
                raise DataFormatError(qrels_path, lineno, "score", f"expected an integer grade, got {score!r}")
            for key, val, known in (("query-id", qid, qseen), ("corpus-id", pid, seen)):
                if val not in known:
                    if strict:
                        raise DataFormatError(qrels_path, lineno, key, f"unknown id {val!r}")
                    break
            else:
                qrels.setdefault(qid, {})[pid] = grade
                continue
            skipped += 1

    if not keep_unjudged_queries:
        keep = [i for i, q in enumerate(qids) if q in qrels]
        if not keep:
            raise DataFormatError(qrels_path, None, None, f"none of the {len(qids)} queries has a judgment in this "
                                  f"split: nothing to evaluate (keep_unjudged_queries=True keeps them)")
        qids, qtexts = [qids[i] for i in keep], [qtexts[i] for i in keep]
    meta = {"format": "beir", "path": str(root), "split": qrels_path.stem, "skipped_qrels": skipped}
    return _ir_dataset(root.name, pids, texts, titles, qids, qtexts, qrels, meta)


def _ir_dataset(name: str, pids: list, texts: list, titles: list, qids: list, qtexts: list,
                qrels: dict[str, dict[str, int]], meta: dict) -> Dataset:
    """An IR collection (passages with optional titles, queries, graded qrels) as a Dataset."""
    return Dataset(name=name, passage_ids=pids, texts=texts, titles=titles if any(titles) else None,
                   query_ids=qids, queries=qtexts, qrels=qrels, meta=meta)


# ---- rag-mini-wikipedia ---------------------------------------------------------------------
def _parquet_files(p: Path) -> list[Path]:
    if p.is_file():
        return [p]
    files = sorted(p.rglob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no .parquet files under {p}")
    return files


def _read_table(p: Path, columns: list[str]):
    """Concatenate the parquet files of ``p``; yields (frame, file, first row) per file for errors."""
    import pandas as pd

    parts = []
    for f in _parquet_files(p):
        # the MIO report reads CSV exports of the same tables (rag-mini-wikipedia_*.csv)
        df = pd.read_csv(f, keep_default_na=False) if f.suffix == ".csv" else pd.read_parquet(f)
        if "id" not in df.columns and df.index.name == "id":
            df = df.reset_index()  # dask writes the id as the index
        for c in columns:
            if c not in df.columns:
                raise DataFormatError(f, None, c, f"missing column (columns: {list(df.columns)})")
        parts.append((df, f))
    return parts


def load_mini_wikipedia(
    path: str | os.PathLike,
    *,
    passages: str | os.PathLike | None = None,
    questions: str | os.PathLike | None = None,
    answer_qrels: bool = False,
) -> Dataset:
    """Load a local copy of rag-mini-wikipedia (either repository layout, or explicit files).

    answer_qrels: the dataset ships no relevance judgments; with True a passage that contains
        a question's answer string (case-insensitive, answers of >= 4 characters other than
        yes/no) is judged relevant (grade 1). A heuristic, recorded in ``meta``.
    """
    root = Path(path)
    if passages is None:
        passages = _find(root, ["data/passages.parquet", "passages.parquet", "text-corpus/passages", "text-corpus", "passages"], "mini-wikipedia passages")
    if questions is None:
        questions = _find(root, ["data/test.parquet", "test.parquet", "question-answer/test", "question-answer", "test"], "mini-wikipedia questions")

    pids, texts, seen = [], [], {}
    for df, f in _read_table(Path(passages), ["passage", "id"]):
        for row, (pid, text) in enumerate(zip(df["id"].tolist(), df["passage"].tolist()), 1):
            if not isinstance(text, str):
                raise DataFormatError(f, row, "passage", f"expected a string, got {type(text).__name__}", unit="row")
            if pid is None or (isinstance(pid, float) and pid != pid):
                raise DataFormatError(f, row, "id", "missing", unit="row")
            pid = str(pid)
            if pid in seen:
                raise DataFormatError(f, row, "id", f"duplicate passage id {pid!r}", unit="row")
            seen[pid] = row
            pids.append(pid)
            texts.append(text)

    qids, qtexts, answers = [], [], {}
    for df, f in _read_table(Path(questions), ["question", "answer", "id"]):
        for row, (qid, q, a) in enumerate(zip(df["id"].tolist(), df["question"].tolist(), df["answer"].tolist()), 1):
            if not isinstance(q, str):
                raise DataFormatError(f, row, "question", f"expected a string, got {type(q).__name__}", unit="row")
            if not isinstance(a, str):
                raise DataFormatError(f, row, "answer", f"expected a string, got {type(a).__name__}", unit="row")
            qid = str(qid)
            if qid in answers:
                raise DataFormatError(f, row, "id", f"duplicate question id {qid!r}", unit="row")
            qids.append(qid)
            qtexts.append(q)
            answers[qid] = [a]

    qrels: dict[str, dict[str, int]] = {}
    if answer_qrels:
        lowered = [t.lower() for t in texts]
        for qid in qids:
            a = answers[qid][0].strip().lower().rstrip(".")
            if len(a) < 4 or a in ("yes", "no"):
                continue
            hits = {pids[i]: 1 for i, t in enumerate(lowered) if a in t}
            if hits:
                qrels[qid] = hits
    return Dataset(
        name="rag-mini-wikipedia",
        passage_ids=pids,
        texts=texts,
        query_ids=qids,
        queries=qtexts,
        qrels=qrels,
        answers=answers,
        meta={"format": "mini-wikipedia", "passages": str(passages), "questions": str(questions), "answer_qrels": answer_qrels},
    )


# ---- RGB ------------------------------------------------------------------------------------
def _rgb_parts(ans: Any, p: Path, lineno: int) -> list[list[str]]:
    """RGB's answer as parts of aliases: ``"a"`` -> [["a"]]; ``["a", ["b", "B"]]`` -> [["a"], ["b", "B"]]."""
    items = [ans] if isinstance(ans, str) else ans
    parts = []
    for i, item in enumerate(items):
        aliases = item if isinstance(item, list) else [item]
        if not aliases or not all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in aliases):
            raise DataFormatError(p, lineno, "answer", f"part {i}: expected a string or a non-empty list of strings")
        aliases = [str(a) for a in aliases if str(a).strip()]
        if not aliases:
            raise DataFormatError(p, lineno, "answer", f"part {i}: empty answer")
        parts.append(aliases)
    if not parts:
        raise DataFormatError(p, lineno, "answer", "expected at least one answer")
    return parts


def load_rgb(path: str | os.PathLike, *, file: str = "en.json") -> Dataset:
    """Load an RGB JSON-lines file (or ``<dir>/<file>``, default ``en.json``; also
    ``en_int.json``, ``en_fact.json``, ``en_refine.json``).

    Passages are de-duplicated across queries by their whitespace-stripped text; ids are
    ``rgb<position>`` in order of first appearance. ``answers`` is the flat list of every
    alias; ``answer_groups`` the parts RGB's string match requires (see module docstring).
    ``candidates[id]`` lists the query's own passages (positives, then ``positive_wrong``, then
    negatives), the documents RGB's protocol draws from. ``en_fact``'s ``positive_wrong``
    passages are judged non-relevant (grade 0) and listed in ``meta["fake_positives"]``, its
    ``fakeanswer`` in ``meta["fake_answers"]``. ``meta["n_listed"]`` counts the passages as the
    file lists them, positives and negatives of every question with repeats (``positive_wrong``
    aside): the size of the Dartboard paper's merged collection, which keeps repeats (11,641 for
    ``en.json``, 5,701 for ``en_int.json``, Pickett et al. 2024, Section 3), where the pool here
    has each distinct text once.
    """
    p = Path(path)
    if p.is_dir():
        p = p / file
    if not p.is_file():
        raise FileNotFoundError(f"RGB file not found: {p}")
    pid_of: dict[str, str] = {}
    texts: list[str] = []
    qids, qtexts = [], []
    qrels: dict[str, dict[str, int]] = {}
    query_subtopics: dict[str, dict[str, str]] = {}
    answers: dict[str, list[str]] = {}
    groups: dict[str, list[list[str]]] = {}
    candidates: dict[str, list[str]] = {}
    fakes: dict[str, list[str]] = {}
    fake_answers: dict[str, str] = {}
    n_listed = 0

    def passage_id(text: str) -> str:
        key = text.strip()
        if key not in pid_of:
            pid_of[key] = f"rgb{len(texts)}"
            texts.append(key)
        return pid_of[key]

    def strings(val: Any, lineno: int, field: str) -> list[str]:
        if not isinstance(val, list) or not all(isinstance(x, str) for x in val):
            raise DataFormatError(p, lineno, field, "expected a list of strings")
        return val

    for lineno, obj in _read_jsonl(p):
        qid = str(_field(obj, "id", p, lineno, types=(str, int)))
        if qid in answers:
            raise DataFormatError(p, lineno, "id", f"duplicate query id {qid!r}")
        query = _field(obj, "query", p, lineno)
        parts = _rgb_parts(_field(obj, "answer", p, lineno, types=(list, str)), p, lineno)
        pos = _field(obj, "positive", p, lineno, types=(list,))
        neg = strings(_field(obj, "negative", p, lineno, types=(list,), required=False, default=[]), lineno, "negative")
        wrong = strings(_field(obj, "positive_wrong", p, lineno, types=(list,), required=False, default=[]), lineno,
                        "positive_wrong")
        judged: dict[str, int] = {}
        own: list[str] = []
        labels: dict[str, str] = {}
        n_listed += len(neg)
        if pos and all(isinstance(g, list) for g in pos):  # en_int: one group per answer part
            for g, group in enumerate(pos):
                n_listed += len(group)
                for pid in (passage_id(t) for t in strings(group, lineno, "positive")):
                    judged[pid] = 1
                    labels.setdefault(pid, f"part{g}")
                    own.append(pid)
        else:
            n_listed += len(pos)
            for pid in (passage_id(t) for t in strings(pos, lineno, "positive")):
                judged[pid] = 1  # a positive also listed as negative counts as relevant
                own.append(pid)
        for pid in (passage_id(t) for t in wrong):
            judged.setdefault(pid, 0)
            own.append(pid)
        for pid in (passage_id(t) for t in neg):
            judged.setdefault(pid, 0)
            own.append(pid)
        if wrong:
            fakes[qid] = [passage_id(t) for t in wrong]
        if "fakeanswer" in obj:
            fake_answers[qid] = str(_field(obj, "fakeanswer", p, lineno, types=(str, int, float)))
        qids.append(qid)
        qtexts.append(query)
        answers[qid] = [a for part in parts for a in part]
        groups[qid] = parts
        qrels[qid] = judged
        candidates[qid] = list(dict.fromkeys(own))
        if labels:
            query_subtopics[qid] = labels
    if not qids:
        raise DataFormatError(p, None, None, "no queries: the file is empty")
    if not texts:
        raise DataFormatError(p, None, None, "no passages: every query's positive and negative lists are empty")
    meta: dict[str, Any] = {"format": "rgb", "path": str(p), "n_listed": n_listed}
    if fakes or fake_answers:
        meta.update(fake_positives=fakes, fake_answers=fake_answers)
    return Dataset(
        name=f"rgb-{p.stem}",
        passage_ids=[f"rgb{i}" for i in range(len(texts))],
        texts=texts,
        query_ids=qids,
        queries=qtexts,
        qrels=qrels,
        query_subtopics=query_subtopics or None,
        answers=answers,
        answer_groups=groups,
        candidates=candidates,
        meta=meta,
    )


# ---- TREC qrels (beside your own embeddings: data.npz_files) ----------------------------------
class _Lines:
    """A text file for a parser that only raises (ir_measures, ir_datasets): it remembers the
    number and text of the line last handed out, so an error can name ``file:line``."""

    def __init__(self, fh: Any) -> None:
        self.fh, self.lineno, self.line = fh, 0, ""

    def read(self) -> str:  # ir_measures takes anything with .read as an open file
        return "".join(self)

    def __iter__(self) -> Iterator[str]:
        for self.lineno, self.line in enumerate(self.fh, 1):
            yield self.line


def read_trec_qrels(path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """A TREC qrels file (``qid iter docid grade`` per line; ``.gz`` too) as query id to
    {doc id: grade}, parsed by ``ir_measures.read_trec_qrels``; a malformed line raises
    :class:`DataFormatError` naming the file and line."""
    import ir_measures  # here, not at the top: the synthetic pools and the GPU check run without it

    out: dict[str, dict[str, int]] = {}
    with _open_text(Path(path)) as fh:
        lines = _Lines(fh)
        try:
            for qrel in ir_measures.read_trec_qrels(lines):
                out.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
        except ValueError:
            parts = lines.line.split()
            if len(parts) != 4:
                raise DataFormatError(path, lines.lineno, None,
                                      f"a TREC qrels line has 4 fields (qid iter docid grade), got {len(parts)}") from None
            raise DataFormatError(path, lines.lineno, "grade", f"expected an integer, got {parts[3]!r}") from None
    return out


# ---- any ir_datasets collection (downloads on first use: needs a network) -------------------
def load_ir_datasets(dataset_id: str, *, keep_unjudged_queries: bool = False) -> Dataset:
    """Load an `ir_datasets <https://ir-datasets.com>`_ collection with documents, queries and
    qrels, e.g. ``"beir/scifact/test"``, ``"beir/nfcorpus/test"``, ``"msmarco-passage/dev/small"``.

    ir_datasets downloads the files on first use into its cache (``IR_DATASETS_HOME``, default
    ``~/.ir_datasets``) and reads them from there afterwards, offline. A document's text is its
    ``text`` field (its ``default_text()`` when it has none) and its title, where the collection
    has one, goes to ``titles``; a query's text is its ``text`` (else ``default_text()``).
    Queries without a judgment are dropped, as in BEIR, unless ``keep_unjudged_queries``.
    Needs ``ir_datasets`` (``pip install "divopt-rag[ir]"``).
    """
    try:
        import ir_datasets
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "ir_datasets":
            raise
        raise ModuleNotFoundError('load_ir_datasets needs ir-datasets: pip install "divopt-rag[ir]"', name=exc.name) from None
    try:
        ds = ir_datasets.load(dataset_id)
    except KeyError:
        raise ValueError(f"unknown ir_datasets id {dataset_id!r} (see https://ir-datasets.com for the ids)") from None
    missing = [part for part in ("docs", "queries", "qrels") if not getattr(ds, f"has_{part}")()]
    if missing:
        raise ValueError(f"ir_datasets {dataset_id!r} has no {' / '.join(missing)}: pick an id with all three, "
                         f"e.g. {dataset_id}/test")

    def text(record: Any) -> str:
        return record.text if "text" in record._fields else record.default_text()

    pids, texts, titles = [], [], []
    qrels: dict[str, dict[str, int]] = {}
    qids, qtexts = [], []
    try:  # the first read downloads the collection into ir_datasets' cache
        for doc in ds.docs_iter():
            pids.append(doc.doc_id)
            texts.append(text(doc))
            titles.append(getattr(doc, "title", "") or "")
        for qrel in ds.qrels_iter():
            qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = int(qrel.relevance)
        for query in ds.queries_iter():
            if keep_unjudged_queries or query.query_id in qrels:
                qids.append(query.query_id)
                qtexts.append(text(query))
    except OSError as exc:  # requests' ConnectionError and ir_datasets' own download errors are OSErrors
        reason = " ".join(str(exc).split())[:160]
        raise ConnectionError(
            f"ir_datasets {dataset_id!r}: its files could not be downloaded ({type(exc).__name__}: {reason}); "
            f"ir_datasets reads them from IR_DATASETS_HOME (default ~/.ir_datasets) once they are there: fetch them "
            f"where the network reaches their source, or copy that folder here"
        ) from None
    return _ir_dataset(dataset_id.replace("/", "-"), pids, texts, titles, qids, qtexts, qrels,
                       {"format": "ir_datasets", "id": dataset_id})
