"""``divopt-rag bench quality``: how close every fast method gets to certified optima, and at what cost.

Three parts, measured in one run (``--parts``, default all):

small  Real embeddings, small pools: the ``wordnet_glosses`` dataset of :func:`divopt_rag.data.load`
       (WordNet noun senses from Debian wordnet-base, embedded with the offline
       all-MiniLM-L6-v2): the queries are seeded polysemous nouns ("bank", "cell", ...), the
       corpus is every sense gloss of those words plus seeded random other glosses, and each
       query's pool is its top-``--pool`` passages by cosine (default 100). For each
       (query, theta) with k = ``--k``, the exact optimum comes from
       :func:`divopt_rag.solvers.exact.solve_exact` (certified within ``--mip-gap``); every method
       is scored by :func:`divopt_rag.experiments.harness.gap_record`: normalized gap
       (OPT - f) / (k (k-1)) against the best value known (the solver's incumbent, or a method's
       value if one is higher, which ``opt_from_fast_method`` flags) when the solve is proven,
       else against its bound (``gap_kind == "upper_bound"``); exact hit when the proven gap is
       <= ``--hit-tol``; and time.
large  Time and objective of divopt's methods and the published baselines vs the paper's FW
       ("fw") on synthetic 10^5 x 384 narrow-cone pools (the ``synthetic`` dataset of
       divopt_rag.data), interleaved per (query, k, theta) and repeated: the median per cell, its
       ratio to "fw", and whether the default method's f is >= every other method's.
batch  The default method's batched sweep (:func:`divopt_rag.solvers.ws_multistart.ws_multistart_sweep`)
       and batched FW (:func:`divopt_rag.solvers.batched_fw.fw_sweep`) over ``--batch-queries``
       queries x ``--batch-thetas`` thetas vs the same problems run one by one on the same pool,
       plus the agreement of the k-sets.

Writes to ``--out``: ``quality_small.parquet``/``.csv`` (one tidy row per (dataset, query,
theta, method) with the run id, a hash of the arguments), ``quality_large.parquet``/``.csv``,
``quality_summary.csv`` (per method, proven instances only: hit rate, mean / p95 / max gap,
time), ``quality.json`` (summaries, batch result, target checks, environment).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from divopt_rag.data import load as load_dataset
from divopt_rag.experiments import harness

__all__ = ["add_arguments", "main", "run_small", "run_large", "run_batch", "summarize"]

# benchmark rows that are a registered method with fixed parameters
DEFAULT_METHODS = ("fw", "fw_ws", "fw_ls", "fw_ms", "fw_ws_ms", "topk", "mmr", "mmr_ls", "gmmr", "dpp", "dartboard", "vrsd")
# the large-pool part: the paper's fw (every ratio is to it), divopt's FW variants and the default,
# and the published greedy baselines (the default's objective is compared with all of them)
LARGE_METHODS = ("fw", "fw_ws", "fw_ls", "fw_ms", "fw_ws_ms", "mmr", "gmmr", "dpp", "dartboard", "vrsd")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--parts", type=harness.str_list, default=["small", "large", "batch"], help="small,large,batch (default all)")
    p.add_argument("--methods", type=harness.str_list, default=None, help=f"selectors (default: {','.join(DEFAULT_METHODS)})")
    p.add_argument("--default-method", default=None,
                   help="the method whose targets are checked (default: divopt_rag.solvers.DEFAULT_METHOD)")
    # small pools
    p.add_argument("--queries", type=int, default=25, help="WordNet query words (default 25)")
    p.add_argument("--theta", type=harness.float_list, default=[0.3, 0.5, 0.7, 0.9], help="thetas of the small-pool set")
    p.add_argument("--pool", type=int, default=100, help="pool size per query (default 100)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--corpus-size", type=int, default=3000, help="WordNet glosses embedded (default 3000)")
    p.add_argument("--exclude-seeds", type=harness.int_list, default=[],
                   help="held-out evaluation: leave out every query word that these seeds draw ("
                        "--exclude-queries words each), e.g. the seeds a method was tuned on (default none)")
    p.add_argument("--exclude-queries", type=int, default=25,
                   help="query words per excluded seed (default 25, the size of the tuning runs)")
    p.add_argument("--solver", default="auto", help="exact solver (default auto: Gurobi if the license allows)")
    p.add_argument("--time-limit", type=float, default=120.0, help="exact solver time limit per instance (s)")
    p.add_argument("--exact-threads", type=int, default=None, help="exact solver threads (default: the solver's)")
    p.add_argument("--mip-gap", type=float, default=1e-7, help="relative MIP gap asked of the exact solver")
    p.add_argument("--hit-tol", type=float, default=1e-7, help="normalized gap counted as a hit (default 1e-7)")
    p.add_argument("--cache-dir", type=Path, default=Path("results/cache"), help="embedding cache")
    # large pools
    p.add_argument("--large-n", type=int, default=100_000)
    p.add_argument("--large-d", type=int, default=384)
    p.add_argument("--large-k", type=harness.int_list, default=[10], help="selection sizes of the large part (default 10)")
    p.add_argument("--large-queries", type=int, default=2)
    p.add_argument("--large-theta", type=harness.float_list, default=[0.3, 0.5, 0.7, 0.9])
    p.add_argument("--large-methods", type=harness.str_list, default=list(LARGE_METHODS),
                   help="methods timed on the large pools; fw = the paper's Algorithm 1, the ratios are to it")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per large-pool cell (median)")
    # batch
    p.add_argument("--batch-n", type=int, default=100_000)
    p.add_argument("--batch-queries", type=int, default=16)
    p.add_argument("--batch-thetas", type=harness.float_list, default=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: on a loaded 2-core machine small kernels are 10x slower "
                        "with 2; 0 = torch's choice)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("results/quality"))


# ---- parts -----------------------------------------------------------------------------------
def run_small(args, methods: list[str], run_id: str) -> pd.DataFrame:
    from divopt_rag.solvers import select
    from divopt_rag.solvers.exact import solve_exact

    data = load_dataset({"name": "wordnet_glosses", "n_queries": args.queries, "corpus_size": args.corpus_size,
                         "seed": args.seed, "embed_cache": str(args.cache_dir)})
    held_out = tuning_words(getattr(args, "exclude_queries", 25), getattr(args, "exclude_seeds", None) or [])
    todo = [(qi, w) for qi, w in enumerate(data.query_ids) if w not in held_out]
    rows = []
    bar = tqdm(total=len(todo) * len(args.theta), desc="quality small pools")
    for qi, word in todo:
        base, _ = harness.query_instance(data, qi)
        pool, _ = base.replace(k=args.k, theta=args.theta[0]).top_n(args.pool)
        for theta in args.theta:
            inst = pool.replace(theta=theta)
            sels = {m: select(inst, m) for m in methods}
            warm = max(sels.values(), key=lambda s: s.objective).indices  # the proof of the bound is the solver's own
            ex = _exact_cached(inst, args, warm, solve_exact)
            proven = ex.proven_optimal
            opt = harness.best_known(ex.objective, [s.objective for s in sels.values()])
            beaten = ex.objective is None or opt > ex.objective + 1e-9
            for m, s in sels.items():
                rows.append(dict(
                    run_id=run_id, dataset="wordnet-minilm", query=word, theta=theta, k=args.k, n=inst.n,
                    method=m, objective=s.objective, optimum=opt, bound=ex.bound, proven_optimal=proven,
                    **harness.gap_record(s.objective, optimum=opt, bound=ex.bound, proven=proven, k=args.k,
                                         tol=args.hit_tol),
                    exact_objective=ex.objective, exact_status=ex.status, exact_solver=ex.solver,
                    exact_seconds=ex.seconds, opt_from_fast_method=beaten, seconds=s.seconds, iterations=s.iterations,
                ))
            bar.update(1)
            bar.set_postfix_str(f"{word} theta={theta} exact={ex.status} {ex.seconds:.2f}s")
    bar.close()
    df = pd.DataFrame(rows)
    df["exact_hit"] = df["exact_hit"].astype("boolean")
    return df


def tuning_words(n_queries: int, seeds) -> set[str]:
    """The query words that ``wordnet_glosses`` draws for each of ``seeds`` (n_queries words each):
    the words a held-out run leaves out."""
    from divopt_rag.data import load_wordnet_glosses

    return {w for s in seeds for w in load_wordnet_glosses(n_queries, 0, seed=int(s)).query_ids}


def _exact_cached(inst, args, warm, solve_exact):
    """Exact solve (a runner Result), cached on disk by a hash of (E, relevance, k, theta, solver settings)."""
    import hashlib

    from divopt_rag.models.runner import Result, relative_gap

    h = hashlib.sha1()
    for t in (inst.E, inst.relevance):
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(f"{inst.k}|{inst.theta!r}|{args.solver}|{args.time_limit}|{args.mip_gap}".encode())
    path = Path(args.cache_dir) / "exact" / f"{h.hexdigest()}.json"
    if path.exists():
        d = json.loads(path.read_text())
        return Result(indices=np.asarray(d["indices"], dtype=np.int64), objective=d["objective"], bound=d["bound"],
                      gap=relative_gap(d["objective"], d["bound"]), status=d["status"], seconds=d["seconds"],
                      solver=d["solver"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = solve_exact(inst, solver=args.solver, time_limit=args.time_limit, mip_gap=args.mip_gap, warm_start=warm,
                        threads=getattr(args, "exact_threads", None))
    out = dict(indices=[int(i) for i in r.indices], objective=r.objective, bound=r.bound, status=r.status,
               seconds=r.seconds, solver=r.solver)
    harness.write_text(json.dumps(out), path)
    return r


def summarize(df: pd.DataFrame, certified_only: bool = True) -> pd.DataFrame:
    """Per method: :func:`divopt_rag.experiments.harness.quality_summary` (rows, hit rate, mean / p95 /
    max normalized gap, seconds), best first. With ``certified_only`` only instances whose
    optimum the exact solver proved are counted."""
    if certified_only:
        df = df[df["proven_optimal"].astype(bool)]
    out = harness.quality_summary(df, "method")
    return out.sort_values(["hit_rate", "mean_gap"], ascending=[False, True]).reset_index(drop=True)


def _queries_near(q: np.ndarray, m: int, seed: int, spread: float = 0.5) -> np.ndarray:
    """m unit queries around q (the first is q itself): q + spread * random unit direction."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((m, q.size))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    Qm = q[None, :] + spread * Z
    Qm[0] = q
    return (Qm / np.linalg.norm(Qm, axis=1, keepdims=True)).astype(np.float32)


