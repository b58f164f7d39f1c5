"""``divopt bench latency``: wall-clock latency of every selector, read as GEMV-equivalents.

For each (n, d) pool (synthetic narrow cone, ``divopt.data.synthetic``) it times one GEMV E q
(median of repeats) and then every selector for each (k, theta); every time is also reported
divided by the GEMV time, which makes numbers comparable across machines. Peak memory of each
selector is measured exactly on Linux (the RSS high-water mark is reset through
/proc/self/clear_refs before each run) or with torch.cuda.max_memory_allocated on CUDA, and
reported as (|E| + extra peak) / |E|. Optionally times divopt's MMR against LangChain's
``maximal_marginal_relevance`` on the same data. Writes ``latency.csv`` (one tidy row per
(n, d, k, theta, method)), ``latency.json`` (rows, environment, target checks) to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from divopt.experiments import harness

__all__ = ["add_arguments", "main", "run_latency", "check_targets"]

BASE_METHODS = ("topk", "mmr", "gmmr", "dpp", "dartboard", "vrsd", "fw", "fw_ws", "fw_topk")
# benchmark rows that are a registered method with fixed parameters


def _ints(s: str) -> list[int]:
    return [int(float(x)) for x in s.split(",") if x]


def _floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",") if x]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=_ints, default=[100_000], help="pool sizes, comma-separated (default 100000; 1000000 for the paper scale)")
    p.add_argument("--d", type=_ints, default=[384, 1024], help="embedding dimensions (default 384,1024)")
    p.add_argument("--k", type=_ints, default=[25, 50, 100], help="selection sizes (default 25,50,100)")
    p.add_argument("--theta", type=_floats, default=[0.5, 0.7, 0.9], help="trade-offs (default 0.5,0.7,0.9)")
    p.add_argument("--methods", type=lambda s: s.split(","), default=None, help="selectors (default: the seven base methods)")
    p.add_argument("--repeats", type=int, default=2, help="timed repeats per cell; the median is reported (default 2)")
    p.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--langchain", type=_ints, default=[10_000, 50], metavar="N,K", help="compare MMR with LangChain's at n,k (d = first --d); '' to skip")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("results/latency"))


class PeakMemory:
    """Extra peak memory (bytes) of a block, beyond what was resident when it started."""

    def __init__(self, device: torch.device):
        self.device = device
        self.extra = float("nan")

    @staticmethod
    def _status(field: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
        raise KeyError(field)

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset VmHWM to the current RSS
                self.base = self._status("VmRSS:")
            except OSError:
                self.base = None
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.extra = torch.cuda.max_memory_allocated(self.device) - self.base
        elif self.base is not None:
            self.extra = self._status("VmHWM:") - self.base
        return False


def _median_time(fn, repeats: int, device: torch.device) -> float:
    ts = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def run_latency(
    ns, ds, ks, thetas, methods=None, repeats=2, dtype="float32", device="cpu", langchain=(10_000, 50), seed=0
) -> tuple[pd.DataFrame, dict]:
    from divopt.data.synthetic import narrow_cone
    from divopt.models import Instance
    from divopt.models.kernels import matvec
    from divopt.solvers import METHODS, select

    methods = list(methods or BASE_METHODS)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; expected some of {sorted(METHODS)}")
    dev = torch.device(device)
    tdtype = getattr(torch, dtype)
    run_id = harness.run_id(dict(n=ns, d=ds, k=ks, theta=thetas, methods=methods, repeats=repeats, dtype=dtype,
                                 device=device, seed=seed))
    rows, extra = [], {}
    cells = [(n, d) for n in ns for d in ds]
    bar = tqdm(total=len(cells) * len(ks) * len(thetas) * len(methods), desc="latency")
    for n, d in cells:
        bar.set_postfix_str(f"generating n={n} d={d}")
        E_np, q, _ = narrow_cone(n, d, seed=seed)
        E = torch.from_numpy(E_np).to(device=dev, dtype=tdtype)
        del E_np
        e_bytes = E.numel() * E.element_size()
        base = Instance(E, q, k=max(ks), theta=thetas[0])
        qv = base.q
        matvec(E, qv)  # warm-up (first touch of E, BLAS initialization)
        for m in methods:  # one warm-up run per method and pool, outside the timings
            select(base.replace(k=min(ks)), m)
        gemv = _median_time(lambda: matvec(E, qv), max(5, repeats), dev)
        for k in ks:
            for theta in thetas:
                inst = base.replace(k=k, theta=theta)
                for m in methods:
                    bar.set_postfix_str(f"n={n} d={d} k={k} theta={theta} {m}")
                    with PeakMemory(dev) as pm:  # the first timed run also gives the peak memory
                        sel = select(inst, m)
                    ts = [sel.seconds] + [select(inst, m).seconds for _ in range(max(0, repeats - 1))]
                    rows.append(
                        dict(
                            run_id=run_id, device=str(dev), dtype=dtype, n=n, d=d, k=k, theta=theta, method=m,
                            seconds=statistics.median(ts), gemv_seconds=gemv,
                            gemv_equivalents=statistics.median(ts) / gemv, iterations=sel.iterations,
                            objective=sel.objective, peak_extra_bytes=pm.extra, embedding_bytes=e_bytes,
                            peak_mem_ratio=(e_bytes + max(pm.extra, 0)) / e_bytes,
                        )
                    )
                    bar.update()
        del base, E
    bar.close()
    if langchain:
        extra["langchain"] = _langchain_compare(langchain[0], ds[0], langchain[1], seed, repeats)
    return pd.DataFrame(rows), extra


def _langchain_compare(n: int, d: int, k: int, seed: int, repeats: int) -> dict:
    """divopt MMR vs langchain_core's maximal_marginal_relevance on the same float32 data."""
    try:
        from langchain_core.vectorstores.utils import maximal_marginal_relevance
    except ImportError:
        return {"skipped": "langchain-core is not installed"}
    from divopt.data.synthetic import narrow_cone
    from divopt.models import Instance
    from divopt.solvers import select

    E, q, _ = narrow_cone(n, d, seed=seed)
    inst = Instance(E, q, k=k, theta=0.5)
    ours = statistics.median(select(inst, "mmr").seconds for _ in range(max(3, repeats)))
    t0 = time.perf_counter()
    theirs_idx = maximal_marginal_relevance(q, list(E), lambda_mult=0.5, k=k)
    theirs = time.perf_counter() - t0
    same = [int(i) for i in theirs_idx] == select(inst, "mmr").indices.tolist()
    return {"n": n, "d": d, "k": k, "divopt_seconds": ours, "langchain_seconds": theirs,
            "speedup": theirs / ours, "same_selection": same}


