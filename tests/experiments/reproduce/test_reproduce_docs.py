"""The measured numbers of docs/howto/reproduce.md are written from the recorded runs
(benchmarks/results/reproduce/) by a script (divopt_rag.experiments.reproduce.docnumbers): every
number sits in a marker naming its run, and a number that differs from its run fails here."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from divopt_rag.experiments.reproduce import docnumbers as D

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "howto" / "reproduce.md"
RESULTS = ROOT / "benchmarks" / "results" / "reproduce"


def test_every_number_of_the_reproduce_page_is_its_runs():
    text = DOC.read_text(encoding="utf-8")
    found = D.markers(text)
    assert len(found) >= 60
    assert D.differences(text, RESULTS) == []
    assert D.fill(text, RESULTS) == text
    # every run id the page cites is a marker's, read from the run it names (none written by hand)
    outside = D.MARKER.sub("", text)
    assert not re.findall(r"run id\s+[0-9a-f]{12}\b", outside)
    assert {m.attrs["file"] for m in found if m.attrs.get("column") == "run_id"} >= {
        f"{r}-{a}.csv" for r, a in (("vrsd-tables", "wordnet"), ("dfrag-table1", "wordnet"), ("dartboard-rgb", "wordnet"))}


def _table(rows):
    frame = pd.DataFrame(rows, dtype=str)
    return lambda name: frame


def test_a_number_that_differs_from_its_run_is_named_and_rewritten():
    runs = _table([{"method": "vrsd", "k": "6", "value": "0.81953"}, {"method": "vrsd", "k": "12", "value": "0.82494"},
                   {"method": "mmr", "k": "6", "value": "0.7383"}])
    text = ('VRSD <!--num file=x.csv method=vrsd k=6 fmt=.3f-->0.820<!--/num--> and '
            '<!--numdefaults file=x.csv method=vrsd-->best <!--num agg=max fmt=.2f-->0.82<!--/num--> of '
            '<!--num agg=first column="value * 2" k=12 fmt=.1f-->1.6<!--/num-->')
    assert D.differences(text, runs) == []
    stale = text.replace("0.820<", "0.811<")
    diff = D.differences(stale, runs)
    assert len(diff) == 1 and "writes '0.811', the run says '0.820'" in diff[0] and "line 1" in diff[0]
    assert D.fill(stale, runs) == text


@pytest.mark.parametrize("marker, message", [
    ('<!--num file=x.csv method=vrsd-->1<!--/num-->', "2 rows of x.csv match"),
    ('<!--num file=x.csv method=dpp-->1<!--/num-->', "0 rows of x.csv match"),
    ('<!--num file=x.csv model=vrsd k=6-->1<!--/num-->', "has no column 'model'"),
    ('<!--num method=vrsd k=6-->1<!--/num-->', "needs file="),
    ('<!--num file=x.csv method="vrsd k=6-->1<!--/num-->', "malformed"),
    ('<!--num file=x.csv method=vrsd agg=mode-->1<!--/num-->', "agg must be one of"),
])
def test_a_marker_that_names_no_single_number_is_an_error(marker, message):
    runs = _table([{"method": "vrsd", "k": "6", "value": "0.8"}, {"method": "vrsd", "k": "12", "value": "0.9"}])
    with pytest.raises(ValueError, match=message):
        D.differences(marker, runs)


def test_the_command_checks_and_writes(tmp_path):
    (tmp_path / "runs").mkdir()
    pd.DataFrame({"metric": ["a"], "value": [0.25]}).to_csv(tmp_path / "runs" / "r.csv", index=False)
    doc = tmp_path / "doc.md"
    doc.write_text("x = <!--num file=r.csv metric=a fmt=.2f-->0.20<!--/num-->\n")
    assert D.main([str(doc), str(tmp_path / "runs"), "--check"]) == 1
    assert D.main([str(doc), str(tmp_path / "runs")]) == 0
    assert doc.read_text() == "x = <!--num file=r.csv metric=a fmt=.2f-->0.25<!--/num-->\n"
    assert D.main([str(doc), str(tmp_path / "runs"), "--check"]) == 0
    doc.write_text("x = <!--num file=missing.csv-->1<!--/num-->\n")
    assert D.main([str(doc), str(tmp_path / "runs"), "--check"]) == 2
