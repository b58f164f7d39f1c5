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
    args = ap.parse_args(argv)
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


if __name__ == "__main__":
    raise SystemExit(main())
