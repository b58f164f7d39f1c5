"""ASQA and QAMPARI loaders and the external-corpus reader, on fixtures written in each
dataset's public format (tests/helpers/fixtures/qa), plus malformed variants that must name file,
line and field. Expected values are recomputed here with plain loops over the raw JSON."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from divopt_rag.data import DataFormatError, Dataset, load_asqa, load_passages, load_qampari

FIX = Path(__file__).parents[1] / "helpers" / "fixtures" / "qa"


# ---- ASQA ---------------------------------------------------------------------------------
def test_asqa_dev_split_against_plain_reading():
    raw = json.loads((FIX / "ASQA.json").read_text())["dev"]
    ds = load_asqa(FIX)  # the folder holding ASQA.json; dev split by default
    assert ds.query_ids == list(raw) and ds.queries == [s["ambiguous_question"] for s in raw.values()]
    for qid, s in raw.items():
        # one answer part per disambiguated pair, its short answers the aliases
        assert ds.answer_groups_for(qid) == [p["short_answers"] for p in s["qa_pairs"]]
        assert ds.answers[qid] == [a for p in s["qa_pairs"] for a in p["short_answers"]]
        assert ds.meta["long_answers"][qid] == [a["long_answer"] for a in s["annotations"]]
        own = {p["context"] for p in s["qa_pairs"] if p["context"] != "No context provided"}
        own |= {k["content"] for a in s["annotations"] for k in a["knowledge"] if k["content"]}
        assert {ds.texts[ds.passage_index(p)] for p in ds.relevant(qid)} == own
    # the shared snippet (Ali Daei) appears once in the pool, relevant to both questions
    texts = [t for s in raw.values() for a in s["annotations"] for k in a["knowledge"] if k["content"]
             for t in [k["content"]]]
    texts += [p["context"] for s in raw.values() for p in s["qa_pairs"] if p["context"] != "No context provided"]
    assert sorted(ds.texts) == sorted(set(texts))
    sinclair = ds.texts.index("Christine Sinclair holds the record with 190 goals.")
    assert ds.titles[sinclair] == "Christine Sinclair"
    assert ds.subtopics_for("-2002") == {ds.passage_ids[sinclair]: "pair1"}


def test_asqa_train_split_limit_and_corpus():
    ds = load_asqa(FIX / "ASQA.json", "train")
    assert ds.query_ids == ["-1001"] and ds.n_passages == 0  # null knowledge, no context
    assert ds.answer_groups_for("-1001") == [["1890"]]
    assert load_asqa(FIX, limit=1).query_ids == ["-2002"]
    with_corpus = load_asqa(FIX, corpus=FIX / "psgs" / "psgs_w100.tsv")
    assert {"1", "2", "3"} <= set(with_corpus.passage_ids)
    assert with_corpus.n_passages == load_asqa(FIX).n_passages + 3
    with pytest.raises(ValueError, match=r"split 'test' not in ASQA.json; available: \['train', 'dev'\]"):
        load_asqa(FIX, "test")
    with pytest.raises(FileNotFoundError, match="ASQA file not found"):
        load_asqa(FIX / "qampari")


def _asqa_variant(tmp_path: Path, mutate) -> Path:
    raw = json.loads((FIX / "ASQA.json").read_text())
    mutate(raw["dev"])
    p = tmp_path / "ASQA.json"
    p.write_text(json.dumps(raw, indent=1))
    return p


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["-3003"].pop("ambiguous_question"), "ambiguous_question"),
        (lambda d: d["-3003"]["qa_pairs"][1].update(short_answers="Alabama"), "qa_pairs[1].short_answers"),
        (lambda d: d["-3003"]["qa_pairs"][0].update(short_answers=[]), "qa_pairs[0].short_answers"),
        (lambda d: d["-3003"]["annotations"][0]["knowledge"][0].update(content=5), "annotations[0].knowledge[0].content"),
        (lambda d: d["-3003"].update(qa_pairs=[]), "qa_pairs"),
    ],
)
def test_asqa_malformed_names_file_line_field(tmp_path, mutate, field):
    p = _asqa_variant(tmp_path, mutate)
    text = p.read_text()
    line = text[: text.index('"-3003"')].count("\n") + 1  # the sample starts on its key's line
    with pytest.raises(DataFormatError) as err:
        load_asqa(p)
    assert err.value.field == field and err.value.line == line
    assert f"ASQA.json:{line}: field '{field}'" in str(err.value)


def test_asqa_invalid_json_names_the_line(tmp_path):
    p = tmp_path / "ASQA.json"
    p.write_text('{"dev": {\n "-1": {"ambiguous_question": "q", "qa_pairs": [}\n}}')
    with pytest.raises(DataFormatError, match=r"ASQA.json:2: invalid JSON"):
        load_asqa(p)


# ---- QAMPARI ------------------------------------------------------------------------------
def _qampari_rows():
    return [json.loads(x) for x in (FIX / "qampari" / "dev_data.jsonl").read_text().splitlines()]


def test_qampari_against_plain_reading():
    rows = _qampari_rows()
    ds = load_qampari(FIX / "qampari")
    assert ds.query_ids == [r["qid"] for r in rows] and ds.queries == [r["question_text"] for r in rows]
    for r in rows:
        expected = []
        for a in r["answer_list"]:
            part = []
            for x in [a["answer_text"]] + a["aliases"]:
                if x not in part:
                    part.append(x)
            expected.append(part)
        assert ds.answer_groups_for(r["qid"]) == expected
        proofs = {}
        for a in r["answer_list"]:
            for pr in a["proof"]:
                proofs.setdefault(pr["proof_text"], a["aid"])
        got = {ds.texts[ds.passage_index(p)]: lab for p, lab in ds.subtopics_for(r["qid"]).items()}
        assert got == proofs  # each proof labelled with the (first) answer it proves
        assert set(ds.relevant(r["qid"])) == set(ds.subtopics_for(r["qid"]))
    # a proof shared by two answers of question 2 is one passage with the first proof's pid
    assert "202__wikitables_simple__dev__1__1" not in ds.passage_ids
    i = ds.passage_index("202__wikitables_simple__dev__0__0")
    assert ds.titles[i] == "Rinconada Bikol"


def test_qampari_external_corpus(tmp_path):
    ds = load_qampari(FIX / "qampari" / "dev_data.jsonl", corpus=FIX / "psgs" / "psgs_w100.tsv")
    assert ds.passage_ids[-3:] == ["1", "2", "3"] and ds.titles[-1] == "Aaron"
    assert ds.texts[ds.passage_index("2")] == "The Mazda Carol is a kei car."
    assert all(p not in ds.relevant(q) for q in ds.query_ids for p in ("1", "2", "3"))  # unjudged


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda r: r.pop("question_text"), "question_text"),
        (lambda r: r.update(answer_list=[]), "answer_list"),
        (lambda r: r["answer_list"][1].update(aliases="Clef"), "answer_list[1].aliases"),
        (lambda r: r["answer_list"][0]["proof"][0].pop("proof_text"), "answer_list[0].proof[0].proof_text"),
        (lambda r: r.update(qid="202__wikitables_simple__dev"), "qid"),
    ],
)
def test_qampari_malformed(tmp_path, mutate, field):
    rows = _qampari_rows()
    bad = json.loads(json.dumps(rows[0]))
    mutate(bad)
    p = tmp_path / "dev_data.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [rows[1], bad]) + "\n")
    with pytest.raises(DataFormatError) as err:
        load_qampari(tmp_path)
    assert (err.value.line, err.value.field) == (2, field)
    assert f"dev_data.jsonl:2: field '{field}'" in str(err.value)


# ---- external corpora ---------------------------------------------------------------------
def test_load_passages_formats(tmp_path):
    ids, texts, titles = load_passages(FIX / "psgs" / "psgs_w100.tsv")
    assert ids == ["1", "2", "3"] and titles == ["Autozam", "Mazda Carol", "Aaron"]
    assert texts[1] == "The Mazda Carol is a kei car."  # csv quoting removed
    assert load_passages(FIX / "psgs" / "psgs_w100.tsv", limit=2)[0] == ["1", "2"]
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\n{"id": 7, "text": "y"}\n')
    assert load_passages(tmp_path / "corpus.jsonl") == (["d1", "7"], ["x", "y"], ["T", ""])
    (tmp_path / "book.txt").write_text('"fact one"\n\nfact two\n')
    assert load_passages(tmp_path / "book.txt") == (["line1", "line3"], ["fact one", "fact two"], ["", ""])
    (tmp_path / "bad.jsonl").write_text('{"_id": "d1", "text": "x"}\n{"_id": "d2"}\n')
    with pytest.raises(DataFormatError, match=r"bad.jsonl:2: field 'text': missing"):
        load_passages(tmp_path / "bad.jsonl")
    (tmp_path / "bad.tsv").write_text("id\ttext\ttitle\n1\n")
    with pytest.raises(DataFormatError, match=r"bad.tsv:2: field 'text'"):
        load_passages(tmp_path / "bad.tsv")
    with pytest.raises(ValueError, match="limit must be None or an integer >= 1"):
        load_passages(tmp_path / "book.txt", limit=0)


# ---- Dataset: structured answers and per-query candidates ---------------------------------
def test_dataset_answer_groups_and_candidates():
    base = dict(name="x", passage_ids=["a", "b", "c"], texts=["t", "u", "v"], query_ids=["q", "r"], queries=["?", "!"])
    ds = Dataset(**base, answer_groups={"q": [["A", "alpha"], ["B"]]}, candidates={"q": ["c", "a"]})
    assert ds.answers == {"q": ["A", "alpha", "B"]}  # backward-compatible flat answers
    assert ds.answer_groups_for("q") == [["A", "alpha"], ["B"]] and ds.answer_groups_for("r") == []
    assert ds.candidate_indices("q").tolist() == [2, 0] and ds.candidate_indices("r").tolist() == [0, 1, 2]
    flat = Dataset(**base, answers={"q": ["x", "y"]})
    assert flat.answer_groups_for("q") == [["x", "y"]]  # flat answers are aliases of one part
    sub = ds.restrict([0, 1])
    assert sub.candidates == {"q": ["a"]} and sub.answer_groups == ds.answer_groups
    with pytest.raises(ValueError, match=r"answer_groups\['q'\]\[1\] must be a non-empty list of alias strings"):
        Dataset(**base, answer_groups={"q": [["A"], []]})
    with pytest.raises(ValueError, match="answer_groups refers to unknown query id 'z'"):
        Dataset(**base, answer_groups={"z": [["A"]]})
    with pytest.raises(ValueError, match=r"candidates\['q'\] refers to unknown passage id 'zz'"):
        Dataset(**base, candidates={"q": ["zz"]})


# ---- optional downloads, exercised offline through file:// URLs ---------------------------
def test_fetch_qa_datasets_from_file_urls(tmp_path):
    import zipfile

    from divopt_rag.data import load_arc_da, load_sciq
    from divopt_rag.data.download import ARCHIVES, fetch

    asqa = fetch("asqa", tmp_path / "datasets", url=(FIX / "ASQA.json").as_uri())
    assert load_asqa(asqa).query_ids == load_asqa(FIX).query_ids
    for name, folder in (("arc-da", "arc-da"), ("sciq", "sciq")):
        archive = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(archive, "w") as zf:  # the releases unpack into a top folder
            for f in (FIX / folder).rglob("*"):
                zf.write(f, Path("Release") / f.relative_to(FIX / folder))
        got = fetch(name, tmp_path / "datasets", url=archive.as_uri())
        assert got == tmp_path / "datasets" / name and any(got.rglob(ARCHIVES[name][1]))
    assert load_arc_da(tmp_path / "datasets" / "arc-da").n_queries == 2
    assert load_sciq(tmp_path / "datasets" / "sciq").n_queries == 3
    assert fetch("sciq", tmp_path / "datasets", url="file:///nonexistent.zip") == tmp_path / "datasets" / "sciq"
    with pytest.raises(ConnectionError, match="download it by hand"):
        fetch("qampari", tmp_path / "datasets", url="file:///nonexistent/qampari.zip")
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("README", "nothing")
    with pytest.raises(ValueError, match="has no dev_data.jsonl"):
        fetch("qampari", tmp_path / "other", url=empty.as_uri())


def test_mini_wikipedia_csv_exports(tmp_path):
    """The MIO report reads rag-mini-wikipedia as CSV exports (question, answer, id / passage, id)."""
    import pandas as pd

    from divopt_rag.data import load_mini_wikipedia

    pd.DataFrame({"passage": ["Lincoln was born in 1809.", "Uruguay is in South America."], "id": [0, 1]}).to_csv(
        tmp_path / "rag-mini-wikipedia_document.csv", index=False)
    pd.DataFrame({"question": ["Was Lincoln born in 1809?", "Where is Uruguay?"], "answer": ["yes", "NA"],
                  "id": [0, 2]}).to_csv(tmp_path / "rag-mini-wikipedia_q_and_a.csv", index=False)
    ds = load_mini_wikipedia(tmp_path, passages=tmp_path / "rag-mini-wikipedia_document.csv",
                             questions=tmp_path / "rag-mini-wikipedia_q_and_a.csv")
    assert ds.passage_ids == ["0", "1"] and ds.query_ids == ["0", "2"]
    assert ds.answers == {"0": ["yes"], "2": ["NA"]}  # "NA" stays a string
