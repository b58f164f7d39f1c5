"""Files that hang or are silently wrong (issue 48, item 5).

* A part file replaced by a FIFO hung the sweep (``open`` waits for a writer): every file read
  back is opened without blocking and must be a regular file
  (:func:`divopt_rag.data.files.open_regular`); a part that is not is set aside and run again.
* A YAML config with two ``grid:`` keys was accepted and the second replaced the first: a key
  given twice is refused, naming the file and the line (JSON likewise; TOML refuses it itself).

The hang is caught by running the sweep in a child process with a generous deadline: the
deadline is a liveness guard (the unfixed code waits forever), not a bound on speed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from divopt_rag.data.files import NotRegularFile, read_regular
from divopt_rag.data.integrity import CacheIntegrityError, read_manifest
from divopt_rag.experiments.cli import main as cli

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")

TINY = {"name": "synthetic", "n": 30, "d": 8, "n_queries": 2, "seed": 3}
#: far beyond what the sweep takes (a few seconds): only a run that waits forever reaches it
HANG = 300


def _sweep_cmd(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "divopt_rag.experiments.cli", "sweep", "--config", str(config), "--out", str(out),
            "--n-workers", "0", "--no-progress"]


def test_a_part_replaced_by_a_fifo_is_set_aside_and_run_again_never_waited_on(tmp_path):
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps({"dataset": TINY, "methods": {"topk": {}}, "grid": {"k": [3], "theta": [0.5]}}))
    out = tmp_path / "out"
    subprocess.run(_sweep_cmd(config, out), check=True, capture_output=True, timeout=HANG)
    table = pd.read_parquet(out / "results.parquet")
    part = sorted((out / "parts").glob("*.parquet"))[0]
    part.unlink()
    os.mkfifo(part)

    try:
        done = subprocess.run(_sweep_cmd(config, out), capture_output=True, text=True, timeout=HANG)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the sweep waited {HANG} s on the FIFO {part}")
    assert done.returncode == 0, done.stderr
    assert "FIFO" in done.stderr and part.name in done.stderr, done.stderr
    assert part.is_file()  # computed again, a regular file now
    assert any(p.name.startswith(part.name.removesuffix(".parquet")) for p in (out / "parts" / "rejected").iterdir())
    again = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(again.drop(columns="seconds"), table.drop(columns="seconds"))


def test_a_fifo_is_refused_by_every_reader_at_once(tmp_path):
    fifo = tmp_path / "manifest.json"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match="FIFO"):
        read_regular(fifo)
    with pytest.raises(NotRegularFile, match="folder"):
        read_regular(tmp_path)
    with pytest.raises(CacheIntegrityError, match="manifest.json"):
        read_manifest(fifo)


def test_a_config_json_replaced_by_a_fifo_is_one_line_exit_2(tmp_path):
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps({"dataset": TINY, "methods": {"topk": {}}, "grid": {"k": [3], "theta": [0.5]}}))
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "config.json")
    try:
        done = subprocess.run(_sweep_cmd(config, out), capture_output=True, text=True, timeout=HANG)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the sweep waited {HANG} s on the FIFO {out / 'config.json'}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "config.json" in done.stderr and "FIFO" in done.stderr, done.stderr


YAML_TWICE = """\
dataset: {name: synthetic, n: 30, d: 8, n_queries: 2}
grid:
  k: [3]
  theta: [0.5]
methods: [topk]
grid:
  theta: [0.9]
"""

YAML_NESTED = """\
dataset: {name: synthetic, n: 30, d: 8, n_queries: 2}
grid:
  k: [3]
  theta: [0.5]
  k: [4]
methods: [topk]
"""


@pytest.mark.parametrize("text, line, key", [(YAML_TWICE, 6, "grid"), (YAML_NESTED, 5, "k")])
def test_a_yaml_config_that_gives_a_key_twice_is_refused_at_its_line(tmp_path, capsys, text, line, key):
    config = tmp_path / "sweep.yaml"
    config.write_text(text)
    out = tmp_path / "out"
    assert cli.main(["sweep", "--config", str(config), "--out", str(out), "--n-workers", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{config}:{line}:" in err and f"duplicate key {key!r}" in err, err
    assert not out.exists()


def test_a_json_config_that_gives_a_key_twice_is_refused(tmp_path, capsys):
    config = tmp_path / "sweep.json"
    config.write_text('{"dataset": "synthetic", "grid": {"k": [3]}, "methods": ["topk"], "grid": {"k": [4]}}')
    assert cli.main(["sweep", "--config", str(config), "--out", str(tmp_path / "out"), "--n-workers", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(config) in err and "duplicate key 'grid'" in err, err
