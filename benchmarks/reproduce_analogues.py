"""Record the offline analogue runs that docs/howto/reproduce.md cites, then write the doc's numbers.

Each recipe runs as ``divopt-rag reproduce RECIPE --analogue NAME --retrieval-only`` would (the
same ``run_recipe`` call), into a scratch folder; its paper table (our values, long form) is
recorded as ``benchmarks/results/reproduce/RECIPE-NAME.csv`` with the run id, and
``analogues.json`` keeps, per file, the command, the commit, the date, the machine load and the
time. Then every number marker of the doc is written from the recorded files
(:mod:`divopt_rag.experiments.reproduce.docnumbers`).

    python benchmarks/reproduce_analogues.py                 # every run below, then the doc
    python benchmarks/reproduce_analogues.py --only vrsd-tables-wordnet
    python benchmarks/reproduce_analogues.py --doc-only      # the doc from the files as they are
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import time
from pathlib import Path

from divopt_rag.experiments.reproduce import RECIPES, Options, run_recipe
from divopt_rag.experiments.reproduce import docnumbers

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "reproduce"
DOC = ROOT / "docs" / "howto" / "reproduce.md"
#: (recipe, analogue) of every recorded analogue run.
RUNS = (("vrsd-tables", "wordnet"), ("vrsd-tables", "synthetic"), ("dartboard-rgb", "wordnet"),
        ("dartboard-sigma", "wordnet"), ("dfrag-table1", "wordnet"), ("dfrag-table3", "wordnet"),
        ("ccbqp-pareto", "wordnet"), ("ccbqp-pareto", "synthetic"))
COLUMNS = ["run_id", "table", "dataset", "setting", "method", "metric", "value", "chosen"]


def record(recipe: str, analogue: str, scratch: Path) -> dict:
    t0 = time.perf_counter()
    load = os.getloadavg()
    res = run_recipe(RECIPES[recipe], Options(out=scratch / f"{recipe}-{analogue}", analogue=analogue,
                                              retrieval_only=True, progress=False))
    table = res.table[res.table["value"].notna()].assign(run_id=res.run_id)
    table = table.assign(chosen=table["chosen"] if "chosen" in table else "")
    name = f"{recipe}-{analogue}.csv"
    table[COLUMNS].to_csv(RESULTS / name, index=False, float_format="%.6g")
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    return {"file": name, "command": f"divopt-rag reproduce {recipe} --analogue {analogue} --retrieval-only",
            "run_id": res.run_id, "n_runs": res.n_runs, "errors": res.n_errors, "commit": commit.strip(),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average_before": [round(x, 2) for x in load], "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="record these RECIPE-ANALOGUE runs only")
    ap.add_argument("--doc-only", action="store_true", help="write the doc's numbers from the files as they are")
    ap.add_argument("--scratch", type=Path, default=ROOT / "results" / "reproduce-analogues")
    args = ap.parse_args()
    if not args.doc_only:
        log_path = RESULTS / "analogues.json"
        log = json.loads(log_path.read_text()) if log_path.exists() else {}
        for recipe, analogue in RUNS:
            if args.only and f"{recipe}-{analogue}" not in args.only:
                continue
            entry = record(recipe, analogue, args.scratch)
            log[entry["file"]] = entry
            log_path.write_text(json.dumps(dict(sorted(log.items())), indent=2) + "\n")
            print(entry, flush=True)
    raise SystemExit(docnumbers.main([str(DOC), str(RESULTS)]))


if __name__ == "__main__":
    main()
