"""The IR measures of a quality run beside its objective (issue 49, item 6): alpha-nDCG@k, nDCG@k
and S-recall@k of every method and of the certified optimum, per theta, from the rows that
``divopt-rag bench quality --parts small`` wrote (``RUN/small/results.parquet``: each row's
measures were computed by the run from the dataset's qrels and subtopic labels,
:func:`divopt_rag.experiments.metrics.selection_metrics`).

    python benchmarks/quality_ir_table.py RUN [--readme README.md]

``RUN`` may also be a ``divopt-rag certify --dataset SPEC`` run (``RUN/results.parquet``): the same
table for any dataset whose qrels and subtopic labels ``divopt_rag.data.load`` gives.

Writes ``RUN/quality_ir.csv`` (tidy: method, theta, measure, cutoff, mean, queries) and prints
the markdown table; with ``--readme`` the table replaces the block between ``<!-- table:quality-ir -->``
and ``<!-- /table:quality-ir -->`` of that file. With a README, the methods are those of its
``table:quality`` block, in its order (the certified optimum first), so the two tables read side
by side; ``quality_ir.csv`` has every method of the run.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

MEASURES = ("alpha_ndcg", "ndcg", "s_recall")
LABELS = {"alpha_ndcg": "α-nDCG", "ndcg": "nDCG", "s_recall": "S-recall"}
EXACT = "exact"
MARKER = "quality-ir"


def tidy(results: pd.DataFrame) -> pd.DataFrame:
    """Mean of each measure per (method, theta) over the queries (rows with an error left out)."""
    ok = results[results["status"].eq("ok")] if "status" in results else results
    ks = sorted(ok["k"].unique())
    if len(ks) != 1:  # a summary never averages over a setting that varies
        raise ValueError(f"the run holds several k ({ks}): give one run per k")
    k = int(ks[0])
    cols = {m: f"{m}@{k}" for m in MEASURES}
    missing = [c for c in cols.values() if c not in ok]
    if missing:
        raise ValueError(f"the run has no {', '.join(missing)} columns: its dataset carries no qrels or subtopic labels")
    rows = []
    for (method, theta), g in ok.groupby(["method", "theta"], sort=True):
        for m, col in cols.items():
            values = g[col].dropna()
            rows.append({"method": method, "theta": float(theta), "measure": m, "cutoff": k,
                         "mean": float(values.mean()) if len(values) else float("nan"), "queries": int(len(values))})
    return pd.DataFrame(rows)


def _order(methods: list[str], readme: Path | None) -> list[str]:
    listed: list[str] = []
    if readme is not None and readme.exists():
        block = re.search(r"<!-- table:quality -->\n(.*?)<!-- /table:quality -->", readme.read_text(encoding="utf-8"), re.S)
        if block:
            listed = re.findall(r"^\|\s*\**([a-z_0-9]+)\**", block.group(1), re.M)
    first = [EXACT] if EXACT in methods else []
    if listed:  # the README's methods only (the run's CSV has every method)
        return first + [m for m in listed if m in methods and m != EXACT]
    return first + sorted(set(methods) - {EXACT})


def markdown(table: pd.DataFrame, readme: Path | None = None) -> str:
    """Rows: methods; columns: theta; a cell: alpha-nDCG / nDCG / S-recall at the run's cutoff."""
    k = int(table["cutoff"].iloc[0])
    thetas = sorted(table["theta"].unique())
    wide = table.pivot_table(index=["method", "theta"], columns="measure", values="mean")
    head = ["method", *(f"θ={t:g}".replace("0.", ".") for t in thetas)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in _order(sorted(table["method"].unique()), readme):
        name = "certified optimum" if method == EXACT else method
        cells = []
        for t in thetas:
            row = wide.loc[(method, t)] if (method, t) in wide.index else None
            cells.append("–" if row is None else "/".join(_short(row[m]) for m in MEASURES))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    legend = " / ".join(f"{LABELS[m]}@{k}" for m in MEASURES)
    return f"Cells: {legend}, mean over the queries.\n\n" + "\n".join(lines)


def _short(value: float) -> str:
    """0.16 as .16 (a table of 13 rows x 4 thetas x 3 measures has to fit the README)."""
    text = f"{value:.2f}"
    return text[1:] if text.startswith("0.") else text


def write_readme(readme: Path, text: str) -> None:
    old = readme.read_text(encoding="utf-8")
    pattern = re.compile(rf"(<!-- table:{MARKER} -->\n).*?(<!-- /table:{MARKER} -->)", re.S)
    if not pattern.search(old):
        raise SystemExit(f"{readme}: no <!-- table:{MARKER} --> ... <!-- /table:{MARKER} --> block to fill")
    readme.write_text(pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(2), old), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path,
                        help="the --out folder of a `bench quality --parts small` run or of a `certify` run")
    parser.add_argument("--readme", type=Path, default=None,
                        help="write the table into this file's table:quality-ir block (default: print only)")
    args = parser.parse_args(argv)
    # a bench quality run keeps its small part in RUN/small; a certify run writes RUN/results.parquet
    found = [p for p in (args.run / "small" / "results.parquet", args.run / "results.parquet") if p.exists()]
    if not found:
        raise SystemExit(f"{args.run}: no small/results.parquet (bench quality) or results.parquet (certify)")
    results = pd.read_parquet(found[0])
    table = tidy(results)
    table.to_csv(args.run / "quality_ir.csv", index=False)
    text = markdown(table, args.readme)
    print(text)
    if args.readme is not None:
        write_readme(args.readme, text)
    print(f"wrote {args.run / 'quality_ir.csv'}" + (f" and {args.readme}" if args.readme else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
