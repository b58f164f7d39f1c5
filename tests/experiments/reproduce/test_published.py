"""The papers' published numbers (experiments/reproduce/published/*.csv): every file parses, every
cell cites its paper, table and row/column, the keys are unique, the numbers agree with the second
copies the papers themselves print (the same cells in two tables, a claim recomputed from a table,
a README quoting a table), and every published cell of a recipe is reachable by the keys of the
recipe's own table() (no orphan rows): tidy rows covering the recipe's grid, in the labels a run
on the paper's data writes, go through table() and must produce each published key."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from divopt_rag.experiments.reproduce import RECIPES, missing, published
from divopt_rag.experiments.reproduce.dfrag import PAPER_TASKS, PAPER_WORDS
from divopt_rag.experiments.reproduce.published import CITATION_COLUMNS, KEY_COLUMNS, read_folder
from helpers.recipe_rows import CONTEXTS, tidy_rows

PAPERS = ("ccbqp", "dfrag", "dartboard", "vrsd", "mio")


def _key(frame):
    return set(map(tuple, frame[list(KEY_COLUMNS)].astype(str).values.tolist()))


def test_every_cell_parses_and_cites_where_it_is_printed():
    pub = published()
    assert set(pub["paper"]) == set(PAPERS)
    for c in CITATION_COLUMNS:
        assert pub[c].str.strip().str.len().gt(0).all(), c
    assert np.isfinite(pub["value"]).all()
    assert not pub.duplicated(["paper", *KEY_COLUMNS]).any()
    # the source names the table or section the cell is printed in
    for _, r in pub.iterrows():
        where = r["table"] if r["table"] not in ("latency claims", "grid means") else ""
        assert where in r["source"], (r["table"], r["source"])
    # the number of cells is the tables' shapes (rows x columns as the papers print them)
    n = pub.groupby(["paper", "table"]).size().to_dict()
    assert n[("ccbqp", "Table 1")] == 13 * 2 * 5 and n[("ccbqp", "Table 2")] == 13 * 2 * 2
    assert n[("dfrag", "Table 1")] == (5 * 3 + 3) * 10 - 4  # RAPTOR and HippoRAG were not run on En.QA (X)
    assert n[("dfrag", "Table 3")] == 5 * 2 and n[("dfrag", "Table 4")] == 3 * 4
    assert n[("dartboard", "Table 2")] == 10 * 4
    assert n[("vrsd", "Table 1")] == n[("vrsd", "Table 3")] == 3 * 10 * 3 * 2
    assert n[("mio", "Table 1")] == 4 * 6 and n[("mio", "Table 3")] == 5 * 5
    assert n[("mio", "Table 4")] == n[("mio", "Table 5")] == n[("mio", "Table 6")] == 12 * 5
    assert n[("mio", "Table 7")] == 18 * 5
    assert n[("dfrag", "Table 2")] == 5 * 2 and n[("mio", "Table 8")] == 2 * 2  # issue 37: the two left out
    # missing.csv keeps figures only
    gaps = missing()
    assert len(gaps) and gaps["table"].str.startswith("Fig").all() and gaps["reason"].str.contains("figure").all()


def test_a_malformed_file_is_one_clear_error(tmp_path):
    good = published("dartboard").iloc[:2]
    cols = ["paper", "table", "dataset", "setting", "method", "metric", "value", "qualifier", "row", "column",
            "source", "note"]
    for change, match in ((lambda f: f.assign(row=""), r"x.csv:2: field 'row'"),
                          (lambda f: f.assign(value=["1", "one"]), r"x.csv:3: field 'value'.*'one'"),
                          (lambda f: f.assign(qualifier="about"), r"x.csv:2: field 'qualifier'"),
                          (lambda f: pd.concat([f.iloc[:1], f.iloc[:1]]), r"x.csv:3: key .* repeats line 2")):
        folder = tmp_path / str(abs(hash(match)))
        folder.mkdir()
        change(good)[cols].to_csv(folder / "x.csv", index=False)
        with pytest.raises(ValueError, match=match):
            read_folder(folder)


def _value(pub, **keys):
    sel = pub
    for k, v in keys.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, keys
    return float(sel["value"].iloc[0])


def test_cells_the_papers_print_twice_agree():
    v = published("vrsd")
    t1 = v[(v["table"] == "Table 1") & (v["dataset"] == "arc-da")].set_index(["setting", "method", "metric"])["value"]
    t3 = v[(v["table"] == "Table 3") & v["setting"].str.contains("all-mpnet")].set_index(
        ["setting", "method", "metric"])["value"]
    assert len(t1) == 60 and t1.sort_index().equals(t3.sort_index())  # Table 3's all-mpnet column is Table 1's ARC
    d = published("dfrag")
    for task in ("hotpotqa", "musique", "2wikimqa"):
        for llm in ("llama-3.3-70b", "qwen-2.5-72b"):  # Table 4's uniform column is Table 1's DF-RAG + IC at 500 words
            assert _value(d, table="Table 4", dataset=task, setting=f"llm={llm},sampling=uniform,w=100") == _value(
                d, table="Table 1", dataset=task, setting=f"llm={llm},w=100", method="dfrag_ic")
    for task in ("hotpotqa", "2wikimqa", "multifieldqa_en", "en_qa"):  # Table 3's gMMR column is Table 1's DF-RAG
        assert _value(d, table="Table 3", dataset=task, setting="base=gmmr,llm=llama-3.3-70b,w=100") == _value(
            d, table="Table 1", dataset=task, setting="llm=llama-3.3-70b,w=100", method="dfrag")
    # ... except MuSiQue, where the paper's Table 3 prints Table 1's DF-RAG + IC (noted on the row)
    mus = d[(d["table"] == "Table 3") & (d["dataset"] == "musique") & d["setting"].str.startswith("base=gmmr")]
    assert mus["value"].iloc[0] == _value(d, table="Table 1", dataset="musique", setting="llm=llama-3.3-70b,w=100",
                                          method="dfrag_ic") and "disagree" in mus["note"].iloc[0]


def test_claims_recomputed_from_the_tables():
    d = published("dfrag")

    def cell(method, llm, w, task="2wikimqa"):
        return _value(d, table="Table 1", dataset=task, setting=f"llm={llm},w={w}", method=method)

    # Sec. 4.3 / abstract: 91.3 % of the Oracle's gap, 2WikiMQA, Qwen 2.5 72B, 1500 words (DF-RAG + IC)
    cap = (cell("dfrag_ic", "qwen-2.5-72b", 300) - cell("vanilla", "qwen-2.5-72b", 300)) / (
        cell("oracle", "qwen-2.5-72b", 300) - cell("vanilla", "qwen-2.5-72b", 300))
    assert round(cap, 3) == _value(d, table="abstract", method="dfrag", metric="gap_captured_max")
    # Sec. 4.2's "~7-19 % F1 points" of the Oracle over vanilla RAG is Table 1's range at 500 words; the
    # abstract's "up to 18 %" is below Table 1's largest gap (19.0, MuSiQue, Qwen, 500 words), as the CSV notes
    gaps = [cell("oracle", llm, 100, t) - cell("vanilla", llm, 100, t) for llm in ("llama-3.3-70b", "qwen-2.5-72b")
            for t in PAPER_TASKS]
    assert (round(min(gaps)), round(max(gaps))) == (7, 19)
    assert _value(d, table="abstract", method="oracle", metric="f1_gain_vs_vanilla_max") == 18 < max(gaps)
    # Sec. 4.2's "up to +8.9% ... at the 500-word context length, and up to +6.2% and +9.5% at the 1000- and
    # 1500-word settings": +8.9 is HotpotQA with Qwen (DF-RAG + IC, 60.1 - 51.2), though 2WikiMQA's is 9.1;
    # 6.2 and 9.5 are the largest gains at 1000 and 1500 words (docs/howto/reproduce.md)
    gain = {(llm, w, t): max(cell(m, llm, w, t) for m in ("dfrag", "dfrag_ic")) - cell("vanilla", llm, w, t)
            for llm in ("llama-3.3-70b", "qwen-2.5-72b") for w in PAPER_WORDS for t in PAPER_TASKS}
    assert round(cell("dfrag_ic", "qwen-2.5-72b", 100, "hotpotqa") - cell("vanilla", "qwen-2.5-72b", 100, "hotpotqa"), 1) == 8.9
    assert [round(max(v for (_, w, _), v in gain.items() if w == ws), 1) for ws in PAPER_WORDS] == [9.1, 6.2, 9.5]
    # App. A.1, Table 2's instances are the task sizes Sec. 3.5 names (200 x 3, 150, 351)
    assert {r["dataset"]: r["value"] for _, r in d[(d["table"] == "Table 2") & (d["metric"] == "instances")].iterrows()} \
        == {"hotpotqa": 200, "2wikimqa": 200, "musique": 200, "multifieldqa_en": 150, "en_qa": 351}
    # CCBQP: F1 > 0.5 is a stricter bar than R > 0.8 is for nobody: shares are fractions, thresholds as printed
    c = published("ccbqp")
    shares = c[c["metric"].str.startswith("share_")]["value"]
    assert ((shares >= 0) & (shares <= 1)).all()
    # the MIO repository's README quotes Table 3 (k = 2 and k = 10), a second source
    m = published("mio", "Table 3")
    assert _value(m, setting="k=2", metric="answer_cosine") == 0.8352 and _value(m, setting="k=2", metric="bertscore_f1") == 0.8436
    assert _value(m, setting="k=10", metric="answer_cosine") == 0.9246 and _value(m, setting="k=10", metric="bertscore_f1") == 0.8680
    # Dartboard: the Oracle retrieves only positives (NDCG 1 on the simple questions); Empty retrieves nothing
    b = published("dartboard", "Table 2")
    assert _value(b, dataset="simple", method="oracle", metric="ndcg") == 1.0
    assert _value(b, dataset="simple", method="empty", metric="ndcg") == _value(
        b, dataset="integration", method="empty", metric="component_ndcg") == 0.0


# ---- every published cell is reachable by the recipe's table() keys -------------------------------


def test_every_recipe_has_a_context_here():
    assert set(CONTEXTS) == set(RECIPES)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_published_cell_is_reachable_by_the_recipes_keys(name):
    recipe = RECIPES[name]
    rows = tidy_rows(recipe, CONTEXTS[name])
    if name == "mio-encoders":  # the encoders' rows of one question share a query id and pick different sets
        rows["selected"] = [[f"{e}{i}" for i in range(5)] for e in rows["encoder"]]
    table = recipe.table(rows)
    pub = published(recipe.paper_key)
    pub = pub[pub["table"].isin(recipe.published_tables)]
    figures = set(missing(recipe.paper_key)["table"])
    assert set(recipe.published_tables) <= set(pub["table"]) | figures, "a published table the data lacks"
    orphans = _key(pub) - _key(table)
    assert not orphans, sorted(orphans)[:5]


def test_every_published_row_belongs_to_a_recipe():
    owned = {(r.paper_key, t) for r in RECIPES.values() for t in r.published_tables}
    pub = published()
    assert set(zip(pub["paper"], pub["table"])) <= owned
    assert set(zip(missing()["paper"], missing()["table"])) <= owned


def test_the_tables_scale_as_printed():
    """DF-RAG's F1 and Dartboard's QA accuracy print in percent; the join keeps the paper's unit."""
    rows = tidy_rows(RECIPES["dfrag-table1"], CONTEXTS["dfrag-table1"][:1])
    rows["f1"] = 0.5
    t = RECIPES["dfrag-table1"].table(rows)
    assert set(t[(t["table"] == "Table 1") & (t["metric"] == "f1")]["value"].dropna()) == {50.0}
    rows = tidy_rows(RECIPES["dartboard-rgb"], CONTEXTS["dartboard-rgb"])
    rows["accuracy"] = 0.25
    t = RECIPES["dartboard-rgb"].table(rows)
    assert set(t[t["metric"] == "accuracy"]["value"]) == {25.0}
    assert not any(math.isnan(x) for x in t[t["metric"] == "ndcg"]["value"])
