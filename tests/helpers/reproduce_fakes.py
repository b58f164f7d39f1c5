"""Fakes for the reproduce tests: a hashing bag-of-words embedder (fast, deterministic, offline),
a token-overlap cross-encoder, a fake OpenAI-compatible chat server on 127.0.0.1 whose replies
follow the rules stated here, and a data folder in ``divopt_rag.data.download.fetch``'s layout
holding the QA fixture files (tests/helpers/fixtures/qa, each dataset's public format) plus the files
written here in the same formats (LongBench, rag-mini-wikipedia)."""
from __future__ import annotations

import json
import re
import shutil
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from helpers.fake_llm import FakeChat

FIXTURES = Path(__file__).parent / "fixtures" / "qa"
DIM = 32


class HashEmbedder:
    """texts -> (n, 32): the sum of one random vector per lower-cased word (seeded by crc32 of
    the word) plus a constant offset, so texts sharing words are close."""

    model_id = "test-hash-embedder-32"

    def __call__(self, texts):
        out = np.zeros((len(texts), DIM))
        for i, t in enumerate(texts):
            out[i] = 0.5
            for w in re.findall(r"\w+", t.lower()):
                out[i] += np.random.default_rng(zlib.crc32(w.encode())).standard_normal(DIM)
        return out.astype(np.float32)


class OtherEmbedder(HashEmbedder):
    """A second encoder (another seed family): different neighbourhoods, for cross-encoder consistency."""

    model_id = "test-hash-embedder-32-b"

    def __call__(self, texts):
        out = np.zeros((len(texts), DIM))
        for i, t in enumerate(texts):
            out[i] = 0.2
            for w in re.findall(r"\w+", t.lower()):
                out[i] += np.random.default_rng(zlib.crc32(w.encode()) + 7).standard_normal(DIM)
        return out.astype(np.float32)


def overlap_cross_encoder(pairs):
    """A cross-encoder: score = 4 * |shared words| - 2 (a logit-like scale)."""
    out = []
    for a, b in pairs:
        wa, wb = set(re.findall(r"\w+", str(a).lower())), set(re.findall(r"\w+", str(b).lower()))
        out.append(4.0 * len(wa & wb) - 2.0)
    return np.asarray(out, dtype=np.float64)


# ---- the fake chat server -------------------------------------------------------------------
_SKIP = {"Answer", "Answers", "Question", "Passages", "Passage", "Document", "Documents", "Instruction", "The",
         "Give", "Only", "You", "Please", "If", "List", "Context", "Instructions", "Provide", "Do", "Based", "Read",
         "Now", "In", "It", "Write", "Use", "Separate", "For", "Always", "Cite", "When", "Title", "According",
         "Instructions", "Passage", "Following", "Role", "Reply", "Here", "Keep", "As", "Mark"}


def generation_reply(user: str) -> str:
    """Generation: the LAST two distinct capitalized words of the prompt outside the question
    and the instruction bullets (lines starting "Question", the line after a bare "Question:",
    lines starting "- "), template words skipped, joined by ", "; "unknown" when none. So the
    answer depends on the least relevant passages and changes with the selection."""
    keep, skip_next = [], False
    for line in user.split("\n"):
        if skip_next:
            skip_next = False
            continue
        if line.strip() == "Question:":
            skip_next = True
            continue
        if line.startswith("Question") or line.startswith("- "):
            continue
        keep.append(line)
    words = []
    for w in re.findall(r"\b[A-Z][a-z]+\b", "\n".join(keep)):
        if w not in _SKIP:
            if w in words:
                words.remove(w)
            words.append(w)
    return ", ".join(words[-2:]) or "unknown"


def evaluator_reply(user: str) -> str:
    """DF-RAG's Evaluator: step i scores min(5, number of chunks of the task part (one
    double-quoted chunk per line) that contain the letter of step i more than twice: 'a' for step
    1, 'e' for step 2)."""
    part = user[user.rindex("\nChunks:\n") + len("\nChunks:\n"):]
    chunks = [ln for ln in part.split("\n") if ln.startswith('"')]
    scores = [min(5, sum(c.count(ch) > 2 for c in chunks)) for ch in ("a", "e")]
    return "\n".join(f"{i}. Score: {s}. Short Explanation: note {i}" for i, s in enumerate(scores, 1))


def rule(body: dict) -> str:
    msgs = body["messages"]
    system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
    if "planner" in system:
        return "1) Find the first fact\n2) Find the second fact"
    if "judge" in system:
        return evaluator_reply(msgs[-1]["content"])
    return generation_reply(msgs[-1]["content"])


class ChatServer:
    """A running fake server (:class:`fake_llm.FakeChat` answering by :func:`rule`): ``url``
    (http://127.0.0.1:PORT/v1) and the ``requests`` it got."""

    def __enter__(self):
        self._chat = FakeChat(rule=rule)
        self._running = self._chat.running()
        self.url = self._running.__enter__()
        return self

    @property
    def requests(self):
        return self._chat.requests

    def __exit__(self, *exc):
        return self._running.__exit__(*exc)