def check_targets(df: pd.DataFrame, extra: dict) -> dict:
    """The issue's targets, evaluated on this run's numbers (ratios of medians, same run)."""
    out: dict = {}
    piv = df.pivot_table(index=["n", "d", "k", "theta"], columns="method", values="seconds")
    if {"fw", "mmr"} <= set(piv.columns):
        sub = piv[(piv.index.get_level_values("k") == 100) & (piv.index.get_level_values("theta") >= 0.5)]
        if len(sub):
            r = (sub["mmr"] / sub["fw"])
            out["fw_speedup_over_mmr_k100"] = {"min": float(r.min()), "median": float(r.median()), "target": ">= 10", "met": bool(r.min() >= 10)}
    if "fw" in set(df["method"]):
        g = df[df["method"] == "fw"]["gemv_equivalents"]
        out["fw_gemv_equivalents"] = {"median": float(g.median()), "max": float(g.max()), "target": "median <= 5", "met": bool(g.median() <= 5)}
    if {"dpp", "mmr"} <= set(piv.columns):
        r = piv["dpp"] / piv["mmr"]
        out["dpp_over_mmr"] = {"max": float(r.max()), "median": float(r.median()), "target": "<= 2", "met": bool(r.max() <= 2)}
    m = df["peak_mem_ratio"].dropna()
    if len(m):
        worst = df.loc[df["peak_mem_ratio"].idxmax()]
        out["peak_mem_ratio"] = {"max": float(m.max()), "worst_method": str(worst["method"]), "worst_cell": f"n={worst['n']} d={worst['d']} k={worst['k']}",
                                 "target": "<= 1.3", "met": bool(m.max() <= 1.3)}
    lc = extra.get("langchain", {})
    if "speedup" in lc:
        out["mmr_speedup_over_langchain"] = {"value": lc["speedup"], "target": ">= 100", "met": bool(lc["speedup"] >= 100)}
    return out


def main(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    df, extra = run_latency(args.n, args.d, args.k, args.theta, args.methods, args.repeats, args.dtype, args.device,
                            tuple(args.langchain) if args.langchain else None, args.seed)
    targets = check_targets(df, extra)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "latency.csv", index=False)
    env = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
           "torch_threads": torch.get_num_threads(), "device": args.device,
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    harness.write_text(json.dumps({"env": env, "targets": targets, **extra, "rows": df.to_dict("records")}, indent=1,
                                  default=str), args.out / "latency.json")
    summary = df.groupby(["n", "d", "k", "method"])[["seconds", "gemv_equivalents", "peak_mem_ratio"]].median().unstack("method")
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print((1e3 * summary["seconds"]).round(1).to_string(), "\n(median ms over theta)\n")
        print(summary["gemv_equivalents"].round(1).to_string(), "\n(GEMV-equivalents)\n")
    print(json.dumps({"targets": targets, **extra}, indent=1))
    print(f"wrote {args.out / 'latency.csv'} and {args.out / 'latency.json'}")
    return 0
