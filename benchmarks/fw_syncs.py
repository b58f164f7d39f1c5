"""Host syncs per Frank-Wolfe iteration and CPU time, this checkout against another, interleaved.

Issue 42, item 3: FW must make at most one host sync per iteration (on CUDA each costs a round
trip). This counts them with ``tests/helpers/sync_count.py`` (torch.profiler + a TorchFunctionMode: the
same calls are made on the CPU) and times the same runs, on one CPU thread:

* ``fw``, ``fw_topk``: one run of the selector on a float32 narrow cone (``--n`` x ``--d``);
* ``fw_batched``: :func:`divopt_rag.solvers.batched_fw.fw_batched` on ``--batch`` problems;
* ``fw_rows_small_torch`` / ``fw_rows_small_numpy``: :func:`fw_rows` on a candidate pool (a narrow
  cone of 300 rows x 384) from 8 random starts, as float64 tensors and as numpy arrays (the
  default's FW starts run the numpy path).

Syncs are counted over one call (``syncs``) and, per iteration, as the difference between calls
capped at 13 and at 3 iterations, over 10 (``syncs_per_iteration``; on a pool of 400 x 8, k = 20,
theta = 0.3, uniform starts, where FW runs past 13 iterations). Times are the minimum of
``--repeats`` runs (the machine is shared: the minimum is the least disturbed).

Driver mode (``--base DIR``, a checkout of the other version): runs worker processes for the base
and for this checkout alternately, ``--rounds`` times each, so that machine load falls on both
alike; writes ``fw_syncs.csv`` (one row per version, case and round: iterations, syncs, syncs per
iteration, the least seconds of ``--repeats`` runs) and ``fw_syncs_ratios.csv`` (per case and
round: this checkout's time / the base's, from back-to-back workers) to ``--out``, with the load.

    python benchmarks/fw_syncs.py --base /tmp/base_checkout --out benchmarks/results/fw_syncs
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
CASES = ("fw", "fw_topk", "fw_batched", "fw_rows_small_torch", "fw_rows_small_numpy")
#: Cases whose syncs are also counted at two iteration caps (3 and 13, both reached): the
#: difference over 10 is the cost of one iteration, whatever a call costs once.
SLOPE_CASES = ("fw", "fw_topk", "fw_batched", "fw_rows_small_torch")


def _worker(args) -> dict:
    import numpy as np
    import torch

    sys.path.insert(0, str(HERE / "tests"))
    from helpers.sync_count import count_host_syncs

    from divopt_rag.data.synthetic import narrow_cone
    from divopt_rag.models import Instance
    from divopt_rag.models.ccbqp import linear_term
    from divopt_rag.solvers import select
    from divopt_rag.solvers.batched_fw import fw_batched
    from divopt_rag.solvers.fw_kernel import fw_rows
    from divopt_rag.solvers.frank_wolfe import random_point

    torch.set_num_threads(1)  # a benchmark process, not a library call
    E, q, _ = narrow_cone(args.n, args.d, seed=0)
    inst = Instance(E, q, k=args.k, theta=args.theta)
    rng = np.random.default_rng(1)
    Q = np.stack([q] + [v / np.linalg.norm(v) for v in rng.standard_normal((args.batch - 1, args.d))]).astype(np.float32)
    small_E, small_q, _ = narrow_cone(300, 384, seed=0)
    small_E = small_E.astype(np.float64)
    small_lin = np.broadcast_to(linear_term(small_E @ small_q.astype(np.float64), args.theta, 10), (8, 300))
    small_X = np.stack([random_point(300, 10, s) for s in range(8)])
    small_T = [torch.from_numpy(np.ascontiguousarray(a)) for a in (small_E, small_X, small_lin)]
    C = torch.from_numpy(Q) @ torch.from_numpy(E).T
    # the syncs per iteration: an instance where FW runs past 13 iterations (k 20, theta 0.3, uniform)
    rng = np.random.default_rng(0)
    Es = rng.standard_normal((400, 8))
    Es /= np.linalg.norm(Es, axis=1, keepdims=True)
    slow = Instance(Es, Es[0], k=20, theta=0.3)
    Cs = torch.from_numpy(Es[:4]) @ slow.E.T
    slow_T = (slow.E, torch.full((4, 400), 20 / 400, dtype=torch.float64), linear_term(Cs, 0.3, 20))

    def run(case, cap=None):
        it = {} if cap is None else {"max_iter": cap}
        if cap is not None:  # the slope instance
            if case in ("fw", "fw_topk"):
                return int(select(slow, case, init="uniform", **it).iterations)
            if case == "fw_batched":
                return int(fw_batched(slow, Cs, [0.3] * 4, init="uniform", **it).iterations.max())
            return int(np.max(fw_rows(*slow_T, 0.3, 20, **it).iterations))
        if case in ("fw", "fw_topk"):
            return int(select(inst, case, init="uniform").iterations)
        if case == "fw_batched":
            return int(fw_batched(inst, C, [args.theta] * args.batch, init="uniform").iterations.max())
        if case == "fw_rows_small_torch":
            return int(np.max(fw_rows(*small_T, args.theta, 10).iterations))
        return int(np.max(fw_rows(small_E, small_X, small_lin, args.theta, 10).iterations))

    out = {}
    for case in CASES:
        run(case)  # warm-up
        with count_host_syncs() as syncs:
            iters = run(case)
        ts = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            run(case)
            ts.append(time.perf_counter() - t0)
        slope = float("nan")
        if case in SLOPE_CASES:
            capped = {}
            for cap in (3, 13):
                with count_host_syncs() as s:
                    reached = run(case, cap)
                capped[cap] = (s.total, reached)
            if capped[3][1] == 3 and capped[13][1] == 13:
                slope = (capped[13][0] - capped[3][0]) / 10
        out[case] = dict(iterations=iters, syncs=syncs.total, by_kind=dict(syncs.by_kind), seconds=min(ts),
                         per_iteration=slope)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--theta", type=float, default=0.7)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--base", type=Path, help="a checkout of the other version (driver mode)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args)))
        return 0
    import pandas as pd

    args.out.mkdir(parents=True, exist_ok=True)
    shims = {"this": None}
    if args.base is not None:
        shim = Path(tempfile.mkdtemp()) / "divopt_rag"
        shim.mkdir()
        for d in ("models", "solvers", "robust", "experiments", "data", "integrations"):
            (shim / d).symlink_to(args.base.resolve() / d)
        shims["base"] = shim.parent
    flags = [f"--{a}={getattr(args, a)}" for a in ("n", "d", "k", "theta", "batch", "repeats")]
    rows = []
    for rnd in range(args.rounds):
        for version, path in shims.items():
            env = dict(os.environ)
            if path is not None:
                env["PYTHONPATH"] = f"{path}{os.pathsep}{env.get('PYTHONPATH', '')}"
            load = os.getloadavg()[0]
            res = subprocess.run([sys.executable, __file__, "--worker", *flags], env=env, capture_output=True,
                                 text=True, check=True)
            for case, r in json.loads(res.stdout.strip().splitlines()[-1]).items():
                rows.append(dict(version=version, round=rnd, case=case, iterations=r["iterations"], syncs=r["syncs"],
                                 syncs_per_iteration=r["per_iteration"],
                                 by_kind=json.dumps(r["by_kind"]), seconds=r["seconds"], load=load))
                print(f"{version:5s} round {rnd} {case:22s} it={r['iterations']:5d} syncs={r['syncs']:5d} "
                      f"per iteration {r['per_iteration']:.2f} {r['seconds'] * 1e3:9.2f} ms  load {load:.2f}", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(args.out / "fw_syncs.csv", index=False)
    if "base" in shims:
        wide = df.pivot_table(index=["case", "round"], columns="version", values="seconds").reset_index()
        wide["this_over_base"] = wide["this"] / wide["base"]
        wide.to_csv(args.out / "fw_syncs_ratios.csv", index=False)
        print(wide.groupby("case")["this_over_base"].median().to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
