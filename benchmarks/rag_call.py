"""The RAG call: the default method ("fw_ws_ms") against MMR on a retriever's top-n pool, real MiniLM embeddings.

Not part of the package. The pool of one call is the top ``--n`` (default 1000) rows, by relevance
c = E q, of ``--corpus`` WordNet noun glosses embedded with the offline all-MiniLM-L6-v2
(``divopt_rag.data.load_wordnet_glosses`` + ``embed_dataset``, cached under ``--cache-dir``); the
queries are the corpus's query words. Per (query, theta) it times ``select(inst)`` (the default),
``select(inst, "mmr")`` and LangChain's ``maximal_marginal_relevance`` (langchain_core, on the
same rows as a numpy array, lambda_mult = theta) in the same process, in rotating order per repeat,
on ``--threads`` torch threads (BLAS and numba threads 1), and records wall and process-CPU seconds of each, the
default's set and objective, MMR's objective, and the default's info (phase, passes, stage
seconds). Writes ``rag_call.csv`` (one row per call), ``rag_call_summary.csv`` (median ms per
theta, the medians of the per-instance ratios default / MMR and default / LangChain) and ``rag_call.json`` (command,
load average, machine, device).

    python benchmarks/rag_call.py --out benchmarks/results/speed/rag_call --threads 1
    python benchmarks/rag_call.py --device cuda --out ...          # the GPU check
    PYTHONPATH=<shim of another checkout> python benchmarks/rag_call.py ...   # a before/after run

Tuning words (``--seed 0``, the development words of ``bench quality``) and reporting words (any
other seed, with the development words left out by ``--exclude-seeds``) are kept apart.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread everywhere (torch's is set by --threads)

import numpy as np


def pools(args):
    """(E (corpus, d) float32, Q (m, d), words): the embedded corpus and its query words."""
    from divopt_rag.data import load_wordnet_glosses
    from divopt_rag.data.embed import embed_dataset

    ds = load_wordnet_glosses(args.queries, args.corpus, seed=args.seed)
    E, Q = embed_dataset(ds, None, args.cache_dir, show_progress=False)
    words = list(ds.query_ids)
    if args.exclude_seeds:
        held = {w for s in args.exclude_seeds.split(",") for w in load_wordnet_glosses(args.queries, 0, seed=int(s)).query_ids}
        keep = [i for i, w in enumerate(words) if w not in held]
        Q, words = Q[keep], [words[i] for i in keep]
    return np.asarray(E, dtype=np.float32), np.asarray(Q, dtype=np.float32), words


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--n", type=int, default=1000, help="pool rows per call (the retriever's top-n)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--thetas", default="0.3,0.5,0.7,0.9")
    p.add_argument("--corpus", type=int, default=10000, help="WordNet glosses embedded")
    p.add_argument("--queries", type=int, default=30, help="query words drawn")
    p.add_argument("--seed", type=int, default=5, help="draws the words and the corpus")
    p.add_argument("--exclude-seeds", default="0,1,2,3", help="leave out the words these seeds draw (tuning words)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--cache-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "divopt", "embeddings"))
    args = p.parse_args()

    import pandas as pd
    import torch

    from divopt_rag.models import Instance
    from divopt_rag.models.kernels import synchronize
    from divopt_rag.solvers import select

    try:
        from langchain_core.vectorstores.utils import maximal_marginal_relevance as lc_mmr
    except ImportError:  # the comparison is skipped without langchain_core
        lc_mmr = None

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {"command": " ".join(os.sys.argv), "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
           "load_average_start": os.getloadavg(), "cpus": os.cpu_count(), "machine": platform.platform(),
           "torch": torch.__version__, "threads": args.threads, "device": args.device,
           "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None}
    E_all, Q, words = pools(args)
    dev, dtype = torch.device(args.device), getattr(torch, args.dtype)
    E_t = torch.from_numpy(E_all)
    thetas = [float(t) for t in args.thetas.split(",")]
    rows = []
    warm = True
    for qi, word in enumerate(words):
        q = torch.from_numpy(Q[qi])
        top = torch.topk(E_t @ q, args.n).indices
        E = E_t.index_select(0, top).to(device=dev, dtype=dtype).contiguous()
        for th in thetas:
            inst = Instance(E, q.to(dev), k=args.k, theta=th, normalize=dtype != torch.float32)
            E_np, q_np = E.cpu().numpy(), q.numpy()
            run = {"default": lambda: select(inst), "mmr": lambda: select(inst, "mmr")}
            if lc_mmr is not None:
                run["langchain"] = lambda: lc_mmr(q_np, E_np, lambda_mult=th, k=args.k)
            if warm:  # first call of the process: library, kernel cache and BLAS warm-up, outside the timings
                for fn in run.values():
                    fn()
                warm = False
            times = {m: [] for m in run}
            names = list(run)
            for r in range(args.repeats):
                for m in names[r % len(names):] + names[: r % len(names)]:
                    synchronize(dev)
                    wall, cpu = time.perf_counter(), time.process_time()
                    sel = run[m]()
                    synchronize(dev)
                    times[m].append((time.perf_counter() - wall, time.process_time() - cpu))
                    if m == "default":
                        d_sel = sel
                    elif m == "mmr":
                        m_sel = sel
            med = {m: np.median(np.array(v), axis=0) for m, v in times.items()}
            lc = med.get("langchain", (np.nan, np.nan))
            rows.append(dict(word=word, theta=th, n=args.n, k=args.k, default_ms=1e3 * med["default"][0],
                             mmr_ms=1e3 * med["mmr"][0], langchain_ms=1e3 * lc[0], default_cpu_ms=1e3 * med["default"][1],
                             mmr_cpu_ms=1e3 * med["mmr"][1], langchain_cpu_ms=1e3 * lc[1],
                             default_objective=d_sel.objective,
                             mmr_objective=m_sel.objective, indices=" ".join(map(str, sorted(d_sel.indices.tolist()))),
                             phase=d_sel.info.get("phase"), passes=d_sel.info.get("passes"),
                             guided=d_sel.info.get("guided"),
                             stage_seconds=json.dumps(d_sel.info.get("seconds", {}))))
        print(f"{qi + 1}/{len(words)} {word} load {os.getloadavg()[0]:.1f}", flush=True)
    df = pd.DataFrame(rows)
    df["ratio"] = df.default_ms / df.mmr_ms
    df["lc_ratio"] = df.default_ms / df.langchain_ms
    df["cpu_ratio"] = df.default_cpu_ms / df.mmr_cpu_ms
    df.to_csv(out / "rag_call.csv", index=False)
    agg = dict(default_ms=("default_ms", "median"), mmr_ms=("mmr_ms", "median"), langchain_ms=("langchain_ms", "median"),
               ratio=("ratio", "median"), lc_ratio=("lc_ratio", "median"), default_cpu_ms=("default_cpu_ms", "median"),
               mmr_cpu_ms=("mmr_cpu_ms", "median"), langchain_cpu_ms=("langchain_cpu_ms", "median"),
               cpu_ratio=("cpu_ratio", "median"), calls=("word", "size"))
    summary = df.groupby("theta").agg(**agg)
    summary.loc["all"] = [df[col].median() if how == "median" else len(df) for col, how in agg.values()]
    summary.to_csv(out / "rag_call_summary.csv")
    env.update(finished_utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), load_average_end=os.getloadavg())
    (out / "rag_call.json").write_text(json.dumps(env, indent=1))
    print(summary.round(3).to_string())


if __name__ == "__main__":
    main()
