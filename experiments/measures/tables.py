"""Metric columns of result tables: a ranking metric's name with its cutoff, and the long form.

* In a wide result table a ranking metric carries its cutoff in its column name, as ir-measures
  and ranx name measures: ``recall@10``, ``ndcg@10``, ``alpha_ndcg@10``, ``s_recall@10``
  (:data:`CUTOFF_METRICS`, :func:`with_cutoff`). A table over several k has one column per
  cutoff; :func:`at_cutoff` reads "the metric at each row's own k" and :func:`metric_columns`
  lists the columns of one metric.
* :func:`measures_table` is the long form of a wide table, one row per (row, measure), with the
  cutoff split out of the name (what ``OUT/measures.parquet`` holds beside ``results.parquet``).
* **Settings of a table** (:func:`varying_settings`): the columns of a result table that define
  its settings (dataset, k, theta, pool, every parameter) and take several values there; summaries
  and plots group or facet by every one of them, never average over it.

The metrics themselves are in :mod:`divopt_rag.experiments.measures.metrics`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from divopt_rag.models.validation import check_scalar

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CUTOFF_METRICS", "with_cutoff", "metric_columns", "at_cutoff", "MEASURE_COLUMNS", "measures_table",
           "SETTING_COLUMNS", "varying_settings"]

#: Ranking metrics measured at a cutoff (the selection size k): named ``<metric>@<k>`` in tables.
CUTOFF_METRICS = ("recall", "ndcg", "alpha_ndcg", "s_recall")


def with_cutoff(metrics: Mapping[str, Any], k: int) -> dict[str, Any]:
    """``metrics`` (as :func:`selection_metrics` returns them) with the ranking metrics of
    :data:`CUTOFF_METRICS` renamed to their table columns ``<metric>@<k>``; other keys unchanged."""
    k = check_scalar(k, "k", int, min_val=1)
    return {(f"{m}@{k}" if m in CUTOFF_METRICS else m): v for m, v in metrics.items()}


def metric_columns(table: Any, name: str) -> list[str]:
    """The columns of ``table`` that hold metric ``name``: ``name`` itself if present, else every
    ``name@<cutoff>`` column, by increasing cutoff."""
    if name in table.columns:
        return [name]
    cols = [c for c in table.columns if isinstance(c, str) and c.startswith(f"{name}@") and c[len(name) + 1:].isdigit()]
    return sorted(cols, key=lambda c: int(c.rsplit("@", 1)[1]))


def at_cutoff(table: Any, name: str):
    """Metric ``name`` of each row at its own cutoff: the value of ``<name>@<k>`` for the row's k
    (a pandas Series; NaN where that column is missing). ``name`` may already be a column
    (``"ilad"``, ``"ndcg@10"``): then that column is returned as it is."""
    import pandas as pd

    if name in table.columns:
        return table[name]
    if name not in CUTOFF_METRICS or "k" not in table.columns:
        raise ValueError(f"no column {name!r} in the table (columns: {sorted(map(str, table.columns))})")
    out = pd.Series(np.nan, index=table.index, dtype=float)
    found = False
    for k, rows in table.groupby("k").groups.items():
        col = f"{name}@{int(k)}"
        if col in table.columns:
            out.loc[rows] = table.loc[rows, col].astype(float)
            found = True
    if not found:
        raise ValueError(f"no column {name}@<k> in the table (columns: {sorted(map(str, table.columns))})")
    return out


# --------------------------------------------------------------------------------------------
# The long measures table (ir-measures / ranx shape)
# --------------------------------------------------------------------------------------------
#: Columns of :func:`measures_table`.
MEASURE_COLUMNS = ("run_id", "run_key", "dataset", "query_id", "method", "measure", "cutoff", "value")
# columns of a result table that identify a row or hold its settings, never a measure
_NOT_MEASURES = {"run_id", "run_key", "run_index", "dataset", "data_key", "query_id", "method", "params",
                 "query_index", "seed", "status", "error", "selected", "info", "k", "theta", "pool", "n", "d"}


def measures_table(table: Any):
    """The long form of a wide result table: one row per (row of ``table``, measure), with the
    columns :data:`MEASURE_COLUMNS` (as ir-measures and ranx report: query, run, measure,
    value), ``cutoff`` split from a column name ``<metric>@<c>`` (NA for a measure without one),
    ``value`` as float (booleans as 0/1).

    Measures are the numeric and boolean columns that are not identity or setting columns (run
    keys, the parameters named in ``params``, k, theta, pool, n, seeds, ...). A value that is
    missing is not written: the measure does not apply to that row's method, or is undefined
    for its selection (ILAD of a one-item set); the wide table shows it as NaN. The table's
    parameters are one ``run_key`` join away.
    """
    import pandas as pd

    settings: set[str] = set()
    if "params" in table:
        for text in table["params"].dropna().unique():
            try:
                settings |= set(json.loads(text))
            except (TypeError, ValueError):
                continue
    skip = _NOT_MEASURES | settings
    cols = [c for c in table.columns if isinstance(c, str) and c not in skip
            and (pd.api.types.is_numeric_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c]))]
    ids = [c for c in MEASURE_COLUMNS[:5] if c in table]
    if table.empty or not cols:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c == "value" else "Int64" if c == "cutoff" else "object")
                             for c in MEASURE_COLUMNS})
    values = table[cols].apply(lambda s: pd.to_numeric(s.astype("Float64"), errors="coerce"))
    values.columns = [f"m:{c}" for c in cols]  # a measure may be named like a column of the long table
    long = pd.concat([table[ids].reset_index(drop=True), values.reset_index(drop=True)], axis=1).melt(
        id_vars=ids, var_name="_column", value_name="_value")
    long = long[long["_value"].notna()]
    split = long["_column"].str[2:].str.extract(r"^(?P<measure>.+?)(?:@(?P<cutoff>\d+))?$")
    long = long.assign(measure=split["measure"], cutoff=pd.to_numeric(split["cutoff"]).astype("Int64"),
                       value=long["_value"].astype("float64"))
    for c in MEASURE_COLUMNS:
        if c not in long:
            long[c] = pd.NA
    return long[list(MEASURE_COLUMNS)].reset_index(drop=True)


#: Columns that define the settings of a result table (besides ``method`` and the parameters
#: listed in its ``params`` column): summaries and plots never average over one that varies.
SETTING_COLUMNS = ("dataset", "data_key", "model", "n", "d", "k", "pool", "theta")


def varying_settings(table: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """The setting columns of ``table`` that take more than one value (NaN / None counts as one).

    Settings are :data:`SETTING_COLUMNS` and every parameter named in the table's ``params``
    column (JSON of each row's parameters, as the executor writes it). A parameter is read on the
    rows that name it in ``params`` only: the rows of a method that does not take it (MMR's
    rho_vec, a robust model's theta and k) leave it empty, which is not a second value. ``data_key`` is left out
    when ``dataset`` already separates the same rows. ``n`` (the pool a method chose from) is a
    setting only where the table has no ``pool`` column of its own. Ordered as found.
    """
    skip = set(exclude)
    names = [c for c in SETTING_COLUMNS if c in table]
    # rows per parameter that take it (a parameter a method does not take is no setting of its rows)
    takes: dict[str, np.ndarray] = {}
    if "params" in table:
        parsed = {}
        for text in table["params"].dropna().unique():
            try:
                parsed[text] = set(json.loads(text))
            except (TypeError, ValueError):
                continue
        for ps in parsed.values():
            names += [p for p in sorted(ps) if p not in names]
        given = table["params"].map(lambda t: parsed.get(t, set()))
        takes = {p: given.map(lambda ps, p=p: p in ps).to_numpy(bool) for p in set().union(*parsed.values())}
    if "pool" in table:
        skip.add("n")  # the pool size follows from the pool setting (and the query's candidates)
    out = []
    for c in names:
        if c in skip or c not in table:
            continue
        values = table[c][takes[c]] if c in takes else table[c]
        if values.astype(str).nunique(dropna=False) > 1:  # None (e.g. the whole pool) is a value
            out.append(c)
    if "dataset" in out and "data_key" in out and table.groupby("dataset")["data_key"].nunique().max() == 1:
        out.remove("data_key")
    return out