def cell(frame, **keys) -> float:
    """The one ``value`` of a tidy table's row matching ``keys`` (column == value each)."""
    sel = frame
    for k, v in keys.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, (keys, sel)
    return float(sel["value"].iloc[0])


# ---- the data folder ---------------------------------------------------------------------------
LONGBENCH_ROWS = [
    {"_id": "lb1", "input": "Where was the director of film Jacob born?", "answers": ["Lyon"],
     "context": " ".join(["Jacob is a film directed by Anna Berg."] * 3 + ["Anna Berg was born in Lyon, France."] * 2
                         + ["alpha beta gamma delta"] * 20 + ["The film premiered at a festival in Paris."] * 4)},
    {"_id": "lb2", "input": "Which band released the album Night Sea?", "answers": ["The Tides", "Tides"],
     "context": " ".join(["Night Sea is an album."] * 2 + ["The Tides released Night Sea in 1999."] * 3
                         + ["waves and sand"] * 25 + ["Another band, The Rocks, toured Europe."] * 5)},
    {"_id": "lb3", "input": "What is the capital of the country where Mount Kenya stands?", "answers": ["Nairobi"],
     "context": " ".join(["Mount Kenya is in Kenya."] * 4 + ["Nairobi is the capital of Kenya."] * 2
                         + ["savanna grass lions"] * 30)},
]

SCIQ_ROWS = [
    ("What do mesophiles grow best in?", "moderate temperature", "Mesophiles grow best in moderate temperature."),
    ("What makes global winds blow?", "coriolis effect", "The Coriolis effect makes global winds blow northeast."),
    ("What organ pumps blood?", "heart", "The heart pumps blood through the arteries and veins."),
    ("What gas do plants absorb?", "carbon dioxide", "Plants absorb carbon dioxide and release oxygen."),
    ("What is the boiling point of water?", "100 degrees", "Water boils at 100 degrees Celsius at sea level."),
]
MINI_PASSAGES = ["Theodore Roosevelt studied judo in the White House.", "Roosevelt was born in New York City.",
                 "Beetles are endopterygotes with complete metamorphosis.", "Beetles live on every continent.",
                 "Judo is a Japanese martial art.", "New York City is the largest city in the United States.",
                 "Elephants are the largest land animals alive today.", "Kangaroos live about six years in the wild."]
MINI_QUESTIONS = [("1492", "Did Theodore Roosevelt study Judo?", "yes"),
                  ("178", "Are beetles endopterygotes?", "yes"),
                  ("1480", "Where was Theodore Roosevelt born?", "New York City"),
                  ("9999", "How long do kangaroos live?", "six years")]


def write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_data_dir(root: Path) -> Path:
    """A data folder in fetch's layout: qampari/, asqa/, rgb/, longbench/, sciq/, openbookqa/,
    arc-da/, rag-mini-wikipedia/ (the last two written here in the public formats)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FIXTURES / "qampari", root / "qampari")
    (root / "asqa").mkdir()
    shutil.copy(FIXTURES / "ASQA.json", root / "asqa" / "ASQA.json")
    shutil.copytree(FIXTURES / "rgb", root / "rgb")
    sciq = [{"question": q, "distractor3": "salt", "distractor1": "heat", "distractor2": "light", "correct_answer": a,
             "support": sup} for q, a, sup in SCIQ_ROWS]
    (root / "sciq").mkdir()
    (root / "sciq" / "test.json").write_text(json.dumps(sciq, indent=2))
    shutil.copytree(FIXTURES / "openbookqa", root / "openbookqa")
    shutil.copytree(FIXTURES / "arc-da", root / "arc-da")
    rows = []
    for r in LONGBENCH_ROWS:
        rows.append({"input": r["input"], "context": r["context"], "answers": r["answers"],
                     "length": len(r["context"].split()), "dataset": "2wikimqa", "language": "en",
                     "all_classes": None, "_id": r["_id"]})
    write_jsonl(root / "longbench" / "data" / "2wikimqa.jsonl", rows)
    mw = root / "rag-mini-wikipedia" / "data"
    (mw / "passages.parquet").mkdir(parents=True)
    (mw / "test.parquet").mkdir(parents=True)
    pd.DataFrame({"passage": MINI_PASSAGES, "id": list(range(len(MINI_PASSAGES)))}).to_parquet(
        mw / "passages.parquet" / "part.0.parquet")
    pd.DataFrame({"question": [q for _, q, _ in MINI_QUESTIONS], "answer": [a for _, _, a in MINI_QUESTIONS],
                  "id": [int(i) for i, _, _ in MINI_QUESTIONS]}).to_parquet(mw / "test.parquet" / "part.0.parquet")
    return root
