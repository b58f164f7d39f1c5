"""``divopt sweep``: a resumable parameter sweep on a local process pool or on Ray.

A sweep runs every (query, method, parameters) of a :class:`~divopt.experiments.grid.SweepConfig`
and writes ONE tidy parquet row per run. How it survives being killed:

* every run has a deterministic key, sha256(dataset, query, method, canonical parameters)
  (:func:`divopt.experiments.grid.run_key`), and a seed derived from (base seed, key);
* each finished run is written by the driver to ``OUT/parts/<key>.parquet`` (or
  ``<key>.error.parquet`` when the method raised) by :func:`divopt.experiments.harness.write_parquet`
  (a hidden temporary name in the same folder, fsync'ed, then ``os.replace``'d), so a part file
  is either complete or absent;
* a restart with the same command lists ``OUT/parts``, skips every key already there and runs
  the rest; at the end :func:`consolidate` reads the parts of the current grid into
  ``OUT/results.parquet`` (written the same atomic way), ordered by ``run_index``.
A kill therefore loses at most the runs in flight, never a written row, and never duplicates one.

The module map of a sweep: this module plans it (:func:`plan`: plugins, dataset, grid), runs it
(:func:`run_sweep`) and keeps its part files; the dataset comes from :func:`divopt.data.load`
with the cache under ``OUT/data/<dataset key>/`` (embeddings computed once, memory-mapped by the
workers, reused by a restart); methods are resolved and run by :mod:`divopt.experiments.methods`
(selectors, robust models, :func:`~divopt.experiments.methods.register_method` extras); one run
becomes one row in :mod:`divopt.experiments.runs`; :mod:`divopt.experiments.backends` executes
the runs (in process, local process pool, Ray); :mod:`divopt.experiments.sweep_cli` is the
command line.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from divopt.data import EmbeddedDataset
from divopt.data import load as load_dataset
from divopt.experiments import harness
from divopt.experiments.backends import import_plugins, run_inline, run_local, run_ray
from divopt.experiments.evaluator import make_evaluator
from divopt.experiments.grid import RunSpec, SweepConfig, chunked, expand_grid
from divopt.experiments.methods import method_accepts, required_parameters, resolve_method

__all__ = [
    "SweepResult",
    "MissingParameterWarning",
    "TIMING_COLUMNS",
    "plan",
    "run_sweep",
    "consolidate",
    "finished_keys",
]

#: Columns that legitimately differ between two runs of the same sweep (wall-clock times).
TIMING_COLUMNS = ("seconds",)


class MissingParameterWarning(UserWarning):
    """A method of the grid lacks a required parameter: its runs will be error rows."""


# =============================================================================================
# Part files: resume and consolidation
# =============================================================================================
def _write_part(parts: Path, row: Mapping[str, Any]) -> None:
    key = row["run_key"]
    ok = row.get("status") == "ok"
    harness.write_parquet(pd.DataFrame([dict(row)]), parts / (f"{key}.parquet" if ok else f"{key}.error.parquet"))
    if ok:  # a retried run replaces its error part
        (parts / f"{key}.error.parquet").unlink(missing_ok=True)


def finished_keys(parts: Path, include_errors: bool = True) -> set[str]:
    """Keys of runs with a part file (``<key>.parquet``; ``<key>.error.parquet`` if include_errors)."""
    parts = Path(parts)
    if not parts.is_dir():
        return set()
    done = set()
    for p in parts.glob("*.parquet"):
        if p.name.startswith("."):
            continue
        key, _, rest = p.name.partition(".")
        if rest == "parquet" or (include_errors and rest == "error.parquet"):
            done.add(key)
    return done


def consolidate(out_dir: str | Path, specs: Sequence[RunSpec] | None = None, sweep_id: str | None = None) -> pd.DataFrame:
    """Read the part files (of ``specs`` if given, else all) into one table, ordered by
    ``run_index``, and write it atomically to ``OUT/results.parquet``."""
    out = Path(out_dir)
    parts = out / "parts"
    wanted = None if specs is None else {s.key for s in specs}
    frames = []
    ok_keys = finished_keys(parts, include_errors=False)
    for p in sorted(parts.glob("*.parquet")) if parts.is_dir() else []:
        if p.name.startswith("."):
            continue
        key, _, rest = p.name.partition(".")
        if wanted is not None and key not in wanted:
            continue
        if rest == "error.parquet" and key in ok_keys:
            continue
        frames.append(pq.read_table(p).to_pandas())
    if not frames:
        table = pd.DataFrame()
    else:
        # concatenate in run order: the result (dtypes of columns that some methods lack
        # included) is then the same however the parts were produced
        frames.sort(key=lambda f: int(f["run_index"].iloc[0]))
        table = pd.concat(frames, ignore_index=True, sort=False)
        if sweep_id is not None:
            table.insert(0, "sweep_id", sweep_id)
    out.mkdir(parents=True, exist_ok=True)
    harness.write_parquet(table, out / "results.parquet")
    # return what the file holds (missing values of bool/str columns read back as None)
    return pq.read_table(out / "results.parquet").to_pandas()


# =============================================================================================
# The sweep
# =============================================================================================
@dataclass
class SweepResult:
    table: pd.DataFrame
    path: Path
    n_runs: int
    n_skipped: int
    n_executed: int
    n_errors: int
    specs: list[RunSpec] = field(repr=False, default_factory=list)


def _select_queries(data: EmbeddedDataset, queries: Any) -> list[tuple[int, str]]:
    if queries is None:
        return list(enumerate(data.query_ids))
    if isinstance(queries, int):
        return list(enumerate(data.query_ids))[: queries]
    pos = {q: i for i, q in enumerate(data.query_ids)}
    unknown = [q for q in queries if q not in pos]
    if unknown:
        raise ValueError(f"unknown query ids {unknown[:5]} in dataset {data.name!r}")
    return [(pos[q], q) for q in queries]


def plan(config: SweepConfig, out_dir: str | Path, mmap: bool = True) -> tuple[EmbeddedDataset, list[RunSpec]]:
    """Import plugins, build (or reuse) the dataset cache and expand the grid into run specs."""
    import_plugins(config.plugins)
    for m in config.methods:
        resolve_method(m)  # unknown methods fail before any work
    data = load_dataset(config.dataset, cache_dir=Path(out_dir) / "data", mmap=mmap)
    specs = expand_grid(config, data.key, _select_queries(data, config.queries), method_accepts)
    checked: set[tuple[str, frozenset]] = set()
    for s in specs:  # say up front which runs cannot work (each still becomes an error row)
        sig = (s.method, frozenset(s.method_params))
        if sig in checked:
            continue
        checked.add(sig)
        missing = required_parameters(s.method) - set(s.method_params) - {"seed"}
        if missing:
            warnings.warn(
                f"method {s.method!r} needs parameter(s) {sorted(missing)}: its runs will be error rows; add them "
                f"to the grid (--param NAME=V1,V2) or to methods.{s.method}", MissingParameterWarning, stacklevel=2,
            )
    return data, specs


def run_sweep(
    config: SweepConfig,
    out_dir: str | Path,
    *,
    backend: str = "local",
    n_workers: int | None = None,
    address: str | None = None,
    chunk_size: int | None = None,
    progress: bool = True,
    retry_errors: bool = False,
) -> SweepResult:
    """Run (or resume) a sweep into ``out_dir`` and return the consolidated table.

    backend : "local" (a process pool of ``n_workers`` spawned processes; ``n_workers=0`` runs
        in this process) or "ray" (``address`` of an existing cluster, else a local
        ``ray.init(num_cpus=n_workers)``; an already initialized Ray is used as it is).
    chunk_size : runs per task (default: about 4 tasks per worker, at most 16 runs).
    retry_errors : run again the runs whose part is an error row.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {backend!r}; expected 'local' or 'ray'")
    if n_workers is not None and (isinstance(n_workers, bool) or int(n_workers) < 0):
        raise ValueError(f"n_workers must be a non-negative integer, got {n_workers!r}")
    out = Path(out_dir)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    for stale in parts.glob(".*.tmp"):  # half-written parts of a killed run (never renamed)
        stale.unlink(missing_ok=True)
    data, specs = plan(config, out)
    make_evaluator(config.evaluator)  # a bad evaluator spec fails here, not in every worker
    cfg = {**config.to_dict(), "sweep_id": config.sweep_id, "dataset_key": data.key, "n_runs": len(specs)}
    harness.write_text(json.dumps(cfg, indent=2, default=str), out / "config.json")

    done = finished_keys(parts, include_errors=not retry_errors)
    todo = [s for s in specs if s.key not in done]
    workers = (os.cpu_count() or 1) if n_workers is None else int(n_workers)
    if chunk_size is None:
        chunk_size = max(1, min(16, math.ceil(len(todo) / max(1, 4 * max(1, workers)))))
    chunks = list(chunked(todo, chunk_size)) if todo else []
    bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc="sweep", unit="run", disable=not progress)
    n_errors = 0

    def on_rows(rows: list[dict[str, Any]]) -> None:
        nonlocal n_errors
        for row in rows:
            _write_part(parts, row)
            n_errors += row.get("status") != "ok"
        bar.update(len(rows))

    try:
        if not chunks:
            pass
        elif backend == "ray":
            run_ray(chunks, data, address, workers, config, on_rows)
        elif workers == 0:
            run_inline(chunks, data, config, on_rows)
        else:
            run_local(chunks, out / "data" / data.key, workers, config, on_rows)
    finally:
        bar.close()
    table = consolidate(out, specs, config.sweep_id)
    return SweepResult(
        table=table, path=out / "results.parquet", n_runs=len(specs), n_skipped=len(specs) - len(todo),
        n_executed=len(todo), n_errors=n_errors, specs=specs,
    )
