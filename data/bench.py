"""Data-layer benchmark: encoding throughput with a cold and a warm cache, BM25 pooling, and
chunked synthetic generation. Writes one tidy row per measurement to parquet.

    python -m divopt_rag.data.bench --out results/data_bench.parquet [--synthetic-n 1000000 --synthetic-d 1024]

Rows: run_id, host, stage, dataset, n, d, params, seconds, per_second, peak_rss_mb.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["run", "main", "wordnet_sense_stats"]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def wordnet_sense_stats(ds, E: np.ndarray, Q: np.ndarray, k: int = 10):
    """Per word of the WordNet benchmark: senses, labelled passages, mean cosine between
    passages of the same sense and of different senses, and how many senses / relevant
    passages the top-k by relevance c = E q covers (what diversification should improve)."""
    import pandas as pd

    rows = []
    for j, qid in enumerate(ds.query_ids):
        labels = ds.subtopics_for(qid)
        idx = ds.passage_indices(labels)
        lab = np.array([labels[p] for p in labels])
        S = E[idx] @ E[idx].T
        same = lab[:, None] == lab[None, :]
        off = ~np.eye(len(idx), dtype=bool)
        top = np.argsort(-(E @ Q[j]), kind="stable")[:k]
        top_labels = [labels.get(ds.passage_ids[i]) for i in top]
        rows.append(
            {
                "query_id": qid,
                "senses": len(set(lab)),
                "passages": len(idx),
                "cos_within_sense": float(S[same & off].mean()) if (same & off).any() else float("nan"),
                "cos_across_senses": float(S[~same].mean()),
                f"senses_in_top{k}": len({t for t in top_labels if t is not None}),
                f"relevant_in_top{k}": sum(t is not None for t in top_labels),
            }
        )
    return pd.DataFrame(rows)


def run(out: str | Path, *, synthetic_n: int = 200_000, synthetic_d: int = 1024, wordnet_words: int | None = None, seed: int = 0):
    import pandas as pd

    from .embed import embed, load_model
    from .atomic import atomic_write
    from .pools import BM25Index, bm25_pool
    from .hashing import stable_hash
    from .synthetic import narrow_cone_npy
    from .wordnet import load_wordnet

    # a hash of the configuration, as every divopt run id (divopt_rag.experiments.engine.store.run_id)
    run_id = stable_hash(dict(synthetic_n=synthetic_n, synthetic_d=synthetic_d, wordnet_words=wordnet_words, seed=seed), 12)
    rows = []

    def record(stage, dataset, n, d, params, seconds, items):
        rows.append(
            {
                "run_id": run_id,
                "host": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cpu)",
                "stage": stage,
                "dataset": dataset,
                "n": int(n),
                "d": int(d),
                "params": json.dumps(params, sort_keys=True),
                "seconds": float(seconds),
                "per_second": float(items / seconds) if seconds > 0 else float("inf"),
                "peak_rss_mb": _rss_mb(),
            }
        )
        print(f"{stage:>24} {dataset:>28} n={n:<8} {seconds:8.3f} s  {items / max(seconds, 1e-9):12.1f}/s")

    # first, so that peak_rss_mb (a process-wide maximum) reflects the streamed generation alone
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        E, q, labels = narrow_cone_npy(Path(tmp) / "E.npy", synthetic_n, synthetic_d, seed=seed, show_progress=None)
        record("narrow_cone_npy", "narrow_cone", synthetic_n, synthetic_d, {"seed": seed, "dtype": "float32"},
               time.perf_counter() - t, synthetic_n)
        del E

    t = time.perf_counter()
    ds = load_wordnet(n_words=wordnet_words) if wordnet_words else load_wordnet()
    record("wordnet_build", ds.name, ds.n_passages, 0, {"n_queries": ds.n_queries}, time.perf_counter() - t, ds.n_passages)

    t = time.perf_counter()
    model = load_model()
    record("model_load", "all-MiniLM-L6-v2", 0, 384, {}, time.perf_counter() - t, 1)
    texts = ds.texts
    with tempfile.TemporaryDirectory() as cache:
        for cache_dtype in ("float32", "float16"):
            for phase in ("cold", "warm"):
                t = time.perf_counter()
                E = embed(texts, model, cache, cache_dtype=cache_dtype, show_progress=False)
                record(f"embed_{phase}", ds.name, len(texts), E.shape[1], {"cache_dtype": cache_dtype, "batch_size": 64},
                       time.perf_counter() - t, len(texts))

    Q = embed(ds.queries, model, show_progress=False)
    stats = wordnet_sense_stats(ds, E, Q)
    stats.insert(0, "run_id", run_id)
    print(stats.round(3).to_string(index=False))
    print("mean:", stats.mean(numeric_only=True).round(3).to_dict())

    t = time.perf_counter()
    index = BM25Index(ds)
    record("bm25_index", ds.name, ds.n_passages, 0, {}, time.perf_counter() - t, ds.n_passages)
    t = time.perf_counter()
    pools = bm25_pool(ds, n=100, index=index)
    record("bm25_pool", ds.name, ds.n_passages, 0, {"n": 100, "queries": len(pools)}, time.perf_counter() - t, len(pools))

    frame = pd.DataFrame(rows)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for path, table in ((out, frame), (out.with_name(out.stem + "_wordnet.parquet"), stats)):
        atomic_write(path, lambda fh, table=table: table.to_parquet(fh, index=False))  # never half a file
    return frame, stats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/data_bench.parquet")
    p.add_argument("--synthetic-n", type=int, default=200_000)
    p.add_argument("--synthetic-d", type=int, default=1024)
    p.add_argument("--wordnet-words", type=int, default=None, help="top-N polysemous nouns instead of the default 20")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    run(a.out, synthetic_n=a.synthetic_n, synthetic_d=a.synthetic_d, wordnet_words=a.wordnet_words, seed=a.seed)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
