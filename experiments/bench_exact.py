"""``divopt-rag bench exact``: time to prove CCBQP optimality per solver on real-embedding pools.

Corpus: WordNet noun glosses (Debian wordnet-base), the ``wordnet`` dataset of
:func:`divopt_rag.data.load`: the passages of the WordNet ambiguity benchmark (glosses and
examples of every sense of ambiguous nouns such as "bank", "bass", "crane" and of their
hyponyms) plus ``--extra-glosses`` randomly drawn noun glosses (seeded) as distractors,
embedded with the offline all-MiniLM-L6-v2 (cached on disk under ``--cache-dir``). Queries are the ambiguous
words. For each (query, n, k, theta) the pool is the top-n of the query's relevance c = E q
and every solver proves (or fails to prove within ``--time-limit``) the CCBQP optimum with
its default formulation (``divopt_rag.solvers.exact.DEFAULT_FORMULATION``).

One tidy row per (dataset, query, solver, formulation, n, k, theta) with a run id (a hash of
the arguments), written to CSV and parquet. The default grid finishes in a few minutes on 2 cores; the issue's full
grid is ``--n 50 100 200 --k 5 10 20 --theta 0.3 0.5 0.7 0.9`` (or ``--full``).
"""
from __future__ import annotations

import argparse
import os
import platform
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from divopt_rag.data import load as load_dataset
from divopt_rag.experiments import harness
from divopt_rag.models import Instance, objective_scale
from divopt_rag.solvers import available_solvers, select, solve_exact
from divopt_rag.solvers.exact import DEFAULT_FORMULATION, SolverRefused

FULL_GRID = {"n": [50, 100, 200], "k": [5, 10, 20], "theta": [0.3, 0.5, 0.7, 0.9]}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, nargs="+", default=[50, 100], help="pool sizes (top-n of relevance)")
    p.add_argument("--k", type=int, nargs="+", default=[10], help="selection sizes")
    p.add_argument("--theta", type=float, nargs="+", default=[0.5, 0.9], help="relevance-diversity trade-offs")
    p.add_argument("--full", action="store_true", help="the full grid n={50,100,200}, k={5,10,20}, theta={.3,.5,.7,.9}")
    p.add_argument("--queries", type=int, default=2, help="number of query words (from the ambiguity benchmark)")
    p.add_argument("--query-offset", type=int, default=0,
                   help="skip this many query words first (held-out words for reported runs)")
    p.add_argument("--solvers", nargs="+", default=None,
                   help="solvers to time, optionally as solver/formulation (e.g. gurobi/qcr); default: every "
                        "installed one and divopt's bnb")
    p.add_argument("--formulation", default="auto", help="CCBQP formulation for every solver (default: each solver's own)")
    p.add_argument("--time-limit", type=float, default=30.0, help="seconds per solve")
    p.add_argument("--threads", type=int, default=None, help="solver threads (default: solver's own)")
    p.add_argument("--warm-start", choices=["none", "fw"], default="none", help="warm start every solver from FW")
    p.add_argument("--extra-glosses", type=int, default=1500, help="random WordNet noun glosses added as distractors")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "divopt", "embeddings"))
    p.add_argument("--out", default="results/bench_exact.csv", help="CSV path (a .parquet twin is written too)")
    p.add_argument("--log-dir", default=None, help="directory for solver logs (default: none)")


def load_corpus(n_queries: int, extra: int, seed: int, cache_dir: str | None):
    """(passage embeddings P, query embeddings Q, query words, number of passages)."""
    data = load_dataset({"name": "wordnet", "distractors": extra, "seed": seed, "embed_cache": cache_dir})
    if n_queries > data.n_queries:
        raise ValueError(f"--queries (+ --query-offset) must be <= {data.n_queries} (the ambiguity benchmark's "
                         f"words), got {n_queries}")
    words = data.query_texts[:n_queries]
    return (np.asarray(data.E, dtype=np.float64), np.asarray(data.Q[:n_queries], dtype=np.float64), words,
            data.E.shape[0])


