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

Under load (issue 39, item 5: the QCR's SDP and build beside CPU burners)::

    python benchmarks/exact_limits.py --solvers scip --formulation qcr_lowrank --n 300 \
        --time-limits 2 3 --burners 2 --repeats 3 --out benchmarks/results/reliability/qcr_limits_load.csv

``--burners N`` starts N busy-looping processes for the length of the benchmark (they die with
it, SIGKILL included) and every row records them and the 1-minute load average when it started.
"""
from __future__ import annotations

import argparse
import itertools
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
COLUMNS = ["solver", "n", "d", "k", "theta", "time_limit", "repeat", "wall_seconds", "ratio", "within_target",
           "status", "objective", "bound", "gap", "solver_ran", "formulation", "build_seconds", "translation_seconds",
           "solver_seconds", "peak_rss_mb", "burners", "load_1min", "message"]
# a CPU burner that dies with the benchmark (prctl PR_SET_PDEATHSIG = 1, SIGKILL = 9, on Linux)
_BURNER = ("import ctypes, os, sys\ntry: ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)\nexcept Exception: pass\n"
           "parent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    for _ in range(10**6): pass\n")


def _child(solver: str, n: int, d: int, k: int, theta: float, limit: float, formulation: str) -> None:
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
        solve_exact(inst.subset(np.arange(20)), solver=solver, time_limit=2, formulation=formulation)
    except Exception:  # noqa: BLE001
        pass
    row = {"solver": solver, "n": n, "d": d, "k": k, "theta": theta, "time_limit": limit}
    t0 = time.perf_counter()
    try:
        r = solve_exact(inst, solver=solver, time_limit=limit, formulation=formulation)
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
            max_memory_gb: float, formulation: str = "auto") -> dict:
    cmd = [sys.executable, __file__, "--child", solver, str(n), str(d), str(k), str(theta), str(limit), formulation]

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
        s, n, d, k, th, lim, form = argv[1:8]
        _child(s, int(n), int(d), int(k), float(th), float(lim), form)
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
    p.add_argument("--formulation", default="auto", help="solve_exact's formulation (e.g. qcr_lowrank)")
    p.add_argument("--burners", type=int, default=0, help="CPU-burning processes beside the runs")
    p.add_argument("--repeats", type=int, default=1, help="runs of each setting")
    p.add_argument("--out", type=Path, required=True, help="CSV file")
    args = p.parse_args(argv)
    burners = [subprocess.Popen([sys.executable, "-c", _BURNER, str(os.getpid())]) for _ in range(args.burners)]
    try:
        return _sweep(args)
    finally:
        for b in burners:
            b.kill()
            b.wait()


def _sweep(args: argparse.Namespace) -> int:
    rows, df = [], pd.DataFrame(columns=COLUMNS)
    for n, limit, repeat, solver in itertools.product(args.n, args.time_limits, range(args.repeats), args.solvers):
        load = os.getloadavg()[0]
        row = run_one(solver, n, limit, d=args.d, k=args.k, theta=args.theta, timeout=args.timeout,
                      max_memory_gb=args.max_memory_gb, formulation=args.formulation)
        row.update(repeat=repeat, burners=args.burners, load_1min=load)
        wall = row.get("wall_seconds", float("nan"))
        row["ratio"] = wall / limit
        row["within_target"] = bool(wall <= 1.5 * limit + 1.0) if row["status"] != "refused" else None
        rows.append(row)
        print(f"{solver:7s} n={n:5d} limit {limit:4g} s: wall {wall:7.2f} s  {row['status']:10s} "
              f"gap {row.get('gap', float('nan')) if row.get('gap') is not None else float('nan'):.3g}  "
              f"load {load:.1f}", flush=True)
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
