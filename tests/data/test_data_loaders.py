"""Loaders on small fixture files written here (BEIR, rag-mini-wikipedia, RGB), well-formed and
malformed; every error must name the file, the line/row and the field."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from divopt_rag.data import DataFormatError, Dataset, load_beir, load_mini_wikipedia, load_rgb
from helpers.beir_files import make_beir, write_jsonl




def test_beir_loads_graded_qrels(tmp_path):
    ds = load_beir(make_beir(tmp_path / "tiny"))
    assert isinstance(ds, Dataset)
    assert ds.passage_ids == ["d1", "d2", "d3"] and ds.titles == ["Banks", "Rivers", ""]
    assert ds.texts[1] == "The river bank was muddy."
    assert ds.query_ids == ["q1", "q2"]  # q3 has no judgments in this split (BEIR convention)
    assert ds.qrels == {"q1": {"d1": 2, "d2": 1, "d3": 0}, "q2": {"d2": 1}}
    assert ds.relevant("q1") == {"d1": 2, "d2": 1}
    assert load_beir(tmp_path / "tiny", keep_unjudged_queries=True).n_queries == 3
    frame = ds.qrels_frame()
    assert list(frame.columns) == ["query_id", "doc_id", "relevance"] and len(frame) == 4
    assert ds.passage_texts([0], with_titles=True) == ["Banks: A bank accepts deposits."]


@pytest.mark.parametrize(
    "qrels_lines, line, field",
    [
        (["query-id\tcorpus-id\tscore", "q1\td1\t2", "q1\td9\t1"], 3, "corpus-id"),
        (["query-id\tcorpus-id\tscore", "qX\td1\t2"], 2, "query-id"),
        (["query-id\tcorpus-id\tscore", "q1\td1"], 2, "score"),
        (["query-id\tcorpus-id\tscore", "q1\td1\thigh"], 2, "score"),
    ],
)
def test_beir_malformed_qrels(tmp_path, qrels_lines, line, field):
    root = make_beir(tmp_path / "bad", qrels_lines=qrels_lines)
    with pytest.raises(DataFormatError) as err:
        load_beir(root)
    assert err.value.file.endswith("test.tsv") and err.value.line == line and err.value.field == field
    assert f"test.tsv:{line}: field '{field}'" in str(err.value)


def test_beir_unknown_ids_skipped_when_not_strict(tmp_path):
    root = make_beir(tmp_path / "lax", qrels_lines=["q1\td1\t2", "q1\td9\t1"])
    ds = load_beir(root, strict=False)
    assert ds.qrels == {"q1": {"d1": 2}} and ds.meta["skipped_qrels"] == 1


@pytest.mark.parametrize(
    "corpus_rows, line, field",
    [
        ([{"_id": "d1", "text": "ok"}, {"_id": "d2"}], 2, "text"),
        ([{"_id": "d1", "text": "ok"}, {"text": "no id"}], 2, "_id"),
        ([{"_id": "d1", "text": "ok"}, {"_id": "d1", "text": "again"}], 2, "_id"),
        ([{"_id": "d1", "text": ["not", "a", "string"]}], 1, "text"),
        ([{"_id": "d1", "text": "ok"}, '{"_id": "d2", "text": broken'], 2, None),
    ],
)
def test_beir_malformed_corpus(tmp_path, corpus_rows, line, field):
    root = make_beir(tmp_path / "badc", corpus=corpus_rows, qrels_lines=["q1\td1\t1"])
    with pytest.raises(DataFormatError) as err:
        load_beir(root)
    assert err.value.file.endswith("corpus.jsonl") and err.value.line == line and err.value.field == field


def test_beir_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_beir(tmp_path / "nothing")
    root = make_beir(tmp_path / "nosplit")
    with pytest.raises(FileNotFoundError, match="dev.tsv"):
        (root / "qrels" / "dev.tsv").write_text("q1\td1\t1\n")
        load_beir(root, split="train")


# ---- rag-mini-wikipedia -------------------------------------------------------------------
def make_mini_wiki(root: Path, layout: str = "data", passages=None, questions=None) -> Path:
    passages = passages if passages is not None else pd.DataFrame(
        {"passage": ["Abraham Lincoln was the 16th president.", "Lincoln was born in Kentucky.", "Beetles are insects."],
         "id": [0, 1, 2]}
    )
    questions = questions if questions is not None else pd.DataFrame(
        {"question": ["Was Lincoln president?", "Where was Lincoln born?"], "answer": ["yes", "Kentucky"], "id": [0, 1]}
    )
    if layout == "data":  # the repository's main branch: dask directories of parts
        (root / "data" / "passages.parquet").mkdir(parents=True)
        (root / "data" / "test.parquet").mkdir(parents=True)
        passages.to_parquet(root / "data" / "passages.parquet" / "part.0.parquet")
        questions.to_parquet(root / "data" / "test.parquet" / "part.0.parquet")
    else:  # the parquet-converter layout
        (root / "text-corpus" / "passages").mkdir(parents=True)
        (root / "question-answer" / "test").mkdir(parents=True)
        passages.to_parquet(root / "text-corpus" / "passages" / "0000.parquet")
        questions.to_parquet(root / "question-answer" / "test" / "0000.parquet")
    return root


@pytest.mark.parametrize("layout", ["data", "converter"])
def test_mini_wikipedia_layouts(tmp_path, layout):
    ds = load_mini_wikipedia(make_mini_wiki(tmp_path / layout, layout))
    assert ds.passage_ids == ["0", "1", "2"] and ds.texts[2] == "Beetles are insects."
    assert ds.query_ids == ["0", "1"] and ds.queries[1] == "Where was Lincoln born?"
    assert ds.answers == {"0": ["yes"], "1": ["Kentucky"]}
    assert ds.qrels == {}
    heur = load_mini_wikipedia(tmp_path / layout, answer_qrels=True)
    assert heur.qrels == {"1": {"1": 1}}  # "yes" is too generic to match; "Kentucky" is in passage 1


def test_mini_wikipedia_id_as_index(tmp_path):
    p = pd.DataFrame({"passage": ["x", "y"]}, index=pd.Index([10, 11], name="id"))
    ds = load_mini_wikipedia(make_mini_wiki(tmp_path / "idx", passages=p))
    assert ds.passage_ids == ["10", "11"]


def test_mini_wikipedia_malformed(tmp_path):
    bad = pd.DataFrame({"passage": ["fine", None], "id": [0, 1]})
    with pytest.raises(DataFormatError, match=r"part.0.parquet: row 2: field 'passage'"):
        load_mini_wikipedia(make_mini_wiki(tmp_path / "a", passages=bad))
    nocol = pd.DataFrame({"question": ["q"], "id": [0]})
    with pytest.raises(DataFormatError, match=r"part.0.parquet: field 'answer': missing column"):
        load_mini_wikipedia(make_mini_wiki(tmp_path / "b", questions=nocol))
    with pytest.raises(FileNotFoundError, match="mini-wikipedia passages"):
        load_mini_wikipedia(tmp_path / "empty")


# ---- RGB ----------------------------------------------------------------------------------
RGB_ROWS = [
    {"id": 0, "query": "Who won the 2022 prize?", "answer": ["Alice"],
     "positive": ["Alice won the 2022 prize.", "The 2022 prize went to Alice."],
     "negative": ["Bob won the 2021 prize.", "Shared distractor."]},
    {"id": 1, "query": "When was the 2022 prize awarded?", "answer": [["October", "Oct."]],
     "positive": ["The 2022 prize went to Alice. It was awarded in October."],
     "negative": ["Shared distractor.", "  Alice won the 2022 prize.  "]},
]


def test_rgb_merged_dedup_pool(tmp_path):
    write_jsonl(tmp_path / "en.json", RGB_ROWS)
    ds = load_rgb(tmp_path)  # a directory: en.json by default
    # plain loop: first-appearance order of distinct stripped texts
    expected = []
    for r in RGB_ROWS:
        for t in r["negative"] + r["positive"]:
            if t.strip() not in expected:
                expected.append(t.strip())
    assert sorted(ds.texts) == sorted(expected) and ds.n_passages == len(expected) == 5
    q0 = {ds.texts[ds.passage_index(p)]: g for p, g in ds.qrels["0"].items()}
    assert q0 == {"Alice won the 2022 prize.": 1, "The 2022 prize went to Alice.": 1,
                  "Bob won the 2021 prize.": 0, "Shared distractor.": 0}
    q1 = {ds.texts[ds.passage_index(p)]: g for p, g in ds.qrels["1"].items()}
    assert q1["Alice won the 2022 prize."] == 0  # a positive of q0 is a judged negative of q1
    assert ds.answers == {"0": ["Alice"], "1": ["October", "Oct."]}
    assert ds.query_subtopics is None
    # the Dartboard paper's collection size counts every listed passage, repeats included
    assert ds.meta["n_listed"] == sum(len(r["positive"]) + len(r["negative"]) for r in RGB_ROWS) == 7


def test_rgb_integration_groups_are_subtopics(tmp_path):
    row = {"id": 7, "query": "Who won A and B?", "answer": [["X"], ["Y"]],
           "positive": [["X won A.", "A went to X."], ["Y won B."]], "negative": ["Z lost."]}
    write_jsonl(tmp_path / "en_int.json", [row])
    ds = load_rgb(tmp_path / "en_int.json")
    labels = {ds.texts[ds.passage_index(p)]: l for p, l in ds.subtopics_for("7").items()}
    assert labels == {"X won A.": "part0", "A went to X.": "part0", "Y won B.": "part1"}
    assert ds.relevant("7") == {p: 1 for p in ds.subtopics_for("7")}
    assert ds.meta["n_listed"] == 4  # 3 positives in 2 groups + 1 negative


@pytest.mark.parametrize(
    "bad_row, field",
    [
        ({"id": 2, "answer": ["a"], "positive": ["p"], "negative": []}, "query"),
        ({"id": 2, "query": "q", "answer": ["a"], "positive": "p", "negative": []}, "positive"),
        ({"id": 2, "query": "q", "answer": ["a"], "positive": ["p", 3], "negative": []}, "positive"),
        ({"id": 2, "query": "q", "answer": ["a"], "positive": ["p"], "negative": [None]}, "negative"),
        ({"id": 0, "query": "q", "answer": ["a"], "positive": ["p"], "negative": []}, "id"),
    ],
)
def test_rgb_malformed(tmp_path, bad_row, field):
    write_jsonl(tmp_path / "en.json", RGB_ROWS + [bad_row])
    with pytest.raises(DataFormatError) as err:
        load_rgb(tmp_path / "en.json")
    assert err.value.line == 3 and err.value.field == field
    assert f"en.json:3: field '{field}'" in str(err.value)


# ---- optional download helper, exercised offline through file:// URLs ---------------------
def test_fetch_beir_zip_and_rgb_from_file_urls(tmp_path):
    import zipfile

    from divopt_rag.data.download import fetch

    src = make_beir(tmp_path / "src" / "tiny")
    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in src.rglob("*"):
            zf.write(f, f.relative_to(src.parent))
    path = fetch("beir/tiny", tmp_path / "datasets", url=archive.as_uri())
    assert load_beir(path).qrels == load_beir(src).qrels
    assert fetch("beir/tiny", tmp_path / "datasets", url="file:///nonexistent.zip") == path  # already there

    write_jsonl(tmp_path / "en.json", RGB_ROWS)
    rgb = fetch("rgb/en", tmp_path / "datasets", url=(tmp_path / "en.json").as_uri())
    assert load_rgb(rgb).n_queries == 2
    with pytest.raises(ConnectionError, match="download it by hand"):
        fetch("rgb/en_int", tmp_path / "datasets", url="file:///nonexistent/en_int.json")
    # one command brings both Table 2 files of the Dartboard paper (url: a template with {name})
    write_jsonl(tmp_path / "src" / "en_int.json", [{"id": 7, "query": "q", "answer": [["X"], ["Y"]],
                                                     "positive": [["X."], ["Y."]], "negative": []}])
    write_jsonl(tmp_path / "src" / "en.json", RGB_ROWS)
    folder = fetch("rgb", tmp_path / "both", url=(tmp_path / "src").as_uri() + "/{name}.json")
    assert folder == tmp_path / "both" / "rgb" and sorted(f.name for f in folder.iterdir()) == ["en.json", "en_int.json"]
    assert load_rgb(folder).n_queries == 2 and load_rgb(folder / "en_int.json").n_queries == 1
    with pytest.raises(ValueError, match="unknown corpus"):
        fetch("msmarco", tmp_path)