def _pool(n: int, d: int, seed: int):
    data = load_dataset("synthetic", n=n, d=d, n_queries=1, seed=seed)
    return torch.from_numpy(data.E), data.Q[0]


def run_large(args, run_id: str, default_method: str, pool=None) -> pd.DataFrame:
    """Every large-pool method on each (query, k, theta), interleaved and repeated; one tidy row per
    (query, k, theta, method) with the median time, its ratio to the paper's "fw", the gain in f
    over it, and whether the default method's f is >= every other method's (``default_wins``,
    the same for all rows of a cell; ``default_wins_but_fw_ms`` leaves out "fw_ms")."""
    from divopt_rag.models import Instance
    from divopt_rag.solvers import select

    E, q = pool if pool is not None else _pool(args.large_n, args.large_d, args.seed)
    Qm = _queries_near(q, args.large_queries, args.seed + 1)
    methods = list(args.large_methods)
    for m in methods:  # warm-up (first touch of E, BLAS initialization)
        select(Instance(E, Qm[0], k=args.large_k[0], theta=0.5), m)
    rows = []
    cells = [(qi, k, th) for qi in range(len(Qm)) for k in args.large_k for th in args.large_theta]
    bar = tqdm(total=len(cells) * args.repeats * len(methods), desc=f"quality large n={E.shape[0]}")
    for qi, k, th in cells:
        inst = Instance(E, Qm[qi], k=k, theta=th)
        times = {m: [] for m in methods}
        last = {}
        for _ in range(args.repeats):  # interleaved, so load spikes hit every method alike
            for m in methods:
                s_ = select(inst, m)
                times[m].append(s_.seconds)
                last[m] = s_
                bar.update(1)
                bar.set_postfix_str(f"q{qi} k={k} theta={th} {m}")
        scale = harness.objective_scale(k)
        tol = 1e-9 * scale
        dm = last.get(default_method)
        others = {m: s_.objective for m, s_ in last.items() if m != default_method}
        wins = None if dm is None else bool(all(dm.objective >= v - tol for v in others.values()))
        wins_but = None if dm is None else bool(all(dm.objective >= v - tol for m, v in others.items() if m != "fw_ms"))
        for m in methods:
            rows.append(dict(
                run_id=run_id, dataset=f"narrow_cone-{E.shape[0]}x{E.shape[1]}", query=qi, theta=th,
                k=k, n=E.shape[0], d=E.shape[1], method=m, seconds=statistics.median(times[m]),
                seconds_all=json.dumps([round(t, 5) for t in times[m]]), objective=last[m].objective,
                iterations=last[m].iterations, passes=last[m].info.get("passes"),
                default_wins=wins, default_wins_but_fw_ms=wins_but,
            ))
    bar.close()
    df = pd.DataFrame(rows)
    key = ["query", "k", "theta"]
    fw = df[df.method == "fw"].set_index(key)
    df["ratio_to_fw"] = [r.seconds / fw.loc[(r.query, r.k, r.theta), "seconds"] for r in df.itertuples()]
    df["gain_over_fw"] = [(r.objective - fw.loc[(r.query, r.k, r.theta), "objective"]) / harness.objective_scale(r.k)
                          for r in df.itertuples()]
    return df


