"""Part files are verified before use and a consolidated table is never lost (issue 39, items 1,
4 and 6): each probe corrupts real files that the executor wrote.

* every single-bit flip of a real part file is rejected before any of it is used (the probe:
  440 of 12,704 flips changed a value and passed, 3.77 became 60.37);
* a flip in a part's pandas metadata and invalid UTF-8 in a string column are rejected, named
  and recomputed (they jammed the folder: "Expecting ':' delimiter" on every rerun, "internal
  error: ArrowException"), also when the file's checksum was made to match;
* ``--consolidate-only`` after the corpus changed refuses, naming the dataset, and keeps the old
  ``results.parquet``; rejected parts keep every copy.
"""
from __future__ import annotations

import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import xxhash

from divopt_rag.data import integrity
from divopt_rag.experiments.cli import main as cli
from divopt_rag.experiments.engine import executor, parts
from divopt_rag.experiments.engine.parts import PartError, PartWarning
from divopt_rag.experiments.engine.plan import Plan, RunSpec, make_task

OBJECTIVE = 3.77  # the probe's value


@dataclass
class Tiny(RunSpec):
    """``n`` tasks whose rows are known: an objective, a selection text and a status."""

    n: int = 2
    command: ClassVar[str] = "tiny"
    calls: ClassVar[list[str]] = []

    def config(self):
        return {"n": self.n}

    def plan(self, out: Path) -> Plan:
        return Plan([make_task(i, config_hash=self.config_hash, data_key="d", query_id=f"q{i}", method="m",
                               params={"k": i + 1}) for i in range(self.n)], data_keys={"d": "d"})

    def execute(self, state, task):
        Tiny.calls.append(task.key)
        return {"objective": OBJECTIVE + task.index, "selected": "131", "status": "ok"}


def _run(out: Path, n: int = 2):
    Tiny.calls.clear()
    return executor.run(Tiny(n), out, progress=False)


def _restamp(data: bytes) -> bytes:
    """The file with its checksum made to match its (changed) bytes, computed here from the format
    the module documents (XXH3-128 of the file with the 32 digits read as '0'): a file that passes
    the checksum and is still broken must be caught by the checks after it."""
    entry = b"\x18\x0f" + integrity.PARQUET_CHECKSUM_KEY + b"\x18\x20"
    at = data.rindex(entry) + len(entry)
    zeroed = data[:at] + b"0" * 32 + data[at + 32:]
    return data[:at] + xxhash.xxh3_128_hexdigest(zeroed).encode() + data[at + 32:]


def _flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit >> 3] ^= 1 << (bit & 7)
    return bytes(out)


@pytest.fixture
def part(tmp_path):
    """(path, key, bytes, rows) of a real part file written by a run."""
    res = _run(tmp_path)
    task = res.tasks[0]
    path = tmp_path / "parts" / f"{task.key}.parquet"
    return path, task.key, path.read_bytes(), parts.read_part(path, task.key)


# ---- item 1: checksummed parts -------------------------------------------------------------
def test_every_single_bit_flip_of_a_part_is_rejected_before_use(part):
    path, key, data, rows = part
    assert rows["objective"].tolist() == [OBJECTIVE]
    pd.testing.assert_frame_equal(parts.part_from_bytes(data, key, path), rows)  # the sound file is used
    used = []
    for bit in range(8 * len(data)):
        try:
            got = parts.part_from_bytes(_flip(data, bit), key, path)
        except PartError as exc:
            assert str(path) in str(exc)
            continue
        used.append((bit, got.equals(rows)))
    # no flipped file is used at all (a flip that changed nothing would be harmless; there is none)
    assert used == [], used[:5]


def test_the_probes_flip_of_an_objective_is_caught_by_the_checksum(part, monkeypatch):
    """The probe's case, 3.77 -> 60.37 (an exponent bit of the float64): without the checksum the
    flipped part decodes to another objective; with it, the part is refused."""
    path, key, data, rows = part
    at = data.index(struct.pack("<d", OBJECTIVE))
    flipped = _flip(data, 8 * (at + 6) + 6)  # bit 54 of the float64: 2**4 times the value
    with pytest.raises(PartError, match="content differs from its xxh3_128 checksum"):
        parts.part_from_bytes(flipped, key, path)
    monkeypatch.setattr(integrity, "verify_parquet_bytes", lambda data, path: None)
    silent = parts.part_from_bytes(flipped, key, path)  # what a reader without the checksum gets
    assert silent["objective"].iloc[0] == pytest.approx(OBJECTIVE * 16)


