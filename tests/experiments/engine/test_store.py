"""The run store: atomic writes leave a complete file or none, run ids hash the configuration
(divopt_rag.experiments.engine.store)."""
from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from divopt_rag.experiments.engine import store as H


def test_atomic_writes_leave_complete_files_or_none(tmp_path, monkeypatch):
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    path = H.write_parquet(df, tmp_path / "sub" / "t.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(path), df)

    def broken(table, where):
        with open(where, "wb") as fh:
            fh.write(b"PAR1 half")
        raise OSError("disk full")

    monkeypatch.setattr(H.pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        H.write_parquet(pd.DataFrame({"a": [9]}), path)
    pd.testing.assert_frame_equal(pd.read_parquet(path), df)  # the old file, untouched
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.parquet"]  # no temporary left
    H.write_text('{"x": 1}', tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text()) == {"x": 1}


def test_run_id_is_a_hash_of_the_config():
    cfg = {"k": 5, "thetas": [0.5, 0.9], "dataset": "synthetic", "out": "/tmp/a"}
    expected = hashlib.sha256(json.dumps({"dataset": "synthetic", "k": 5, "thetas": [0.5, 0.9]},
                                         separators=(",", ":")).encode()).hexdigest()[:12]
    assert H.run_id(cfg, exclude=("out",)) == expected
    assert H.run_id(dict(reversed(list(cfg.items()))), exclude=["out"]) == expected  # key order is irrelevant
    assert H.run_id({**cfg, "out": "/elsewhere"}, exclude=("out",)) == expected
    assert H.run_id({**cfg, "k": 6}, exclude=("out",)) != expected
