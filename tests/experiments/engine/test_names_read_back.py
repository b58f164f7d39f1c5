"""Names read back from disk never choose a path (issue 48, item 4).

A run id in ``config.json``, a file name in a manifest, a dataset key in ``meta.json``, a part's
key from its file name: each is checked by :func:`divopt_rag.data.names.checked_name` before it
is joined to a folder. The probe that broke: a ``run_id`` of ``x/../../pwn`` made ``--new-grid``
move ``config.json`` out of the output folder; ``""`` and ``"a\\nb"`` were accepted.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from divopt_rag.data import EmbeddedDataset
from divopt_rag.data.integrity import CacheIntegrityError, checksum
from divopt_rag.data.names import UnsafeName, checked_name
from divopt_rag.experiments.cli import main as cli
from divopt_rag.experiments.engine.parts import finished_keys
from divopt_rag.experiments.studies.sweep import _data_folder

TINY = {"name": "synthetic", "n": 30, "d": 8, "n_queries": 1, "seed": 3}


def _sweep(tmp_path: Path, out: Path, theta: list[float], *extra: str) -> int:
    (tmp_path / "configs").mkdir(exist_ok=True)
    cfg = tmp_path / "configs" / f"cfg{len(theta)}.json"
    cfg.write_text(json.dumps({"dataset": TINY, "methods": {"topk": {}}, "grid": {"k": [3], "theta": theta}}))
    return cli.main(["sweep", "--config", str(cfg), "--out", str(out), "--n-workers", "0", "--no-progress", *extra])


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("bad", ["x/../../pwn", "", "a\nb", "../0123456789ab", "0123456789AB", "abc", 12, None])
def test_a_run_id_that_is_not_a_hash_is_refused_and_nothing_moves(tmp_path, capsys, bad):
    out = tmp_path / "work" / "out"
    assert _sweep(tmp_path, out, [0.5]) == 0
    config = json.loads((out / "config.json").read_text())
    config["run_id"] = bad
    (out / "config.json").write_text(json.dumps(config))
    (out / "config.x").mkdir()  # a folder of the user's: x/../../pwn then resolves, to beside the output folder
    (out / "config.x" / "notes.txt").write_text("mine")
    before = _tree(tmp_path / "work")
    capsys.readouterr()

    assert _sweep(tmp_path, out, [0.5, 0.9], "--new-grid") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run_id" in err and str(out / "config.json") in err, err
    assert _tree(tmp_path / "work") == before  # nothing moved, written or removed, inside the folder or out of it
    assert not (tmp_path / "pwn").exists() and not list(tmp_path.rglob("*pwn*"))


def test_the_checker_refuses_every_name_that_is_not_one_file_name():
    assert checked_name("0123456789ab", "run_id", "f", hexadecimal=True, length=12) == "0123456789ab"
    assert checked_name("E.npy", "file name", "f") == "E.npy"
    for bad in ["", "a/b", "a\\b", "..", ".hidden", "a\nb", "a\x00b", "a\u2028b", "a\x7fb", 3, None]:
        with pytest.raises(UnsafeName, match="^f: file name"):
            checked_name(bad, "file name", "f")
    for bad in ["xyz", "0123456789AB", "01234"]:
        with pytest.raises(UnsafeName):
            checked_name(bad, "key", "f", hexadecimal=True, length=12)


def _saved(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    E = rng.standard_normal((6, 4)).astype(np.float32)
    data = EmbeddedDataset(name="tiny", key="0123456789abcdef", E=E, Q=E[:2].copy(), query_ids=["a", "b"],
                           doc_ids=np.arange(6))
    folder = tmp_path / "ds"
    data.save(folder)
    return folder


def test_a_manifest_that_lists_a_path_is_refused_before_any_file_is_read(tmp_path):
    folder = _saved(tmp_path)
    (tmp_path / "secret").write_bytes(b"x")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["../secret"] = {"size": 1, "xxh3_128": "0"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CacheIntegrityError, match=r"file name '\.\./secret' cannot name a file"):
        EmbeddedDataset.load(folder)


@pytest.mark.parametrize("bad", ["../../pwn", "", "a\nb", "K"])
def test_a_dataset_key_that_is_not_a_hash_never_names_a_sweep_folder(tmp_path, bad):
    folder = _saved(tmp_path)
    data = EmbeddedDataset.load(folder)
    data.key = bad
    with pytest.raises(UnsafeName, match="dataset key"):
        _data_folder(data, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.rglob("pwn"))


def test_a_meta_json_whose_key_differs_from_its_manifest_is_refused(tmp_path):
    folder = _saved(tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    meta["key"] = "../../pwn"
    (folder / "meta.json").write_text(json.dumps(meta))
    manifest = json.loads((folder / "manifest.json").read_text())


    manifest["files"]["meta.json"] = checksum(folder / "meta.json")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CacheIntegrityError, match="records key"):
        EmbeddedDataset.load(folder)


def test_part_names_that_are_not_run_keys_are_not_parts(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    good = "0123456789abcdef0123"
    for name in (f"{good}.parquet", "x.parquet", "..parquet", "ABCDEF0123456789ABCD.parquet", "a\nb.parquet"):
        (parts / name).write_bytes(b"")
    assert finished_keys(parts) == {good}
