"""Result tables as TREC run files and ranx Runs, read back by the IR libraries themselves
(ranx, ir_measures) and evaluated by ir_measures against measures computed by hand.
(ranx's own metrics are not run here: numba compiles them for minutes on a cold 2-core CI.)"""
import json

import numpy as np
import pandas as pd
import pytest

from divopt_rag.experiments.measures.export import run_dict, run_name, runs, to_ranx, to_trec

ir_measures = pytest.importorskip("ir_measures")
ranx = pytest.importorskip("ranx")

QRELS = """q1 0 d1 2
q1 0 d4 1
q1 0 d9 0
q2 0 d2 1
q2 0 d7 3
q3 0 d5 1
"""


def sweep_table():
    """The shape `divopt-rag sweep` writes: one row per (dataset, query, method, params), the
    selected passage ids in selection order; one failed run."""
    rows = []
    picks = {
        ("fw_ws_ms", 0.5): {"q1": ["d1", "d3", "d4"], "q2": ["d7", "d2", "d8"], "q3": ["d6", "d5", "d0"]},
        ("mmr", 0.5): {"q1": ["d3", "d1", "d2"], "q2": ["d8", "d7", "d1"], "q3": []},
        ("mmr", 0.9): {"q1": ["d4", "d9", "d1"], "q2": ["d2", "d3", "d7"], "q3": ["d5", "d1", "d2"]},
    }
    for (method, theta), by_query in picks.items():
        for qi, (qid, sel) in enumerate(by_query.items()):
            rows.append({"run_key": f"{method}{theta}{qid}", "dataset": "tiny", "query_index": qi, "query_id": qid,
                         "method": method, "params": json.dumps({"k": 3, "theta": theta}, sort_keys=True), "k": 3,
                         "theta": theta, "status": "ok" if sel else "error", "ndcg": np.nan, "selected": sel})
    return pd.DataFrame(rows)


def test_runs_split_a_table_into_its_settings():
    parts = runs(sweep_table())
    assert list(parts) == ["tiny.fw_ws_ms.k=3.theta=0.5", "tiny.mmr.k=3.theta=0.5", "tiny.mmr.k=3.theta=0.9"]
    assert all(len(rows) == 3 for rows in parts.values())
    assert run_name(parts["tiny.mmr.k=3.theta=0.9"].iloc[0]) == "tiny.mmr.k=3.theta=0.9"
    assert list(runs(sweep_table(), by=["method"])) == ["method=fw_ws_ms", "method=mmr"]


@pytest.mark.parametrize("name", ["tiny.fw_ws_ms.k=3.theta=0.5", "tiny.mmr.k=3.theta=0.5", "tiny.mmr.k=3.theta=0.9"])
def test_trec_file_round_trips_through_ranx_and_ir_measures(tmp_path, name):
    rows = runs(sweep_table())[name]
    path = to_trec(rows, tmp_path / f"{name}.trec")
    want = {q: list(sel) for q, sel in zip(rows["query_id"], rows["selected"]) if sel}
    # ranx reads the file to the Run that to_ranx builds, named after the setting
    from_file = ranx.Run.from_file(str(path), kind="trec")
    built = to_ranx(rows)
    assert built.name == name and from_file.name == name
    assert from_file.to_dict() == built.to_dict() == run_dict(rows)
    # ir_measures reads the same ranked lists back: rank order = selection order
    scored = list(ir_measures.read_trec_run(str(path)))
    got = {}
    for sd in sorted(scored, key=lambda s: (s.query_id, -s.score)):
        got.setdefault(sd.query_id, []).append(sd.doc_id)
    assert got == want


