"""BEIR-format files written by hand (corpus, queries, qrels), for the loaders' tests."""
from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def make_beir(root: Path, qrels_lines=None, corpus=None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "corpus.jsonl", corpus or [
        {"_id": "d1", "title": "Banks", "text": "A bank accepts deposits."},
        {"_id": "d2", "title": "Rivers", "text": "The river bank was muddy."},
        {"_id": "d3", "title": "", "text": "Unrelated passage."},
    ])
    write_jsonl(root / "queries.jsonl", [
        {"_id": "q1", "text": "what is a bank"},
        {"_id": "q2", "text": "river shores"},
        {"_id": "q3", "text": "a query without judgments"},
    ])
    (root / "qrels").mkdir(exist_ok=True)
    lines = qrels_lines or ["query-id\tcorpus-id\tscore", "q1\td1\t2", "q1\td2\t1", "q1\td3\t0", "q2\td2\t1"]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root
