"""One pass over a float16 pool on the CPU, three ways: what a float16-stored selector pays per pass.

Every selector in the CCBQP latency claim (FW, MMR, DPP, divopt's default) spends its time in
passes E v over the pool (``divopt-rag bench latency`` reports each time as GEMV-equivalents).
This times, on one n x d pool (synthetic unit rows, seeded):

* ``kernel_fp16``: divopt's :func:`divopt_rag.models.kernels.matvec` on float16 storage (rows
  upcast to float32 a cache-sized block at a time into one buffer, float32 accumulation: what
  the selectors run);
* ``blocks64_fp16``: the kernel before that change (16,384-row blocks, a fresh 64 MiB float32
  block each), for the comparison within one run;
* ``torch_fp16``: torch's own half-precision GEMV ``E @ v.half()`` (float16 result);
* ``fp32``: the same pool stored in float32 (twice the memory).

Writes ``fp16_pass.csv`` (one row per way: median seconds over ``--repeats``) to ``--out``.

    python benchmarks/fp16_pass_cpu.py --n 2000000 --d 1024 --out DIR
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from divopt_rag.models.kernels import matvec


def _median(f, repeats: int) -> float:
    f()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    E = torch.empty(args.n, args.d, dtype=torch.float16)
    for s in range(0, args.n, 1 << 16):  # generated a block at a time: no float32 copy of the pool
        blk = torch.randn(min(1 << 16, args.n - s), args.d, generator=g)
        E[s : s + blk.shape[0]] = (blk / blk.norm(dim=1, keepdim=True)).half()
    v = torch.randn(args.d, generator=g)
    def blocks64():
        out = torch.empty(E.shape[0])
        for s in range(0, E.shape[0], 1 << 14):
            out[s : s + (1 << 14)] = E[s : s + (1 << 14)].float() @ v
        return out

    rows = [{"way": "kernel_fp16", "seconds": _median(lambda: matvec(E, v), args.repeats)},
            {"way": "blocks64_fp16", "seconds": _median(blocks64, args.repeats)},
            {"way": "torch_fp16", "seconds": _median(lambda: E @ v.half(), args.repeats)}]
    E32 = E.float()
    del E
    rows.append({"way": "fp32", "seconds": _median(lambda: matvec(E32, v), args.repeats)})
    df = pd.DataFrame(rows).assign(n=args.n, d=args.d, threads=torch.get_num_threads(), torch=torch.__version__,
                                   cpu_capability=torch.backends.cpu.get_cpu_capability(),
                                   machine=platform.processor() or platform.machine())
    df.to_csv(args.out / "fp16_pass.csv", index=False)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
