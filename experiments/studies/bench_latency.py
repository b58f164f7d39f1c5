"""``divopt-rag bench latency``: wall-clock latency of every selector, read as GEMV-equivalents.

A run spec of the one executor (:class:`LatencySpec`; inline and sequential, as every timing
benchmark): one task per (n, d, k, theta, method), in that order. For each (n, d) pool
(synthetic narrow cone, ``divopt_rag.data.synthetic``, generated once per process) it times one
GEMV E q (median of repeats) and warms every method up once, outside the timings; then each
task times its selector at (k, theta) (median of ``--repeats``); every time is also reported
divided by the GEMV time, which makes numbers comparable across machines. Per (n, d, k) it also
times one certificate pass that compares every row (``dense_pass_seconds``); with the default
method's ``compared`` rows this gives, per cell, the least one certificate of its answer costs
as a fraction of MMR (``one_pass/mmr`` in ``latency_ratios.csv``). Peak memory of each
selector is measured exactly on Linux (the RSS high-water mark is reset through
/proc/self/clear_refs before each run) or with torch.cuda.max_memory_allocated on CUDA, and
reported as (|E| + extra peak) / |E|. Optionally times divopt's MMR against LangChain's
``maximal_marginal_relevance`` on the same data. The methods are every selector that runs on
an Instance alone (the registry), or ``--methods``.

Writes to ``--out``: ``results.parquet`` and ``latency.csv`` (one tidy row per (n, d, k, theta,
method), times in seconds), ``latency_ratios.csv`` and ``latency.json`` (environment, target
checks, the LangChain comparison). A killed run resumes at the next cell (its timings then come
from two sessions: use a fresh ``--out`` for numbers you report).
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch

from divopt_rag.data import stable_hash
from divopt_rag.experiments.cli import flag_checks
from divopt_rag.experiments.cli.arguments import run_options
from divopt_rag.experiments.engine import executor, limits, store
from divopt_rag.experiments.engine.backends import worker_threads
from divopt_rag.experiments.engine.plan import Plan, RunSpec, Task, make_task
from divopt_rag.experiments.measures import quality
from divopt_rag.experiments.methods import check_selectors

__all__ = ["main", "LatencySpec", "run_latency", "check_targets", "ratio_table", "environment"]




def resolve_device(text: str, flag: str = "--device") -> str:
    """The torch device a ``--device`` value names ("auto": CUDA when available, else the CPU),
    after checking that torch knows it and that this machine has it; :class:`UsageError`
    naming the flag otherwise."""
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError):
        raise limits.UsageError(flag, "a torch device: auto, cpu, cuda, cuda:N or mps", repr(text)) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "torch was built without CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            raise limits.UsageError(flag, "cpu on this machine (CUDA is not available)", repr(text), why)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise limits.UsageError(flag, f"cuda:0 to cuda:{torch.cuda.device_count() - 1}", repr(text))
    elif dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise limits.UsageError(flag, "cpu on this machine (MPS is not available)", repr(text))
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise limits.UsageError(flag, "cpu, cuda[:N] or mps", repr(text))
    return str(dev)


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


def _dense_pass_time(inst, repeats: int, device: torch.device) -> float:
    """One certificate pass that compares every row (:func:`swap_certificates` with ``dense``: one
    GEMM E E_S^T, u its row sums, every 1-swap gain; ``stop_early`` off, since the top-k set is
    usually improvable), at the top-k set: what certifying a k-set costs when the bound prunes
    nothing (small k, low theta)."""
    from divopt_rag.solvers.local_search import ls_tolerance
    from divopt_rag.solvers.swap_certificate import swap_certificates

    top = torch.topk(inst.relevance, inst.k).indices
    return _median_time(lambda: swap_certificates([inst], [top], ls_tolerance(inst), dense=[True], stop_early=False),
                        repeats, device)


@dataclass
class LatencySpec(RunSpec):
    """The latency grid: one task per (n, d, k, theta, method), run inline in that order (the
    pool of an (n, d) is generated and warmed up once per process)."""

    ns: list[int]
    ds: list[int]
    ks: list[int]
    thetas: list[float]
    methods: list[str]
    repeats: int = 2
    dtype: str = "float32"
    device: str = "cpu"
    seed: int = 0
    command: ClassVar[str] = "bench-latency"

    def row_config(self) -> dict[str, Any]:
        return {"repeats": self.repeats, "dtype": self.dtype, "device": self.device}

    def check(self) -> None:
        check_selectors(self.methods)
        for name in ("ns", "ds", "ks"):
            bad = [v for v in getattr(self, name) if v < 1]
            if bad:
                raise ValueError(f"--{name[:-1]} values must be >= 1, got {bad}")

    @staticmethod
    def pool_key(n: int, d: int, seed: int) -> tuple[str, str]:
        """(label, content key) of the narrow-cone pool: its generator and parameters fix its content."""
        return f"narrow_cone(n={n},d={d},seed={seed})", stable_hash({"narrow_cone": [n, d, seed]}, 16)

    def plan(self, out: Path) -> Plan:
        tasks, keys = [], {}
        for n in self.ns:
            for d in self.ds:
                label, key = self.pool_key(n, d, self.seed)
                keys[label] = key
                for k in self.ks:
                    for theta in self.thetas:
                        for m in self.methods:
                            tasks.append(make_task(len(tasks), config_hash=self.config_hash, data_key=key,
                                                   query_id="q0", method=m, params={"n": n, "d": d, "k": k,
                                                                                    "theta": theta},
                                                   dataset=label))
        return Plan(tasks=tasks, data_keys=keys)

    def open(self, data: Any) -> dict[str, Any]:
        return {}  # the pool of the current (n, d), built by the first task that needs it

    def _pool(self, state: dict[str, Any], n: int, d: int) -> dict[str, Any]:
        from divopt_rag.data.synthetic import narrow_cone
        from divopt_rag.models import Instance
        from divopt_rag.models.kernels import matvec
        from divopt_rag.solvers import select

        if state.get("shape") == (n, d):
            return state
        state.clear()  # one pool in memory at a time
        dev = torch.device(self.device)
        E_np, q, _ = narrow_cone(n, d, seed=self.seed)
        E = torch.from_numpy(E_np).to(device=dev, dtype=getattr(torch, self.dtype))
        del E_np
        base = Instance(E, q, k=max(self.ks), theta=self.thetas[0])
        matvec(E, base.q)  # warm-up (first touch of E, BLAS initialization)
        for m in self.methods:  # one warm-up run per method and pool, outside the timings
            select(base.replace(k=min(self.ks)), m)
        state.update(shape=(n, d), base=base, dense={},
                     gemv=_median_time(lambda: matvec(E, base.q), max(5, self.repeats), dev))
        return state

    def execute(self, state: dict[str, Any], task: Task) -> dict[str, Any]:
        from divopt_rag.solvers import select

        p = task.params
        pool = self._pool(state, int(p["n"]), int(p["d"]))
        dev = torch.device(self.device)
        base, k = pool["base"], int(p["k"])
        if k not in pool["dense"]:
            pool["dense"][k] = _dense_pass_time(base.replace(k=k), max(3, self.repeats), dev)
        inst = base.replace(k=k, theta=float(p["theta"]))
        e_bytes = base.E.numel() * base.E.element_size()
        with PeakMemory(dev) as pm:  # the first timed run also gives the peak memory
            sel = select(inst, task.method)
        ts = [sel.seconds] + [select(inst, task.method).seconds for _ in range(max(0, self.repeats - 1))]
        return dict(device=str(dev), dtype=self.dtype, seconds=statistics.median(ts), gemv_seconds=pool["gemv"],
                    dense_pass_seconds=pool["dense"][k], gemv_equivalents=statistics.median(ts) / pool["gemv"],
                    iterations=sel.iterations, objective=sel.objective, peak_extra_bytes=pm.extra,
                    embedding_bytes=e_bytes, peak_mem_ratio=(e_bytes + max(pm.extra, 0)) / e_bytes,
                    passes=sel.info.get("passes"),  # reads of the pool ("fw_ws_ms")
                    compared=sel.info.get("compared"),  # rows its last certificate compared exactly
                    stage_seconds=json.dumps(sel.info["seconds"]) if "seconds" in sel.info else None)


def run_latency(ns, ds, ks, thetas, methods=None, repeats=2, dtype="float32", device="cpu", langchain=(10_000, 50),
                seed=0, out: str | Path | None = None, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """The latency table of :class:`LatencySpec` (run into ``out``, or a temporary folder) and
    the LangChain comparison (``extra["langchain"]``; None skips it)."""
    from divopt_rag.solvers import instance_methods

    spec = LatencySpec(ns=list(ns), ds=list(ds), ks=list(ks), thetas=list(thetas),
                       methods=list(methods or instance_methods()), repeats=repeats, dtype=dtype, device=device,
                       seed=seed)
    if out is None:
        with tempfile.TemporaryDirectory(prefix="divopt-latency-") as tmp:
            table = executor.run(spec, tmp, progress=progress).table
    else:
        table = executor.run(spec, out, progress=progress).table
    extra = {}
    if langchain:
        extra["langchain"] = _langchain_compare(langchain[0], ds[0], langchain[1], seed, repeats)
    return table, extra


def _langchain_compare(n: int, d: int, k: int, seed: int, repeats: int) -> dict:
    """divopt MMR vs langchain_core's maximal_marginal_relevance on the same float32 data."""
    try:
        from langchain_core.vectorstores.utils import maximal_marginal_relevance
    except ImportError:
        return {"skipped": "langchain-core is not installed"}
    from divopt_rag.data.synthetic import narrow_cone
    from divopt_rag.models import Instance
    from divopt_rag.solvers import select

    E, q, _ = narrow_cone(n, d, seed=seed)
    inst = Instance(E, q, k=k, theta=0.5)
    rows = list(E)
    times = []
    for _ in range(max(3, repeats)):  # the median of as many runs as ours
        t0 = time.perf_counter()
        theirs_idx = [int(i) for i in maximal_marginal_relevance(q, rows, lambda_mult=0.5, k=k)]
        times.append(time.perf_counter() - t0)
    theirs = statistics.median(times)
    out = {"n": n, "d": d, "k": k, "lambda_mult": 0.5, "langchain_seconds": theirs, "langchain_runs": times}
    for m in ("mmr", "mmr_lazy"):
        select(inst, m)  # warm-up
        sels = [select(inst, m) for _ in range(max(3, repeats))]
        ours = statistics.median(s_.seconds for s_ in sels)
        out[m] = {"seconds": ours, "speedup": theirs / ours, "same_selection": sels[0].indices.tolist() == theirs_idx}
    return out


