"""ARC-DA, OpenBookQA, SciQ and RGB (en_fact, answer parts) loaders on fixtures in the
releases' formats; malformed variants must name file, line and field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from divopt_rag.data import DataFormatError, load_arc_da, load_openbookqa, load_rgb, load_sciq

FIX = Path(__file__).parents[1] / "helpers" / "fixtures" / "qa"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _bad_jsonl(tmp_path: Path, name: str, good: dict, bad: dict) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    return p


# ---- ARC-DA -------------------------------------------------------------------------------
def test_arc_da_questions_answers_and_pool():
    rows = _jsonl(FIX / "arc-da" / "test.jsonl")
    ds = load_arc_da(FIX / "arc-da")
    assert ds.query_ids == [r["question_id"] for r in rows] and ds.queries == [r["question"] for r in rows]
    assert [ds.answer_groups_for(r["question_id"]) for r in rows] == [[r["answers"]] for r in rows]
    assert ds.meta["tags"]["ARCEZ_MCAS_1998_4_7"] == "EASY-TEST"
    assert ds.n_passages == 0  # ARC-DA ships no passages
    with_corpus = load_arc_da(FIX / "arc-da" / "test.jsonl", corpus=FIX / "openbookqa" / "Data" / "Main" / "openbook.txt")
    assert with_corpus.texts == ["the sun is the source of energy for physical cycles on Earth",
                                 "a magnet attracts magnetic metals"]


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("question"), "question"),
    (lambda r: r.update(answers=[]), "answers"),
    (lambda r: r.update(answers=["ok", 3]), "answers"),
    (lambda r: r.update(question_id="ARCEZ_MCAS_1998_4_7"), "question_id"),
])
def test_arc_da_malformed(tmp_path, mutate, field):
    rows = _jsonl(FIX / "arc-da" / "test.jsonl")
    bad = dict(rows[1])
    mutate(bad)
    p = _bad_jsonl(tmp_path, "test.jsonl", rows[0], bad)
    with pytest.raises(DataFormatError) as err:
        load_arc_da(p)
    assert (err.value.line, err.value.field) == (2, field)
    assert f"test.jsonl:2: field '{field}'" in str(err.value)


# ---- OpenBookQA ---------------------------------------------------------------------------
def test_openbookqa_release_layout():
    rows = _jsonl(FIX / "openbookqa" / "Data" / "Additional" / "test_complete.jsonl")
    ds = load_openbookqa(FIX / "openbookqa")  # Additional preferred when present; book found
    assert ds.query_ids == [r["id"] for r in rows] and ds.queries == [r["question"]["stem"] for r in rows]
    for r in rows:
        right = [c["text"] for c in r["question"]["choices"] if c["label"] == r["answerKey"]]
        assert ds.answer_groups_for(r["id"]) == [right]
        assert [ds.texts[ds.passage_index(p)] for p in ds.relevant(r["id"])] == [r["fact1"]]
    # the book's two facts + the fact1 not already in the book
    assert ds.n_passages == 3 and ds.texts[0] == rows[0]["fact1"]
    main = load_openbookqa(FIX / "openbookqa", "test", additional=False)
    assert main.qrels == {} and main.n_passages == 2 and main.query_ids == ds.query_ids


def test_openbookqa_hugging_face_layout(tmp_path):
    rows = _jsonl(FIX / "openbookqa" / "Data" / "Main" / "test.jsonl")
    hf = [{"id": r["id"], "question_stem": r["question"]["stem"],
           "choices": {"text": [c["text"] for c in r["question"]["choices"]],
                       "label": [c["label"] for c in r["question"]["choices"]]},
           "answerKey": r["answerKey"]} for r in rows]
    p = tmp_path / "validation.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in hf) + "\n")
    ds = load_openbookqa(p)
    assert ds.answer_groups == load_openbookqa(FIX / "openbookqa", additional=False).answer_groups


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.update(answerKey="E"), "answerKey"),
    (lambda r: r["question"].pop("stem"), "question.stem"),
    (lambda r: r["question"]["choices"][2].pop("text"), "question.choices[2].text"),
])
def test_openbookqa_malformed(tmp_path, mutate, field):
    rows = _jsonl(FIX / "openbookqa" / "Data" / "Main" / "test.jsonl")
    bad = json.loads(json.dumps(rows[1]))
    mutate(bad)
    p = _bad_jsonl(tmp_path, "test.jsonl", rows[0], bad)
    with pytest.raises(DataFormatError) as err:
        load_openbookqa(p)
    assert (err.value.line, err.value.field) == (2, field)


# ---- SciQ ---------------------------------------------------------------------------------
def test_sciq_supports_are_the_pool():
    rows = json.loads((FIX / "sciq" / "test.json").read_text())
    ds = load_sciq(FIX / "sciq")
    assert ds.query_ids == [f"test-{i}" for i in range(len(rows))]
    assert [ds.answer_groups_for(q) for q in ds.query_ids] == [[[r["correct_answer"]]] for r in rows]
    supports = [r["support"] for r in rows if r["support"]]
    assert ds.texts == list(dict.fromkeys(supports))  # de-duplicated, empty skipped
    assert ds.relevant("test-0") == ds.relevant("test-2") and ds.relevant("test-1") == {}
    assert ds.meta["distractors"]["test-0"] == [rows[0]["distractor1"], rows[0]["distractor2"], rows[0]["distractor3"]]
    assert load_sciq(FIX / "sciq" / "test.json", limit=2).n_queries == 2


def test_sciq_malformed_names_the_record_line(tmp_path):
    rows = json.loads((FIX / "sciq" / "test.json").read_text())
    rows[2]["correct_answer"] = ["moderate"]
    p = tmp_path / "test.json"
    p.write_text(json.dumps(rows, indent=2))
    starts = [i + 1 for i, text in enumerate(p.read_text().split("\n")) if text == "  {"]  # json.dumps(indent=2)
    line = starts[2]  # the third record
    with pytest.raises(DataFormatError) as err:
        load_sciq(p)
    assert (err.value.line, err.value.field) == (line, "correct_answer")
    assert f"test.json:{line}: field 'correct_answer'" in str(err.value)
    p.write_text('[{"question": "q", "correct_answer": "a"},\n 5]')
    with pytest.raises(DataFormatError, match=r"test.json:2: expected a JSON object"):
        load_sciq(p)


# ---- RGB: answer parts, en_fact, own candidates -------------------------------------------
def test_rgb_fact_file_and_answer_parts():
    rows = _jsonl(FIX / "rgb" / "en_fact.json")
    ds = load_rgb(FIX / "rgb", file="en_fact.json")
    for r in rows:
        q = str(r["id"])
        assert ds.answer_groups_for(q) == [[r["answer"]]]
        assert ds.meta["fake_answers"][q] == r["fakeanswer"]
        own = [ds.texts[i] for i in ds.candidate_indices(q)]
        assert own == r["positive"] + r["positive_wrong"] + r["negative"]
        judged = {ds.texts[ds.passage_index(p)]: g for p, g in ds.qrels[q].items()}
        assert judged == {**{t: 0 for t in r["positive_wrong"] + r["negative"]}, **{t: 1 for t in r["positive"]}}
        assert [ds.texts[ds.passage_index(p)] for p in ds.meta["fake_positives"][q]] == r["positive_wrong"]


def test_rgb_answer_parts_follow_checkanswer(tmp_path):
    rows = [
        {"id": 0, "query": "q0", "answer": ["Alice"], "positive": ["p"], "negative": []},
        {"id": 1, "query": "q1", "answer": [["October", "Oct."]], "positive": ["p"], "negative": []},
        {"id": 2, "query": "q2", "answer": [["Joe Biden", "Biden"], ["Kamala Harris", "Harris"]],
         "positive": [["b"], ["h"]], "negative": []},
        {"id": 3, "query": "q3", "answer": ["1月3日", "1月12日"], "positive": [["x"], ["y"]], "negative": []},
        {"id": 4, "query": "q4", "answer": 2022, "positive": ["p"], "negative": []},
    ]
    rows[4]["answer"] = "2022"
    p = tmp_path / "en_int.json"
    p.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    ds = load_rgb(p)
    assert [ds.answer_groups_for(str(i)) for i in range(5)] == [
        [["Alice"]], [["October", "Oct."]], [["Joe Biden", "Biden"], ["Kamala Harris", "Harris"]],
        [["1月3日"], ["1月12日"]], [["2022"]]]
    assert ds.answers["2"] == ["Joe Biden", "Biden", "Kamala Harris", "Harris"]  # flat, as before
    bad = dict(rows[1], answer=[["October"], []])
    p.write_text(json.dumps(rows[0]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataFormatError, match=r"en_int.json:2: field 'answer': part 1"):
        load_rgb(p)
