"""Quality against an exact solve: the one definition of the normalized gap and of an exact hit
(:func:`gap_record`, :func:`best_known`, :func:`quality_summary`), used by ``divopt-rag certify``,
``divopt-rag bench quality``, the plots and the notebooks, and the one text form of a printed
result table (:func:`format_table`). The rule:

- the reference value is the best feasible value known, ``optimum = max(exact incumbent,
  every method's value)`` (:func:`best_known`). It is a lower bound on OPT; a MIP solver's
  "optimal" is proven only within its relative gap, so a fast method may beat its incumbent
  by a hair, and OPT is then at least that method's value;
- when the exact solve is **proven** optimal, ``gap = (optimum - f) / (k (k-1))``
  (:func:`divopt_rag.models.ccbqp.normalized_gap`), ``gap_kind = "exact"`` and
  ``exact_hit = gap <= tol`` (:func:`divopt_rag.models.ccbqp.exact_hit`);
- when it is **not** proven (time limit), the gap is measured against the solver's proven
  upper bound, ``gap = (bound - f) / (k (k-1))``, and labelled ``gap_kind = "upper_bound"``:
  an upper bound on the true gap, never called exact. ``exact_hit`` is then True only when
  f meets the bound (provably optimal) and otherwise unknown (``<NA>``), never False;
- ``bound_gap = (bound - f) / (k (k-1))`` on every row: a valid upper bound on the true gap
  even when "proven" means proven within the solver's relative gap (the name the full-scale
  certificates use for the same quantity; ``ccbqp.normalized_gap`` is the function behind both).

Gaps are clipped at 0 (values within rounding of the reference). The tolerance is the one of
the whole project, :data:`divopt_rag.models.ccbqp.EXACT_HIT_TOL` = 1e-9 of k(k-1): far above the
float64 rounding of f (|f| <= k(k-1), about 1e-14 of it) and far below the smallest real
difference between two k-sets seen in the recorded benchmarks (no gap lies in (0, 1e-6) in the
1,200 rows behind the README's quality table), so a hit means "the same value as the best
known", never "close". :func:`exact_gaps` applies this rule to a consolidated table, the
post-step of every run whose grid holds the ``exact`` method.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

from divopt_rag.models.ccbqp import EXACT_HIT_TOL, exact_hit, normalized_gap, objective_scale

__all__ = ["best_known", "gap_record", "exact_gaps", "INSTANCE_COLUMNS", "GAP_COLUMNS", "quality_summary",
           "format_table"]


def best_known(exact_value: float | None, values: Iterable[float | None] = ()) -> float:
    """The best feasible value known: max of the exact incumbent and every method's value
    (None / NaN ignored; -inf when none is known)."""
    vals = [float(v) for v in (exact_value, *values) if v is not None and not math.isnan(float(v))]
    return max(vals, default=-math.inf)


def gap_record(value: float | None, *, optimum: float, bound: float | None, proven: bool, k: int,
               tol: float = EXACT_HIT_TOL) -> dict[str, Any]:
    """``gap``, ``gap_kind``, ``bound_gap`` and ``exact_hit`` of a selection of value f =
    ``value`` (the rule is in the module docstring).

    optimum : best feasible value known (:func:`best_known`); bound : proven upper bound on OPT
    (None: none known); proven : whether the exact solve proved optimality; tol : normalized gap
    still counted as a hit (default :data:`divopt_rag.models.ccbqp.EXACT_HIT_TOL`). A missing value
    (a failed method) gives NaN gaps, an empty kind and an unknown hit.
    """
    if value is None or math.isnan(float(value)):
        return {"gap": math.nan, "gap_kind": "", "bound_gap": math.nan, "exact_hit": pd.NA}
    f = float(value)
    ub = math.inf if bound is None or math.isnan(float(bound)) else float(bound)
    to_bound = max(0.0, (ub - f) / objective_scale(k))
    if proven:
        return {"gap": max(0.0, normalized_gap(optimum, f, k)), "gap_kind": "exact", "bound_gap": to_bound,
                "exact_hit": exact_hit(optimum, f, k, tol)}
    return {"gap": to_bound, "gap_kind": "upper_bound", "bound_gap": to_bound,
            "exact_hit": True if to_bound <= tol else pd.NA}


#: Columns that identify one CCBQP instance in a result table: the rows of every method on the
#: same (data, query, k, theta, pool) compare with that instance's ``exact`` row.
INSTANCE_COLUMNS = ("data_key", "query_id", "k", "theta", "pool", "n")
#: What :func:`exact_gaps` writes on every row.
GAP_COLUMNS = ("optimum", "bound", "proven_optimal", "exact_status", "exact_solver", "gap", "gap_kind", "bound_gap",
               "exact_hit")


def _value(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def exact_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """The post-step of a run whose grid holds the ``exact`` method: the gap columns of every row.

    Rows are grouped by the instance they ran on (:data:`INSTANCE_COLUMNS` present in the
    table); in a group with a finished ``exact`` row, every row gets ``optimum`` (the best value
    known, :func:`best_known` over the exact incumbent and every method's f), the exact row's
    ``bound``, ``proven_optimal``, ``exact_status`` and ``exact_solver``, and ``gap``,
    ``gap_kind``, ``bound_gap``, ``exact_hit`` by :func:`gap_record`. Rows of an instance without
    a finished exact row (it failed, or it was not in the grid) keep what they had (NaN gaps, or
    a full-scale certificate's own ``bound_gap``); an error row has NaN gaps. Returns a new
    table; ``exact_hit`` and ``proven_optimal`` are nullable booleans (NA: unknown).
    """
    if table.empty or "method" not in table or not (table["method"] == "exact").any():
        return table
    out = table.copy()
    ok = out["status"].eq("ok") if "status" in out else pd.Series(True, index=out.index)
    keys = [c for c in INSTANCE_COLUMNS if c in out]
    # the reference of every row: its instance's exact row (merged on the instance columns) and
    # the best value any finished row of the instance reached
    ref_cols = ["objective", "bound", "proven_optimal", "exact_status", "exact_solver"]
    exact_rows = out.loc[(out["method"] == "exact") & ok, keys + [c for c in ref_cols if c in out]]
    exact_rows = exact_rows.drop_duplicates(keys).rename(columns={c: f"_ref_{c}" for c in ref_cols})
    ref = out[keys].astype(object).merge(exact_rows.astype({c: object for c in keys}), on=keys, how="left")
    best = out["objective"].where(ok).groupby([out[c].astype(object) for c in keys], dropna=False).transform("max")
    has_ref = ref["_ref_exact_status"].notna().to_numpy() if "_ref_exact_status" in ref else np.zeros(len(out), bool)
    records = {c: list(out[c]) if c in out else [pd.NA] * len(out) for c in GAP_COLUMNS}
    for i in np.flatnonzero(has_ref):
        optimum = best_known(_value(ref.at[i, "_ref_objective"]), [_value(best.iat[i])])
        bound = _value(ref.at[i, "_ref_bound"])
        proven = bool(ref.at[i, "_ref_proven_optimal"]) if pd.notna(ref.at[i, "_ref_proven_optimal"]) else False
        value = _value(out["objective"].iat[i]) if ok.iat[i] else None
        rec = gap_record(value, optimum=optimum, bound=bound, proven=proven, k=int(out["k"].iat[i]))
        rec.update(optimum=optimum, bound=math.nan if bound is None else bound, proven_optimal=proven,
                   exact_status=ref.at[i, "_ref_exact_status"], exact_solver=ref.at[i, "_ref_exact_solver"])
        for c, v in rec.items():
            records[c][i] = v
    for c in GAP_COLUMNS:
        out[c] = records[c]
    for c in ("optimum", "bound", "gap", "bound_gap"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    out["proven_optimal"] = out["proven_optimal"].astype("boolean")
    out["exact_hit"] = out["exact_hit"].astype("boolean")
    out["gap_kind"] = out["gap_kind"].fillna("").astype(str)
    return out


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


def format_table(table: pd.DataFrame, *, index: bool = False, digits: int = 4, tol: float = EXACT_HIT_TOL) -> str:
    """The one text form of a result table printed by a command: numbers with ``digits``
    significant digits, and in a gap column (a name holding "gap": ``gap``, ``mean_gap``,
    ``bound_gap``, ``relative_gap``, ...) a value within ``tol`` of 0 (default the hit tolerance
    :data:`divopt_rag.models.ccbqp.EXACT_HIT_TOL`) as 0: a gap of 7e-17 is 0 up to rounding, the
    rule :func:`divopt_rag.models.ccbqp.exact_hit` counts as a hit. ``index``: print the index
    too (pivot tables)."""

    def number(v: float) -> str:
        return f"{v:.{digits}g}"

    def gap(v: float) -> str:
        return "0" if abs(v) <= tol else number(v)

    formatters = {c: gap if "gap" in str(c).lower() else number for c in table.columns
                  if pd.api.types.is_float_dtype(table[c])}
    with pd.option_context("display.width", 200, "display.max_columns", 60):
        return table.to_string(index=index, formatters=formatters, na_rep="NaN")
