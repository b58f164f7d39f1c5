"""Consolidation: the verified parts of a plan become one tidy table, ``OUT/results.parquet``.

* :func:`consolidate`: the rows of every finished task in plan order, stamped with ``run_id``
  and ``run_index``, each part read through :func:`~divopt_rag.experiments.engine.parts.read_part`
  (checksum, key, rows); identity columns first (:func:`schema_order`).
* A table is never lost. Consolidating without running (``--consolidate-only``) refuses, before
  anything is written, when a dataset changed since the folder's run (:func:`refuse_changed_data`:
  its parts hold rows of the old content, the new content's runs have none) or when the new table
  would lack rows that ``results.parquet`` holds (:func:`refuse_losing_rows`); the old file stays.
* :func:`error_summary` / :func:`report_errors`: how many runs failed, and why (the exit code).
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import pyarrow.parquet as pq

from divopt_rag.experiments.engine import store
from divopt_rag.experiments.engine.folder import changed_data
from divopt_rag.experiments.engine.parts import PartError, part_paths, read_part
from divopt_rag.experiments.engine.plan import Task
from divopt_rag.experiments.measures.tables import measures_table

__all__ = ["consolidate", "schema_order", "write_results", "refuse_changed_data", "refuse_losing_rows",
           "error_summary", "report_errors", "RESULTS"]

#: The consolidated table of an output folder.
RESULTS = "results.parquet"
#: The long form of the results, one row per (row, measure), as ir-measures reports.
MEASURES = "measures.parquet"

_Unusable = Callable[[Task, Path, PartError], None]


def consolidate(out: Path, tasks: Sequence[Task], run_id: str, on_unusable: _Unusable | None = None) -> pd.DataFrame:
    """The rows of every finished task, in plan order, stamped with ``run_id`` and ``run_index``
    (a part reused from another grid keeps its rows but takes this plan's index).

    A part that fails its checks raises :class:`~divopt_rag.experiments.engine.parts.PartError` naming
    it, or, with ``on_unusable``, is handed to it ``(task, path, error)`` and left out."""
    parts = out / "parts"
    frames = []
    for t in tasks:
        good, bad = part_paths(parts, t.key)
        path = good if good.exists() else bad if bad.exists() else None
        if path is None:
            continue
        try:
            frame = read_part(path, t.key)
        except PartError as exc:
            if on_unusable is None:
                raise
            on_unusable(t, path, exc)
            continue
        if len(frame):
            frames.append(frame.assign(run_index=t.index))
    if not frames:
        return pd.DataFrame()
    # concatenated in run order: the dtypes (of columns some methods lack too) are then the
    # same however the parts were produced
    table = pd.concat(frames, ignore_index=True, sort=False)
    table.insert(0, "run_id", run_id)
    return table[schema_order(table.columns, tasks)]


def schema_order(columns: Sequence[str], tasks: Sequence[Task]) -> list[str]:
    """Identity columns first (run, dataset, query, method, every parameter, the tasks' own
    columns, status), then the measurements in the order they appeared."""
    params = list(dict.fromkeys(p for t in tasks for p in t.params))
    extra = list(dict.fromkeys(e for t in tasks for e in t.extra))
    head = ["run_id", "run_key", "run_index", "dataset", "data_key", "query_id", "method", "params", *params, *extra,
            "status", "error"]
    head = [c for c in dict.fromkeys(head) if c in set(columns)]
    return head + [c for c in columns if c not in set(head)]


def write_results(out: Path, table: pd.DataFrame) -> pd.DataFrame:
    """Write ``OUT/results.parquet`` atomically, and beside it ``OUT/measures.parquet``, the same
    measurements in long form (:func:`divopt_rag.experiments.measures.tables.measures_table`);
    returns what the results file holds (missing values of bool / str columns read back as None)."""
    store.write_parquet(table, out / RESULTS)
    store.write_parquet(measures_table(table), out / MEASURES)
    return pq.read_table(out / RESULTS).to_pandas()


def _previous_keys(out: Path) -> list[str] | None:
    """The run keys of the rows ``OUT/results.parquet`` holds, or None when there is no such
    file or it cannot be read (a damaged consolidated table holds nothing to keep: its rows come
    from the parts)."""
    path = out / RESULTS
    if not path.exists():
        return None
    try:
        table = pq.read_table(path, columns=["run_key"])
    except Exception:  # noqa: BLE001 (unreadable, or no run_key column: nothing to compare with)
        return None
    return [str(k) for k in table.column("run_key").to_pylist()]


_KEEP = "nothing was written and results.parquet is kept"


def refuse_changed_data(out: Path, old_config: Mapping[str, Any] | None, data_keys: Mapping[str, str]) -> None:
    """ValueError naming each dataset whose content changed since the run that ``config.json``
    records: the folder's parts hold rows of the old content, and the new content's runs have
    none, so consolidating alone would replace the table with one that lacks them."""
    changes = changed_data(old_config, data_keys)
    if not changes:
        return
    previous = _previous_keys(out)
    held = f"its {len(previous)} rows" if previous is not None else "its rows"
    what = "; ".join(f"dataset {label!r} changed since the run in {out} (content key {was} -> {now})"
                     for label, (was, now) in changes.items())
    raise ValueError(f"{what}: the parts hold rows of the old content and the runs of the new content have none, "
                     f"so consolidating would replace results.parquet and {held} with a table without them; "
                     f"{_KEEP}: run the command without --consolidate-only to compute the new content's runs")


def refuse_losing_rows(out: Path, table: pd.DataFrame, limit: int = 3) -> None:
    """ValueError when ``table`` lacks rows (by run key) that ``OUT/results.parquet`` holds."""
    previous = _previous_keys(out)
    if not previous:
        return
    kept = set(table["run_key"].astype(str)) if "run_key" in table else set()
    lost = [k for k in dict.fromkeys(previous) if k not in kept]
    if not lost:
        return
    shown = ", ".join(lost[:limit]) + (f" and {len(lost) - limit} more" if len(lost) > limit else "")
    raise ValueError(f"{out}: consolidating would drop {len(lost)} of the {len(previous)} rows of results.parquet "
                     f"(runs with no part in {out / 'parts'}: {shown}); {_KEEP}: run the command without "
                     f"--consolidate-only to compute them")


def error_summary(table: pd.DataFrame, limit: int = 3) -> tuple[int, list[tuple[str, int]]]:
    """(number of error rows, the ``limit`` most frequent error messages with their counts)."""
    if table.empty or "status" not in table:
        return 0, []
    errors = table.loc[table["status"] != "ok", "error"].fillna("").astype(str)
    return int(errors.size), Counter(errors).most_common(limit)


def report_errors(prog: str, table: pd.DataFrame, n_runs: int | None = None, what: str = "runs") -> int:
    """Print on stderr how many runs of ``table`` failed and their most frequent reasons
    (:func:`error_summary`); the exit code of the command: 1 if any failed, else 0."""
    n_failed, reasons = error_summary(table)
    if not n_failed:
        return 0
    n_runs = len(table) if n_runs is None else n_runs
    counted = f"every {what.removesuffix('s')}" if n_failed == n_runs else f"{n_failed} of {n_runs} {what}"
    print(f"{prog}: {counted} failed (status 'error'; --retry-errors runs them again). Most frequent reasons:",
          file=sys.stderr)
    for text, count in reasons:
        print(f"  {count} x {text}", file=sys.stderr)
    return 1
