"""Full-scale certificates per theta: the certified fraction of queries on a whole corpus.

``python -m divopt_rag.experiments.bench_fullscale --distractors 0 --queries 20 --theta 0.5 0.6 0.7 0.8 0.9``

For each query of the ``wordnet`` dataset of :func:`divopt_rag.data.load` (the ambiguity benchmark's
passages, 502 of them, plus ``--distractors`` random WordNet noun glosses, seeded) and each theta,
:func:`divopt_rag.solvers.certificates.certify_full_scale` screens the WHOLE corpus, bounds it and
solves the survivors exactly (Gurobi within its licence, else divopt's branch-and-bound) when at
most ``--max-exact`` survive, within ``--time-limit`` seconds. One tidy row per (query, theta):
the certificate (:meth:`~divopt_rag.solvers.certificates.FullScaleCertificate.as_row`), the dataset,
the run id (a hash of the arguments) and the 1-minute load average (the machine is shared).
Written to CSV (and a parquet twin); the summary printed is the certified fraction per theta.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from divopt_rag.data import load as load_dataset
from divopt_rag.experiments import harness
from divopt_rag.solvers.certificates import certify_full_scale

__all__ = ["run", "summarize", "main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m divopt_rag.experiments.bench_fullscale", description=__doc__.split("\n")[0])
    p.add_argument("--distractors", type=int, default=0, help="random WordNet noun glosses added to the 502 passages")
    p.add_argument("--queries", type=int, default=20, help="number of query words")
    p.add_argument("--query-offset", type=int, default=0, help="skip this many query words first")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--theta", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9])
    p.add_argument("--max-exact", type=int, default=1000, help="solve the survivors exactly when <= this many")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds for the exact solve of the survivors")
    p.add_argument("--exact-solver", default="auto", help="'auto' (Gurobi within its licence, else bnb), 'bnb', ...")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "divopt", "embeddings"))
    p.add_argument("--out", default="results/fullscale.csv", help="CSV path (a .parquet twin is written too)")
    return p


def run(args) -> pd.DataFrame:
    if args.queries < 1 or args.query_offset < 0 or args.k < 2 or args.time_limit <= 0:
        raise ValueError(f"need --queries >= 1, --query-offset >= 0, --k >= 2, --time-limit > 0; got "
                         f"{args.queries}, {args.query_offset}, {args.k}, {args.time_limit}")
    data = load_dataset({"name": "wordnet", "distractors": args.distractors, "seed": args.seed,
                         "embed_cache": args.cache_dir})
    stop = args.query_offset + args.queries
    if stop > data.n_queries:
        raise ValueError(f"--queries + --query-offset must be <= {data.n_queries}, got {stop}")
    run_id = harness.run_id(vars(args), exclude=("out", "cache_dir"))
    rows = []
    jobs = [(i, th) for i in range(args.query_offset, stop) for th in args.theta]
    bar = tqdm(jobs, desc="full-scale certificates", unit="query")
    for i, th in bar:
        inst, _ = harness.query_instance(data, i)
        bar.set_postfix_str(f"{data.query_ids[i]} theta={th}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            cert = certify_full_scale(inst.replace(k=args.k, theta=float(th)), max_exact=args.max_exact,
                                      exact_solver=args.exact_solver, time_limit=args.time_limit)
        row = cert.as_row()
        row.pop("incumbent_ids")
        rows.append({"run_id": run_id, "dataset": f"wordnet-{data.E.shape[0]}", "query": data.query_ids[i],
                     **row, "exact_solver": cert.info.get("exact_solver", ""), "time_limit": args.time_limit,
                     "max_exact": args.max_exact, "load_avg_1min": os.getloadavg()[0]})
    return pd.DataFrame(rows)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per theta: certified queries, median survivors of screening, median seconds, mean bound gap of the rest."""
    g = df.groupby("theta")
    return pd.DataFrame({
        "queries": g.size(),
        "certified": g["certified"].sum().astype(int),
        "fraction": g["certified"].mean(),
        "median_survivors": g["n_survivors"].median(),
        "median_seconds": g["seconds"].median(),
        "mean_gap_open": g.apply(lambda x: x.loc[~x["certified"], "bound_gap"].mean() if (~x["certified"]).any()
                                 else np.nan),
    }).reset_index()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        df = run(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    harness.write_parquet(df, out.with_suffix(".parquet"))
    print(summarize(df).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {out} ({len(df)} rows, run {df['run_id'].iloc[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
