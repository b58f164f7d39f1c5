"""Time you can plan: the pool size at which each robust model proves optimality within 10 s.

For every robust model of divopt_rag.robust.ROBUST_MODELS, on WordNet MiniLM pools (the top-n
of the 2,602 MiniLM-embedded WordNet passages of ``wordnet:30`` by cosine to the query word),
solve the record with a 10 s limit (solver "auto", model building included, as a sweep runs it)
on a ladder of pool sizes, for a few queries and two uncertainty radii, and stop the ladder of a
model at the first size where some solve is not proven optimal. Writes one row per solve
(status, seconds, |S|, gap, the share of pairs whose robust similarity bound exceeds rho_div,
the machine's 1-minute load) to ``--out`` and prints, per model, the largest size at which every
solve was proven within the limit.

    python benchmarks/robust_pool_time.py --out benchmarks/results/robust/pool_time.csv

Parameters are the MIO report's where it prints them (Tables 4-7: rho_vec in {0.02, 0.05},
rho_div = 0.8, attack budget K = 20), plus rho_div = 0.4, where the robust similarity bounds of
MiniLM's WordNet pools straddle the cap for the l1/l2 balls (at 0.8 no pair of those exceeds it
and every set is feasible: no work for the solver), and a sparsity penalty lambda = 0.2 (the
report's 0.5-0.72 would empty MiniLM's pools, whose cosines to a one-word query are lower than the
report's encoder's). A ladder of sizes stops at its first size with an unproven solve, with one
bisection step between that size and the last one proven.
The machine's load is recorded beside every time: re-run on a quiet machine before quoting.
"""
from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from divopt_rag.data import load
from divopt_rag.experiments.studies import runs
from divopt_rag.robust import ROBUST_MODELS, KSparse, NormBall, similarity_upper_bounds
from divopt_rag.robust.relevance import pool_arrays

SETS = {"nominal_sparsity": lambda rho: NormBall(2, 0.0), "robust_l1": lambda rho: NormBall(1, rho),
        "robust_l2": lambda rho: NormBall(2, rho), "robust_linf": lambda rho: NormBall(math.inf, rho),
        "robust_ksparse": lambda rho: KSparse(rho, 20, 20), "robust_ksparse_lpdual": lambda rho: KSparse(rho, 20, 20),
        "robust_ksparse_cp": lambda rho: KSparse(rho, 20, 20)}


def positive_share(inst, uset, rho_div: float) -> float:
    """Share of pairs with B_ij > rho_div (pairs that push the average over the cap)."""
    E, q, _ = pool_arrays(inst)
    B = similarity_upper_bounds(E, uset, "cosine", q=q, free=uset.free_mask(E, q))
    iu = np.triu_indices(inst.n, 1)
    return float((B[iu] > rho_div).mean()) if iu[0].size else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/robust/pool_time.csv"))
    p.add_argument("--models", nargs="+", default=list(ROBUST_MODELS))
    p.add_argument("--sizes", nargs="+", type=int, default=[10, 20, 40, 80, 160])
    p.add_argument("--queries", type=int, default=2)
    p.add_argument("--rho-vec", nargs="+", type=float, default=[0.02, 0.05])
    p.add_argument("--sparsity-penalty", type=float, default=0.2)
    p.add_argument("--rho-div", nargs="+", type=float, default=[0.8, 0.4])
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--solver", default="auto", help='the records\' solver ("auto": Gurobi where the model fits '
                   'its licence, else SCIP; "scip" for the open-source path alone)')
    p.add_argument("--oracle-gap-tol", type=float, default=1e-4,
                   help="a cutting plane that stops on 'oracle_gap' (cosine: the rest of the gap is the oracle's "
                        "bound-vs-attack bracket) with a relative gap within this counts as solved")
    p.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "divopt-wordnet-cache")
    args = p.parse_args()
    data = load("wordnet:30", cache_dir=args.cache)
    rows = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    def rung(model: str, n: int) -> bool:
        """Every (rho_vec, rho_div, query) solve of ``model`` at pool size n; True if all proven."""
        fn, proven_all = ROBUST_MODELS[model], True
        for rho in (args.rho_vec if model != "nominal_sparsity" else [0.0]):
            for rho_div in args.rho_div:
                for qi in range(args.queries):
                    inst, _ = runs.query_instance(data, qi, n)
                    kw = dict(sparsity_penalty=args.sparsity_penalty, rho_div=rho_div, time_limit=args.time_limit,
                              solver=args.solver)
                    if model != "nominal_sparsity":
                        kw["rho_vec"] = rho
                    if "ksparse" in model:
                        kw["attack_budget"] = 20
                    load1 = os.getloadavg()[0]
                    t0 = time.perf_counter()
                    rec = fn(inst, **kw)
                    wall = time.perf_counter() - t0
                    row = dict(model=model, query=data.query_ids[qi], n=n, rho_vec=rho,
                               sparsity_penalty=args.sparsity_penalty, rho_div=rho_div,
                               time_limit=args.time_limit, status=rec["status"],
                               proven=bool(rec["proven_optimal"]) or (rec["status"] == "oracle_gap"
                                                                      and rec["gap"] <= args.oracle_gap_tol),
                               seconds=wall, set_size=rec["n_selected"], objective=rec["objective"],
                               bound=rec["bound"], gap=rec["gap"], solver=rec["solver"],
                               positive_pairs=positive_share(inst, SETS[model](rho), rho_div), load1=load1)
                    rows.append(row)
                    proven_all &= row["proven"]
                    print(f"{model:22s} n={n:4d} rho={rho:.2f} rho_div={rho_div:.2f} q={row['query']:8s} "
                          f"{rec['status']:12s} {wall:6.1f}s |S|={row['set_size']:3d} gap={row['gap']:.3g} "
                          f"pos={row['positive_pairs']:.2f} load={load1:.1f}", flush=True)
                    pd.DataFrame(rows).to_csv(args.out, index=False)
        return proven_all

    for model in args.models:
        last = 0
        for n in args.sizes:
            if not rung(model, n):
                mid = (last + n) // 2  # one bisection step between the last size proven and this one
                if last and mid not in (last, n):
                    rung(model, mid)
                break
            last = n
    df = pd.DataFrame(rows)
    ok = df.groupby(["model", "n"])["proven"].all().reset_index()
    for model, g in ok.groupby("model", sort=False):
        proven = g.loc[g["proven"], "n"]
        print(f"{model}: every solve proven (or within the oracle's bracket) within {args.time_limit:g} s up to n = "
              f"{int(proven.max()) if len(proven) else 'none of the sizes'}")


if __name__ == "__main__":
    main()
