"""The GPU check's timings (issue 42): the paper row, the RAG call and the batched default sweep.

Run by ``benchmarks/gpu_check.sh`` (which runs the CUDA tests first); needs only torch, numpy and
pandas (no pyomo, tqdm or ir-measures: the pools are generated here, on the device). Every time is
the median of ``--repeats`` runs after one warm-up, with the device synchronized around each run;
ratios come from the same run.

* ``paper_row.csv``: the CCBQP paper's latency row (its Sec. 4.2: pools of 2*10^6 x 1024, k = 100)
  on a synthetic narrow cone stored in float16, extended to k in {25, 50, 100} x theta in
  {0.3, 0.5, 0.7, 0.9} (issue 42): fw (the paper's Algorithm 1), fw_ws_ms (divopt's default), mmr,
  mmr_lazy and dpp; seconds, iterations, converged, objective, and seconds / one GEMV over the
  pool. ``paper_ratios.csv``: per cell, each method's time over MMR's and over fw's.
* ``rag_call.csv``: the usual RAG call, a top-1000 pool (d = 384, float32) and k = 10 at theta in
  {0.5, 0.7, 0.9}: the default, mmr and fw, median milliseconds over ``--rag-queries`` queries.
* ``batched_sweep.csv``: the default's batched sweep (``ws_multistart_sweep``), 32 queries x 9
  thetas on n = 10^5 (d = 384, float32), k = 10: seconds and milliseconds per instance.
* ``environment.json``: the card, its memory, torch / CUDA versions, the machine load.

The pool is the narrow cone of :func:`divopt_rag.data.synthetic.narrow_cone` (rows
cone * mu0 + spread * u_c + noise * z / sqrt(d), n / 20 clusters, the query towards five of them),
drawn with torch's generator on the device, so 2*10^6 x 1024 takes seconds (the same construction,
not the same numbers as the CPU generator). ``--small`` runs tiny sizes (a CPU dry run).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from divopt_rag.models import Instance
from divopt_rag.solvers import DEFAULT_METHOD, select

PAPER_METHODS = ("fw", DEFAULT_METHOD, "mmr", "mmr_lazy", "dpp")
RAG_METHODS = (DEFAULT_METHOD, "mmr", "fw")


def narrow_cone(n: int, d: int, *, seed: int, device: str, dtype: torch.dtype, chunk: int = 1 << 16):
    """(E, q): the narrow cone (module docstring) on ``device``, rows in ``dtype``, q float32."""
    g = torch.Generator(device=device).manual_seed(seed)
    unit = torch.nn.functional.normalize
    n_clusters = max(2, n // 20)
    mu0 = unit(torch.randn(d, generator=g, device=device), dim=0)
    centers = unit(torch.randn(n_clusters, d, generator=g, device=device), dim=1)
    labels = torch.randint(0, n_clusters, (n,), generator=g, device=device)
    rel = torch.randperm(n_clusters, generator=g, device=device)[:5]
    q = unit(mu0 + 0.9 * unit(centers[rel].sum(0), dim=0) + 0.2 * unit(torch.randn(d, generator=g, device=device), dim=0),
             dim=0)
    E = torch.empty(n, d, dtype=dtype, device=device)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        z = torch.randn(e - s, d, generator=g, device=device)
        E[s:e] = unit(mu0 + centers[labels[s:e]] + (0.35 / d ** 0.5) * z, dim=1).to(dtype)
    return E, q


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, repeats: int, device: torch.device, warm_up: bool = True):
    """(median seconds, last result) of ``repeats`` runs after one warm-up."""
    out = fn() if warm_up else None
    ts = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def environment(device: torch.device) -> dict:
    env = {"python": platform.python_version(), "torch": torch.__version__, "device": str(device),
           "load_avg_1min": os.getloadavg()[0], "cpu_count": os.cpu_count()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2 ** 30, 1), cuda=torch.version.cuda,
                   capability=f"{p.major}.{p.minor}",
                   fp16_reduced_precision_reduction=torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
                   tf32=torch.backends.cuda.matmul.allow_tf32)
    return env


def paper_row(args, device, deadline: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    E, q = narrow_cone(args.n, args.d, seed=0, device=str(device), dtype=torch.float16)
    gemv, _ = timed(lambda: E @ q.half(), 10, device)
    rows = []
    for k in args.k:
        for theta in args.theta:
            inst = Instance(E, q, k=k, theta=theta)
            for method in PAPER_METHODS:
                if time.perf_counter() > deadline:
                    rows.append(dict(k=k, theta=theta, method=method, seconds=np.nan, skipped="time budget"))
                    continue
                secs, sel = timed(lambda inst=inst, method=method: select(inst, method), args.repeats, device,
                                  args.warm_up)
                rows.append(dict(k=k, theta=theta, method=method, seconds=secs, gemvs=secs / gemv,
                                 iterations=sel.iterations, converged=sel.info.get("converged"),
                                 objective=sel.objective, skipped=""))
                print(f"paper row  k={k:3d} theta={theta:.1f} {method:9s} {secs * 1e3:9.2f} ms "
                      f"({secs / gemv:7.1f} GEMVs) it={sel.iterations}", flush=True)
    df = pd.DataFrame(rows).assign(n=args.n, d=args.d, dtype="float16", gemv_seconds=gemv)
    wide = df.pivot_table(index=["k", "theta"], columns="method", values="seconds")
    ratios = pd.DataFrame({f"{m}/mmr": wide[m] / wide["mmr"] for m in wide.columns if m != "mmr"})
    for m in wide.columns:
        if m != "fw":
            ratios[f"{m}/fw"] = wide[m] / wide["fw"]
    E = None  # free the pool before the next stage
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return df, ratios.reset_index()


def rag_call(args, device) -> pd.DataFrame:
    E, q0 = narrow_cone(args.rag_n, 384, seed=1, device=str(device), dtype=torch.float32)
    g = torch.Generator(device=str(device)).manual_seed(2)
    Q = torch.nn.functional.normalize(q0 + 0.3 * torch.randn(args.rag_queries, 384, generator=g, device=device), dim=1)
    rows = []
    for theta in (0.5, 0.7, 0.9):
        for method in RAG_METHODS:
            ts = []
            for i in range(args.rag_queries):
                inst = Instance(E, Q[i], k=10, theta=theta)
                secs, _ = timed(lambda inst=inst, method=method: select(inst, method), 1, device, args.warm_up)
                ts.append(secs)
            rows.append(dict(n=args.rag_n, d=384, k=10, theta=theta, method=method, queries=args.rag_queries,
                             median_ms=1e3 * statistics.median(ts), p90_ms=1e3 * float(np.quantile(ts, 0.9))))
            print(f"RAG call   theta={theta:.1f} {method:9s} {rows[-1]['median_ms']:8.2f} ms median", flush=True)
    df = pd.DataFrame(rows)
    mmr = df[df.method == "mmr"].set_index("theta")["median_ms"]
    df["over_mmr"] = df.median_ms / df.theta.map(mmr)
    return df


def batched_sweep(args, device) -> pd.DataFrame:
    from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

    E, q0 = narrow_cone(args.sweep_n, 384, seed=3, device=str(device), dtype=torch.float32)
    g = torch.Generator(device=str(device)).manual_seed(4)
    Q = torch.nn.functional.normalize(q0 + 0.3 * torch.randn(args.sweep_queries, 384, generator=g, device=device), dim=1)
    thetas = np.linspace(0.1, 0.9, args.sweep_thetas).round(3).tolist()
    base = Instance(E, q0, k=10, theta=0.5)
    if args.warm_up:
        ws_multistart_sweep(base, Q[:2], thetas[:2])
    _sync(device)
    t0 = time.perf_counter()
    res, _ = ws_multistart_sweep(base, Q, thetas)
    _sync(device)
    secs = time.perf_counter() - t0
    B = len(res.thetas)
    print(f"sweep      {args.sweep_queries} queries x {len(thetas)} thetas, n={args.sweep_n}: {secs:.2f} s, "
          f"{1e3 * secs / B:.2f} ms per instance", flush=True)
    return pd.DataFrame([dict(n=args.sweep_n, d=384, k=10, queries=args.sweep_queries, thetas=len(thetas),
                              instances=B, seconds=secs, ms_per_instance=1e3 * secs / B)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="tiny sizes: a dry run of the script (e.g. on the CPU)")
    ap.add_argument("--budget", type=float, default=200.0, help="seconds for the paper row before cells are skipped")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: --device cuda but CUDA is not available (use DEVICE=cpu SMALL=1 for a dry run)", file=sys.stderr)
        return 2
    big = not args.small
    args.n, args.d = (2_000_000, 1024) if big else (600, 16)
    args.k = [25, 50, 100] if big else [5]
    args.theta = [0.3, 0.5, 0.7, 0.9] if big else [0.5, 0.9]
    args.repeats, args.warm_up = (3, True) if big else (1, False)
    args.rag_n, args.rag_queries = (1000, 20) if big else (100, 1)
    args.sweep_n, args.sweep_queries, args.sweep_thetas = (100_000, 32, 9) if big else (300, 2, 2)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    env = environment(device)
    (args.out / "environment.json").write_text(json.dumps(env, indent=1))
    print(json.dumps(env), flush=True)
    row, ratios = paper_row(args, device, start + args.budget)
    row.to_csv(args.out / "paper_row.csv", index=False)
    ratios.to_csv(args.out / "paper_ratios.csv", index=False)
    rag = rag_call(args, device)
    rag.to_csv(args.out / "rag_call.csv", index=False)
    sweep = batched_sweep(args, device)
    sweep.to_csv(args.out / "batched_sweep.csv", index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 3):
        print(f"\n== paper row ({env.get('gpu', device)}; n={args.n}, d={args.d}, float16): seconds ==")
        print(row.pivot_table(index=["k", "theta"], columns="method", values="seconds").to_string())
        print("\n== ratios ==")
        print(ratios.to_string(index=False))
        print("\n== RAG call (ms) ==")
        print(rag.to_string(index=False))
        print("\n== batched sweep ==")
        print(sweep.to_string(index=False))
    print(f"\ngpu_check timings took {time.perf_counter() - start:.0f} s; CSVs in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
