"""The instance library's file format (issue 50; stated for readers in ``docs/library.md``).

A library is a folder::

    manifest.json            name, version, format, objective, instances (id -> summary), files (path -> xxh3)
    CHANGELOG.md, LICENCES.md
    pools/<corpus>/rows.npy      (N, d) float32 unit rows, shared by every instance of the corpus
    pools/<corpus>/queries.npy   (m, d) float32 unit queries
    pools/<corpus>/passages.jsonl  one {"id", "text"} per row (text corpora)
    subsets/<corpus>-q<j>-n<n>.npy  (n,) int32 rows of the pool, the instance's item order
    instances/<id>/card.json     source, licence, recipe, n, k, theta, rows/query pointers, files (xxh3)
    instances/<id>/solution.json best known set, f, bound, bound source, status, gap, verification

Instance ``id`` has rows ``E = rows[subset]`` (the whole pool when the card has no subset) and
query ``q = queries[query_row]``, both read as float32 and widened exactly to float64. Its
objective, for a set S of k distinct indices into E (0-based), is

    f(S) = theta (k - 1) sum_{i in S} c_i - (1 - theta) sum_{i != j in S} e_i . e_j,   c = E q,

computed in float64 (pairs ordered, so each unordered pair counts twice; divopt's
:func:`~divopt_rag.models.ccbqp_objective` on the same rows). Gaps are normalized by
k (k - 1): ``gap = (bound - f) / (k (k - 1))``. Status ``optimal`` means a solver proved
``bound - f <= tolerance`` (the card's solution states the tolerance and the solver); ``open``
keeps the best set, the best proven bound and their gap.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT", "OBJECTIVE", "LibraryInstance", "objective", "normalized_gap", "file_hash", "read_json",
           "write_json", "load_instance", "instance_ids", "check_library", "OPTIMAL", "OPEN"]

FORMAT = 1
OPTIMAL = "optimal"
OPEN = "open"
OBJECTIVE = ("f(S) = theta*(k-1)*sum_{i in S} c_i - (1-theta)*sum_{i!=j in S} e_i.e_j, c = E q; E, q float32 "
             "files widened to float64; gap = (bound - f) / (k*(k-1))")


def file_hash(path: str | Path) -> str:
    """``xxh3:<16 hex>``: the xxh3-64 digest of the file's bytes."""
    import xxhash

    h = xxhash.xxh3_64()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "xxh3:" + h.hexdigest()


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None


def write_json(path: str | Path, obj: Any) -> None:
    from divopt_rag.data.atomic import write_atomically

    text = json.dumps(obj, indent=1, sort_keys=False, allow_nan=False) + "\n"
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def objective(E: np.ndarray, q: np.ndarray, theta: float, S: Any) -> float:
    """f(S) in float64 (the formula above), from rows E (n, d) and query q (d,)."""
    S = np.asarray(S, dtype=np.int64)
    k = S.size
    X = np.asarray(E[S], dtype=np.float64)
    c = X @ np.asarray(q, dtype=np.float64)
    G = X @ X.T
    pairs = float(G.sum() - np.trace(G))
    return float(theta * (k - 1) * c.sum() - (1.0 - theta) * pairs)


def check_set(indices: Any, n: int, k: int) -> tuple[np.ndarray | None, str]:
    """(the indices as int64, "") or (None, the reason the set is refused)."""
    if indices is None:
        return None, "no indices"
    vals = []
    for v in indices:
        try:
            if isinstance(v, bool):
                raise ValueError
            fv = float(v)
            if not fv.is_integer():
                raise ValueError
            vals.append(int(fv))
        except (TypeError, ValueError):
            return None, f"index {v!r} is not an integer"
    a = np.asarray(vals, dtype=np.int64)
    if a.size != k:
        return None, f"wrong k: expected {k} indices, got {a.size}"
    if np.unique(a).size != a.size:
        dup = sorted({int(x) for x in a if (a == x).sum() > 1})
        return None, f"duplicates: {dup}"
    bad = a[(a < 0) | (a >= n)]
    if bad.size:
        return None, f"out of range: {sorted(int(x) for x in bad)} not in [0, {n})"
    return a, ""


def normalized_gap(bound: float, f: float, k: int) -> float:
    return max(0.0, (bound - f) / (k * (k - 1))) if k > 1 else 0.0


@dataclass
class LibraryInstance:
    """One instance read from a library: its id, card, solution and float64 data."""

    id: str
    root: Path
    card: dict
    solution: dict | None
    E: np.ndarray         # (n, d) float64 (widened float32)
    q: np.ndarray         # (d,) float64

    @property
    def k(self) -> int:
        return int(self.card["k"])

    @property
    def theta(self) -> float:
        return float(self.card["theta"])

    @property
    def n(self) -> int:
        return int(self.E.shape[0])

    @property
    def family(self) -> str:
        return str(self.card["family"])

    def f(self, S: Any) -> float:
        return objective(self.E, self.q, self.theta, S)

    def to_instance(self):
        """The divopt :class:`~divopt_rag.models.Instance` (float64 rows, relevance c = E q)."""
        import torch

        from divopt_rag.models import Instance

        E = torch.from_numpy(np.ascontiguousarray(self.E))
        return Instance(E, relevance=torch.from_numpy(self.E @ self.q), k=self.k, theta=self.theta)


_ROWS_CACHE: dict[tuple[str, float], np.ndarray] = {}


def _npy(path: Path) -> np.ndarray:
    key = (str(path), path.stat().st_mtime)
    if key not in _ROWS_CACHE:
        if len(_ROWS_CACHE) > 16:
            _ROWS_CACHE.clear()
        _ROWS_CACHE[key] = np.load(path, allow_pickle=False)
    return _ROWS_CACHE[key]


def load_instance(root: str | Path, instance_id: str) -> LibraryInstance:
    """Read instance ``instance_id`` of the library at ``root`` (no hash check: see verify)."""
    root = Path(root)
    folder = root / "instances" / instance_id
    if not (folder / "card.json").exists():
        raise ValueError(f"unknown instance {instance_id!r} (no {folder / 'card.json'})")
    card = read_json(folder / "card.json")
    sol_path = folder / "solution.json"
    solution = read_json(sol_path) if sol_path.exists() else None
    rows = _npy(root / card["rows"]["pool"])
    if card["rows"].get("subset"):
        E = rows[_npy(root / card["rows"]["subset"]).astype(np.int64)]
    else:
        E = rows
    q = _npy(root / card["query"]["file"])[int(card["query"]["row"])]
    return LibraryInstance(instance_id, root, card, solution, E.astype(np.float64), q.astype(np.float64))


def instance_ids(root: str | Path) -> list[str]:
    """Ids of the library's instances, from its manifest (or its instances/ folder)."""
    root = Path(root)
    check_library(root)
    if (root / "manifest.json").exists():
        return list(read_json(root / "manifest.json")["instances"])
    return sorted(p.name for p in (root / "instances").iterdir() if (p / "card.json").exists())


def check_library(root: str | Path) -> Path:
    root = Path(root)
    if not (root / "instances").is_dir():
        raise ValueError(f"library: expected a folder with instances/ (a divopt-rag instance library), got {str(root)!r}")
    return root


def finite(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)