def run(args) -> pd.DataFrame:
    grid = FULL_GRID if args.full else {"n": args.n, "k": args.k, "theta": args.theta}
    engines = available_solvers() + ["bnb"]  # divopt's own branch-and-bound needs no licence
    specs = [tuple(x.split("/", 1)) if "/" in x else (x, args.formulation) for x in (args.solvers or engines)]
    unknown = sorted({s for s, _ in specs} - set(engines))
    if unknown:
        raise ValueError(f"--solvers {unknown} not installed; available: {engines}")
    if args.time_limit <= 0:
        raise ValueError(f"--time-limit must be > 0, got {args.time_limit}")
    offset = getattr(args, "query_offset", 0)
    if offset < 0:
        raise ValueError(f"--query-offset must be >= 0, got {offset}")
    P, Q, words, n_pass = load_corpus(offset + args.queries, args.extra_glosses, args.seed, args.cache_dir)
    Q, words = Q[offset:], words[offset:]
    run_id = harness.run_id(vars(args), exclude=("out", "log_dir", "cache_dir"))
    machine = f"{platform.processor() or platform.machine()} x{os.cpu_count()} cores"
    jobs = [(qi, n, k, th, s) for qi in range(len(words)) for n in grid["n"] for k in grid["k"]
            for th in grid["theta"] for s in specs if k < n]
    rows = []
    bar = tqdm(jobs, desc="bench exact", unit="solve")
    for qi, n, k, th, (s, form) in bar:
        full = Instance(P, Q[qi], k=k, theta=th, normalize=True)
        inst, orig = full.top_n(min(n, full.n))
        form = DEFAULT_FORMULATION[s] if form == "auto" else form
        row = dict(run_id=run_id, dataset=f"wordnet-glosses-{n_pass}", query=words[qi], method=f"{s}/{form}",
                   solver=s, formulation=form, n=n, k=k, theta=th, time_limit=args.time_limit,
                   threads=args.threads, warm_start=args.warm_start, machine=machine,
                   load_avg_1min=os.getloadavg()[0])
        bar.set_postfix_str(f"{words[qi]} n={n} k={k} theta={th} {s}")
        warm = select(inst, "fw") if args.warm_start == "fw" else None
        log = None if args.log_dir is None else str(Path(args.log_dir) / f"{run_id}_{qi}_{n}_{k}_{th}_{s}_{form}.log")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r = solve_exact(inst, s, time_limit=args.time_limit, formulation=form, warm_start=warm,
                                threads=args.threads, log_path=log)
        except SolverRefused as exc:  # measured on the built model (license size, MIQP for HiGHS)
            rows.append({**row, "status": "skipped", "message": exc.reason})
            continue
        rows.append({
            **row, "status": r.status, "proven_optimal": r.proven_optimal, "objective": r.objective,
            "bound": r.bound, "gap": r.gap,
            "normalized_gap": (r.bound - r.objective) / objective_scale(k)
            if r.bound is not None and r.objective is not None else np.nan,
            "seconds": r.seconds, "wall_seconds": r.info.get("wall_seconds", r.seconds),
            "build_seconds": r.info.get("build_seconds"),
            "nodes": r.info.get("nodes"), "n_vars": r.info.get("n_vars"),
            "n_constraints": r.info.get("n_constraints"), "solver_version": r.info.get("solver_version"),
            "selected": " ".join(str(int(orig[i])) for i in r.indices), "message": r.message,
        })
    df = pd.DataFrame(rows)
    # cross-check: every proven optimum of an instance must agree with the best incumbent
    key = ["query", "n", "k", "theta"]
    if "objective" in df:
        best = df.groupby(key)["objective"].transform("max")
        df["best_objective"] = best
        df["agrees"] = np.where(df["proven_optimal"] == True, np.isclose(df["objective"], best, rtol=1e-6, atol=1e-6), np.nan)  # noqa: E712
    return df


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Median wall seconds to proof (the whole call, model building and the QCR SDP included;
    censored at the time limit) and proof rate per (solver, n, k)."""
    d = df[df["status"] != "skipped"].copy()
    wall = d["wall_seconds"] if "wall_seconds" in d else d["seconds"]
    d["seconds_censored"] = np.where(d["proven_optimal"] == True, wall, np.inf)  # noqa: E712
    g = d.groupby(["method", "n", "k"])
    return pd.DataFrame({
        "instances": g.size(),
        "proven": g["proven_optimal"].sum().astype(int),
        "median_s": g["seconds_censored"].median(),
        "max_proven_s": g.apply(lambda x: x.loc[x["proven_optimal"] == True, "seconds_censored"].max()),  # noqa: E712
        "median_gap_open": g.apply(lambda x: x.loc[x["proven_optimal"] != True, "gap"].median()),  # noqa: E712
    }).reset_index()


def main(args) -> int:
    df = run(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    harness.write_parquet(df, out.with_suffix(".parquet"))
    summ = summarize(df)
    print(summ.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if "agrees" in df and (df["agrees"] == False).any():  # noqa: E712
        print("WARNING: proven optima disagree between solvers; see the 'agrees' column")
        return 1
    print(f"wrote {out} and {out.with_suffix('.parquet')} ({len(df)} rows, run {df['run_id'].iloc[0]})")
    return 0
