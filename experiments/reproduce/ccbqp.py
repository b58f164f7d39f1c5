"""Recipes of the CCBQP paper (Lu & Sidiropoulos, "Principled and Scalable Diversity-Aware
Retrieval via Cardinality-Constrained Binary Quadratic Programming", arXiv:2604.02554v1).

* ``ccbqp-pareto`` (Fig. 1): answer recall@k against ILAD on QAMPARI for FW (the paper's
  Algorithm 1, ``fw``), MMR, greedy DPP over theta in {0.1, ..., 0.9} and top-k, k in
  {25, 50, 100}. The paper's pool is the union of BM25 top-3000 passages per question from the
  DPR Wikipedia dump (``psgs_w100.tsv``, the authors' ``encode_qampari.py``) embedded with BGE-M3:
  give ``--corpus`` (and ``--model`` a local BGE-M3) for that; without a corpus the pool is the
  questions' proof passages (divopt's small-scale stand-in, labelled ``qampari-dev (proofs)``).
* ``ccbqp-latency`` (latency vs k): wall-clock time of FW, MMR, DPP and top-k on a pool of
  n x d unit rows (a synthetic narrow cone of the given shape, labelled as such; FW's iteration
  count depends on the data, the greedy methods' time does not).
* ``ccbqp-generation`` (Tables 1-2): an LLM answers from each method's top-k; list precision,
  recall and F1 of the answers (QAMPARI's answer-list metric) on QAMPARI (Table 1) and ASQA
  (Table 2). The paper's generation prompt, k and theta for these tables could not be read from a
  stored copy: divopt's list prompt (template ``ccbqp``) and the grid below, which ``--set``
  changes. ``--retrieval-only`` reports the answer recall of the same contexts.
"""
from __future__ import annotations

import re
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd
import torch

from divopt_rag.data import bm25_pool, load_asqa, load_qampari, narrow_cone, stable_hash, union_pool
from divopt_rag.data import EmbeddedDataset
from divopt_rag.experiments.plots import plot_latency, plot_pareto, save_figure
from divopt_rag.models import Instance
from divopt_rag.solvers import select

from .data import DatasetPlan, Prepared, first_queries, prepare_text, synthetic_analogue, wordnet_analogue
from .spec import DataNeed, Needs, Options, Recipe, Run
from .steps import Env, answer_scores, query_instance, retrieval_metrics, select_rows
from .tables import mean_table

__all__ = ["PARETO", "LATENCY", "GENERATION", "PAPER_THETAS", "PAPER_KS"]

SOURCE = "arXiv:2604.02554v1"
PAPER = "CCBQP (Lu & Sidiropoulos 2026)"
#: Fig. 1's trade-off grid and retrieval sizes.
PAPER_THETAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
PAPER_KS = (25, 50, 100)

QAMPARI = DataNeed("QAMPARI dev set", "qampari", "dev_data.jsonl", fetch="qampari",
                   url="https://aggreg-qa.s3.amazonaws.com/qampari.zip")
ASQA = DataNeed("ASQA", "asqa", "ASQA.json", fetch="asqa", url="https://storage.googleapis.com/gresearch/ASQA/ASQA.json")


# ---- datasets ---------------------------------------------------------------------------------
def _qa_plan(need: DataNeed, loader, name: str, bm25: int) -> DatasetPlan:
    def build(options: Options) -> Prepared:
        path = need.locate(options.data_dir)
        corpus = options.corpus
        ds = loader(path, "dev", corpus=corpus, limit=options.limit)
        label = f"{name}" if corpus is not None else f"{name} (proofs)"
        if corpus is not None:  # the paper's pool: BM25 top-N per question, merged
            ds = ds.restrict(union_pool(bm25_pool(ds, ds.query_ids, bm25)), name=ds.name)
        # the pool is built from the loaded questions, so a limited run has its own key
        spec = {"name": name, "corpus": None if corpus is None else str(corpus), "bm25": bm25, "limit": options.limit}
        return prepare_text(ds, options, label=label, spec=spec, with_titles=True)

    return DatasetPlan(name, build)


def _pareto_datasets(options: Options) -> list[DatasetPlan]:
    # d = 128 > k: a DPP cannot pick more items than the rank of E E^T
    if options.analogue == "wordnet":
        return [DatasetPlan("wordnet", lambda o: wordnet_analogue(o))]
    if options.analogue == "synthetic":
        return [DatasetPlan("synthetic", lambda o: synthetic_analogue(o, n=2000, d=128, n_queries=16))]
    return [_qa_plan(QAMPARI, load_qampari, "qampari-dev", int(PARETO.param(options, "bm25")))]


