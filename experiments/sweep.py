"""``divopt-rag sweep``: a resumable parameter sweep on a local process pool or on Ray.

A sweep runs every (query, method, parameters) of a :class:`~divopt_rag.experiments.grid.SweepConfig`
and writes ONE tidy parquet row per run. How it survives being killed:

* every run has a deterministic key, sha256(dataset, query, method, canonical parameters)
  (:func:`divopt_rag.experiments.grid.run_key`), and a seed derived from (base seed, key);
* each finished run is written by the driver to ``OUT/parts/<key>.parquet`` (or
  ``<key>.error.parquet`` when the method raised) by :func:`divopt_rag.experiments.harness.write_parquet`
  (a hidden temporary name in the same folder, fsync'ed, then ``os.replace``'d), so a part file
  is either complete or absent;
* a restart with the same command lists ``OUT/parts``, skips every key already there and runs
  the rest; at the end :func:`consolidate` reads the parts of the current grid into
  ``OUT/results.parquet`` (written the same atomic way), ordered by ``run_index``.
A kill therefore loses at most the runs in flight, never a written row, and never duplicates one.

Runs that share an output folder (what the most trusted runners do: one writer per folder,
nothing silently replaced):

* a sweep holds the folder's lock (:func:`divopt_rag.experiments.harness.output_lock`) while it
  runs: a second sweep on the same folder stops at once with an error naming the first (its pid,
  host, start time and command); the OS drops the lock when the holder dies, however it dies;
* temporary files are private to their writer, and a restart deletes only those whose writer is
  provably gone (:func:`divopt_rag.experiments.harness.remove_stale_temporaries`);
* a folder remembers its sweep (``OUT/config.json``). A different configuration there is refused
  with the differences listed, unless ``new_grid=True`` (``--new-grid``): the previous
  ``config.json`` and ``results.parquet`` are then kept beside as ``config.<sweep_id>.json`` and
  ``results.<sweep_id>.parquet``, and the finished runs both grids share are reused. Settings
  that change a run's row without changing its key (``seed``, ``evaluator``, ``plugins``) can
  never share a folder: reusing a part would give a silently wrong row;
* the local pool's workers die with the driver (:mod:`divopt_rag.experiments.backends`).

Every parameter name is checked before any work: a grid or method parameter that no chosen
method takes is an error listing the names they do take (a typo never becomes a silent no-op).

The module map of a sweep: this module plans it (:func:`plan`: plugins, dataset, grid), runs it
(:func:`run_sweep`) and keeps its part files; the dataset comes from :func:`divopt_rag.data.load`
with the cache under ``OUT/data/<dataset key>/`` (embeddings computed once, memory-mapped by the
workers, reused by a restart); methods are resolved and run by :mod:`divopt_rag.experiments.methods`
(selectors, robust models, :func:`~divopt_rag.experiments.methods.register_method` extras); one run
becomes one row in :mod:`divopt_rag.experiments.runs`; :mod:`divopt_rag.experiments.backends` executes
the runs (in process, local process pool, Ray); :mod:`divopt_rag.experiments.sweep_cli` is the
command line.
"""
from __future__ import annotations

import difflib
import json
import math
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from divopt_rag.data import EmbeddedDataset
from divopt_rag.data import load as load_dataset
from divopt_rag.experiments import harness
from divopt_rag.experiments.backends import import_plugins, run_inline, run_local, run_ray
from divopt_rag.experiments.rag.evaluator import make_evaluator
from divopt_rag.experiments.grid import RunSpec, SweepConfig, chunked, expand_grid
from divopt_rag.experiments.grid import INSTANCE_PARAMS
from divopt_rag.experiments.methods import accepted_parameters, method_accepts, required_parameters, resolve_method
from divopt_rag.models.validation import check_scalar

__all__ = [
    "SweepResult",
    "MissingParameterWarning",
    "TIMING_COLUMNS",
    "plan",
    "run_sweep",
    "consolidate",
    "finished_keys",
    "check_parameters",
    "check_folder",
    "keep_previous",
    "error_summary",
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


def _suggest(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_parameters(config: SweepConfig) -> None:
    """Every parameter name of ``config`` is taken by a chosen method: a common grid parameter
    by at least one of them (it expands only those), a ``methods.<name>`` parameter by that
    method. ValueError listing the valid names otherwise (plugins must be imported first)."""
    accepted = {m: accepted_parameters(m) for m in config.methods}
    if any(a is None for a in accepted.values()):  # a method taking **kwargs takes any name
        known: set[str] | None = None
    else:
        known = set().union(*accepted.values())
    for p in config.grid:
        if p in INSTANCE_PARAMS or known is None or p in known:
            continue
        valid = sorted(set(INSTANCE_PARAMS) | known)
        raise ValueError(f"grid parameter {p!r} is taken by none of the methods {list(config.methods)}{_suggest(p, valid)}; "
                         f"valid names: {valid}")
    for m, own in config.methods.items():
        ok = accepted[m]
        for p in own:
            if p in INSTANCE_PARAMS or ok is None or p in ok:
                continue
            valid = sorted(set(INSTANCE_PARAMS) | ok)
            raise ValueError(f"method {m!r} does not take parameter {p!r} (methods.{m}){_suggest(p, valid)}; "
                             f"its parameters: {valid}")


def plan(config: SweepConfig, out_dir: str | Path, mmap: bool = True) -> tuple[EmbeddedDataset, list[RunSpec]]:
    """Import plugins, check the method and parameter names, build (or reuse) the dataset cache
    and expand the grid into run specs (ValueError when the grid has no run)."""
    import_plugins(config.plugins)
    for m in config.methods:
        resolve_method(m)  # unknown methods fail before any work
    check_parameters(config)
    data = load_dataset(config.dataset, cache_dir=Path(out_dir) / "data", mmap=mmap)
    specs = expand_grid(config, data.key, _select_queries(data, config.queries), method_accepts)
    if not specs:
        raise ValueError(f"the sweep has no runs: dataset {data.name!r} gives {data.n_queries} queries "
                         f"(queries={config.queries!r})")
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


#: Settings that change a run's row but not its key: two sweeps differing in them never share a folder.
_ROW_SETTINGS = ("seed", "evaluator", "plugins")


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): d}


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = 4) -> str:
    a, b = _flat(json.loads(json.dumps(old, default=str))), _flat(json.loads(json.dumps(new, default=str)))
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k, "<absent>") != b.get(k, "<absent>")]
    text = "; ".join(f"{k}: {a.get(k, '<absent>')!r} -> {b.get(k, '<absent>')!r}" for k in keys[:limit])
    return text + (f"; and {len(keys) - limit} more" if len(keys) > limit else "")