def test_a_flipped_part_is_rejected_named_and_recomputed_by_a_run(tmp_path):
    first = _run(tmp_path).table
    victim = tmp_path / "parts" / f"{first['run_key'].iloc[0]}.parquet"
    data = victim.read_bytes()
    at = data.index(struct.pack("<d", OBJECTIVE))
    victim.write_bytes(_flip(data, 8 * (at + 6) + 6))
    with pytest.raises(PartError, match=f"{victim}: content differs"):
        executor.consolidate_only(Tiny(), tmp_path)
    with pytest.warns(PartWarning, match=victim.name):
        again = _run(tmp_path)
    assert Tiny.calls == [first["run_key"].iloc[0]]
    pd.testing.assert_frame_equal(again.table, first)


def _pandas_metadata_flip(data: bytes) -> bytes:
    """A ':' of the pandas metadata JSON in the footer turned into ';' (one bit)."""
    at = data.rindex(b'"pandas"') if b'"pandas"' in data else data.rindex(b"pandas")
    colon = data.index(b'":', at) + 1
    return _flip(data, 8 * colon)


def _bad_utf8(data: bytes) -> bytes:
    """The first byte of the string value '131' replaced by 0xff (invalid UTF-8)."""
    at = data.index(b"131")
    return data[:at] + b"\xff" + data[at + 1:]


@pytest.mark.parametrize("damage", ["pandas metadata", "invalid utf-8"])
@pytest.mark.parametrize("checksum", ["as written", "made to match"])
def test_metadata_and_utf8_damage_is_rejected_named_and_recomputed(tmp_path, capsys, damage, checksum):
    """Failure 8: these jammed the folder (exit 2 on every rerun, never named or run again)."""
    first = _run(tmp_path).table
    key = first["run_key"].iloc[0]
    victim = tmp_path / "parts" / f"{key}.parquet"
    data = (_pandas_metadata_flip if damage == "pandas metadata" else _bad_utf8)(victim.read_bytes())
    victim.write_bytes(_restamp(data) if checksum == "made to match" else data)
    with pytest.raises(PartError, match=str(victim)):
        parts.read_part(victim, key)
    with pytest.warns(PartWarning, match=victim.name):
        again = _run(tmp_path)
    assert Tiny.calls == [key] and again.n_executed == 1
    pd.testing.assert_frame_equal(again.table, first)
    assert (tmp_path / "parts" / "rejected" / victim.name).read_bytes() != victim.read_bytes()


def test_a_cli_rerun_names_a_damaged_part_and_exits_0(tmp_path, capsys):
    out = tmp_path / "s"
    argv = ["sweep", "--out", str(out), "--dataset", "synthetic", "--dataset-opt", "n=40", "--dataset-opt", "d=6",
            "--dataset-opt", "n_queries=1", "--methods", "mmr,topk", "--k", "3", "--n-workers", "0", "--no-progress"]
    assert cli.main(argv) == 0
    before = pd.read_parquet(out / "results.parquet")
    victim = sorted((out / "parts").glob("*.parquet"))[0]
    victim.write_bytes(_pandas_metadata_flip(victim.read_bytes()))
    capsys.readouterr()
    assert cli.main([*argv, "--consolidate-only"]) == 2
    err = capsys.readouterr().err
    assert str(victim) in err and "Traceback" not in err and "Expecting" not in err
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert f"warning: part file {victim}: content differs" in err and "its run is computed again" in err
    after = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(after.drop(columns="seconds"), before.drop(columns="seconds"))  # timings vary


