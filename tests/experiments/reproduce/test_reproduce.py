"""``divopt-rag reproduce`` without an LLM: the CCBQP Pareto and latency recipes and VRSD's tables run
end to end on fixture files in the datasets' public formats (a hashing embedder stands in for
MiniLM), and every printed / written table equals a plain recomputation written here from the
tidy rows (metrics recomputed from the texts and embeddings with numpy loops); a killed run
resumes without redoing finished rows; bad input is one line and exit code 2; the published
numbers are well-formed and agree with the second source that quotes them."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from divopt_rag.data import load_openbookqa, load_qampari, load_sciq
from divopt_rag.experiments.reproduce import (RECIPES, MissingData, Options, ReproduceError, published, run_recipe,
                                              runner)
from divopt_rag.experiments.reproduce.published import missing
from helpers.reproduce_fakes import FIXTURES, HashEmbedder, cell, make_data_dir

CORPUS = FIXTURES / "psgs" / "psgs_w100.tsv"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return make_data_dir(tmp_path_factory.mktemp("datasets"))


def _opts(tmp_path, data_dir, **kw):
    base = dict(out=tmp_path / "out", data_dir=data_dir, model=HashEmbedder(), cache_dir=tmp_path / "cache",
                progress=False)
    base.update(kw)
    return Options(**base)


def _unit(a):
    a = np.asarray(a, dtype=np.float64)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def _ilad_plain(V):
    pairs = list(itertools.combinations(range(len(V)), 2))
    return float(np.mean([1.0 - V[i] @ V[j] for i, j in pairs])) if pairs else math.nan


# ---- CCBQP Fig. 1 ---------------------------------------------------------------------------
def test_ccbqp_pareto_equals_plain_recomputation(tmp_path, data_dir):
    opts = _opts(tmp_path, data_dir, corpus=CORPUS, overrides={"k": [2, 3], "theta": [0.3, 0.8]})
    res = run_recipe(RECIPES["ccbqp-pareto"], opts)
    rows = res.rows
    assert res.n_errors == 0 and (rows["status"] == "ok").all()
    # 2 questions x (topk: 2 k + fw/mmr/dpp: 2 k x 2 theta)
    assert len(rows) == 2 * (2 + 3 * 4) and set(rows["method"]) == {"topk", "fw", "mmr", "dpp"}
    # independent truth per row: the texts of the selected ids, the aliases, a numpy ILAD
    ds = load_qampari(data_dir / "qampari" / "dev_data.jsonl", corpus=CORPUS)
    texts = dict(zip(ds.passage_ids, ds.passage_texts(with_titles=True)))
    raw = dict(zip(ds.passage_ids, ds.texts))
    for _, r in rows.iterrows():
        sel = list(r["selected"])
        assert len(sel) == r["k"] and len(set(sel)) == len(sel)
        joined = " ".join(raw[p] for p in sel).lower()
        parts = ds.answer_groups_for(r["query_id"])
        want = np.mean([any(a.lower() in joined for a in part) for part in parts])
        assert r["answer_recall"] == pytest.approx(want)
        V = _unit(HashEmbedder()([texts[p] for p in sel]))
        assert r["ilad"] == pytest.approx(_ilad_plain(V), abs=1e-5)
    # the table: means over questions per (method, k, theta), written here with a plain loop
    for (method, k, theta), g in rows.groupby(["method", "k", rows.get("theta").fillna(-1)]):
        setting = f"k={k}" if theta == -1 else f"k={k},theta={theta:g}"
        for metric in ("answer_recall", "ilad"):
            assert cell(res.table, method=method, setting=setting, metric=metric) == pytest.approx(g[metric].mean())
    assert set(res.table["table"]) == {"Fig. 1"} and res.table["published"].isna().all()
    # the files: tidy rows and the table, as returned
    assert len(pd.read_parquet(res.out / "results.parquet")) == len(rows)
    assert len(pd.read_parquet(res.out / "table.parquet")) == len(res.table)
    # Fig. 1's panels, one per k, drawn from the same rows
    assert {p.name for p in res.out.glob("fig1_*.png")} == {"fig1_qampari-dev_k2.png", "fig1_qampari-dev_k3.png"}
    # the printed table shows our cells and says which published numbers are missing
    text = runner.format_table(RECIPES["ccbqp-pareto"], res.table)
    assert "answer_recall" in text and f"{res.table['value'].iloc[0]:.4g}" in text


def test_resume_after_an_interrupted_run_redoes_nothing(tmp_path, data_dir, monkeypatch):
    recipe = RECIPES["ccbqp-pareto"]
    over = {"k": [2], "theta": [0.5]}
    full = run_recipe(recipe, _opts(tmp_path / "a", data_dir, overrides=over))
    calls = []
    real = recipe.execute

    def dying(prep, run, env):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(run.key)
        return real(prep, run, env)

    monkeypatch.setattr(recipe, "execute", dying)
    opts = _opts(tmp_path / "b", data_dir, overrides=over)
    with pytest.raises(KeyboardInterrupt):
        run_recipe(recipe, opts)
    assert len(list((opts.out / "parts").glob("*.parquet"))) == 3
    done_first = list(calls)
    monkeypatch.setattr(recipe, "execute", lambda prep, run, env: calls.append(run.key) or real(prep, run, env))
    resumed = run_recipe(recipe, opts)
    assert resumed.n_skipped == 3 and resumed.n_executed == full.n_runs - 3
    assert not set(calls[3:]) & set(done_first)  # nothing finished was run again
    assert resumed.run_id == full.run_id
    cols = [c for c in full.rows.columns if c not in ("seconds",)]
    pd.testing.assert_frame_equal(resumed.rows[cols].reset_index(drop=True), full.rows[cols].reset_index(drop=True))
    # QAMPARI's pool gathers the loaded questions' passages: a limited run is another dataset
    monkeypatch.setattr(recipe, "execute", real)
    lim = run_recipe(recipe, _opts(tmp_path / "a", data_dir, overrides=over, limit=1))
    assert lim.n_executed == lim.n_runs and not set(lim.rows["run_key"]) & set(full.rows["run_key"])


def test_limited_rows_are_reused_where_each_query_has_its_own_pool(tmp_path, data_dir):
    recipe, over = RECIPES["dartboard-sigma"], {"sigma": [0.05, 0.2]}
    lim = run_recipe(recipe, _opts(tmp_path, data_dir, overrides=over, retrieval_only=True, limit=1))
    full = run_recipe(recipe, _opts(tmp_path, data_dir, overrides=over, retrieval_only=True))
    assert full.n_skipped == lim.n_runs == 2 * 2 and set(lim.rows["run_key"]) < set(full.rows["run_key"])


def test_wordnet_and_synthetic_analogues_are_labelled(tmp_path, data_dir):
    res = run_recipe(RECIPES["ccbqp-pareto"], _opts(tmp_path, data_dir, analogue="synthetic", limit=2,
                                                    overrides={"k": [5], "theta": [0.5]}))
    assert set(res.rows["dataset"]) == {"synthetic (analogue)"} and res.rows["analogue"].all()
    # on the analogue, answer recall is the share of the query's labelled subtopics covered
    from divopt_rag.data import synthetic_pools

    data = synthetic_pools(n=2000, d=128, n_queries=16)
    for _, r in res.rows.iterrows():
        labels = data.subtopics[r["query_id"]]
        want = len({labels[p] for p in r["selected"] if p in labels}) / len(set(labels.values()))
        assert r["answer_recall"] == pytest.approx(want)
    buf = __import__("io").StringIO()
    runner.print_report(RECIPES["ccbqp-pareto"], res, buf)
    assert "ANALOGUE" in buf.getvalue() and "published number missing: Fig. 1" in buf.getvalue()


# ---- CCBQP latency --------------------------------------------------------------------------
def test_latency_table_is_medians_and_ratios_of_the_rows(tmp_path, data_dir):
    over = {"n": [300], "d": [16], "repeats": [1], "k": [5, 10], "theta": [0.7]}
    res = run_recipe(RECIPES["ccbqp-latency"], _opts(tmp_path, data_dir, overrides=over))
    rows = res.rows
    assert len(rows) == 2 * 4 and (rows["seconds"] > 0).all() and (rows["n"] == 300).all()
    assert (res.out / "latency_vs_k.png").exists() and any("latency_vs_k.png" in n for n in res.notes)
    label = "narrow-cone n=300 d=16"
    for k in (5, 10):
        # the paper's table is in ms, the rows (as every divopt table) in seconds
        ms = {m: 1e3 * float(rows[(rows["method"] == m) & (rows["k"] == k)]["seconds"].iloc[0])
              for m in ("topk", "fw", "mmr", "dpp")}
        s = f"k={k},theta=0.7"
        assert cell(res.table, dataset=label, method="fw", setting=s, metric="ms") == pytest.approx(ms["fw"])
        assert cell(res.table, dataset=label, method="topk", setting=f"k={k}", metric="ms") == pytest.approx(ms["topk"])
        assert cell(res.table, method="fw", setting=s, metric="mmr_over_fw") == pytest.approx(ms["mmr"] / ms["fw"])
        assert cell(res.table, method="fw", setting=s, metric="dpp_over_fw") == pytest.approx(ms["dpp"] / ms["fw"])
    # the paper's statements in our numbers: a pool of another scale keeps its own label (no join)
    claims = res.table[res.table["table"] == "latency claims"]
    ours = claims[claims["value"].notna()]
    assert set(ours["dataset"]) == {"n=300,d=16"} and claims[claims["value"].isna()]["published"].notna().all()
    ratios = [float(rows[(rows["method"] == "mmr") & (rows["k"] == k)]["seconds"].iloc[0])
              / float(rows[(rows["method"] == "fw") & (rows["k"] == k)]["seconds"].iloc[0]) for k in (5, 10)]
    assert cell(ours, setting="theta>=0.5", metric="mmr_over_fw_min") == pytest.approx(min(ratios))
    assert cell(ours, setting="theta>=0.5", metric="mmr_over_fw_max") == pytest.approx(max(ratios))


def test_latency_claims_join_at_the_papers_scale():
    """At n >= 2e6 and d = 1024 the claims sit beside the paper's numbers (rows written here: the
    recipe's table on them, without running a 2e6 pool in a unit test)."""
    recs = []
    for method, theta, ms in (("mmr", 0.5, 900.0), ("mmr", 0.9, 870.0), ("dpp", 0.5, 1200.0), ("dpp", 0.9, 950.0),
                              ("fw", 0.5, 170.0), ("fw", 0.9, 41.0)):
        recs.append({"dataset": "narrow-cone n=2000000 d=1024", "method": method, "k": 100, "theta": theta,
                     "params": json.dumps({"k": 100, "theta": theta}), "seconds": ms / 1e3, "n": 2_000_000, "d": 1024,
                     "status": "ok", "query_id": "q0"})
    t = runner.paper_table(RECIPES["ccbqp-latency"], pd.DataFrame(recs))
    c = t[t["table"] == "latency claims"].set_index(["method", "setting", "metric"])
    assert c.loc[("mmr", "k=100", "ms_min"), ["value", "published"]].tolist() == [870.0, 850.0]
    assert c.loc[("dpp", "k=100", "ms_min"), ["value", "published"]].tolist() == [950.0, 850.0]
    assert c.loc[("fw", "k=100", "ms_max"), ["value", "published"]].tolist() == [170.0, 180.0]
    assert c.loc[("fw", "k=100,theta=0.9", "ms"), "value"] == 41.0
    assert c.loc[("fw", "theta>=0.5", "mmr_over_fw_max"), ["value", "published"]].tolist() == [870 / 41, 22.9]
    assert c.loc[("fw", "theta>=0.5", "mmr_over_fw_min"), ["value", "published"]].tolist() == [900 / 170, 2.4]