def large_summary(dfl: pd.DataFrame, default_method: str) -> tuple[pd.DataFrame, dict]:
    """Per method: median / mean seconds, median and max ratio to fw, mean gain over fw; and the
    default method's targets (time <= 3x fw per cell and per theta, f >= every other method's)."""
    g = dfl.groupby("method", sort=False)
    large = pd.DataFrame({"median_seconds": g["seconds"].median(), "mean_seconds": g["seconds"].mean(),
                          "median_ratio_to_fw": g["ratio_to_fw"].median(), "max_ratio_to_fw": g["ratio_to_fw"].max(),
                          "mean_gain_over_fw": g["gain_over_fw"].mean()}).reset_index()
    targets: dict = {}
    d = dfl[dfl.method == default_method]
    if len(d):
        by_theta = dfl.groupby(["theta", "method"])["seconds"].median().unstack("method")
        rt = by_theta[default_method] / by_theta["fw"]
        cells = d.drop_duplicates(["query", "k", "theta"])
        targets.update({
            "time<=3x_fw(per cell)": {"max": float(d.ratio_to_fw.max()), "median": float(d.ratio_to_fw.median()),
                                      "met": bool((d.ratio_to_fw <= 3).all())},
            "time<=3x_fw(per theta median)": {"ratios": {f"{t:g}": float(v) for t, v in rt.items()},
                                              "met": bool((rt <= 3).all())},
            "f>=every_other_method": {"rate": float(cells.default_wins.mean()), "target": ">= 0.95",
                                      "met": bool(cells.default_wins.mean() >= 0.95)},
            "f>=every_other_method_but_fw_ms": {"rate": float(cells.default_wins_but_fw_ms.mean())},
        })
    return large, targets


