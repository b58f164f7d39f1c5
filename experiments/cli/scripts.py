"""The flags of divopt's ``python -m`` scripts (they are not ``divopt-rag`` commands): the
full-scale certificate benchmark, the time-limit benchmark and the doc-number writer. Each
script's module builds its parser here, so argparse stays in the command line's package."""
from __future__ import annotations

import argparse
from pathlib import Path

from divopt_rag.experiments.cli.arguments import add_run_arguments

__all__ = ["bench_fullscale_parser", "bench_time_limits_parser", "docnumbers_parser"]


def bench_fullscale_parser(description: str) -> argparse.ArgumentParser:
    """``python -m divopt_rag.experiments.studies.bench_fullscale``."""
    p = argparse.ArgumentParser(prog="python -m divopt_rag.experiments.studies.bench_fullscale", description=description)
    p.add_argument("--distractors", type=int, default=0, help="random WordNet noun glosses added to the 502 passages")
    p.add_argument("--queries", type=int, default=20, help="number of query words")
    p.add_argument("--query-offset", type=int, default=0, help="skip this many query words first")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--theta", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9])
    p.add_argument("--max-exact", type=int, default=1000, help="solve the survivors exactly when <= this many")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds for the exact solve of the survivors")
    p.add_argument("--exact-solver", default="auto", help="'auto' (Gurobi within its licence, else bnb), 'bnb', ...")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=None, help="embedding cache (default: the command's own, under --out)")
    p.add_argument("--out", type=Path, default=Path("results/fullscale"), help="output folder")
    add_run_arguments(p)
    return p


def bench_time_limits_parser(description: str) -> argparse.ArgumentParser:
    """``python -m divopt_rag.experiments.studies.bench_time_limits``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--solvers", nargs="+", default=["highs", "gurobi", "scip"])
    p.add_argument("--n", nargs="+", type=int, default=[100, 200, 300])
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--out", type=Path, required=True, help="output folder")
    add_run_arguments(p)
    return p


def docnumbers_parser() -> argparse.ArgumentParser:
    """``python -m divopt_rag.experiments.reproduce.docnumbers``."""
    ap = argparse.ArgumentParser(prog="python -m divopt_rag.experiments.reproduce.docnumbers",
                                 description="write a doc's measured numbers from the recorded runs")
    ap.add_argument("doc", type=Path)
    ap.add_argument("results", type=Path, help="the folder of the recorded runs (benchmarks/results/reproduce)")
    ap.add_argument("--check", action="store_true", help="list the numbers that differ from their runs; change nothing")
    return ap