# ---- VRSD ------------------------------------------------------------------------------------
def test_vrsd_tables_equal_plain_recomputation(tmp_path, data_dir):
    over = {"k": [2, 3], "theta": [0.3, 0.5], "query_share": [1.0], "candidates": [4]}
    res = run_recipe(RECIPES["vrsd-tables"], _opts(tmp_path, data_dir, corpus=CORPUS, overrides=over))
    rows = res.rows
    assert (rows["n"] <= 4).all() and (rows["n"] == 4).any()  # every method picks among the query's 4 most similar passages (Sec. 3.1)
    assert res.n_errors == 0 and set(rows["dataset"]) == {"arc-da", "openbookqa", "sciq"}
    enc = "test-hash-embedder-32"  # the encoder's name keys every cell (Tables 1 and 3 are per encoder)
    assert set(rows["encoder"]) == {enc}
    sources = {
        "sciq": load_sciq(data_dir / "sciq" / "test.json"),
        "openbookqa": load_openbookqa(data_dir / "openbookqa" / "Data"),
    }
    for name, ds in sources.items():
        E = dict(zip(ds.passage_ids, _unit(HashEmbedder()(ds.texts))))
        Q = dict(zip(ds.query_ids, _unit(HashEmbedder()(ds.queries))))
        for _, r in rows[rows["dataset"] == name].iterrows():
            q = Q[r["query_id"]]
            top4 = sorted(E, key=lambda p: -float(E[p] @ q))[:4]
            assert set(r["selected"]) <= set(top4)
            V = np.array([E[p] for p in r["selected"]])
            s = V.sum(0)
            assert r["sim"] == pytest.approx(float(s @ Q[r["query_id"]] / np.linalg.norm(s)), abs=1e-5)
            # Eq. 7: the mean pairwise cosine of the selection (lower is more diverse)
            assert r["div"] == pytest.approx(1.0 - _ilad_plain(V), abs=1e-5)
    # Tables 1 and 3: means; win rates: the share of questions where VRSD's similarity is larger, its
    # mean pairwise cosine smaller (Eqs. 8-9)
    rows = rows.assign(theta=rows["theta"].fillna(-1))
    for (ds, method, k, theta), g in rows.groupby(["dataset", "method", "k", "theta"]):
        name = "k-dpp" if method == "dpp" else method
        setting = f"encoder={enc},k={k}" + ("" if theta == -1 else f",theta={theta:g}")
        for tid in ("Table 1",) + (("Table 3",) if ds == "arc-da" else ()):
            assert cell(res.table, table=tid, dataset=ds, method=name, setting=setting, metric="sim_mean") \
                == pytest.approx(g["sim"].mean())
            assert cell(res.table, table=tid, dataset=ds, method=name, setting=setting, metric="div_mean") \
                == pytest.approx(g["div"].mean())
    for (ds, k), g in rows.groupby(["dataset", "k"]):
        v = g[g["method"] == "vrsd"].set_index("query_id")
        for b, name in (("dpp", "vrsd vs k-dpp"), ("mmr", "vrsd vs mmr (theta=0.3)")):
            o = g[(g["method"] == b) & ((g["theta"] == 0.3) | (b == "dpp"))].set_index("query_id")
            wins = [float(v.loc[q, "sim"] > o.loc[q, "sim"]) for q in v.index]
            divw = [float(v.loc[q, "div"] < o.loc[q, "div"]) for q in v.index]
            setting = f"encoder={enc},k={k}"
            assert cell(res.table, table="win rates", dataset=ds, method=name, setting=setting,
                        metric="similarity_win_rate") == pytest.approx(np.mean(wins))
            assert cell(res.table, table="win rates", dataset=ds, method=name, setting=setting,
                        metric="diversity_win_rate") == pytest.approx(np.mean(divw))