def check_targets(df: pd.DataFrame, extra: dict, default_method: str = "fw_ws_ms") -> dict:
    """The issue's targets, evaluated on this run's numbers (ratios of medians, same run).

    For the default method both readings of "median time <= 3x fw and <= 0.1x MMR at every
    theta": per cell (each (n, d, k, theta), the median over repeats) and per theta (the median
    over the (n, d, k) cells of that theta's times).
    """
    out: dict = {}
    piv = df.pivot_table(index=["n", "d", "k", "theta"], columns="method", values="seconds")
    dm = default_method
    for ref, limit in (("fw", 3.0), ("mmr", 0.1)):
        if {dm, ref} <= set(piv.columns):
            r = piv[dm] / piv[ref]
            by_theta = piv.groupby(level="theta")[[dm, ref]].median()
            rt = by_theta[dm] / by_theta[ref]
            out[f"{dm}/{ref}"] = {
                "target": f"<= {limit:g}",
                "per_cell": {"max": float(r.max()), "median": float(r.median()), "cells_met": int((r <= limit).sum()),
                             "cells": int(r.size), "met": bool((r <= limit).all())},
                "per_theta_median": {f"{t:g}": float(v) for t, v in rt.items()},
                "per_theta_met": bool((rt <= limit).all()),
                "per_k_max": {int(kk): float(v) for kk, v in r.groupby(level="k").max().items()},
            }
    if {"fw", "mmr"} <= set(piv.columns):
        sub = piv[(piv.index.get_level_values("k") == 100) & (piv.index.get_level_values("theta") >= 0.5)]
        if len(sub):
            r = (sub["mmr"] / sub["fw"])
            out["fw_speedup_over_mmr_k100"] = {"min": float(r.min()), "median": float(r.median()), "target": ">= 10", "met": bool(r.min() >= 10)}
    if "fw" in set(df["method"]):
        g = df[df["method"] == "fw"]["gemv_equivalents"]
        out["fw_gemv_equivalents"] = {"median": float(g.median()), "max": float(g.max())}
    if {"dpp", "mmr"} <= set(piv.columns):
        r = piv["dpp"] / piv["mmr"]
        out["dpp_over_mmr"] = {"max": float(r.max()), "median": float(r.median()), "target": "<= 2", "met": bool(r.max() <= 2)}
    m = df["peak_mem_ratio"].dropna()
    if len(m):
        worst = df.loc[df["peak_mem_ratio"].idxmax()]
        out["peak_mem_ratio"] = {"max": float(m.max()), "worst_method": str(worst["method"]), "worst_cell": f"n={worst['n']} d={worst['d']} k={worst['k']}",
                                 "target": "<= 1.3", "met": bool(m.max() <= 1.3)}
    lc = extra.get("langchain", {})
    for m_ in ("mmr", "mmr_lazy"):
        if m_ in lc:
            out[f"{m_}_over_langchain"] = {"speedup": lc[m_]["speedup"], "same_selection": lc[m_]["same_selection"],
                                           "target": ">= 100, same picks",
                                           "met": bool(lc[m_]["speedup"] >= 100 and lc[m_]["same_selection"])}
    return out


