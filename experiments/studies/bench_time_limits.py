"""How well each exact solver path honours ``time_limit`` (wall clock, model building and
translation included): one row per (solver, n) with the limit, the wall time of the whole
``solve_exact`` call, the runner's own seconds and its split (build, translation, solver).

A run spec of the one executor (:class:`TimeLimitSpec`, inline and sequential). Instances: n
unit rows in d = 32 (seed 0), k = 10, theta = 0.5, large enough that no solver proves optimality
within the limit. Run from any divopt checkout (public API only), e.g.::

    python experiments/bench_time_limits.py --solvers highs gurobi scip --n 100 200 300 \\
        --time-limit 2 --out benchmarks/results/reliability/time_limits_after

which writes ``results.parquet`` and ``results.csv`` into the ``--out`` folder.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from divopt_rag.data import stable_hash
from divopt_rag.experiments.cli.arguments import run_options
from divopt_rag.experiments.cli.scripts import bench_time_limits_parser
from divopt_rag.experiments.engine import executor, store
from divopt_rag.experiments.engine.options import RunOptions
from divopt_rag.experiments.engine.plan import Plan, RunSpec, Task, make_task
from divopt_rag.models import Instance
from divopt_rag.solvers import solve_exact

__all__ = ["TimeLimitSpec", "measure", "main"]


def _instance(n: int, d: int, k: int, theta: float, seed: int) -> Instance:
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.standard_normal(d)
    q /= np.linalg.norm(q)
    return Instance(E, q, k=k, theta=theta)


@dataclass
class TimeLimitSpec(RunSpec):
    """One task per (n, solver): the wall time of a time-limited ``solve_exact`` call."""

    solvers: list[str]
    sizes: list[int]
    time_limit: float
    d: int = 32
    k: int = 10
    theta: float = 0.5
    seed: int = 0
    command: ClassVar[str] = "bench-time-limits"

    def row_config(self) -> dict[str, Any]:
        return {"time_limit": self.time_limit}

    def plan(self, out: Path) -> Plan:
        tasks, keys = [], {}
        for n in self.sizes:
            label = f"gaussian(n={n},d={self.d},seed={self.seed})"
            keys[label] = stable_hash({"gaussian": [n, self.d, self.seed]}, 16)
            for solver in self.solvers:
                tasks.append(make_task(len(tasks), config_hash=self.config_hash, data_key=keys[label], query_id="q0",
                                       method="exact", params={"n": n, "k": self.k, "theta": self.theta,
                                                               "solver": solver}, dataset=label))
        return Plan(tasks=tasks, data_keys=keys)

    def execute(self, state: Any, task: Task) -> dict[str, Any]:
        n, solver = int(task.params["n"]), str(task.params["solver"])
        inst = _instance(n, self.d, self.k, self.theta, self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            t0 = time.perf_counter()
            try:
                r = solve_exact(inst, solver=solver, time_limit=self.time_limit, threads=1)
            except ValueError as exc:  # e.g. the size-limited Gurobi licence
                return {"exact_status": "refused", "message": str(exc), "time_limit": self.time_limit}
            wall = time.perf_counter() - t0
        print(f"{solver:7s} n={n:4d} limit {self.time_limit:g} s: wall {wall:.2f} s ({wall / self.time_limit:.1f}x) "
              f"{r.status}", flush=True)
        return {"formulation": r.info.get("formulation"), "time_limit": self.time_limit, "wall_seconds": wall,
                "overshoot": wall / self.time_limit, "runner_seconds": r.seconds,
                "build_seconds": r.info.get("build_seconds"), "translation_seconds": r.info.get("translation_seconds"),
                "solver_seconds": r.info.get("solver_seconds"), "exact_status": r.status, "message": r.message}


def measure(solvers: list[str], sizes: list[int], time_limit: float, out: str | Path, options: RunOptions | None = None,
            **fields: Any) -> pd.DataFrame:
    """The table of :class:`TimeLimitSpec` run into the folder ``out`` (``options``, ``fields``: as
    :func:`~divopt_rag.experiments.engine.executor.run` takes them)."""
    return executor.run(TimeLimitSpec(list(solvers), list(sizes), time_limit), out, options, **fields).table


def main(argv: list[str] | None = None) -> int:
    args = bench_time_limits_parser(__doc__.splitlines()[0]).parse_args(argv)
    df = measure(args.solvers, args.n, args.time_limit, args.out, run_options(args))
    store.write_csv(df, args.out / "results.csv")
    print(f"wrote {args.out / 'results.parquet'} and {args.out / 'results.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
