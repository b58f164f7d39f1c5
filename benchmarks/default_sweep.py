"""The default's batched sweep: time per instance, and its kernel launches and host syncs, of one code.

Not part of the package. ``ws_multistart_sweep`` on Q queries x T thetas of one synthetic pool
(``bench quality``'s development pool of ``--seed``: n = 1e5, d = 384, queries near the pool's
query), k = 10 (issue 42: 32 x 9 on a GPU, <= 5 ms per instance). ``time``: wall and process-CPU
seconds of ``--repeats`` sweeps (after one warm-up sweep), per instance. ``count``: one sweep
of ``--count-queries`` x ``--count-thetas`` (issue 42 counted 12,903 kernel launches and 1,562
stream syncs for 8 x 3 on a GPU) under ``torch.profiler``: the aten ops that run a kernel (on
a GPU each is a launch; on the CPU the count is the proxy, with the problems of a pool size
searched in one chunk, as on a GPU), and the host syncs of ``tests/helpers/sync_count.py``. Writes ``default_sweep.json`` (and the per-repeat CSV) in ``--out``.

    python benchmarks/default_sweep.py --out benchmarks/results/default_sweep/run1
    PYTHONPATH=<shim of another checkout> python benchmarks/default_sweep.py --out ...   # before/after
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

#: aten ops that only reshape or view (no kernel of their own): left out of the launch count.
_VIEWS = {"aten::view", "aten::reshape", "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::as_strided",
          "aten::select", "aten::slice", "aten::transpose", "aten::t", "aten::permute", "aten::alias",
          "aten::detach", "aten::lift_fresh", "aten::empty", "aten::empty_strided", "aten::empty_like",
          "aten::resolve_conj", "aten::resolve_neg", "aten::_unsafe_view", "aten::unbind", "aten::split",
          "aten::chunk", "aten::narrow", "aten::contiguous", "aten::_reshape_alias", "aten::result_type",
          "aten::is_nonzero", "aten::item", "aten::numpy_T", "aten::to", "aten::_to_copy", "aten::view_as",
          "aten::expand_as", "aten::squeeze_", "aten::unsqueeze_", "aten::as_strided_", "aten::diagonal",
          "aten::flatten", "aten::unflatten", "aten::movedim", "aten::lift", "aten::set_"}


def _pool(seed: int, n: int, d: int, queries: int):
    sys.path.insert(0, os.path.dirname(__file__))
    from divopt_rag.experiments.studies.bench_quality import _pool as make_pool, _queries_near

    E, q = make_pool(n, d, seed)
    return E, _queries_near(q, queries, seed + 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--d", type=int, default=384)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--queries", type=int, default=32)
    p.add_argument("--thetas", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--count-queries", type=int, default=8)
    p.add_argument("--count-thetas", default="0.3,0.6,0.9")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--skip", default="", help="time or count: leave that part out")
    args = p.parse_args()

    import pandas as pd
    import torch
    from torch.profiler import ProfilerActivity, profile

    from divopt_rag.models import Instance
    from divopt_rag.models.kernels import synchronize
    from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(args.device)
    env = {"command": " ".join(sys.argv), "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
           "load_average_start": os.getloadavg(), "cpus": os.cpu_count(), "machine": platform.platform(),
           "torch": torch.__version__, "threads": args.threads, "device": args.device,
           "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None}
    E, Q = _pool(args.seed, args.n, args.d, max(args.queries, args.count_queries))
    E = torch.as_tensor(E).to(dev)
    base = Instance(E, Q[0], k=args.k, theta=0.5)
    thetas = [float(t) for t in args.thetas.split(",")]
    report = dict(env)
    if "time" not in args.skip:
        ws_multistart_sweep(base, Q[: min(4, args.queries)], thetas[:2])  # warm-up
        rows = []
        for r in range(args.repeats):
            synchronize(dev)
            wall, cpu = time.perf_counter(), time.process_time()
            res, _ = ws_multistart_sweep(base, Q[: args.queries], thetas)
            synchronize(dev)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            B = len(res.objectives)
            rows.append(dict(repeat=r, instances=B, wall_s=wall, cpu_s=cpu, ms_per_instance=1e3 * wall / B,
                             cpu_ms_per_instance=1e3 * cpu / B, load=os.getloadavg()[0],
                             stage_seconds=json.dumps(res.seconds)))
            print(rows[-1], flush=True)
        pd.DataFrame(rows).to_csv(out / "default_sweep_times.csv", index=False)
        report["time"] = {"queries": args.queries, "thetas": thetas, "instances": rows[0]["instances"],
                          "ms_per_instance_median": float(np.median([r["ms_per_instance"] for r in rows])),
                          "cpu_ms_per_instance_median": float(np.median([r["cpu_ms_per_instance"] for r in rows])),
                          "objectives": [float(x) for x in res.objectives],
                          "sets": [sorted(map(int, s)) for s in res.indices]}
    if "count" not in args.skip:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from helpers.sync_count import count_host_syncs

        cq, ct = Q[: args.count_queries], [float(t) for t in args.count_thetas.split(",")]
        from divopt_rag.solvers import ws_multistart

        if dev.type == "cpu" and hasattr(ws_multistart, "CHUNK_BYTES"):  # search every problem of a pool size
            ws_multistart.CHUNK_BYTES = 1 << 40  # in one chunk, as on a GPU, so the ops count its launches
        ws_multistart_sweep(base, cq, ct)  # warm-up
        with count_host_syncs() as syncs:
            ws_multistart_sweep(base, cq, ct)
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])) as prof:
            ws_multistart_sweep(base, cq, ct)
        ops = [e.name for e in prof.events() if e.name.startswith("aten::") and e.name not in _VIEWS]
        kernels = sum(1 for e in prof.events() if getattr(e, "device_type", None) is not None
                      and str(e.device_type).endswith("CUDA")) if dev.type == "cuda" else None
        report["count"] = {"queries": args.count_queries, "thetas": ct, "aten_ops": len(ops),
                           "cuda_kernels": kernels, "host_syncs": syncs.total, "host_syncs_by_kind": dict(syncs.by_kind)}
        print(report["count"], flush=True)
    report.update(finished_utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), load_average_end=os.getloadavg())
    (out / "default_sweep.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
