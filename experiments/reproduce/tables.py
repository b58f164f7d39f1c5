"""From tidy rows to a paper's table (long form: ``table, dataset, setting, method, metric,
value``): the aggregations recipes share, each a plain pandas group-by a test can redo."""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .spec import setting_label

__all__ = ["setting_labels", "mean_table", "long_rows", "upper_median", "leave_one_out_choice"]


def setting_labels(rows: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """The ``setting`` text of each row from its parameters ``keys`` (those it has; the rows'
    ``params`` column, as every executor table names it)."""
    return pd.Series([setting_label(json.loads(s), keys) for s in rows["params"]], index=rows.index, dtype=object)


def mean_table(rows: pd.DataFrame, table: str, metrics: Sequence[str], keys: Sequence[str],
               agg: str = "mean") -> pd.DataFrame:
    """Mean (or ``agg``) of each metric over queries per (dataset, method, setting of ``keys``)."""
    present = [m for m in metrics if m in rows.columns]
    if rows.empty or not present:
        return pd.DataFrame(columns=["table", "dataset", "setting", "method", "metric", "value"])
    df = rows.assign(setting=setting_labels(rows, keys))
    g = df.groupby(["dataset", "method", "setting"], sort=False)[present].agg(agg).reset_index()
    out = g.melt(id_vars=["dataset", "method", "setting"], value_vars=present, var_name="metric", value_name="value")
    out.insert(0, "table", table)
    return out[["table", "dataset", "setting", "method", "metric", "value"]]


def long_rows(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """A long table from ``{"table", "dataset", "setting", "method", "metric", "value"}`` dicts."""
    return pd.DataFrame(list(records), columns=["table", "dataset", "setting", "method", "metric", "value"])


def upper_median(values: dict[float, float]) -> float:
    """The upper median of the keys with the best value (DF-RAG's tie rule): sort the tied
    keys t_1 < ... < t_m and take t_(floor(m/2)+1). NaN values are ignored."""
    vals = {t: v for t, v in values.items() if not (isinstance(v, float) and math.isnan(v))}
    if not vals:
        return math.nan
    best = max(vals.values())
    tied = sorted(t for t, v in vals.items() if v == best)
    return tied[len(tied) // 2]


def leave_one_out_choice(per_query: pd.DataFrame, score: str = "value", key: str = "theta",
                         query: str = "query_id", choose: Callable[[dict], float] = upper_median) -> pd.Series:
    """For each query, the ``key`` value chosen on the OTHER queries: argmax over ``key`` of the
    mean ``score`` of every other query (ties by ``choose``, the upper median). A query alone
    falls back to all queries (itself included), reported as such by the caller."""
    piv = per_query.pivot_table(index=query, columns=key, values=score, aggfunc="mean")
    total, count = piv.sum(), piv.count()
    out = {}
    for q in piv.index:
        rest_n = count - piv.loc[q].notna().astype(int)
        rest = (total - piv.loc[q].fillna(0.0)) / rest_n.replace(0, np.nan)
        if rest.isna().all():
            rest = total / count
        out[q] = choose({float(t): float(v) for t, v in rest.items()})
    return pd.Series(out, name=f"{key}_chosen")