def test_exported_runs_evaluate_as_computed_by_hand(tmp_path):
    """ir_measures (pytrec_eval) on the exported files against P@2, nDCG@3 and RR computed here
    from the table (linear gains, as trec_eval; a failed row retrieves nothing and scores 0)."""
    qrels_path = tmp_path / "qrels.txt"
    qrels_path.write_text(QRELS)
    qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
    judged = {}
    for q in qrels:
        judged.setdefault(q.query_id, {})[q.doc_id] = q.relevance

    def by_hand(qid, sel):
        g = [judged[qid].get(d, 0) for d in sel]
        ideal = sorted(judged[qid].values(), reverse=True)
        dcg = lambda gains: sum(x / np.log2(i + 2) for i, x in enumerate(gains[:3]))
        first = next((i for i, x in enumerate(g) if x >= 1), None)
        return {"P@2": sum(x >= 1 for x in g[:2]) / 2, "nDCG@3": dcg(g) / dcg(ideal),
                "RR": 0.0 if first is None else 1 / (first + 1)}

    measures = {"P@2": ir_measures.P @ 2, "nDCG@3": ir_measures.nDCG @ 3, "RR": ir_measures.RR}
    for name, rows in runs(sweep_table()).items():
        path = to_trec(rows, tmp_path / f"{name}.trec")
        got = {(m.measure, m.query_id): m.value
               for m in ir_measures.iter_calc(list(measures.values()), qrels, ir_measures.read_trec_run(str(path)))}
        for qid, sel in zip(rows["query_id"], rows["selected"]):
            want = by_hand(qid, list(sel))
            for key, measure in measures.items():
                np.testing.assert_allclose(got.get((measure, qid), 0.0), want[key], atol=1e-9, err_msg=f"{name} {qid} {key}")


def test_certify_tables_and_bad_tables(tmp_path):
    certify = pd.DataFrame({"query_id": ["a", "b"], "method": ["fw", "fw"], "selected_ids": [["p1", "p2"], ["p3"]]})
    path = to_trec(certify, tmp_path / "c.trec", name="fw-run")
    # ranx's writer: scores as floats, no newline after the last line
    assert path.read_text().splitlines() == ["a Q0 p1 1 2.0 fw-run", "a Q0 p2 2 1.0 fw-run", "b Q0 p3 1 1.0 fw-run"]
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file became c.trec
    with pytest.raises(ValueError, match=r"query 'q1' has 3 rows \(settings differ in \['method', 'params', 'theta'"):
        to_trec(sweep_table(), tmp_path / "all.trec")
    with pytest.raises(ValueError, match="no column of selected passage ids"):
        run_dict(pd.DataFrame({"query_id": ["a"]}))
    with pytest.raises(ValueError, match="contains white space"):
        to_trec(pd.DataFrame({"query_id": ["a"], "selected": [["p 1"]]}), tmp_path / "w.trec")
    with pytest.raises(ValueError, match="lists a passage twice"):
        run_dict(pd.DataFrame({"query_id": ["a"], "selected": [["p1", "p1"]]}))
    with pytest.raises(ValueError, match="name must be a run tag"):
        to_trec(certify, tmp_path / "x.trec", name="my run")


def test_qrels_reach_ranx_under_any_pandas(tmp_path):
    """A dataset's qrels frame goes to ranx through ranx's own from_df and through to_ranx_qrels
    (which takes a dataset, a dict or a frame), giving ranx's Qrels of the same judgments."""
    from divopt_rag.data import Dataset
    from divopt_rag.experiments.measures.export import to_ranx_qrels

    ds = Dataset(name="tiny", passage_ids=["d1", "d2", "d4", "d9"], texts=["a", "b", "c", "d"], query_ids=["q1", "q2"],
                 queries=["x", "y"], qrels={"q1": {"d1": 2, "d4": 1, "d9": 0}, "q2": {"d2": 1}})
    frame = ds.qrels_frame()
    assert frame["query_id"].dtype == object and frame["doc_id"].dtype == object  # pandas 2 and 3
    want = {str(q): {str(d): int(g) for d, g in judged.items()} for q, judged in ds.qrels.items()}
    via_df = ranx.Qrels.from_df(frame, q_id_col="query_id", doc_id_col="doc_id", score_col="relevance")
    for given in (ds, ds.qrels, frame, frame.astype({"query_id": "string", "doc_id": "string"})):
        assert to_ranx_qrels(given).to_dict() == via_df.to_dict() == want
    # ir_measures takes the same frame as its qrels: P@2 of q1's run [d1, d9] is 1/2
    got = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.P @ 2], frame, {"q1": {"d1": 2.0, "d9": 1.0}})}
    assert got["q1"] == 0.5
    with pytest.raises(ValueError, match="missing \\['relevance'\\]"):
        to_ranx_qrels(frame.drop(columns="relevance"))
