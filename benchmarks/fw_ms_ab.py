"""fw_ms's sub-pool search on the host kernels ("new") against the lockstep tensor search ("old"), in one process (issue 46).

Not part of the package. Both paths are in the package: fw_ms picks one by
``divopt_rag.solvers.ws_multistart.use_kernels``; here ``multistart.use_kernels`` is set to each
answer in turn, so old and new run the same code around the search, on the same instance,
alternately (new, old, new, old, ...: load drifts hit both), one thread (torch, BLAS and numba
pinned to 1), after a warm-up call of each (numba compilation and first-use costs out of the
timing). Cells: benchmarks/large_k.py's instance (n = 2000 unit rows of dimension 64 on a cone
around a unit query, theta = 0.5, seed 0) at k = 10, 100, 1000, and a RAG-sized pool (1000 rows of
dimension 384, the same construction) at k = 10 and theta 0.3 / 0.5 / 0.7. Each cell records the
median wall and process-CPU seconds of ``--repeats`` calls per path, f of each path's set and the
old/new ratio. The old path is not run where ``--old-max-k`` is exceeded: at k = 1000 its 2-swap
over every member forms an (48, 48, k, k) float32 tensor (9 GB), which this shared machine cannot
hold; benchmarks/results/speed/large_k.md recorded it past 60 s before that stage.

    python benchmarks/fw_ms_ab.py --out benchmarks/results/speed --repeats 3
    python benchmarks/fw_ms_ab.py --out benchmarks/results/speed --tally 160   # f new vs old only

``--tally N``: instead of the timing cells, N seeded small instances (n in 30..400 rows of
dimension 4..16 around a query at three spreads, k in 2..39, theta in 0.1..0.9, float32 and
float64 rows; instance s seeds fw_ms with s), the first 60 % searched whole (the default
``pool_size``), the rest on a 50-row sub-pool; counts new > old, equal within the search's
tolerance, new < old (``large_k_fwms_tally.{csv,md}``).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

CELLS = [(2000, 64, 10, 0.5), (2000, 64, 100, 0.5), (2000, 64, 1000, 0.5),
         (1000, 384, 10, 0.3), (1000, 384, 10, 0.5), (1000, 384, 10, 0.7)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/speed"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--old-max-k", type=int, default=100, help="largest k at which the old path runs")
    ap.add_argument("--name", default="large_k_fwms_ab")
    ap.add_argument("--tally", type=int, default=0, help="N seeded small instances: f new vs old, no timing")
    args = ap.parse_args(argv)
    if args.tally:
        return _tally(args)
    import numpy as np
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from large_k import _instance

    from divopt_rag.solvers import multistart, select

    def run(inst, new: bool):
        multistart.use_kernels = (lambda i, b: True) if new else (lambda i, b: False)
        t0, c0 = time.perf_counter(), time.process_time()
        sel = select(inst, "fw_ms")
        return time.perf_counter() - t0, time.process_time() - c0, sel.objective

    warm = _instance(200, 64, 20, 0.5, 1)
    run(warm, True), run(warm, False)
    rows, loads = [], []
    for n, d, k, th in CELLS:
        inst = _instance(n, d, k, th, 0)
        paths = (True, False) if k <= args.old_max_k else (True,)
        res: dict[bool, list] = {p: [] for p in paths}
        for _ in range(args.repeats):
            for p in paths:
                loads.append(os.getloadavg()[0])
                res[p].append(run(inst, p))
        row = {"n": n, "d": d, "k": k, "theta": th}
        for p in paths:
            w, c, f = (np.median([r[i] for r in res[p]]) for i in range(3))
            tag = "new" if p else "old"
            row.update({f"{tag}_wall_s": w, f"{tag}_cpu_s": c, f"{tag}_f": f})
        if False in res:
            row["old/new wall"] = row["old_wall_s"] / row["new_wall_s"]
            row["old/new cpu"] = row["old_cpu_s"] / row["new_cpu_s"]
        rows.append(row)
        print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    import csv

    keys = ["n", "d", "k", "theta", "new_wall_s", "new_cpu_s", "new_f", "old_wall_s", "old_cpu_s", "old_f",
            "old/new wall", "old/new cpu"]
    with open(args.out / f"{args.name}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)

    def fmt(x, spec=".3f"):
        return "" if x is None else format(x, spec)

    lines = ["# fw_ms: host kernels (new) vs lockstep tensor search (old), one process (issue 46)", "",
             f"One thread, {args.repeats} alternating calls per path and cell, medians. Machine: {platform.machine()}, "
             f"{os.cpu_count()} cores, shared; 1-minute load {min(loads):.1f} to {max(loads):.1f} during the run. "
             f"Command: `python {' '.join(sys.argv)}`", "",
             "Target (issue 46 item 4): fw_ms <= 2 s at n = 2000, k = 1000, d = 64. '-': the old path not run "
             f"(k > {args.old_max_k}: its all-member 2-swap tensor is 9 GB at k = 1000).", "",
             "| n | d | k | theta | new wall s | new CPU s | old wall s | old CPU s | old/new wall | old/new CPU | "
             "f new - f old |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        old = "old_f" in r
        lines.append(f"| {r['n']} | {r['d']} | {r['k']} | {r['theta']} | {fmt(r['new_wall_s'])} | {fmt(r['new_cpu_s'])} | "
                     f"{fmt(r.get('old_wall_s')) or '-'} | {fmt(r.get('old_cpu_s')) or '-'} | "
                     f"{fmt(r.get('old/new wall'), '.1f') or '-'} | {fmt(r.get('old/new cpu'), '.1f') or '-'} | "
                     f"{fmt(r['new_f'] - r['old_f'], '.2e') if old else '-'} |")
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    return 0


def _small(seed: int):
    import numpy as np

    from divopt_rag.models import Instance

    r = np.random.default_rng(1000 + seed)
    n = int(r.choice([30, 60, 120, 250, 400]))
    d = int(r.choice([4, 8, 16]))
    k = int(r.integers(2, min(40, n // 2)))
    th = float(r.choice([0.1, 0.3, 0.5, 0.7, 0.9]))
    q = r.standard_normal(d)
    q /= np.linalg.norm(q)
    E = r.standard_normal((n, d)) * float(r.choice([0.3, 1.0, 3.0])) + q
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    dt = np.float32 if seed % 2 else np.float64
    return Instance(E.astype(dt), q.astype(dt), k=k, theta=th)


def _tally(args) -> int:
    import csv

    import torch

    torch.set_num_threads(1)
    from divopt_rag.solvers import multistart, select
    from divopt_rag.solvers.local_search import ls_tolerance

    rows, whole = [], int(0.6 * args.tally)
    for s in range(args.tally):
        inst = _small(s)
        kw = {} if s < whole else {"pool_size": 50}
        out = {}
        for tag, new in (("new", True), ("old", False)):
            multistart.use_kernels = (lambda i, b, new=new: new)
            t0 = time.perf_counter()
            sel = select(inst, "fw_ms", seed=s, **kw)
            out[tag] = (sel.objective, time.perf_counter() - t0, sel.info["pool"])
        tol = ls_tolerance(inst)
        diff = out["new"][0] - out["old"][0]
        rows.append({"seed": s, "n": inst.n, "k": inst.k, "theta": inst.theta, "dtype": str(inst.E.dtype),
                     "pool": out["new"][2], "f_new": out["new"][0], "f_old": out["old"][0],
                     "verdict": "higher" if diff > tol else "lower" if diff < -tol else "equal",
                     "new_s": out["new"][1], "old_s": out["old"][1]})
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "large_k_fwms_tally.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    count = {v: sum(r["verdict"] == v for r in rows) for v in ("higher", "equal", "lower")}
    lines = ["# fw_ms: f of the host-kernel search (new) vs the lockstep search (old) on seeded small instances", "",
             f"Command: `python {' '.join(sys.argv)}`; instances: the docstring of benchmarks/fw_ms_ab.py "
             f"({whole} searched whole, {args.tally - whole} on a 50-row sub-pool).", "",
             f"new > old: {count['higher']}; equal within the search tolerance (1e-6 k(k-1) float32, 1e-9 k(k-1) "
             f"float64): {count['equal']}; new < old: {count['lower']} (of {args.tally}). Total time new "
             f"{sum(r['new_s'] for r in rows):.1f} s, old {sum(r['old_s'] for r in rows):.1f} s (one thread, load "
             f"{os.getloadavg()[0]:.1f} at the end).", ""]
    lines += [f"- seed {r['seed']}: n {r['n']} k {r['k']} theta {r['theta']} {r['dtype']}: new - old "
              f"{r['f_new'] - r['f_old']:.3g}" for r in rows if r["verdict"] != "equal"]
    (args.out / "large_k_fwms_tally.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
