"""The RAG call's knobs on the development words: can a knob setting, rather than the design, meet 5 ms?

Not part of the package. Top-1000 of 10000 WordNet glosses (MiniLM), k = 10, the 12 development
words (seed 0: never the reported words), theta .3/.5/.7, one thread; per variant the median
process-CPU ms of a warm call and how many calls keep the default's f. Writes rag_call_knobs.csv.

    python benchmarks/rag_call_knobs.py --out benchmarks/results/speed/rag_call_knobs
"""
import os, sys, time
for v in ("OMP_NUM_THREADS","MKL_NUM_THREADS","OPENBLAS_NUM_THREADS","NUMBA_NUM_THREADS"): os.environ.setdefault(v,"1")
import argparse
import numpy as np, pandas as pd, torch
ap = argparse.ArgumentParser(); ap.add_argument('--out', required=True); args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
torch.set_num_threads(1)
from divopt_rag.data import load_wordnet_glosses
from divopt_rag.data.embed import embed_dataset
from divopt_rag.models import Instance
from divopt_rag.solvers import select
ds = load_wordnet_glosses(12, 10000, seed=0)  # development words
E, Q = embed_dataset(ds, None, os.path.expanduser("~/.cache/divopt/embeddings"), show_progress=False)
E, Q = np.asarray(E, np.float32), np.asarray(Q, np.float32)
variants = {"default": {}, "gp300": dict(guided_pool_size=300), "gp300_w3": dict(guided_pool_size=300, tabu_walks=3), "w3": dict(tabu_walks=3)}
res = {v: [] for v in variants}
for qi in range(Q.shape[0]):
    top = np.argsort(-(E @ Q[qi]), kind="stable")[:1000]
    Et = torch.from_numpy(np.ascontiguousarray(E[top])); q = torch.from_numpy(Q[qi])
    for th in (0.3, 0.5, 0.7):
        inst = Instance(Et, q, k=10, theta=th)
        for v, kw in variants.items():
            select(inst, **kw)
            t = time.process_time(); s = select(inst, **kw); dt = time.process_time() - t
            res[v].append((th, dt * 1e3, s.objective))
base = np.array([r[2] for r in res["default"]])
for v in variants:
    a = np.array(res[v])
    print(v, "median ms", np.median(a[:, 1]).round(1), "by theta", [np.median(a[a[:, 0] == t, 1]).round(1) for t in (0.3, 0.5, 0.7)],
          "f>=default", int((a[:, 2] >= base - 1e-9 * np.abs(base)).sum()), "/", len(a), "mean df", (a[:, 2] - base).mean())
rows = [dict(variant=v, theta=th, cpu_ms=ms, objective=f, f_ge_default=bool(f >= b - 1e-9 * abs(b)))
        for v in variants for (th, ms, f), b in zip(res[v], base)]
pd.DataFrame(rows).to_csv(os.path.join(args.out, "rag_call_knobs.csv"), index=False)
