"""The experiment harness: what every experiment shares, written once.

* **Quality against an exact solve** (:func:`gap_record`, :func:`best_known`,
  :func:`quality_summary`): the one definition of the normalized gap and of an exact hit, used
  by ``divopt certify``, ``divopt bench quality``, the plots and the notebooks. The rule:

  - the reference value is the best feasible value known, ``optimum = max(exact incumbent,
    every method's value)`` (:func:`best_known`). It is a lower bound on OPT; a MIP solver's
    "optimal" is proven only within its relative gap, so a fast method may beat its incumbent
    by a hair, and OPT is then at least that method's value;
  - when the exact solve is **proven** optimal, ``gap = (optimum - f) / (k (k-1))``
    (:func:`divopt.models.ccbqp.normalized_gap`), ``gap_kind = "exact"`` and
    ``exact_hit = gap <= tol`` (:func:`divopt.models.ccbqp.exact_hit`);
  - when it is **not** proven (time limit), the gap is measured against the solver's proven
    upper bound, ``gap = (bound - f) / (k (k-1))``, and labelled ``gap_kind = "upper_bound"``:
    an upper bound on the true gap, never called exact. ``exact_hit`` is then True only when
    f meets the bound (provably optimal) and otherwise unknown (``<NA>``), never False;
  - ``gap_to_bound = (bound - f) / (k (k-1))`` on every row: a valid upper bound on the true gap
    even when "proven" means proven within the solver's relative gap.

  Gaps are clipped at 0 (values within rounding of the reference).
* **Atomic writes** (:func:`write_parquet`, :func:`write_text`): a hidden temporary sibling,
  fsync'ed, then ``os.replace``'d, so a file is either complete or absent, whatever kills the
  process (checkpoints and resumable sweeps rely on this).
* **Run ids** (:func:`run_id`): a hash of the configuration, so the same configuration gives the
  same id (and a resumed run finds its checkpoints); hashes come from
  :func:`divopt.data.stable_hash` (sha256 of the canonical JSON).
* **Query instances** (:func:`query_instance`): query ``i`` of an
  :class:`~divopt.data.EmbeddedDataset` as a :class:`~divopt.models.Instance` over its pool.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from divopt.data import EmbeddedDataset, stable_hash
from divopt.models import Instance
from divopt.models.ccbqp import EXACT_HIT_TOL, exact_hit, normalized_gap, objective_scale

__all__ = [
    "best_known",
    "gap_record",
    "quality_summary",
    "write_parquet",
    "write_text",
    "run_id",
    "query_instance",
]

_RUN_ID_LENGTH = 12


# --------------------------------------------------------------------------------------------
# quality against an exact solve
# --------------------------------------------------------------------------------------------
def best_known(exact_value: float | None, values: Iterable[float | None] = ()) -> float:
    """The best feasible value known: max of the exact incumbent and every method's value
    (None / NaN ignored; -inf when none is known)."""
    vals = [float(v) for v in (exact_value, *values) if v is not None and not math.isnan(float(v))]
    return max(vals, default=-math.inf)


def gap_record(value: float | None, *, optimum: float, bound: float | None, proven: bool, k: int,
               tol: float = EXACT_HIT_TOL) -> dict[str, Any]:
    """``gap``, ``gap_kind``, ``gap_to_bound`` and ``exact_hit`` of a selection of value f =
    ``value`` (the rule is in the module docstring).

    optimum : best feasible value known (:func:`best_known`); bound : proven upper bound on OPT
    (None: none known); proven : whether the exact solve proved optimality; tol : normalized gap
    still counted as a hit (default :data:`divopt.models.ccbqp.EXACT_HIT_TOL`). A missing value
    (a failed method) gives NaN gaps, an empty kind and an unknown hit.
    """
    if value is None or math.isnan(float(value)):
        return {"gap": math.nan, "gap_kind": "", "gap_to_bound": math.nan, "exact_hit": pd.NA}
    f = float(value)
    ub = math.inf if bound is None or math.isnan(float(bound)) else float(bound)
    to_bound = max(0.0, (ub - f) / objective_scale(k))
    if proven:
        return {"gap": max(0.0, normalized_gap(optimum, f, k)), "gap_kind": "exact", "gap_to_bound": to_bound,
                "exact_hit": exact_hit(optimum, f, k, tol)}
    return {"gap": to_bound, "gap_kind": "upper_bound", "gap_to_bound": to_bound,
            "exact_hit": True if to_bound <= tol else pd.NA}


def quality_summary(df: pd.DataFrame, by: str | list[str] = "method") -> pd.DataFrame:
    """Per group of ``by``: rows, unproven rows (gap only an upper bound), exact-hit rate (over
    the rows whose hit is known), mean / p95 / max normalized gap and, with a ``seconds``
    column, mean / median seconds. Reads the columns :func:`gap_record` writes."""
    keys = [by] if isinstance(by, str) else list(by)
    g = df.groupby(keys, sort=True)
    cols = {
        "rows": g.size(),
        "unproven": g["gap_kind"].apply(lambda s: int((s == "upper_bound").sum())),
        "hit_rate": g["exact_hit"].apply(lambda s: float(s.astype("Float64").mean()) if s.notna().any() else math.nan),
        "mean_gap": g["gap"].mean(),
        "p95_gap": g["gap"].quantile(0.95),
        "max_gap": g["gap"].max(),
    }
    if "seconds" in df:
        cols.update(mean_seconds=g["seconds"].mean(), median_seconds=g["seconds"].median())
    return pd.DataFrame(cols).reset_index()


# --------------------------------------------------------------------------------------------
# atomic writes and run ids
# --------------------------------------------------------------------------------------------
def _replace_atomically(path: Path, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as fh:  # the bytes reach the disk before the name appears
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_parquet(table: pd.DataFrame | pa.Table, path: str | os.PathLike) -> Path:
    """Write a table (pandas frame without its index, or an Arrow table) to ``path`` atomically."""
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    return _replace_atomically(Path(path), lambda tmp: pq.write_table(table, tmp))


def write_text(text: str, path: str | os.PathLike) -> Path:
    """Write ``text`` to ``path`` atomically (configs, JSON reports, caches)."""
    return _replace_atomically(Path(path), lambda tmp: Path(tmp).write_text(text))


def run_id(config: Mapping[str, Any], exclude: Iterable[str] = ()) -> str:
    """The run id of a configuration: a 12-hex-digit hash of its canonical JSON (sorted keys;
    values that JSON cannot hold are written as ``str``). ``exclude``: keys that do not change
    the rows (output paths, caches)."""
    drop = set(exclude)
    return stable_hash({k: v for k, v in config.items() if k not in drop}, _RUN_ID_LENGTH)


# --------------------------------------------------------------------------------------------
# query instances
# --------------------------------------------------------------------------------------------
def query_instance(data: EmbeddedDataset, query_index: int, pool: int | None = None) -> tuple[Instance, np.ndarray]:
    """Query ``query_index`` of ``data`` as an Instance (k=1, theta=1: set them with ``replace``)
    over its candidate rows, and those rows of ``data.E``.

    The candidates are the query's pool (``data.pools``) or all of E; ``pool`` keeps the top
    ``pool`` of them by relevance c = E q (ties by position). The Instance's ids are the doc ids.
    """
    rows = data.pools[query_index] if data.pools is not None else np.arange(data.E.shape[0])
    q = np.array(data.Q[query_index], dtype=np.float32)
    if data.pools is None and (pool is None or pool >= rows.size):
        E = np.asarray(data.E, dtype=np.float32)
        Erows = E if E.flags.writeable else np.array(E)  # torch wants a writable array (not a read-only mmap)
    else:
        Erows = np.asarray(data.E[rows], dtype=np.float32)  # fancy indexing copies: a writable array
    if pool is not None and pool < rows.size:
        top = np.argsort(-(Erows @ q), kind="stable")[:pool]
        rows, Erows = rows[top], np.ascontiguousarray(Erows[top])
    inst = Instance(torch.from_numpy(Erows), torch.from_numpy(q), k=1, theta=1.0, ids=data.doc_ids[rows])
    return inst, rows