def run_batch(args, run_id: str, default_method: str, pool=None) -> dict:
    """Batched runs vs the same problems run one by one (Q queries x T thetas, first --large-k).

    The default method's batch (:func:`divopt_rag.solvers.ws_multistart.ws_multistart_sweep`: the
    passes over the pool as GEMMs, the searches as (problems x sets) arrays) vs its single runs;
    and batched FW: "fw_ws" singles vs the working-set batch (both certified by a full-pool FW
    gap), "fw_topk" singles (full pool) vs the full-pool batch, which follows their iterates.
    """
    from divopt_rag.models import Instance
    from divopt_rag.models.kernels import synchronize
    from divopt_rag.solvers import select
    from divopt_rag.solvers.batched_fw import fw_sweep
    from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

    E, q = pool if pool is not None else _pool(args.batch_n, args.large_d, args.seed)
    Qm = _queries_near(q, args.batch_queries, args.seed + 2)
    thetas = list(args.batch_thetas)
    k = args.large_k[0]
    base = Instance(E, Qm[0], k=k, theta=0.5)
    fw_sweep(base, Qm[:2], thetas[:2], working_set="auto")  # warm-up
    select(base, "fw_ws")
    select(base, default_method)
    out = dict(run_id=run_id, n=int(E.shape[0]), d=int(E.shape[1]), k=k, queries=len(Qm), thetas=thetas,
               problems=len(Qm) * len(thetas))
    sweeps = [("batched_ws", lambda: fw_sweep(base, Qm, thetas, working_set="auto"), "fw_ws"),
              ("batched_full", lambda: fw_sweep(base, Qm, thetas, working_set=0), "fw_topk")]
    if default_method == "fw_ws_ms":
        sweeps.insert(0, ("batched_default", lambda: ws_multistart_sweep(base, Qm, thetas), default_method))
    for batch_name, sweep, single_name in sweeps:
        synchronize(base.device)
        t0 = time.perf_counter()
        swept = sweep()
        synchronize(base.device)
        t_batch = time.perf_counter() - t0
        res, qidx = swept[0], swept[1]
        th = np.tile(np.asarray(thetas), len(Qm))
        t_total, agree, diffs = 0.0, 0, []
        for b in tqdm(range(len(qidx)), desc=f"quality batch: single {single_name} runs"):
            s_ = select(Instance(E, Qm[qidx[b]], k=k, theta=float(th[b])), single_name)
            t_total += s_.seconds
            agree += set(s_.indices.tolist()) == set(np.asarray(res.indices[b]).tolist())
            diffs.append((float(res.objectives[b]) - s_.objective) / harness.objective_scale(k))
        entry = dict(batched_seconds=t_batch, single_method=single_name, single_seconds=t_total,
                     speedup=t_total / t_batch, same_sets=agree, mean_normalized_objective_diff=float(np.mean(diffs)),
                     min_normalized_objective_diff=float(np.min(diffs)))
        if hasattr(res, "iterations"):
            entry.update(iterations_max=int(res.iterations.max()), iterations_mean=float(res.iterations.mean()),
                         all_converged=bool(res.converged.all()))
        else:
            entry["stage_seconds"] = res.seconds
        out[batch_name] = entry
    return out


