"""A/B check of a refactor of the default method ("fw_ws_ms"): the same picks, and the speed, of two codes.

Not part of the package. Each code runs in its own process, imported through its own shim
(``PYTHONPATH`` pointing at a folder whose ``divopt_rag/<folder>`` entries link to a checkout's
folders), on the development pools of ``divopt-rag bench quality --parts large,batch`` (seeds 0-3:
n = 1e5, d = 384, 4 queries near the pool's query, k in {10, 50, 100}, theta in {0.3, 0.5, 0.7,
0.9}; the batch: 16 queries x 9 thetas at k = 10), built with that command's own helpers.

    # the sets and objectives of one code (one process), written as JSON
    PYTHONPATH=<shim> python refactor_default_ab.py record --out picks.json
    # compare two such files: identical index sets on every instance?
    python refactor_default_ab.py compare a.json b.json
    # time both codes in one run: two worker processes, driven alternately (A B / B A per
    # repeat, per instance), torch.set_num_threads(1) in each; median ratio B / A per cell
    python refactor_default_ab.py time --a <shim A> --b <shim B> --repeats 3 --out times.csv
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

SEEDS = (0, 1, 2, 3)
N, D = 100_000, 384
KS = (10, 50, 100)
THETAS = (0.3, 0.5, 0.7, 0.9)
QUERIES = 4
BATCH_QUERIES, BATCH_THETAS, BATCH_K = 16, (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), 10


def _pools(seeds):
    """seed -> (E, Qm, Qb): the pool, its 4 large-part queries and its 16 batch queries."""
    from divopt_rag.experiments.studies.bench_quality import _pool, _queries_near

    out = {}
    for s in seeds:
        E, q = _pool(N, D, s)
        out[s] = (E, _queries_near(q, QUERIES, s + 1), _queries_near(q, BATCH_QUERIES, s + 2))
    return out


def _cells(seeds):
    return [(s, qi, k, th) for s in seeds for qi in range(QUERIES) for k in KS for th in THETAS]


def record(args) -> None:
    import torch
    from divopt_rag.models import Instance
    from divopt_rag.solvers import select
    from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    pools = _pools(seeds)
    methods = [m for m in args.methods.split(",") if m]
    out = {part: {} for part in ["single", "batch"] + methods + (["fw_sweep", "fw_sweep_ws"] if args.fw_sweep else [])}
    for s, qi, k, th in _cells(seeds):
        E, Qm, _ = pools[s]
        inst = Instance(E, Qm[qi], k=k, theta=th)
        key = f"{s}/{qi}/{k}/{th}"
        if not args.no_default:
            sel = select(inst, "fw_ws_ms")
            out["single"][key] = {"indices": sorted(sel.indices.tolist()), "objective": sel.objective,
                                  "passes": sel.info["passes"], "phase": sel.info["phase"]}
        for m in methods:
            other = select(inst, m)
            out[m][key] = {"indices": sorted(other.indices.tolist()), "objective": other.objective}
        print(key, flush=True)
    for s in seeds:
        E, _, Qb = pools[s]
        base = Instance(E, Qb[0], k=BATCH_K, theta=0.5)
        sweeps = [] if args.no_default else [("batch", lambda: ws_multistart_sweep(base, Qb, list(BATCH_THETAS)))]
        if args.fw_sweep:
            from divopt_rag.solvers.batched_fw import fw_sweep

            sweeps += [("fw_sweep", lambda: fw_sweep(base, Qb, list(BATCH_THETAS), working_set=0)),
                       ("fw_sweep_ws", lambda: fw_sweep(base, Qb, list(BATCH_THETAS), working_set="auto"))]
        for part, run in sweeps:
            got = run()
            res, qidx = got[0], got[1]
            for b in range(len(qidx)):
                key = f"{s}/{int(qidx[b])}/{BATCH_K}/{float(res.thetas[b]):g}"
                out[part][key] = {"indices": sorted(res.indices[b].tolist()), "objective": float(res.objectives[b])}
        print(f"batch seed {s}", flush=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh)


def compare(args) -> None:
    a, b = (json.load(open(p)) for p in (args.a, args.b))
    report = {}
    for part in sorted(set(a) | set(b)):
        keys = sorted(set(a.get(part, {})) & set(b.get(part, {})))
        if not keys:
            continue
        same = [k for k in keys if a[part][k]["indices"] == b[part][k]["indices"]]
        diff = [k for k in keys if k not in same]
        dobj = max((abs(a[part][k]["objective"] - b[part][k]["objective"]) for k in keys), default=0.0)
        report[part] = {"instances": len(keys), "identical_sets": len(same), "different": diff,
                        "max_abs_objective_diff": dobj}
        print(f"{part}: identical index sets on {len(same)} / {len(keys)}; max |f_a - f_b| = {dobj:.3g}"
              + (f"; differ: {diff}" if diff else ""))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)


def worker(args) -> None:
    """Read 'seed qi k theta' lines; answer the wall seconds (``Selection.seconds``) and the process
    CPU seconds of one select(inst, "fw_ws_ms"), and its set."""
    import hashlib

    import torch
    from divopt_rag.models import Instance
    from divopt_rag.solvers import select
    from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    pools = _pools(seeds)
    select(Instance(pools[seeds[0]][0], pools[seeds[0]][1][0], k=10, theta=0.5), "fw_ws_ms")  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        if line.startswith("batch"):  # one batched sweep (16 queries x 9 thetas) of pool s
            E, _, Qb = pools[int(line.split()[1])]
            base = Instance(E, Qb[0], k=BATCH_K, theta=0.5)
            wall, cpu = time.perf_counter(), time.process_time()
            res, _ = ws_multistart_sweep(base, Qb, list(BATCH_THETAS))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            sets = hashlib.sha256(np.sort(res.indices, axis=1).tobytes()).hexdigest()[:16]
            print(f"{wall:.6f} {cpu:.6f} {sets}", flush=True)
            continue
        s, qi, k, th = line.split()
        E, Qm, _ = pools[int(s)]
        inst = Instance(E, Qm[int(qi)], k=int(k), theta=float(th))
        cpu = time.process_time()
        sel = select(inst, "fw_ws_ms")
        cpu = time.process_time() - cpu
        print(f"{sel.seconds:.6f} {cpu:.6f} {','.join(map(str, sorted(sel.indices.tolist())))}", flush=True)


def _start(shim: str, seeds: str):
    env = dict(os.environ, PYTHONPATH=shim, PYTHONPYCACHEPREFIX="/tmp/pyc" + shim.replace("/", "_"))
    p = subprocess.Popen([sys.executable, __file__, "worker", "--seeds", seeds], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    return p


def _ask(p, cell) -> tuple[float, float, str]:
    p.stdin.write(" ".join(map(str, cell)) + "\n")
    p.stdin.flush()
    sec, cpu, idx = p.stdout.readline().split()
    return float(sec), float(cpu), idx


def _single_summary(df, args) -> dict:
    """Median per instance over the repeats; the ratio B / A per instance, its median per (k, theta)
    cell and overall, for the wall and the CPU seconds."""
    med = df.groupby(["seed", "query", "k", "theta"])[["seconds_a", "seconds_b", "cpu_a", "cpu_b"]].median()
    med["ratio_b_over_a"] = med.seconds_b / med.seconds_a
    med["cpu_ratio_b_over_a"] = med.cpu_b / med.cpu_a
    summary = {"instances": len(med), "repeats": args.repeats, "same_sets": int(df.same_set.sum()), "runs": len(df)}
    for kind, col, a, b in (("wall", "ratio_b_over_a", "seconds_a", "seconds_b"),
                            ("cpu", "cpu_ratio_b_over_a", "cpu_a", "cpu_b")):
        by = med.groupby(["k", "theta"])[col].median().unstack("theta")
        summary[kind] = {"median_ratio_b_over_a": float(med[col].median()),
                         "total_a": float(med[a].sum()), "total_b": float(med[b].sum()),
                         "ratio_of_totals": float(med[b].sum() / med[a].sum()),
                         "per_cell_median_ratio": {f"k={k}": {f"{t:g}": round(float(v), 4) for t, v in row.items()}
                                                   for k, row in by.iterrows()}}
        print(kind, "median ratio B / A per (k, theta):")
        print(by.round(3).to_string())
    return summary


def timing(args) -> None:
    import statistics

    import pandas as pd

    import platform

    seeds = [int(s) for s in args.seeds.split(",")]
    env = {"command": " ".join(sys.argv), "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
           "load_average_start": os.getloadavg(), "cpus": os.cpu_count(), "machine": platform.platform(),
           "python": platform.python_version(), "nice": os.nice(0)}
    procs = {"a": _start(args.a, args.seeds), "b": _start(args.b, args.seeds)}
    rows, t0 = [], time.time()
    cells = _cells(seeds)
    for r in range(args.repeats):
        for i, cell in enumerate(cells):
            order = ("a", "b") if (r + i) % 2 == 0 else ("b", "a")  # alternate who goes first
            got = {w: _ask(procs[w], cell) for w in order}
            s, qi, k, th = cell
            rows.append(dict(seed=s, query=qi, k=k, theta=th, repeat=r, seconds_a=got["a"][0], seconds_b=got["b"][0],
                             cpu_a=got["a"][1], cpu_b=got["b"][1], same_set=got["a"][2] == got["b"][2],
                             first=order[0]))
        print(f"repeat {r + 1}/{args.repeats} done after {time.time() - t0:.0f} s, load {os.getloadavg()}", flush=True)
    batch = []
    for r in range(args.batch_repeats):
        for i, s in enumerate(seeds):
            order = ("a", "b") if (r + i) % 2 == 0 else ("b", "a")
            got = {w: _ask(procs[w], ("batch", s)) for w in order}
            batch.append(dict(seed=s, repeat=r, seconds_a=got["a"][0], seconds_b=got["b"][0], cpu_a=got["a"][1],
                              cpu_b=got["b"][1], same_sets=got["a"][2] == got["b"][2], first=order[0]))
        print(f"batch repeat {r + 1}/{args.batch_repeats} done after {time.time() - t0:.0f} s", flush=True)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    df = pd.DataFrame(rows)
    df.to_csv(args.out, index=False)
    summary = {**env, "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
               "load_average_end": os.getloadavg()}
    if rows:
        summary.update(_single_summary(df, args))
    if batch:
        db = pd.DataFrame(batch)
        db.to_csv(os.path.splitext(args.out)[0] + "_batch.csv", index=False)
        mb = db.groupby("seed")[["seconds_a", "seconds_b", "cpu_a", "cpu_b"]].median()
        summary["batch"] = {"sweeps": len(db), "same_sets": int(db.same_sets.sum()),
                            "per_seed_median_ratio_wall": {str(s): round(float(v), 4)
                                                           for s, v in (mb.seconds_b / mb.seconds_a).items()},
                            "median_ratio_wall": float((mb.seconds_b / mb.seconds_a).median()),
                            "median_ratio_cpu": float((mb.cpu_b / mb.cpu_a).median())}
    print(json.dumps(summary, indent=1))
    with open(os.path.splitext(args.out)[0] + "_summary.json", "w") as fh:
        json.dump(summary, fh, indent=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    r.add_argument("--methods", default="", help="also record these selectors' picks (e.g. fw,fw_ws,fw_ms)")
    r.add_argument("--fw-sweep", action="store_true", help="also record batched FW (fw_sweep) picks")
    r.add_argument("--no-default", action="store_true", help="skip the default method")
    r.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--out")
    w = sub.add_parser("worker")
    w.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    t = sub.add_parser("time")
    t.add_argument("--a", required=True, help="PYTHONPATH (shim) of code A")
    t.add_argument("--b", required=True, help="PYTHONPATH (shim) of code B")
    t.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    t.add_argument("--repeats", type=int, default=3)
    t.add_argument("--batch-repeats", type=int, default=0, help="also time the batched sweep of each pool")
    t.add_argument("--out", required=True)
    args = p.parse_args()
    {"record": record, "compare": compare, "worker": worker, "time": timing}[args.cmd](args)


if __name__ == "__main__":
    main()