# ---- Fig. 1 -----------------------------------------------------------------------------------
def _pareto_execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
    p = run.params
    inst, rows = query_instance(prep, run.query_index, env=env)
    idx, info = select_rows(inst, run.method, k=p["k"], theta=p.get("theta", 1.0), env=env)
    return {"n": inst.n, "seconds": info["seconds"], "objective": info["objective"],
            "selected": [str(inst.ids[i]) for i in idx],
            **retrieval_metrics(prep, run.query_id, inst, rows, idx, ("answer_recall", "ilad"))}


def _pareto_table(rows: pd.DataFrame) -> pd.DataFrame:
    return mean_table(rows, "Fig. 1", ("answer_recall", "ilad"), ("k", "theta"))


def _pareto_plot(rows: pd.DataFrame, out, options: Options) -> list:
    """Fig. 1's panels: answer recall vs ILAD per method over theta, one figure per (dataset, k);
    top-k is drawn as theta = 1 (its limit)."""
    rows = rows.assign(theta=rows["theta"].fillna(1.0)) if "theta" in rows else rows.assign(theta=1.0)
    paths = []
    for (ds, k), g in rows.groupby(["dataset", "k"], sort=False):
        fig, _ = plot_pareto(g, x="ilad", y="answer_recall")
        fig.axes[0].set_title(f"{ds}, k = {k}: answer recall@k vs ILAD over theta")
        slug = re.sub(r"[^0-9A-Za-z]+", "-", str(ds)).strip("-")
        paths += save_figure(fig, out, f"fig1_{slug}_k{k}")
    return paths


PARETO = Recipe(
    name="ccbqp-pareto",
    paper_key="ccbqp",
    paper=PAPER,
    source=SOURCE,
    target="Fig. 1",
    summary="Pareto of answer recall@k vs ILAD over theta in [0.1, 0.9] for FW, MMR, DPP and top-k, k in {25, 50, 100}",
    needs=Needs(data=(QAMPARI,), gpu="for the paper's pool (BM25 top-3000 per question from psgs_w100.tsv)"),
    methods={"topk": {}, "fw": {"theta": PAPER_THETAS}, "mmr": {"theta": PAPER_THETAS}, "dpp": {"theta": PAPER_THETAS}},
    grid={"k": PAPER_KS},
    metrics=("answer_recall", "ilad"),
    datasets=_pareto_datasets,
    execute=_pareto_execute,
    table=_pareto_table,
    layout=(("dataset", "setting"), ("method", "metric")),
    analogues=("wordnet", "synthetic"),
    published_tables=("Fig. 1",),
    params={"bm25": 3000},
    plot=_pareto_plot,
)


# ---- latency vs k -----------------------------------------------------------------------------
def _latency_datasets(options: Options) -> list[DatasetPlan]:
    n, d = int(LATENCY.param(options, "n")), int(LATENCY.param(options, "d"))
    seed = options.seed

    def build(o: Options) -> Prepared:
        E, q, _ = narrow_cone(n, d, seed=seed)
        key = f"narrow-cone-{stable_hash({'n': n, 'd': d, 'seed': seed}, 10)}"
        data = EmbeddedDataset(name="narrow-cone", key=key, E=E, Q=q.reshape(1, -1).astype(np.float32),
                               query_ids=["q0"], doc_ids=np.arange(n))
        return Prepared(label=f"narrow-cone n={n} d={d}", key=key, data=data, analogue=True, queries=first_queries(1, None))

    return [DatasetPlan("narrow-cone", build)]


def _latency_execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
    p = run.params
    opts = env.options
    device = torch.device(LATENCY.param(opts, "device"))
    dtype = getattr(torch, LATENCY.param(opts, "dtype"))
    key = ("latency", prep.key, str(device), str(dtype))
    if key not in env._instances:
        env._instances.clear()  # one pool on the device at a time
        E = torch.from_numpy(np.asarray(prep.data.E)).to(device=device, dtype=dtype)
        env._instances[key] = (Instance(E, torch.from_numpy(np.asarray(prep.data.Q[0])).to(device), k=1, theta=1.0), None)
    base = env._instances[key][0]
    inst = base.replace(k=p["k"], theta=p.get("theta", 1.0))
    select(inst, run.method)  # warm-up, outside the timings
    times, sel = [], None
    for _ in range(int(LATENCY.param(opts, "repeats"))):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        sel = select(inst, run.method)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return {"n": inst.n, "seconds": statistics.median(times), "iterations": sel.iterations,
            "objective": sel.objective, "device": str(device), "dtype": str(dtype).replace("torch.", "")}


