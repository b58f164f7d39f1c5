"""qrels through ir_measures, and collections through ir_datasets, offline: an ir_datasets cache
laid out by hand (what its first download leaves) stands in for the network, and the result is
checked against divopt's own BEIR loader reading the same files."""
import gzip
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

from divopt_rag.data import DataFormatError, load_npz, read_trec_qrels

from helpers.beir_files import make_beir

QRELS = "q1 0 d1 2\nq1 0 d2 0\n\nq2 Q0 d3 1\n"


@pytest.mark.parametrize("gz", [False, True])
def test_trec_qrels(tmp_path, gz):
    path = tmp_path / ("qrels.txt.gz" if gz else "qrels.txt")
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(QRELS)
    else:
        path.write_text(QRELS)
    assert read_trec_qrels(path) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}


@pytest.mark.parametrize("text, line, field, message", [
    ("q1 0 d1 2\nq1 0 d2\n", 2, None, "has 4 fields"),
    ("q1 0 d1 2\n\nq2 0 d2 high\n", 3, "grade", "expected an integer, got 'high'"),
])
def test_malformed_trec_qrels_name_the_line(tmp_path, text, line, field, message):
    path = tmp_path / "bad.qrels"
    path.write_text(text)
    with pytest.raises(DataFormatError, match=message) as err:
        read_trec_qrels(path)
    assert err.value.line == line and err.value.field == field and err.value.file.endswith("bad.qrels")


def test_npz_with_trec_qrels(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "mine.npz", E=rng.standard_normal((4, 3)), Q=rng.standard_normal((2, 3)),
             doc_ids=np.array(["d1", "d2", "d3", "d4"]), query_ids=np.array(["q1", "q2"]))
    (tmp_path / "qrels.txt").write_text(QRELS)
    data = load_npz(tmp_path / "mine.npz", qrels=tmp_path / "qrels.txt")
    assert data.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}


def test_ir_datasets_beir_equals_the_local_beir_loader(tmp_path):
    pytest.importorskip("ir_datasets")
    beir = make_beir(tmp_path / "scifact")
    home = tmp_path / "irds"
    # what ir_datasets' first download of beir/scifact leaves: the release zip at its cache path
    # (ir_datasets/etc/downloads.json: beir/scifact -> scifact/source.zip); present, it is used as is
    (home / "beir" / "scifact").mkdir(parents=True)
    with zipfile.ZipFile(home / "beir" / "scifact" / "source.zip", "w") as z:
        for f in ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"]:
            z.write(beir / f, f"scifact/{f}")
    script = textwrap.dedent(f"""
        import json
        from divopt_rag.data import load_beir, load_ir_datasets
        a, b = load_ir_datasets("beir/scifact/test"), load_beir({str(beir)!r})
        fields = ["passage_ids", "texts", "titles", "query_ids", "queries", "qrels"]
        print(json.dumps({{"same": [getattr(a, f) == getattr(b, f) for f in fields], "qrels": a.qrels,
                          "queries": a.query_ids, "name": a.name}}))
    """)
    env = {**os.environ, "IR_DATASETS_HOME": str(home)}  # read when ir_datasets is imported: a fresh process
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["same"] == [True] * 6
    assert out["qrels"] == {"q1": {"d1": 2, "d2": 1, "d3": 0}, "q2": {"d2": 1}} and out["queries"] == ["q1", "q2"]
    assert out["name"] == "beir-scifact-test"


def test_ir_datasets_ids_are_checked():
    pytest.importorskip("ir_datasets")
    from divopt_rag.data import load_ir_datasets

    with pytest.raises(ValueError, match="unknown ir_datasets id 'beir/no-such-set'"):
        load_ir_datasets("beir/no-such-set")
    with pytest.raises(ValueError, match="has no .*qrels"):
        load_ir_datasets("beir/scifact")  # the corpus alone: no queries and qrels without a split
