"""LongBench loader and DF-RAG's word chunking, on a fixture in LongBench's jsonl format.
The chunking is compared with a plain transcription of the paper's public script
(split on whitespace, windows of w words every w - overlap words) written here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from divopt_rag.data import DataFormatError, chunk_texts, chunk_words, load_infinitebench_qa, load_longbench

FIX = Path(__file__).parents[1] / "helpers" / "fixtures" / "qa" / "longbench"


def plain_chunks(text, w, overlap):
    words = text.split()
    out, i = [], 0
    while i < len(words):
        out.append(" ".join(words[i : i + w]))
        i += w - overlap
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "bb", "c\n", "d\t", "  e", "f.", ""]), max_size=60).map(" ".join),
    st.integers(1, 12),
    st.integers(0, 11),
)
def test_chunk_words_matches_plain_loop(text, w, overlap):
    if overlap >= w:
        with pytest.raises(ValueError, match=r"overlap must be an integer in \[0, words\)"):
            chunk_words(text, w, overlap)
        return
    assert chunk_words(text, w, overlap) == plain_chunks(text, w, overlap)


def test_chunk_words_examples_and_errors():
    assert chunk_words("a b c d e", 2) == ["a b", "c d", "e"]
    assert chunk_words("a b c d e", 3, 1) == ["a b c", "c d e", "e"]  # the script's trailing suffix
    assert chunk_words("   \n", 5) == []
    assert chunk_texts(["a b c", "", "d"], 2) == [(0, 0, "a b"), (0, 1, "c"), (2, 0, "d")]
    with pytest.raises(ValueError, match="words must be an integer >= 1"):
        chunk_words("a", 0)
    with pytest.raises(TypeError, match="text must be a string"):
        chunk_words(None, 3)


@pytest.mark.parametrize("words", [100, 200, 300])
def test_longbench_chunks_each_context(words):
    rows = [json.loads(x) for x in (FIX / "2wikimqa.jsonl").read_text().splitlines()]
    ds = load_longbench(FIX, "2wikimqa", words=words)
    assert ds.query_ids == [r["_id"] for r in rows] and ds.queries == [r["input"] for r in rows]
    for r in rows:
        expected = plain_chunks(r["context"], words, 0)
        own = ds.candidate_indices(r["_id"])
        assert [ds.texts[i] for i in own] == expected
        assert [ds.passage_ids[i] for i in own] == [f"{r['_id']}:{j}" for j in range(len(expected))]
        assert ds.answer_groups_for(r["_id"]) == [r["answers"]]  # alternatives: one part
        assert ds.meta["samples"][r["_id"]]["length"] == r["length"]
    assert ds.n_passages == sum(len(plain_chunks(r["context"], words, 0)) for r in rows)
    assert ds.qrels == {} and ds.name == f"longbench-2wikimqa-w{words}"


def test_longbench_file_path_limit_and_errors(tmp_path):
    ds = load_longbench(FIX / "2wikimqa.jsonl", words=50, limit=1)
    assert ds.query_ids == ["a1b2c3"] and ds.n_passages == 5  # 233 words -> 5 chunks of 50
    with pytest.raises(ValueError, match="task is required when path is a folder"):
        load_longbench(FIX)
    with pytest.raises(FileNotFoundError, match="LongBench task 'musique' not found"):
        load_longbench(FIX, "musique")
    rows = [json.loads(x) for x in (FIX / "2wikimqa.jsonl").read_text().splitlines()]
    for mutate, field in [
        (lambda r: r.pop("context"), "context"),
        (lambda r: r.update(answers="Lyon"), "answers"),
        (lambda r: r.update(answers=[""]), "answers"),
        (lambda r: r.update(length="12"), "length"),
        (lambda r: r.update(_id="a1b2c3"), "_id"),
    ]:
        bad = dict(rows[1])
        mutate(bad)
        p = tmp_path / "2wikimqa.jsonl"
        p.write_text(json.dumps(rows[0]) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(DataFormatError) as err:
            load_longbench(tmp_path, "2wikimqa")
        assert (err.value.line, err.value.field) == (2, field), err.value
        assert f"2wikimqa.jsonl:2: field '{field}'" in str(err.value)


# ---- InfiniteBench En.QA (longbook_qa_eng.jsonl: id, context, input, answer, options) -------------
EN_QA = [
    {"id": 0, "context": " ".join(f"w{i}" for i in range(250)), "input": "Who is the lighthouse keeper?",
     "answer": ["Ada", "Ada Lind"], "options": []},
    {"id": 1, "context": "Chapter one. " * 40, "input": "Where does the story start?", "answer": ["the harbour"],
     "options": []},
]


@pytest.mark.parametrize("words", [100, 200, 300])
def test_en_qa_chunks_each_book_like_a_longbench_task(tmp_path, words):
    (tmp_path / "longbook_qa_eng.jsonl").write_text("".join(json.dumps(r) + "\n" for r in EN_QA))
    ds = load_infinitebench_qa(tmp_path, words=words)
    assert ds.query_ids == ["0", "1"] and ds.queries == [r["input"] for r in EN_QA]
    for r in EN_QA:
        qid = str(r["id"])
        expected = plain_chunks(r["context"], words, 0)
        own = ds.candidate_indices(qid)
        assert [ds.texts[i] for i in own] == expected
        assert [ds.passage_ids[i] for i in own] == [f"{qid}:{j}" for j in range(len(expected))]
        assert ds.answer_groups_for(qid) == [r["answer"]]  # alternatives of one answer: one part
    assert ds.name == f"infinitebench-en_qa-w{words}" and ds.meta["task"] == "en_qa"
    assert load_infinitebench_qa(tmp_path / "longbook_qa_eng.jsonl", words=words, limit=1).query_ids == ["0"]


def test_en_qa_errors_name_the_line_and_field(tmp_path):
    with pytest.raises(FileNotFoundError, match="InfiniteBench En.QA not found"):
        load_infinitebench_qa(tmp_path)
    for mutate, field in [(lambda r: r.pop("context"), "context"), (lambda r: r.update(answer="Ada"), "answer"),
                          (lambda r: r.update(answer=[" "]), "answer"), (lambda r: r.update(id=0), "id"),
                          (lambda r: r.pop("input"), "input"), (lambda r: r.update(options=[3]), "options")]:
        bad = dict(EN_QA[1])
        mutate(bad)
        p = tmp_path / "longbook_qa_eng.jsonl"
        p.write_text(json.dumps(EN_QA[0]) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(DataFormatError) as err:
            load_infinitebench_qa(p)
        assert (err.value.line, err.value.field) == (2, field), err.value