# ---- entry point -----------------------------------------------------------------------------
def main(args: argparse.Namespace) -> int:
    from divopt_rag.solvers import METHODS

    if args.threads:
        torch.set_num_threads(args.threads)
    methods = list(args.methods or [m for m in DEFAULT_METHODS if m in METHODS])
    unknown = [m for m in methods + list(args.large_methods) if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; expected some of {sorted(METHODS)}")
    bad = set(args.parts) - {"small", "large", "batch"}
    if bad:
        raise ValueError(f"unknown parts {sorted(bad)}; expected small, large, batch")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    run_id = harness.run_id(vars(args), exclude=("out", "cache_dir"))
    report: dict = {"run_id": run_id, "args": {k: str(v) for k, v in vars(args).items() if not k.startswith("_")},
                    "environment": dict(python=platform.python_version(), torch=torch.__version__,
                                        threads=torch.get_num_threads(), cpus=os.cpu_count(),
                                        machine=platform.machine(),
                                        load_average=os.getloadavg() if hasattr(os, "getloadavg") else None)}
    targets: dict = {}
    from divopt_rag.solvers import DEFAULT_METHOD

    dm = args.default_method or DEFAULT_METHOD
    if "small" in args.parts:
        df = run_small(args, methods, run_id)
        harness.write_parquet(df, out / "quality_small.parquet")
        df.to_csv(out / "quality_small.csv", index=False)
        summ = summarize(df)
        summ.to_csv(out / "quality_summary.csv", index=False)
        report["small_summary"] = summ.to_dict(orient="records")
        report["small_exact_status"] = df.drop_duplicates(["query", "theta"])["exact_status"].value_counts().to_dict()
        print(summ.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        if dm in set(summ.method):
            r = summ.set_index("method").loc[dm]
            targets["hit_rate>=0.95"] = {"value": float(r.hit_rate), "met": bool(r.hit_rate >= 0.95)}
            targets["mean_gap<=1e-4"] = {"value": float(r.mean_gap), "met": bool(r.mean_gap <= 1e-4)}
    pool = None
    if "large" in args.parts or "batch" in args.parts:
        if args.batch_n == args.large_n or "batch" not in args.parts:
            pool = _pool(args.large_n, args.large_d, args.seed)
    if "large" in args.parts:
        dfl = run_large(args, run_id, dm, pool)
        harness.write_parquet(dfl, out / "quality_large.parquet")
        dfl.to_csv(out / "quality_large.csv", index=False)
        large, large_targets = large_summary(dfl, dm)
        report["large_summary"] = large.to_dict(orient="records")
        print(large.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        targets.update(large_targets)
    if "batch" in args.parts:
        bpool = pool if (pool is not None and args.batch_n == args.large_n) else None
        b = run_batch(args, run_id, dm, bpool)
        report["batch"] = b
        print(json.dumps(b, indent=1, default=str))
        if "batched_default" in b:
            targets["batched_default>=10x_singles"] = {"speedup": b["batched_default"]["speedup"],
                                                       "same_sets": b["batched_default"]["same_sets"],
                                                       "met": bool(b["batched_default"]["speedup"] >= 10)}
        targets["batched_full>=5x_single_fw_topk"] = bool(b["batched_full"]["speedup"] >= 5.0)
    report["environment"]["load_average_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    report["targets"] = targets
    harness.write_text(json.dumps(report, indent=1, default=str), out / "quality.json")
    print("targets:", json.dumps(targets, indent=1))
    print(f"wrote {out}/quality_*.csv, quality.json (run {run_id})")
    return 0
