"""How well every exact solver path honours ``time_limit`` (issue 33): wall time of the whole
``solve_exact`` call against the limit, with the status, incumbent, bound and gap it returned.

Target: wall <= 1.5 x limit + 1 s for every solver ("gurobi", "scip", "highs", "bnb", "auto") on
pools up to n = 3000. Each run is a fresh subprocess (so one run's memory cannot disturb the
next) with a hard timeout and an address-space cap; the wall time is measured inside it, around
the call only (imports and a warm-up solve on a 20-item pool come first). A request refused up
front (memory estimate, Gurobi's size-limited licence) is a row with status "refused" and its
one-line message.

Instances: n random unit rows in d = 384 (MiniLM's dimension), a random unit query, k = 10,
theta = 0.5, seed 0. Run from a divopt checkout, e.g.::

    python benchmarks/exact_limits.py --out benchmarks/results/reliability/exact_limits.csv
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

SOLVERS = ["gurobi", "scip", "highs", "bnb", "auto"]
SIZES = [150, 300, 1000, 3000]
LIMITS = [1.0, 10.0]
COLUMNS = ["solver", "n", "d", "k", "theta", "time_limit", "wall_seconds", "ratio", "within_target", "status",
           "objective", "bound", "gap", "solver_ran", "formulation", "build_seconds", "translation_seconds",
           "solver_seconds", "peak_rss_mb", "message"]


def _child(solver: str, n: int, d: int, k: int, theta: float, limit: float) -> None:
    import warnings

    import numpy as np

    from divopt_rag.models import Instance
    from divopt_rag.solvers import solve_exact

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    E = rng.standard_normal((n, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.standard_normal(d)
    inst = Instance(E, q / np.linalg.norm(q), k=k, theta=theta)
    try:  # warm-up: imports, solver availability, first calls
        solve_exact(inst.subset(np.arange(20)), solver=solver, time_limit=2)
    except Exception:  # noqa: BLE001
        pass
    row = {"solver": solver, "n": n, "d": d, "k": k, "theta": theta, "time_limit": limit}
    t0 = time.perf_counter()
    try:
        r = solve_exact(inst, solver=solver, time_limit=limit)
    except (ValueError, MemoryError) as exc:  # refused up front: ModelTooLarge, SolverRefused
        row.update(wall_seconds=time.perf_counter() - t0, status="refused", message=str(exc))
    else:
        row.update(wall_seconds=time.perf_counter() - t0, status=r.status, objective=r.objective, bound=r.bound,
                   gap=r.gap, solver_ran=r.info.get("solver_ran"), formulation=r.info.get("formulation"),
                   build_seconds=r.info.get("build_seconds"), translation_seconds=r.info.get("translation_seconds"),
                   solver_seconds=r.info.get("solver_seconds"), message=r.message)
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("ROW " + json.dumps(row), flush=True)


def run_one(solver: str, n: int, limit: float, *, d: int, k: int, theta: float, timeout: float,
            max_memory_gb: float) -> dict:
    cmd = [sys.executable, __file__, "--child", solver, str(n), str(d), str(k), str(theta), str(limit)]

    def cap() -> None:
        lim = int(max_memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    row = {"solver": solver, "n": n, "d": d, "k": k, "theta": theta, "time_limit": limit}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=cap,
                             env=dict(os.environ, PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        row.update(status="killed", wall_seconds=float("nan"), message=f"still running after {timeout:g} s")
        return row
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("ROW ")]
    if not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        row.update(status="crashed", wall_seconds=float("nan"), message=tail[:300])
        return row
    return json.loads(lines[-1][4:])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        s, n, d, k, th, lim = argv[1:7]
        _child(s, int(n), int(d), int(k), float(th), float(lim))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--solvers", nargs="+", default=SOLVERS)
    p.add_argument("--n", nargs="+", type=int, default=SIZES)
    p.add_argument("--time-limits", nargs="+", type=float, default=LIMITS)
    p.add_argument("--d", type=int, default=384)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--theta", type=float, default=0.5)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a run is killed")
    p.add_argument("--max-memory-gb", type=float, default=16.0, help="address-space cap of each run")
    p.add_argument("--out", type=Path, required=True, help="CSV file")
    args = p.parse_args(argv)
    rows = []
    for n in args.n:
        for limit in args.time_limits:
            for solver in args.solvers:
                row = run_one(solver, n, limit, d=args.d, k=args.k, theta=args.theta, timeout=args.timeout,
                              max_memory_gb=args.max_memory_gb)
                wall = row.get("wall_seconds", float("nan"))
                row["ratio"] = wall / limit
                row["within_target"] = bool(wall <= 1.5 * limit + 1.0) if row["status"] != "refused" else None
                rows.append(row)
                print(f"{solver:7s} n={n:5d} limit {limit:4g} s: wall {wall:7.2f} s  {row['status']:10s} "
                      f"gap {row.get('gap', float('nan')) if row.get('gap') is not None else float('nan'):.3g}",
                      flush=True)
                df = pd.DataFrame(rows).reindex(columns=COLUMNS)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                df.to_csv(args.out, index=False)
    ran = df[df.status != "refused"]
    worst = ran.groupby("solver")["ratio"].max()
    print("worst wall/limit per solver:", worst.round(2).to_dict())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