def ratio_table(df: pd.DataFrame, default_method: str) -> pd.DataFrame | None:
    """Per (n, d, k, theta): seconds of the paper's fw, the default method and MMR, and the ratios."""
    from divopt_rag.solvers.swap_certificate import DENSE_SHARE

    piv = df.pivot_table(index=["n", "d", "k", "theta"], columns="method", values="seconds")
    if default_method not in piv.columns:
        return None
    out = pd.DataFrame({f"{m}_seconds": piv[m] for m in ("fw", default_method, "mmr", "mmr_lazy") if m in piv.columns})
    for ref in ("fw", "mmr"):
        if ref in piv.columns:
            out[f"{default_method}/{ref}"] = piv[default_method] / piv[ref]
    cells = df[df["method"] == default_method].set_index(["n", "d", "k", "theta"])
    if "dense_pass_seconds" in cells and "mmr" in piv.columns and cells["compared"].notna().all():
        # one certificate pass at the default's answer: a GEMV when its bound pruned (it compared
        # < n/4 rows), else the pass that compares every row: the least that certifying that
        # answer costs with this bound, even when the search itself is free
        dense = cells["compared"] >= DENSE_SHARE * cells.index.get_level_values("n")
        floor = cells["dense_pass_seconds"].where(dense, cells["gemv_seconds"])
        out["compared"] = cells["compared"]
        out["one_pass/mmr"] = floor / piv["mmr"]
    return out