def test_vrsd_queries_are_a_seeded_fifth_of_the_questions(tmp_path, data_dir):
    res = run_recipe(RECIPES["vrsd-tables"], _opts(tmp_path, data_dir, overrides={"k": [2], "theta": [0.5]}))
    n = load_sciq(data_dir / "sciq" / "test.json").n_queries
    got = sorted(set(res.rows[res.rows["dataset"] == "sciq"]["query_index"]))
    want = sorted(np.random.default_rng(0).choice(n, size=math.ceil(0.2 * n), replace=False).tolist())
    assert got == want


def test_vrsd_skips_arc_da_without_a_corpus(tmp_path, data_dir):
    res = run_recipe(RECIPES["vrsd-tables"], _opts(tmp_path, data_dir, overrides={"k": [2]}, limit=1))
    assert "arc-da" not in set(res.rows["dataset"])
    assert any("ARC-DA ships no passages" in n for n in res.notes)


# ---- the command line: --list and one-line errors ---------------------------------------------
def _main(argv):
    from divopt_rag.experiments.cli import main as cli

    return cli.main(["reproduce", *argv])  # the real entry point: flags checked, then rcli.main


def test_list_names_every_recipe_and_what_it_needs(capsys):
    assert _main(["--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in out] == list(RECIPES)
    line = {ln.split()[0]: ln for ln in out}
    assert "LLM: yes" in line["dfrag-table4"] and "data: LongBench (hotpotqa, musique" in line["dfrag-table4"]
    assert "InfiniteBench En.QA" in line["dfrag-table1"]
    assert "cross-encoder: optional" in line["dartboard-rgb"] and "offline analogue: wordnet" in line["dartboard-rgb"]
    assert "data: none (synthetic)" in line["ccbqp-latency"] and "GPU:" in line["ccbqp-latency"]


@pytest.mark.parametrize("argv, needle", [
    (["nope"], "unknown recipe 'nope'"),
    (["dartboard-rgb"], "no en.json under"),
    (["dfrag-table1", "--analogue", "synthetic"], "has no 'synthetic' analogue"),
    (["ccbqp-latency", "--set", "bogus=1"], "--set bogus: not an axis or parameter"),
    (["dartboard-rgb", "--cross-encoder", "/nonexistent"],
     "--cross-encoder: expected a local model directory, got '/nonexistent' (no such file or folder)"),
    (["ccbqp-pareto", "--limit", "0"], "--limit: expected an integer >= 1, got '0'"),
])
def test_bad_input_is_one_line_and_exit_2(argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DIVOPT_LLM_BASE_URL", raising=False)
    code = _main([*argv, "--data-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and needle in err and len(err.splitlines()) == 1
    if "en.json" in needle:  # the missing file, where it goes and how to fetch it
        assert "fetch('rgb', " in err and "raw.githubusercontent.com/chen700564/RGB" in err


def test_missing_llm_names_the_variables(tmp_path, data_dir, capsys, monkeypatch):
    monkeypatch.delenv("DIVOPT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("DIVOPT_LLM_MODEL", raising=False)
    code = _main(["dartboard-rgb", "--data-dir", str(data_dir), "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "DIVOPT_LLM_BASE_URL" in err and "DIVOPT_LLM_MODEL" in err
    with pytest.raises(ReproduceError, match="LLM answers only"):
        run_recipe(RECIPES["dfrag-table4"], _opts(tmp_path, data_dir, retrieval_only=True))
    with pytest.raises(MissingData, match="no dev_data.jsonl under"):
        run_recipe(RECIPES["ccbqp-pareto"], _opts(tmp_path, tmp_path / "nothing"))


@pytest.mark.slow
def test_cli_end_to_end_with_the_offline_minilm(tmp_path, data_dir, capsys):
    out = tmp_path / "cli"
    code = _main(["ccbqp-pareto", "--data-dir", str(data_dir), "--out", str(out), "--limit", "1", "--set", "k=2",
                  "--set", "theta=0.5", "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    text = capsys.readouterr().out
    assert code == 0 and "ccbqp-pareto" in text and "published number missing: Fig. 1" in text
    rows = pd.read_parquet(out / "results.parquet")
    table = pd.read_parquet(out / "table.parquet")
    assert len(rows) == 4 and json.loads((out / "config.json").read_text())["n_runs"] == 4
    for _, r in rows.iterrows():
        setting = f"k={r['k']}" if r["method"] == "topk" else f"k={r['k']},theta=0.5"
        assert cell(table, method=r["method"], setting=setting, metric="ilad") == pytest.approx(r["ilad"])
        assert f"{r['ilad']:.4g}" in text


@pytest.mark.slow
def test_cli_with_a_local_cross_encoder_directory(tmp_path, data_dir, capsys):
    """A tiny random CrossEncoder saved offline: the cross-encoder rows run and the model's
    directory is part of the run keys (another model would not reuse these rows)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = ["the", "super", "bowl", "tampa", "facebook", "instagram", "nolan", "apple", "cook", "who", "was"]
    ce = tmp_path / "tiny-ce"
    ce.mkdir()
    (ce / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    BertTokenizer(str(ce / "vocab.txt")).save_pretrained(str(ce))
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=32, max_position_embeddings=128,
                                             num_labels=1, initializer_range=1.0)).save_pretrained(str(ce))
    out = tmp_path / "o"
    code = _main(["dartboard-rgb", "--retrieval-only", "--cross-encoder", str(ce), "--data-dir", str(data_dir),
                  "--out", str(out), "--limit", "1", "--set", "k=3", "--cache-dir", str(tmp_path / "cache"),
                  "--no-progress"])
    text = capsys.readouterr().out
    assert code == 0 and "dartboard_cc" in text and "knn_cc" in text
    rows = pd.read_parquet(out / "results.parquet")
    assert set(rows["method"]) >= {"dartboard_hybrid", "dartboard_cc", "knn_cc", "mmr_cc"} and (rows["status"] == "ok").all()
    assert json.loads((out / "config.json").read_text())["config"]["cross_encoder"] == str(ce.resolve())


# ---- published numbers (more in test_published.py) -------------------------------------------------
def test_every_recipe_prints_its_published_tables_or_names_the_figures():
    pub = published()
    known = set(zip(pub["paper"], pub["table"])) | set(zip(missing()["paper"], missing()["table"]))
    for r in RECIPES.values():
        for t in r.published_tables:
            assert (r.paper_key, t) in known, (r.name, t)