def check_folder(out_dir: str | Path, config: SweepConfig, new_grid: bool = False) -> str | None:
    """Refuse to put ``config`` in a folder that holds another sweep (``OUT/config.json`` of a
    different ``sweep_id``), naming the differences. With ``new_grid`` that is allowed, and the
    previous sweep's id is returned: :func:`keep_previous` then moves its ``config.json`` and
    ``results.parquet`` beside; but a difference in a row setting (seed, evaluator, plugins) is
    refused even then, since finished parts would be reused with the wrong seed or score.
    Returns None when the folder is new or holds this very sweep."""
    out = Path(out_dir)
    path = out / "config.json"
    if not path.exists():
        return None
    try:
        old = json.loads(path.read_text())
        old_id = str(old["sweep_id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a divopt-rag sweep config ({exc}); use another output folder") from None
    if old_id == config.sweep_id:
        return None
    old_cfg = {k: old.get(k) for k in SweepConfig._KEYS}
    new_cfg = config.to_dict()
    diff = _differences(old_cfg, new_cfg)
    row_diff = [k for k in _ROW_SETTINGS if json.dumps(old_cfg.get(k), sort_keys=True, default=str)
                != json.dumps(new_cfg.get(k), sort_keys=True, default=str)]
    if row_diff:
        raise ValueError(f"{out} holds sweep {old_id} and this sweep differs in {row_diff} ({diff}): its finished runs "
                         f"would be reused with the other {'/'.join(row_diff)}; use another output folder")
    if not new_grid:
        raise ValueError(f"{out} holds sweep {old_id} (config.json) with another configuration ({diff}); "
                         f"its results.parquet would be replaced: use another output folder, or --new-grid "
                         f"(new_grid=True) to run this grid here and keep the previous files as "
                         f"config.{old_id}.json and results.{old_id}.parquet")
    return old_id


def keep_previous(out_dir: str | Path, old_id: str) -> None:
    """Move the previous sweep's ``config.json`` and ``results.parquet`` to
    ``config.<old_id>.json`` and ``results.<old_id>.parquet`` (the caller holds the lock)."""
    out = Path(out_dir)
    for name, kept in (("config.json", f"config.{old_id}.json"), ("results.parquet", f"results.{old_id}.parquet")):
        if (out / name).exists():
            os.replace(out / name, out / kept)


def error_summary(table: pd.DataFrame, limit: int = 3) -> tuple[int, list[tuple[str, int]]]:
    """(number of error rows, the ``limit`` most frequent error messages with their counts)."""
    if table.empty or "status" not in table:
        return 0, []
    errors = table.loc[table["status"] != "ok", "error"].fillna("").astype(str)
    return int(errors.size), Counter(errors).most_common(limit)


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
    new_grid: bool = False,
) -> SweepResult:
    """Run (or resume) a sweep into ``out_dir`` and return the consolidated table.

    backend : "local" (a process pool of ``n_workers`` spawned processes; ``n_workers=0`` runs
        in this process) or "ray" (``address`` of an existing cluster, else a local
        ``ray.init(num_cpus=n_workers)`` bound to 127.0.0.1; an already initialized Ray is
        used as it is).
    chunk_size : runs per task (default: about 4 tasks per worker, at most 16 runs).
    retry_errors : run again the runs whose part is an error row.
    new_grid : accept a configuration different from the one ``out_dir`` holds, keeping the
        previous files beside (:func:`check_folder`); otherwise that is a ValueError.

    Raises :class:`~divopt_rag.experiments.harness.OutputLocked` when another run holds the folder.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {backend!r}; expected 'local' or 'ray'")
    n_workers = check_scalar(n_workers, "n_workers", int, min_val=0, allow_none=True)
    out = Path(out_dir)
    with harness.output_lock(out):
        return _run_locked(config, out, backend, n_workers, address, chunk_size, progress, retry_errors, new_grid)


def _run_locked(config: SweepConfig, out: Path, backend: str, n_workers: int | None, address: str | None,
                chunk_size: int | None, progress: bool, retry_errors: bool, new_grid: bool) -> SweepResult:
    parts = out / "parts"
    import_plugins(config.plugins)
    for m in config.methods:  # names first: a typo is reported as such, before any other check
        resolve_method(m)
    check_parameters(config)
    previous = check_folder(out, config, new_grid)  # before any work: a refusal costs nothing
    parts.mkdir(parents=True, exist_ok=True)
    harness.remove_stale_temporaries(parts)  # half-written parts of a killed run (never renamed)
    harness.remove_stale_temporaries(out)
    data, specs = plan(config, out)
    make_evaluator(config.evaluator)  # a bad evaluator spec fails here, not in every worker
    if previous is not None:
        keep_previous(out, previous)
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