def environment(device: str) -> dict:
    """Where the numbers come from: platform, CPU count and load, torch, and the GPU (name, memory,
    compute capability, CUDA / cuDNN versions) when the device is CUDA."""
    env = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
           "torch_threads": torch.get_num_threads(), "device": device,
           "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None}
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device))
        env.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   compute_capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version())
    return env


def main(args) -> int:
    """Run the command with ``--threads`` intra-op threads (0 or unset: as they are), restored when it
    returns (a call of ``main`` from Python leaves the process's threads as it found them)."""
    with worker_threads(args.threads or None):
        return _main(args)


def _main(args) -> int:
    from divopt_rag.solvers import DEFAULT_METHOD, instance_methods

    device = resolve_device(args.device)  # checked, like every flag, before any work
    dm = args.default_method or DEFAULT_METHOD
    flag_checks.check_methods([dm], "--default-method", selectors=True)
    flag_checks.check_methods(args.methods or [], "--methods", selectors=True)
    spec = LatencySpec(ns=list(args.n), ds=list(args.d), ks=list(args.k), thetas=list(args.theta),
                       methods=list(args.methods or instance_methods()), repeats=args.repeats, dtype=args.dtype,
                       device=device, seed=args.seed)
    spec.check()
    env = environment(device)
    res = executor.run(spec, args.out, run_options(args))
    df = res.table
    extra = {}
    if args.langchain:
        extra["langchain"] = _langchain_compare(args.langchain[0], args.d[0], args.langchain[1], args.seed,
                                                args.repeats)
    env["load_average_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    targets = check_targets(df, extra, dm)
    ratios = ratio_table(df, dm)
    if ratios is not None and "one_pass/mmr" in ratios:
        floor = ratios["one_pass/mmr"]
        targets["one_pass/mmr"] = {"what": "one certificate pass at the default's answer / MMR (a floor)",
                                   "max": float(floor.max()), "cells_over_0.1": int((floor > 0.1).sum()),
                                   "cells": int(floor.size)}
    store.write_csv(df, args.out / "latency.csv")
    store.write_text(json.dumps({"env": env, "run_id": res.run_id, "targets": targets, **extra}, indent=1,
                                default=str), args.out / "latency.json")
    if ratios is not None:
        store.write_csv(ratios, args.out / "latency_ratios.csv", index=True)
    # one column per method, one row per cell: every setting that varies stays a row key
    keys = [c for c in ("n", "d", "k", "theta") if c in df]
    print(quality.format_table(df.pivot_table(index=keys, columns="method", values="seconds"), index=True),
          "\n(median seconds per cell)\n")
    print(quality.format_table(df.pivot_table(index=keys, columns="method", values="gemv_equivalents"), index=True),
          "\n(GEMV-equivalents)\n")
    if ratios is not None:
        print(quality.format_table(ratios, index=True), "\n(per cell: seconds and ratios of the default method, same run)\n")
    print(json.dumps({"targets": targets, **extra}, indent=1))
    print(f"wrote {args.out / 'latency.csv'} and {args.out / 'latency.json'} (run {res.run_id})")
    return 0


if __name__ == "__main__":  # python -m divopt_rag.experiments.studies.bench_latency ... (what ``divopt-rag bench latency`` runs)
    import sys

    from divopt_rag.experiments.cli import main as cli

    sys.exit(cli.main(["bench", "latency", *sys.argv[1:]]))