def _latency_table(rows: pd.DataFrame) -> pd.DataFrame:
    # the paper's unit: ms (the rows, like every divopt table, hold seconds)
    t = mean_table(rows.assign(ms=1e3 * rows["seconds"]), "latency vs k", ("ms",), ("k", "theta"), agg="median")
    # FW's speed-up over MMR and DPP in the same run, cell by cell
    extra = []
    for (ds, s), g in t[t["metric"] == "ms"].groupby(["dataset", "setting"], sort=False):
        ms = dict(zip(g["method"], g["value"]))
        for other in ("mmr", "dpp"):
            if "fw" in ms and other in ms and ms["fw"] > 0:
                extra.append({"table": "latency vs k", "dataset": ds, "setting": s, "method": "fw",
                              "metric": f"{other}_over_fw", "value": ms[other] / ms["fw"]})
    return pd.concat([t, pd.DataFrame(extra, columns=t.columns)], ignore_index=True) if extra else t


def _latency_plot(rows: pd.DataFrame, out, options: Options) -> list:
    """Latency vs k per method (seconds), one panel per theta, log scale."""
    n, d = int(LATENCY.param(options, "n")), int(LATENCY.param(options, "d"))
    fig, _ = plot_latency(rows.assign(n=n, d=d), value="seconds")
    return save_figure(fig, out, "latency_vs_k")


LATENCY = Recipe(
    name="ccbqp-latency",
    paper_key="ccbqp",
    paper=PAPER,
    source=SOURCE,
    target="latency vs k",
    summary="median wall-clock time of FW, MMR, DPP and top-k vs k on an n x d pool; FW's speed-up over MMR and DPP",
    needs=Needs(gpu="for the paper's scale (--set device=cuda --set n=2000000)"),
    methods={"topk": {}, "fw": {"theta": (0.5, 0.7, 0.9)}, "mmr": {"theta": (0.5, 0.7, 0.9)},
             "dpp": {"theta": (0.5, 0.7, 0.9)}},
    grid={"k": PAPER_KS},
    metrics=("seconds",),
    datasets=_latency_datasets,
    execute=_latency_execute,
    table=_latency_table,
    layout=(("dataset", "setting"), ("method", "metric")),
    published_tables=("latency vs k",),
    params={"n": 100_000, "d": 1024, "repeats": 3, "device": "cpu", "dtype": "float32"},
    plot=_latency_plot,
    notes="synthetic narrow-cone pool of the given shape (labelled analogue): latency depends on n, d, k and the machine",
)


# ---- Tables 1-2 -------------------------------------------------------------------------------
_LIST = ("list_precision", "list_recall", "list_f1")


def _generation_datasets(options: Options) -> list[DatasetPlan]:
    bm25 = int(GENERATION.param(options, "bm25"))
    return [_qa_plan(QAMPARI, load_qampari, "qampari-dev", bm25), _qa_plan(ASQA, load_asqa, "asqa-dev", bm25)]


def _generation_execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
    p = run.params
    inst, rows = query_instance(prep, run.query_index, env=env)
    idx, info = select_rows(inst, run.method, k=p["k"], theta=p.get("theta", 1.0), env=env)
    out: dict[str, Any] = {"n": inst.n, "seconds": info["seconds"], "selected": [str(inst.ids[i]) for i in idx],
                           **retrieval_metrics(prep, run.query_id, inst, rows, idx, ("answer_recall",))}
    if env.llm is not None:
        answer = env.generator(GENERATION.param(env.options, "template")).generate(
            prep.question(run.query_index), prep.texts(rows[idx]))
        out["answer"] = answer
        out.update(answer_scores(answer, prep.answer_groups(run.query_id), _LIST))
    return out


def _generation_table(rows: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for ds, tid in (("qampari", "Table 1"), ("asqa", "Table 2")):
        sub = rows[rows["dataset"].str.startswith(ds)]
        parts.append(mean_table(sub, tid, (*_LIST, "answer_recall"), ("k", "theta")))
    return pd.concat(parts, ignore_index=True)


GENERATION = Recipe(
    name="ccbqp-generation",
    paper_key="ccbqp",
    paper=PAPER,
    source=SOURCE,
    target="Tables 1-2",
    summary="LLM answers from each method's top-k; answer-list precision / recall / F1 on QAMPARI and ASQA",
    needs=Needs(data=(QAMPARI, ASQA), llm="partly"),
    methods={"topk": {}, "fw": {"theta": (0.5,)}, "mmr": {"theta": (0.5,)}, "dpp": {"theta": (0.5,)}},
    grid={"k": (25,)},
    metrics=(*_LIST, "answer_recall"),
    datasets=_generation_datasets,
    execute=_generation_execute,
    table=_generation_table,
    layout=(("method", "setting"), ("dataset", "metric")),
    published_tables=("Table 1", "Table 2"),
    params={"bm25": 3000, "template": "ccbqp"},
    notes="k, theta and the prompt of the paper's Tables 1-2 could not be read: divopt's defaults (override with --set)",
)
