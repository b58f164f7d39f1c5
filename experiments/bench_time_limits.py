"""How well each exact solver path honours ``time_limit`` (wall clock, model building and
translation included): one row per (solver, n) with the limit, the wall time of the whole
``solve_exact`` call, the runner's own seconds and its split (build, translation, solver).

Instances: n unit rows in d = 32 (seed 0), k = 10, theta = 0.5, large enough that no solver
proves optimality within the limit. Run from any divopt checkout (public API only), e.g.::

    python experiments/bench_time_limits.py --solvers highs gurobi scip --n 100 200 300 \\
        --time-limit 2 --out benchmarks/results/reliability/time_limits_after.csv
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from divopt_rag.models import Instance
from divopt_rag.solvers import solve_exact

__all__ = ["measure", "main"]


def measure(solvers: list[str], sizes: list[int], time_limit: float, d: int = 32, k: int = 10,
            theta: float = 0.5, seed: int = 0) -> pd.DataFrame:
    rows = []
    for n in sizes:
        rng = np.random.default_rng(seed)
        E = rng.standard_normal((n, d))
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        q = rng.standard_normal(d)
        q /= np.linalg.norm(q)
        inst = Instance(E, q, k=k, theta=theta)
        for solver in solvers:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                t0 = time.perf_counter()
                try:
                    r = solve_exact(inst, solver=solver, time_limit=time_limit, threads=1)
                except ValueError as exc:  # e.g. the size-limited Gurobi licence
                    print(f"{solver:7s} n={n:4d}: refused ({exc})", flush=True)
                    continue
                wall = time.perf_counter() - t0
            rows.append({
                "solver": solver, "formulation": r.info.get("formulation"), "n": n, "k": k, "theta": theta,
                "time_limit": time_limit, "wall_seconds": wall, "overshoot": wall / time_limit,
                "runner_seconds": r.seconds, "build_seconds": r.info.get("build_seconds"),
                "translation_seconds": r.info.get("translation_seconds"), "solver_seconds": r.info.get("solver_seconds"),
                "status": r.status, "message": r.message,
            })
            print(f"{solver:7s} n={n:4d} limit {time_limit:g} s: wall {wall:.2f} s ({wall / time_limit:.1f}x) "
                  f"{r.status}", flush=True)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--solvers", nargs="+", default=["highs", "gurobi", "scip"])
    p.add_argument("--n", nargs="+", type=int, default=[100, 200, 300])
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--out", type=Path, required=True, help="CSV file")
    args = p.parse_args(argv)
    df = measure(args.solvers, args.n, args.time_limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
