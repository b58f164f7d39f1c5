"""Identity check of a change to the default's knobs (issue 46 item 3): the same sets, f and info.

Not part of the package. ``record`` runs "fw_ws_ms" on a few hundred small seeded problems and
writes one digest per problem (sha256 of its sorted set, its f as ``repr`` and its ``info``
without ``seconds``) with f in the clear; ``compare`` says on how many two such files agree. The
problems cover both searches and every pool path: the host kernels (float32 / float64 rows on a
CPU) and the lockstep tensor search (float16 rows on a CPU run it), pools searched whole (n <=
300), first pools by relevance and guided first pools (low theta on a narrow cone), k from 3 to
120, the batched entry points (``ws_multistart_batch`` through ``ws_multistart_sweep``), and the
knobs kept public at non-default values (their derived values follow them).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/knobs_identity.py record --out before.json
    ... change the code ...
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/knobs_identity.py record --out after.json
    python benchmarks/knobs_identity.py compare before.json after.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time

import numpy as np

THETAS = (0.1, 0.3, 0.5, 0.7, 0.9)

#: Non-default settings of the public knobs (each problem of the "knobs" part runs one).
KNOB_SETTINGS = (
    {"pool_size": 40},
    {"pool_size": 40, "guided_pool_size": 60},
    {"guided_pool_size": 350},
    {"perturb_rounds": 3},
    {"tabu_iters": 10, "tabu_walks": 2},
    {"n_random": 1, "two_swap": False},
    {"polish": False, "seed": 3},
    {"max_phases": 1},
    {"max_iter": 3, "relax_penalty": 3.0},
)


def _pool(n, d, seed, cone):
    """n unit rows in d dimensions: isotropic (cone = 0) or around one direction (a narrow cone,
    where relevance misleads at low theta), and a query near the rows' mean direction."""
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d))
    if cone:
        E[:, 0] += cone * np.sqrt(d)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = E[: max(1, n // 10)].mean(0) + 0.3 * rng.standard_normal(d) / np.sqrt(d)
    return E, q / np.linalg.norm(q)


def _problems():
    """(key, n, d, k, theta, cone, dtype, knobs): the single problems."""
    out = []
    s = 0
    for n, d, ks in ((30, 8, (3, 5)), (120, 16, (5, 10)), (280, 16, (10,))):  # searched whole
        for k in ks:
            for th in THETAS:
                for cone in (0.0, 1.5):
                    out.append((n, d, k, th, cone, "float32", {}, s))
                    s += 1
    for n, d, ks in ((500, 16, (5, 10, 30)), (1200, 24, (10, 50))):  # first pools, guided or not
        for k in ks:
            for th in THETAS:
                for cone in (0.0, 1.5, 3.0):
                    out.append((n, d, k, th, cone, "float32", {}, s))
                    s += 1
    for n, k in ((700, 100), (1100, 120)):  # k >= 100
        for th in (0.3, 0.5, 0.9):
            for cone in (0.0, 2.0):
                out.append((n, 24, k, th, cone, "float32", {}, s))
                s += 1
    for n, d, k in ((200, 12, 6), (600, 16, 10)):  # float64 rows (host kernels, float64 search)
        for th in THETAS:
            out.append((n, d, k, th, 1.5, "float64", {}, s))
            s += 1
    for n, d, k in ((150, 12, 5), (450, 16, 8)):  # float16 rows: the lockstep tensor search
        for th in (0.3, 0.7):
            for cone in (0.0, 2.0):
                out.append((n, d, k, th, cone, "float16", {}, s))
                s += 1
    for i, knobs in enumerate(KNOB_SETTINGS):  # public knobs at other values
        for th in (0.3, 0.7):
            for n, dtype in ((120, "float32"), (500, "float32"), (400, "float16")):
                if dtype == "float16" and i % 3:
                    continue
                out.append((n, 16, 8, th, 2.0, dtype, knobs, s))
                s += 1
    return out


def _digest(indices, objective, info) -> dict:
    info = {key: v for key, v in info.items() if key != "seconds"}
    blob = json.dumps([sorted(int(i) for i in indices), repr(float(objective)), info], sort_keys=True, default=repr)
    return {"f": repr(float(objective)), "sha": hashlib.sha256(blob.encode()).hexdigest()[:16],
            "guided": bool(info.get("guided")), "phase": info.get("phase")}


def record(args) -> None:
    import torch

    from divopt_rag.models import Instance
    from divopt_rag.solvers import select
    from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

    torch.set_num_threads(1)
    out = {}
    t0 = time.perf_counter()
    probs = _problems()
    for n, d, k, th, cone, dtype, knobs, s in probs:
        E, q = _pool(n, d, s, cone)
        inst = Instance(torch.from_numpy(E).to(getattr(torch, dtype)), q, k=k, theta=th)
        sel = select(inst, "fw_ws_ms", **knobs)
        key = f"single/{s}/n{n}/d{d}/k{k}/t{th}/c{cone}/{dtype}/" + ",".join(f"{a}={b}" for a, b in sorted(knobs.items()))
        out[key] = _digest(sel.indices, sel.objective, sel.info)
    # the batched entry points: Q queries x T thetas on one pool, each problem's set and info
    for s, (n, d, k, cone, dtype, knobs) in enumerate(((600, 16, 10, 2.0, "float32", {}),
                                                      (900, 24, 40, 1.0, "float32", {}),
                                                      (250, 16, 6, 0.0, "float32", {}),
                                                      (500, 16, 8, 2.0, "float32", {"pool_size": 60}),
                                                      (400, 16, 8, 2.0, "float16", {}))):
        E, q = _pool(n, d, 500 + s, cone)
        rng = np.random.default_rng(600 + s)
        Q = q + 0.3 * rng.standard_normal((4, d)) / np.sqrt(d)
        Q /= np.linalg.norm(Q, axis=1, keepdims=True)
        inst = Instance(torch.from_numpy(E).to(getattr(torch, dtype)), q, k=k, theta=0.5)
        res, qof = ws_multistart_sweep(inst, Q.astype(np.float32 if dtype != "float64" else np.float64),
                                       [0.2, 0.5, 0.8], **knobs)
        for b in range(len(res.info)):
            out[f"sweep/{s}/n{n}/k{k}/{dtype}/{knobs}/q{qof[b]}/b{b}"] = _digest(res.indices[b], res.objectives[b],
                                                                               res.info[b])
    meta = {"problems": len(out), "seconds": round(time.perf_counter() - t0, 1)}
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "records": out}, fh, indent=0, sort_keys=True)
    print(json.dumps(meta))


def compare(args) -> int:
    a, b = (json.load(open(p))["records"] for p in (args.a, args.b))
    keys = sorted(set(a) | set(b))
    same = [key for key in keys if a.get(key) == b.get(key)]
    diff = [key for key in keys if a.get(key) != b.get(key)]
    guided = sum(1 for key in keys if a.get(key, {}).get("guided"))
    big = sum(1 for key in keys if int(re.search(r"/k(\d+)/", key).group(1)) >= 100)
    print(f"{len(same)} / {len(keys)} problems identical (set, f, info); {guided} guided; {big} with k >= 100")
    for key in diff[:20]:
        print("DIFF", key, a.get(key), b.get(key))
    return 0 if not diff else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
