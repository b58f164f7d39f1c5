"""Frank-Wolfe in reduced storage precision on the CPU, with a reduced-precision product emulated.

Issue 42: on one H200 the paper's FW ran to its 200-iteration cap on float16 pools where float32
converged in 2-47 iterations. The cause shows on the CPU when every product E v (the gradient's
one pass over the pool) rounds its sums to the storage dtype, as a GEMM with reduced-precision
reductions / a half-precision output does. This runs, on one synthetic narrow cone
(``divopt_rag.data.synthetic.narrow_cone``, the generator of ``divopt-rag bench latency``):

* ``float32``: the pool stored in float32 (the reference: iterations and picks);
* ``<dtype>@f64``: the stored float16 / bfloat16 values solved in float64 (FW without rounding
  on the same data: the picks a precision-independent FW gives on that pool);
* ``<dtype>``: the same pool stored in float16 / bfloat16, divopt's own product (float32 sums);
* ``<dtype>+round``: the same, with every E v rounded to the storage dtype (the emulation).

For every (k, theta, method, storage) it writes one row to ``fw_precision.csv`` in ``--out``:
iterations, whether FW stopped by its rule (``converged``), the last FW gap, the objective of the
picks on the pool's own storage (``objective``) and on the float32 pool (``objective_f32``), the
picks' overlap with the float32 picks (``same_picks``, ``overlap``), the float16 rounding of the
objective (``f16_rounding`` = 2^-11 |f|), whether the picks equal those of ``<dtype>@f64``
(``same_as_exact``), the picks and seconds; plus the machine load and the commit.
Each run is single-threaded (``--threads``) so that the load of a shared machine moves it less.

    python benchmarks/fw_precision.py --n 200000 --d 256 --out benchmarks/results/fw_precision/after
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from divopt_rag.data.synthetic import narrow_cone
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers import select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.reduced_precision import rounded_products  # noqa: E402  (the emulation, shared with the tests)

_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def _commit() -> str:
    try:
        here = Path(__file__).resolve().parent
        return subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--k", default="25,50,100")
    ap.add_argument("--theta", default="0.3,0.5,0.7,0.9")
    ap.add_argument("--methods", default="fw,fw_ws,fw_topk")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--label", default="", help="a name for this code version (e.g. before / after)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)  # a benchmark process, not a library call
    args.out.mkdir(parents=True, exist_ok=True)
    E, q, _ = narrow_cone(args.n, args.d, seed=args.seed)
    pools = {"float32": torch.from_numpy(E)}
    for name in args.dtypes.split(","):
        pools[name] = pools["float32"].to(_DTYPES[name])
    ks = [int(k) for k in args.k.split(",")]
    thetas = [float(t) for t in args.theta.split(",")]
    rows = []
    commit, load = _commit(), os.getloadavg()[0]
    for k in ks:
        for theta in thetas:
            ref32 = Instance(pools["float32"], q, k=k, theta=theta)
            for method in args.methods.split(","):
                base = exact = None
                for storage in ["float32"] + [f"{n}{s}" for n in args.dtypes.split(",") for s in ("@f64", "", "+round")]:
                    dtype = storage.split("+")[0].split("@")[0]
                    inst = ref32 if dtype == "float32" else Instance(pools[dtype], q, k=k, theta=theta)
                    if storage.endswith("@f64"):  # the stored values, solved in float64: FW without rounding
                        inst = inst.to(dtype=torch.float64)
                    t0 = time.perf_counter()
                    if storage.endswith("+round"):
                        with rounded_products():
                            sel = select(inst, method)
                    else:
                        sel = select(inst, method)
                    secs = time.perf_counter() - t0
                    picks = set(sel.indices.tolist())
                    if base is None:
                        base = picks
                    if storage.endswith("@f64"):
                        exact = picks
                    f32 = ccbqp_objective(ref32, sel.indices)
                    rows.append(dict(
                        label=args.label, commit=commit, n=args.n, d=args.d, k=k, theta=theta, method=method,
                        storage=storage, iterations=int(sel.iterations), converged=bool(sel.info.get("converged")),
                        gap=float(sel.info.get("gap", np.nan)), objective=float(sel.objective), objective_f32=f32,
                        same_picks=picks == base, overlap=len(picks & base) / k,
                        same_as_exact=(picks == exact) if dtype != "float32" else True,
                        f16_rounding=2.0 ** -11 * abs(f32), seconds=secs, load=load,
                        picks=" ".join(map(str, sorted(picks)))))
                    r = rows[-1]
                    print(f"k={k:4d} theta={theta:.1f} {method:8s} {storage:15s} it={r['iterations']:4d} "
                          f"conv={r['converged']!s:5s} gap={r['gap']:.3g} f={r['objective']:.4f} "
                          f"f32={r['objective_f32']:.4f} same={r['same_picks']!s:5s} "
                          f"exact={r['same_as_exact']!s:5s} {secs:.2f}s", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(args.out / "fw_precision.csv", index=False)
    print(f"wrote {args.out / 'fw_precision.csv'} ({len(df)} rows; load {load:.2f}, commit {commit})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
