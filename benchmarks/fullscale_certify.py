"""Full-scale certificates on a 10^5 x 384 narrow cone at k = 10: the certified fraction per theta, before/after.

Not part of the package. The pools are ``bench quality``'s large-part pools
(:func:`divopt_rag.data.synthetic.narrow_cone` of ``--seed``, 5 planted relevant clusters, ~20
near-duplicates per cluster) and its queries (``_queries_near``: q and ``--queries`` - 1 queries
around it). Each (query, theta) is certified by :func:`divopt_rag.solvers.certificates.certify_full_scale`
once per variant, the variants interleaved per instance (load spikes hit both alike):

* ``fw``: the relaxation screening at the last iterate of Frank-Wolfe on the whole pool (the rule
  before issue 50 item 5);
* ``dual``: the same per-item bounds at a column-generated dual point
  (:func:`divopt_rag.solvers.relaxation_screening.dual_screen`, the default now).

    nice -n 15 python benchmarks/fullscale_certify.py --seeds 1 --queries 4 \\
        --out benchmarks/results/library/fullscale_1e5

writes OUT.csv (one row per variant x query x theta) and OUT.md (the certified fraction per
theta and variant, median seconds and survivors, the mean bound gap of the rest). Pauses while a
/work/locks/quiet-* file exists (the shared machine's rule for timing passes).
"""
from __future__ import annotations

import argparse
import glob
import os
import platform
import sys
import time

import numpy as np
import pandas as pd
import torch


def _wait_quiet() -> None:
    while glob.glob("/work/locks/quiet-*"):
        time.sleep(10)


def _summary(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (var, th), g in df.groupby(["variant", "theta"], sort=True):
        rest = g[~g["certified"]]
        rows.append({"variant": var, "theta": th, "certified": f"{int(g['certified'].sum())}/{len(g)}",
                     "fraction": round(float(g["certified"].mean()), 3),
                     "median_seconds": round(float(g["seconds"].median()), 1),
                     "median_survivors": int(g["n_survivors"].median()),
                     "mean_bound_gap_of_rest": float(rest["bound_gap"].mean()) if len(rest) else float("nan")})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="pool rows (default 100000)")
    ap.add_argument("--d", type=int, default=384, help="dimension (default 384)")
    ap.add_argument("--k", type=int, default=10, help="set size (default 10)")
    ap.add_argument("--seeds", default="1", help="comma-separated pool seeds (default 1; seed 0 was used for tuning)")
    ap.add_argument("--queries", type=int, default=4, help="queries per pool (default 4)")
    ap.add_argument("--thetas", type=float, nargs="+", default=[0.3, 0.5, 0.7, 0.9], help="default 0.3 0.5 0.7 0.9")
    ap.add_argument("--variants", default="fw,dual", help="relaxation screenings to compare (default fw,dual)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="exact solve's limit in seconds (default 60)")
    ap.add_argument("--exact-solver", default="auto", help="certify_full_scale's exact_solver (default auto)")
    ap.add_argument("--out", default="benchmarks/results/library/fullscale_1e5", help="output stem (.csv, .md)")
    ap.add_argument("--resume", action="store_true", help="keep OUT.csv's rows and skip the cells they cover")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if args.n < args.k or args.queries < 1 or not variants or any(v not in ("fw", "dual", "none") for v in variants):
        print(f"error: need --n >= --k, --queries >= 1, --variants from fw,dual,none; got {args.n}, {args.queries}, "
              f"{args.variants!r}", file=sys.stderr)
        return 2
    from divopt_rag.data.synthetic import narrow_cone
    from divopt_rag.experiments.studies.bench_quality import _queries_near
    from divopt_rag.models import Instance
    from divopt_rag.solvers.certificates import certify_full_scale

    torch.set_num_threads(1)
    rows: list[dict] = []
    if args.resume and os.path.exists(args.out + ".csv"):
        rows = pd.read_csv(args.out + ".csv").to_dict("records")
    done = {(int(r["seed"]), int(r["query"]), float(r["theta"]), r["variant"]) for r in rows}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    for seed in [int(s) for s in args.seeds.split(",")]:
        E, q, _ = narrow_cone(args.n, args.d, seed=seed)
        Q = _queries_near(q, args.queries, seed + 1)
        Et = torch.from_numpy(E)
        for qi in range(args.queries):
            for th in args.thetas:
                inst = Instance(Et, Q[qi], k=args.k, theta=th)
                for var in variants:
                    if (seed, qi, float(th), var) in done:
                        continue
                    _wait_quiet()
                    cert = certify_full_scale(inst, relaxation=var, time_limit=args.time_limit,
                                              exact_solver=args.exact_solver)
                    r = cert.as_row()
                    r.pop("incumbent_ids")
                    r.update(seed=seed, query=qi, variant=var, load=os.getloadavg()[0],
                             exact_status=str(r["exact_status"]), exact_solver=cert.info.get("exact_solver", ""))
                    rows.append(r)
                    print(f"seed {seed} q{qi} theta {th} {var}: {r['status']}, {r['n_survivors']} survivors, "
                          f"gap {r['bound_gap']:.2e}, {r['seconds']:.1f}s", flush=True)
                df = pd.DataFrame(rows)
                df.to_csv(args.out + ".csv", index=False)
                _write_md(df, args, argv)
    return 0


def _write_md(df: pd.DataFrame, args, argv) -> None:
    summ = _summary(df)
    cmd = "nice -n 15 python benchmarks/fullscale_certify.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"# Full-scale certificates, narrow cone n = {args.n}, d = {args.d}, k = {args.k}", "",
             f"`{cmd}`", "",
             f"Machine: {platform.machine()} VM, {os.cpu_count()} cores, shared (load avg during the run "
             f"{df['load'].min():.1f}-{df['load'].max():.1f}); one torch thread; exact solver `{args.exact_solver}`; "
             "GPU not run.", "",
             "Variants: `fw` = relaxation screening at a full-pool Frank-Wolfe iterate (before); "
             "`dual` = at the column-generated dual point (after).", "",
             "| variant | theta | certified | fraction | median s | median survivors | mean bound gap of the rest |",
             "|---|---|---|---|---|---|---|"]
    for r in summ.itertuples():
        lines.append(f"| {r.variant} | {r.theta} | {r.certified} | {r.fraction} | {r.median_seconds} | "
                     f"{r.median_survivors} | {r.mean_bound_gap_of_rest:.2e} |")
    with open(args.out + ".md", "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
