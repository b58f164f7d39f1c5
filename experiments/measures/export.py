"""Result tables as IR runs: TREC run files and ranx ``Run`` objects.

divopt's result tables (``divopt-rag sweep``, ``certify``, ``reproduce``) have one row per
(dataset, query, method, parameters) and a column of the selected passage ids, in the order the
selector returns them ("selected" in sweep tables, "selected_ids" in certify tables). An IR run
is one system's ranked list per query: here, the rows of one setting (one method with one set of
parameters, on one dataset).

* :func:`runs` splits a table into its settings: ``{run name: rows}``.
* :func:`to_trec` writes one setting as a TREC run file (``qid Q0 docid rank score tag``), the
  format trec_eval, ir_measures (``read_trec_run``) and ranx (``Run.from_file``) read, with
  ranx's own writer (``Run.save(path, kind="trec")``).
* :func:`to_ranx` returns one setting as a ``ranx.Run``, and :func:`to_ranx_qrels` a dataset's
  qrels as a ``ranx.Qrels``, under pandas 2 and 3 alike (``pip install "divopt-rag[ir]"``).

Scores: a selection is a ranked list, not a scored one, so the passage at rank r (0-based) of
a list of k gets the score k - r; every evaluation tool sorts by score, so they all see the
selector's order. A query whose row has no selection (a failed run) has no lines, which
evaluation tools count as retrieving nothing.

Examples
--------
>>> table = pd.read_parquet("results/sweep.parquet")                          # doctest: +SKIP
>>> for name, rows in runs(table).items():                                    # doctest: +SKIP
...     to_trec(rows, f"runs/{name}.trec")
>>> run = to_ranx(runs(table)["fw_ws_ms.k=10.theta=0.5"])                     # doctest: +SKIP
>>> ranx.evaluate(qrels, run, "ndcg@10")                                      # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from divopt_rag.data.atomic import write_atomically
from divopt_rag.models.extras import require


__all__ = ["runs", "run_name", "to_trec", "to_ranx", "to_ranx_qrels", "run_dict"]

#: columns that hold the selected passage ids, in the order they are looked for
SELECTED_COLUMNS = ("selected", "selected_ids")
#: columns that never tell two settings apart (outcomes and bookkeeping, not parameters)
_NOT_SETTINGS = {"run_key", "run_index", "query_index", "query_id", "status", "error", "seed"}


def _selected_column(table: pd.DataFrame, selected: str | None) -> str:
    if selected is not None:
        if selected not in table.columns:
            raise ValueError(f"selected={selected!r} is not a column of the table; columns: {sorted(table.columns)}")
        return selected
    for col in SELECTED_COLUMNS:
        if col in table.columns:
            return col
    raise ValueError(f"no column of selected passage ids ({' / '.join(SELECTED_COLUMNS)}) in {sorted(table.columns)}")


def _setting_columns(table: pd.DataFrame) -> list[str]:
    """The columns that name a setting: dataset, method and the parameters (``params`` JSON)."""
    cols = [c for c in ("dataset", "method") if c in table.columns]
    if "params" in table.columns:
        return [*cols, "params"]
    return cols


def run_name(row: pd.Series | dict) -> str:
    """A run tag for a setting: ``method.param=value...`` (dataset first when present), with no
    white space, as TREC run tags must be."""
    parts = [str(row[c]) for c in ("dataset", "method") if c in row and pd.notna(row[c])]
    if "params" in row and isinstance(row["params"], str) and row["params"]:
        params = json.loads(row["params"])
        parts += [f"{k}={params[k]}" for k in sorted(params)]
    name = ".".join(parts) or "divopt"
    return re.sub(r"\s+", "", name)


def runs(table: pd.DataFrame, by: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """Split a result table into its settings, ``{run name: rows}`` (one row per query each).

    ``by``: the columns that tell settings apart (default: ``dataset``, ``method`` and
    ``params``, the JSON of every parameter, as divopt's tables write them).
    """
    by = list(_setting_columns(table) if by is None else by)
    missing = [c for c in by if c not in table.columns]
    if missing:
        raise ValueError(f"by names columns the table lacks: {missing}")
    if not by:
        return {"divopt": table}
    out: dict[str, pd.DataFrame] = {}
    for _, rows in table.groupby(by, sort=True, dropna=False):
        name = run_name(rows.iloc[0]) if by == _setting_columns(table) else ".".join(
            re.sub(r"\s+", "", f"{c}={rows.iloc[0][c]}") for c in by)
        if name in out:
            raise ValueError(f"two settings share the run name {name!r}; pass by= to tell them apart")
        out[name] = rows
    return out


def run_dict(table: pd.DataFrame, *, query: str = "query_id", selected: str | None = None) -> dict[str, dict[str, float]]:
    """``{query id: {passage id: score}}`` of one setting (scores k - rank, see module doc).

    Refuses a table with several rows for a query (several settings: split it with
    :func:`runs`), naming the columns that vary.
    """
    col = _selected_column(table, selected)
    if query not in table.columns:
        raise ValueError(f"query={query!r} is not a column of the table; columns: {sorted(table.columns)}")
    dup = table[query].astype(str).duplicated(keep=False)
    if dup.any():
        rows = table[dup]
        varying = [c for c in rows.columns if c not in _NOT_SETTINGS and c != col
                   and rows[c].astype(str).nunique(dropna=False) > 1]
        raise ValueError(
            f"one run has one row per query, but query {rows[query].iloc[0]!r} has {int((table[query] == rows[query].iloc[0]).sum())} "
            f"rows (settings differ in {varying[:6]}): split the table with runs(table) first"
        )
    out: dict[str, dict[str, float]] = {}
    for qid, ids in zip(table[query], table[col]):
        ids = [] if ids is None else [str(i) for i in ids]
        if len(set(ids)) != len(ids):
            raise ValueError(f"query {qid!r}: the selection lists a passage twice: {ids}")
        if ids:
            out[str(qid)] = {pid: float(len(ids) - rank) for rank, pid in enumerate(ids)}
    return out


def to_trec(
    table: pd.DataFrame,
    path: str | os.PathLike,
    *,
    name: str | None = None,
    query: str = "query_id",
    selected: str | None = None,
) -> Path:
    """Write one setting of a result table as a TREC run file; returns the path.

    Lines are ``qid Q0 docid rank score name`` (rank from 1), each query's passages in
    selection order, written by ranx (``Run.save(kind="trec")``). ``name`` (the run tag)
    defaults to :func:`run_name` of the setting. The file is written atomically (ranx writes a
    temporary file beside it, which then replaces ``path``:
    :func:`divopt_rag.data.atomic.write_atomically`).
    """
    run = run_dict(table, query=query, selected=selected)
    tag = name if name is not None else (run_name(table.iloc[0]) if len(table) else "divopt")
    if not tag or re.search(r"\s", tag):
        raise ValueError(f"name must be a run tag without white space, got {tag!r}")
    for qid, docs in run.items():
        bad = [d for d in [qid, *docs] if re.search(r"\s", d)]
        if bad:
            raise ValueError(f"TREC run files are white-space separated: id {bad[0]!r} contains white space")
    ranx_run = require("ranx", "to_trec").Run(run, name=tag)
    return write_atomically(path, lambda tmp: ranx_run.save(str(tmp), kind="trec"))


def to_ranx(
    table: pd.DataFrame, *, name: str | None = None, query: str = "query_id", selected: str | None = None
) -> Any:
    """One setting of a result table as a ``ranx.Run`` named ``name`` (default :func:`run_name`)."""
    Run = require("ranx", "to_ranx").Run  # numba compiles on import: only when asked
    run = run_dict(table, query=query, selected=selected)
    tag = name if name is not None else (run_name(table.iloc[0]) if len(table) else "divopt")
    return Run(run, name=tag)


def to_ranx_qrels(qrels: Any) -> Any:
    """Relevance judgments as a ``ranx.Qrels``, under pandas 2 and 3 alike.

    ``qrels``: a divopt dataset (its ``.qrels``), a mapping ``{query id: {passage id: grade}}``,
    or a frame with columns ``query_id``, ``doc_id``, ``relevance`` (``Dataset.qrels_frame()``,
    ir_measures' shape). ``ranx.Qrels.from_df`` asserts object-dtype id columns, which pandas 3's
    string columns are not; this builds the Qrels from a dict, which every pandas gives.
    """
    Qrels = require("ranx", "to_ranx_qrels").Qrels
    if hasattr(qrels, "qrels") and not isinstance(qrels, pd.DataFrame):
        qrels = qrels.qrels
    if isinstance(qrels, pd.DataFrame):
        missing = {"query_id", "doc_id", "relevance"} - set(qrels.columns)
        if missing:
            raise ValueError(f"a qrels frame needs the columns query_id, doc_id, relevance; missing {sorted(missing)}")
        judged: dict[str, dict[str, int]] = {}
        for q, d, g in zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"]):
            judged.setdefault(str(q), {})[str(d)] = int(g)
    else:
        judged = {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.items()}
    return Qrels(judged)
