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

from divopt_rag.experiments.measures.ir_table import MEASURES, markdown as _markdown, short as _short, tidy

MARKER = "quality-ir"


def _order(readme: Path | None) -> list[str] | None:
    """The methods of the README's table:quality block, in its order (None: no such block)."""
    if readme is None or not readme.exists():
        return None
    block = re.search(r"<!-- table:quality -->\n(.*?)<!-- /table:quality -->", readme.read_text(encoding="utf-8"), re.S)
    return re.findall(r"^\|\s*\**([a-z_0-9]+)\**", block.group(1), re.M) if block else None


def markdown(table: pd.DataFrame, readme: Path | None = None) -> str:
    """The table (:func:`divopt_rag.experiments.measures.ir_table.markdown`) with the methods of
    ``readme``'s quality table, in its order, so the two tables read side by side."""
    return _markdown(table, _order(readme))


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