def test_foreign_and_truncated_parquet_files_fail_the_checksum_naming_what_is_wrong(part, tmp_path):
    path, key, data, rows = part
    integrity.verify_parquet_bytes(data, path)  # the sound file
    foreign = tmp_path / "foreign.parquet"
    rows.to_parquet(foreign)
    with pytest.raises(integrity.CacheIntegrityError, match=f"{foreign}: carries no checksum"):
        integrity.verify_parquet_bytes(foreign.read_bytes(), foreign)
    with pytest.raises(integrity.CacheIntegrityError, match="not a whole Parquet file"):
        integrity.verify_parquet_bytes(data[: len(data) // 2], path)


def test_parts_without_a_checksum_are_rejected_and_summed_up_past_five(tmp_path):
    """A folder written before parts carried checksums: every part is run again, five are named
    and one warning counts the rest."""
    first = _run(tmp_path, n=8).table
    for path in (tmp_path / "parts").glob("*.parquet"):
        pq.write_table(pq.read_table(path), path)  # the same rows, without the checksum
    with pytest.warns(PartWarning) as seen:
        again = _run(tmp_path, n=8)
    messages = [str(w.message) for w in seen]
    assert sum("carries no checksum" in m for m in messages) == 5
    assert sum("3 more part files failed their checks" in m for m in messages) == 1
    assert again.n_executed == 8 and len(list((tmp_path / "parts" / "rejected").iterdir())) == 8
    pd.testing.assert_frame_equal(again.table, first)


# ---- item 4: a table is never lost ----------------------------------------------------------
def test_rejected_parts_keep_every_copy(tmp_path):
    first = _run(tmp_path).table
    key = first["run_key"].iloc[1]
    victim = tmp_path / "parts" / f"{key}.parquet"
    damaged = []
    for i in range(3):
        data = victim.read_bytes()
        damaged.append(data[: len(data) - 10 - i])  # truncated, three different ways
        victim.write_bytes(damaged[-1])
        with pytest.warns(PartWarning, match=victim.name):
            _run(tmp_path)
    rejected = tmp_path / "parts" / "rejected"
    names = [f"{key}.parquet", f"{key}.2.parquet", f"{key}.3.parquet"]
    assert sorted(p.name for p in rejected.iterdir()) == sorted(names)
    assert [(rejected / n).read_bytes() for n in names] == damaged


def _npz(path: Path, E: np.ndarray, Q: np.ndarray) -> None:
    np.savez(path, E=E, Q=Q, doc_ids=np.array([f"d{i}" for i in range(len(E))]))


def test_consolidate_only_after_the_corpus_changed_refuses_and_keeps_the_table(tmp_path, capsys):
    """The probe: a 6-row results.parquet became an empty table, exit 0, no note."""
    rng = np.random.default_rng(3)
    E, Q = rng.standard_normal((30, 6)), rng.standard_normal((3, 6))
    corpus, out = tmp_path / "corpus.npz", tmp_path / "out"
    _npz(corpus, E, Q)
    argv = ["sweep", "--out", str(out), "--dataset", f"npz:{corpus}", "--methods", "mmr,topk", "--k", "3",
            "--n-workers", "0", "--no-progress"]
    assert cli.main(argv) == 0
    table = out / "results.parquet"
    before = table.read_bytes()
    assert len(pd.read_parquet(table)) == 6
    E[:5] = rng.standard_normal((5, 6))
    _npz(corpus, E, Q)
    listing = sorted(p.relative_to(out) for p in out.rglob("*"))
    capsys.readouterr()
    assert cli.main([*argv, "--consolidate-only"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert "changed since the run" in err[0] and "content key" in err[0] and "its 6 rows" in err[0]
    assert "results.parquet is kept" in err[0]
    assert table.read_bytes() == before
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == listing  # nothing written or removed


def test_consolidate_only_refuses_to_drop_rows_whose_parts_are_gone(tmp_path):
    first = _run(tmp_path).table
    table = tmp_path / "results.parquet"
    before = table.read_bytes()
    shutil.move(tmp_path / "parts" / f"{first['run_key'].iloc[1]}.parquet", tmp_path / "elsewhere.parquet")
    with pytest.raises(ValueError, match=r"would drop 1 of the 2 rows of results.parquet .*results.parquet is kept"):
        executor.consolidate_only(Tiny(), tmp_path)
    assert table.read_bytes() == before
    # a run computes the missing part; consolidating then keeps every row
    again = _run(tmp_path)
    assert again.n_executed == 1
    pd.testing.assert_frame_equal(executor.consolidate_only(Tiny(), tmp_path).table, first)
