"""npz datasets are checked from their headers before anything is loaded (issue 48, item 6).

An npz whose ``E`` header claims (2e8, 384) was an internal MemoryError (286 GiB asked); a
complex64 ``E`` was cast with a warning and exit 0. The shapes and dtypes are now read from the
``.npy`` headers inside the zip (:func:`divopt_rag.data.npz_files.npz_headers`); a size the machine
cannot hold and a dtype that is not real are each exit 2 in one line naming the file.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from divopt_rag.data.dataset import DataFormatError
from divopt_rag.data.npz_files import load_npz, npz_headers
from divopt_rag.experiments.cli import main as cli


def _header_only_npz(path: Path, shape: tuple[int, int]) -> Path:
    """An npz whose E and Q are headers without data (what a header that lies looks like)."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, sh in (("E", shape), ("Q", (2, shape[1]))):
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": sh})
            zf.writestr(f"{name}.npy", buf.getvalue())
    return path


def _sweep(spec: str, out: Path) -> int:
    return cli.main(["sweep", "--dataset", spec, "--methods", "topk", "--k", "2", "--theta", "0.5", "--out", str(out),
                     "--n-workers", "0", "--no-progress"])


def test_a_header_that_claims_more_than_memory_holds_is_exit_2_before_any_allocation(tmp_path, capsys, monkeypatch):
    path = _header_only_npz(tmp_path / "big.npz", (200_000_000, 384))
    assert npz_headers(path)["E"] == ((200_000_000, 384), np.dtype("<f4"))  # read from the header alone
    monkeypatch.setenv("DIVOPT_MEMORY_LIMIT", "8G")
    assert _sweep(f"npz:{path}", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "memory" in err and "MemoryError" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, "U3"])
def test_an_array_that_is_not_real_numbers_is_exit_2_naming_the_file(tmp_path, capsys, dtype):
    path = tmp_path / "c.npz"
    np.savez(path, E=np.ones((5, 3)).astype(dtype), Q=np.ones((2, 3)).astype(dtype))
    with pytest.raises(DataFormatError, match=r"c\.npz: array E holds .*expected real numbers"):
        load_npz(path)
    assert _sweep(f"npz:{path}", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "real numbers" in err, err
    assert not (tmp_path / "out").exists()


def test_shapes_that_do_not_agree_are_refused_from_the_headers(tmp_path):
    path = tmp_path / "s.npz"
    np.savez(path, E=np.ones((5, 3), np.float32), Q=np.ones((2, 4), np.float32))
    with pytest.raises(DataFormatError, match="same d"):
        npz_headers(path)
    np.savez(path, E=np.ones((5, 3), np.float32), Q=np.ones((2, 3), np.float32), doc_ids=np.arange(4))
    with pytest.raises(DataFormatError, match=r"doc_ids has shape \(4,\), expected \(5,\)"):
        load_npz(path)
    np.savez(path, E=np.ones((5, 3), np.float32), Q=np.ones((2, 3), np.float32))
    data = load_npz(path)  # a sound file loads as before
    assert data.E.shape == (5, 3) and data.Q.shape == (2, 3)
