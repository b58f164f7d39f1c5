"""The IR measures of a certify run beside its objective (issue 49, item 6): alpha-nDCG@k,
nDCG@k and S-recall@k of every method and of the certified optimum (``exact``), per theta, mean
over the queries. The rows' measures are computed by the run from the dataset's qrels and
subtopic labels (:mod:`divopt_rag.experiments.measures.metrics`: ir_measures and its pyndeval
provider where installed). ``divopt-rag bench quality`` writes this table for any dataset with
qrels (``OUT/quality_ir.csv`` and ``OUT/quality_ir.md``); ``benchmarks/quality_ir_table.py``
writes it into the README."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

__all__ = ["MEASURES", "LABELS", "EXACT", "NEEDED", "tidy", "markdown", "short", "has_ir_columns"]

MEASURES = ("alpha_ndcg", "ndcg", "s_recall")
LABELS = {"alpha_ndcg": "α-nDCG", "ndcg": "nDCG", "s_recall": "S-recall"}
#: The method name of the certified optimum's rows.
EXACT = "exact"


def _ok(results: pd.DataFrame) -> pd.DataFrame:
    return results[results["status"].eq("ok")] if "status" in results else results


#: The measure every dataset with qrels gives; alpha-nDCG and S-recall need subtopic labels too.
NEEDED = "ndcg"


def has_ir_columns(results: pd.DataFrame) -> bool:
    """Whether the rows carry nDCG at their one k (a dataset with qrels; alpha-nDCG and S-recall
    where it also labels subtopics)."""
    ok = _ok(results)
    ks = sorted(ok["k"].dropna().unique()) if "k" in ok else []
    return len(ks) == 1 and f"{NEEDED}@{int(ks[0])}" in ok and ok[f"{NEEDED}@{int(ks[0])}"].notna().any()


def tidy(results: pd.DataFrame) -> pd.DataFrame:
    """Mean of each measure per (method, theta) over the queries (rows with an error left out):
    columns method, theta, measure, cutoff, mean, queries. A dataset with qrels but no subtopic
    labels has no alpha-nDCG or S-recall: their means are NaN over 0 queries (shown as "–")."""
    ok = _ok(results)
    ks = sorted(ok["k"].unique())
    if len(ks) != 1:  # a summary never averages over a setting that varies
        raise ValueError(f"the run holds several k ({ks}): give one run per k")
    k = int(ks[0])
    cols = {m: f"{m}@{k}" for m in MEASURES}
    if cols[NEEDED] not in ok:
        raise ValueError(f"the run has no {cols[NEEDED]} column: its dataset carries no qrels")
    rows = []
    for (method, theta), g in ok.groupby(["method", "theta"], sort=True):
        for m, col in cols.items():
            values = g[col].dropna() if col in g else pd.Series([], dtype=float)
            rows.append({"method": method, "theta": float(theta), "measure": m, "cutoff": k,
                         "mean": float(values.mean()) if len(values) else float("nan"), "queries": int(len(values))})
    return pd.DataFrame(rows)


def short(value: float) -> str:
    """0.16 as .16 (a table of 13 rows x 4 thetas x 3 measures has to fit the README)."""
    text = f"{value:.2f}"
    return text[1:] if text.startswith("0.") else text


def markdown(table: pd.DataFrame, order: Sequence[str] | None = None) -> str:
    """Rows: methods (the certified optimum first, then ``order``'s methods that the table has, or
    every method sorted); columns: theta; a cell: alpha-nDCG / nDCG / S-recall at the run's cutoff."""
    k = int(table["cutoff"].iloc[0])
    thetas = sorted(table["theta"].unique())
    wide = table.pivot_table(index=["method", "theta"], columns="measure", values="mean")
    methods = sorted(table["method"].unique())
    first = [EXACT] if EXACT in methods else []
    rest = [m for m in order if m in methods and m != EXACT] if order else sorted(set(methods) - {EXACT})
    head = ["method", *(f"θ={t:g}".replace("0.", ".") for t in thetas)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in first + rest:
        name = "certified optimum" if method == EXACT else method
        cells = []
        for t in thetas:
            row = wide.loc[(method, t)] if (method, t) in wide.index else None
            cells.append("–" if row is None else "/".join(
                "–" if m not in row or pd.isna(row[m]) else short(row[m]) for m in MEASURES))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    legend = " / ".join(f"{LABELS[m]}@{k}" for m in MEASURES)
    absent = [LABELS[m] for m in MEASURES if not table.loc[table["measure"] == m, "queries"].gt(0).any()]
    note = (f" {' and '.join(absent)}: – (the dataset labels no subtopics)." if absent else "")
    return f"Cells: {legend}, mean over the queries.{note}\n\n" + "\n".join(lines)
