"""Your own embeddings as an ``.npz`` (:func:`load_npz`): arrays ``E`` (N, d) and ``Q`` (m, d), optional
``doc_ids`` / ``query_ids``, and optional TREC qrels (:func:`divopt_rag.data.loaders.read_trec_qrels`).
The ``.npy`` headers inside the zip are read first (:func:`npz_headers`), so a bad or oversized array
is named before anything is allocated; :func:`npz_memory` gives the registry its memory estimate."""
from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .dataset import DataFormatError
from .embedded import EmbeddedDataset
from .loaders import read_trec_qrels

__all__ = ["load_npz", "npz_headers", "npz_memory"]


#: The arrays of an npz dataset and the number of dimensions each must have.
_NPZ_ARRAYS = {"E": 2, "Q": 2, "doc_ids": 1, "query_ids": 1}


def npz_headers(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """name -> (shape, dtype) of the arrays of the npz dataset ``path``, read from the ``.npy``
    headers inside the zip (nothing else is read or allocated); :class:`DataFormatError` naming
    the file when E or Q is missing, is not (rows, d) with the same d, or is not real numbers
    (complex, strings, objects), or when an id array is not 1-D with a row per E/Q row."""
    p = Path(path)
    found: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    try:
        with zipfile.ZipFile(p) as zf:
            for info in zf.infolist():
                name = info.filename.removesuffix(".npy")
                if name not in _NPZ_ARRAYS or not info.filename.endswith(".npy"):
                    continue
                with zf.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                    shape, _, dtype = read(fh)
                found[name] = (tuple(int(s) for s in shape), np.dtype(dtype))
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise DataFormatError(p, None, None, f"not a .npz archive of arrays E and Q ({type(exc).__name__}: {exc})") from None
    missing = sorted({"E", "Q"} - set(found))
    if missing:
        raise DataFormatError(p, None, None, f"must contain arrays E and Q, missing {missing}")
    for name, (shape, dtype) in found.items():
        if len(shape) != _NPZ_ARRAYS[name]:
            raise DataFormatError(p, None, None, f"array {name} has shape {shape}, expected {_NPZ_ARRAYS[name]} dimensions")
        if name in ("E", "Q") and dtype.kind not in "fiu":
            raise DataFormatError(p, None, None, f"array {name} holds {dtype}, expected real numbers (float or integer)")
    (n, d), (m, dq) = found["E"][0], found["Q"][0]
    if d != dq or n < 1 or m < 1 or d < 1:
        raise DataFormatError(p, None, None, f"E {found['E'][0]} and Q {found['Q'][0]} must be (rows, d) with the same d "
                                             f"and at least one row")
    for name, rows in (("doc_ids", n), ("query_ids", m)):
        if name in found and found[name][0] != (rows,):
            raise DataFormatError(p, None, None, f"array {name} has shape {found[name][0]}, expected ({rows},)")
    return found


def npz_memory(options: Mapping[str, Any]) -> float | None:
    """Bytes an npz dataset needs while it is loaded, from its headers (:func:`npz_headers`): the
    arrays as stored, plus E and Q as float32 (and their unit rows); None without a path."""
    path = options.get("path")
    if not path or not Path(path).is_file():
        return None  # the loader names a missing file itself
    found = npz_headers(path)
    stored = sum(float(np.prod(s, dtype=np.float64)) * t.itemsize for s, t in found.values())
    work = sum(float(np.prod(found[k][0], dtype=np.float64)) * 4 * 2 for k in ("E", "Q"))
    return stored + work


def load_npz(path: str | os.PathLike, qrels: str | os.PathLike | None = None) -> EmbeddedDataset:
    """Your own embeddings: an ``.npz`` with ``E`` (N, d) and ``Q`` (m, d), optional ``doc_ids`` and
    ``query_ids`` (default: positions); ``qrels`` an optional TREC qrels file."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"npz dataset file not found: {p}")
    headers = npz_headers(p)  # shapes and dtypes from the headers first: nothing is allocated for a bad array
    E_shape, Q_shape = headers["E"][0], headers["Q"][0]
    try:
        archive = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise DataFormatError(p, None, None, f"not a .npz archive of arrays E and Q ({exc})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):  # a bare .npy array
        raise DataFormatError(p, None, None, "a single array, not a .npz archive of arrays E and Q")
    with archive as z:
        missing = {"E", "Q"} - set(z.files)
        if missing:
            raise ValueError(f"{p} must contain arrays E and Q, missing {sorted(missing)}")
        try:
            E, Q = z["E"], z["Q"]
        except MemoryError:
            raise DataFormatError(p, None, None, f"arrays E {E_shape} and Q {Q_shape} do not fit in memory") from None
        doc_ids = z["doc_ids"] if "doc_ids" in z.files else np.arange(E.shape[0])
        qids = z["query_ids"] if "query_ids" in z.files else np.arange(Q.shape[0])
    return EmbeddedDataset(
        name=p.stem, key="", E=E, Q=Q, query_ids=[str(q) for q in qids], doc_ids=doc_ids,
        qrels=None if qrels is None else read_trec_qrels(qrels),
    )
