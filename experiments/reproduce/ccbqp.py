"""Recipes of the CCBQP paper (Lu & Sidiropoulos, "Principled and Scalable Diversity-Aware
Retrieval via Cardinality-Constrained Binary Quadratic Programming", arXiv:2604.02554v1).

* ``ccbqp-pareto`` (Fig. 1, a figure without numbers): answer recall@k against ILAD on QAMPARI
  for FW (the paper's Algorithm 1, ``fw``), MMR, greedy DPP over theta in {0.1, ..., 0.9} and
  top-k, k in {25, 50, 100}. The paper's pool (Sec. 4.1) is the union of BM25 top-3000 passages
  per question from the 21M-passage DPR Wikipedia dump (``psgs_w100.tsv``), n = 2,064,511 for
  QAMPARI, embedded with BGE-M3 (1024-d): give ``--corpus`` (and ``--model`` a local BGE-M3) for
  that; without a corpus the pool is the questions' proof passages (divopt's small-scale
  stand-in, labelled ``qampari-dev (proofs)``).
* ``ccbqp-latency`` (Sec. 1 and 4.2): median wall-clock ms of FW, MMR, DPP and top-k on a pool of
  n x d unit rows (a synthetic narrow cone of the given shape, labelled as such), theta in
  {0.5, ..., 0.9} (the paper's "practical regime", where its speed-ups are stated), k in {25, 50,
  100}; FW's speed-up over MMR and DPP per cell. The ``latency claims`` table sets our numbers
  beside the paper's statements (MMR and DPP > 850 ms at k = 100; FW 40-180 ms at k = 100,
  about 40 ms at theta 0.8-0.9; 2.4x-22.9x over MMR at theta >= 0.5); they join only a run at
  the paper's scale (``--set n=2000000`` or more, ``d=1024``), labelled ``n>=2e6,d=1024``.
  The paper timed one RTX 4090 (PyTorch); a CPU run measures this machine, not the paper's.
* ``ccbqp-generation`` (Tables 1-2): Llama-3.1-8B-Instruct (temperature 0, Sec. 4.3) answers
  from each method's top-k, k in {25, 50}, theta in {0.6, 0.7, 0.8, 0.9}; Table 1 (QAMPARI):
  instance-level precision / recall / F1 of the answer list (QAMPARI's list metric) and the
  shares of questions with recall >= 0.8 and F1 >= 0.5; Table 2 (ASQA): instance-level recall of
  the short answers found in the generated text and the share of questions with recall 1.0. The
  paper does not print its generation prompt: divopt's list prompt (template ``ccbqp``,
  ``--set template=...``). ``--retrieval-only`` reports the answer recall of the same contexts.
  Published cells join the paper's pool only (datasets ``qampari`` / ``asqa``: a run with
  ``--corpus``), not the proof-passage stand-in.
"""
from __future__ import annotations

import re
import statistics
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd
import torch

from divopt_rag.data import bm25_pool, load_asqa, load_qampari, narrow_cone, stable_hash, union_pool, EmbeddedDataset
from divopt_rag.experiments.rag import answers
from divopt_rag.models import Instance
from divopt_rag.models.domains import ROWS_MAX
from divopt_rag.models.parameters import Interval, Param, Text, Options as OneOf
from divopt_rag.solvers import select

from .data import DatasetPlan, Prepared, first_queries, prepare_text, synthetic_analogue, wordnet_analogue
from .spec import DataNeed, Needs, Options, Recipe, Run
from .steps import Env, answer_scores, query_instance, retrieval_metrics, select_rows
from .tables import mean_table

__all__ = ["PARETO", "LATENCY", "GENERATION", "PAPER_THETAS", "PAPER_KS", "LATENCY_THETAS", "GENERATION_THETAS",
           "GENERATION_KS", "PAPER_SCALE"]

SOURCE = "arXiv:2604.02554v1"
PAPER = "CCBQP (Lu & Sidiropoulos 2026)"
#: Fig. 1's trade-off grid and retrieval sizes.
PAPER_THETAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
PAPER_KS = (25, 50, 100)
#: The thetas of the latency claims (Sec. 1: "theta > 0.5" as the text reads, Sec. 4.2: 0.5-0.9).
LATENCY_THETAS = (0.5, 0.6, 0.7, 0.8, 0.9)
#: Tables 1-2's grid (Sec. 4.3 and App. E).
GENERATION_THETAS = (0.6, 0.7, 0.8, 0.9)
GENERATION_KS = (25, 50)
#: The label of the paper's pool scale in the latency claims (n > 2e6 passages, d = 1024).
PAPER_SCALE = "n>=2e6,d=1024"

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


def _plots():
    """divopt_rag.experiments.plots.figures, or None with a warning that names the extra (the tables need no figure)."""
    try:
        from divopt_rag.experiments.plots import figures
    except ModuleNotFoundError as exc:
        if exc.name != "matplotlib":
            raise
        warnings.warn(f"{exc}; the figure is skipped", stacklevel=3)
        return None
    return figures


def _pareto_plot(rows: pd.DataFrame, out, options: Options) -> list:
    """Fig. 1's panels: answer recall vs ILAD per method over theta, one figure per (dataset, k);
    top-k is drawn as theta = 1 (its limit)."""
    if (figures := _plots()) is None:
        return []
    rows = rows.assign(theta=rows["theta"].fillna(1.0)) if "theta" in rows else rows.assign(theta=1.0)
    paths = []
    for (ds, k), g in rows.groupby(["dataset", "k"], sort=False):
        fig, _ = figures.plot_pareto(g, x="ilad", y="answer_recall")
        fig.axes[0].set_title(f"{ds}, k = {k}: answer recall@k vs ILAD over theta")
        slug = re.sub(r"[^0-9A-Za-z]+", "-", str(ds)).strip("-")
        paths += figures.save_figure(fig, out, f"fig1_{slug}_k{k}")
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
    return {"n": inst.n, "d": int(base.d), "seconds": statistics.median(times), "iterations": sel.iterations,
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
    extra += _latency_claims(rows)
    return pd.concat([t, pd.DataFrame(extra, columns=t.columns)], ignore_index=True) if extra else t


def _scale_label(n: int, d: int) -> str:
    return PAPER_SCALE if n >= 2_000_000 and d == 1024 else f"n={n},d={d}"


def _latency_claims(rows: pd.DataFrame) -> list[dict]:
    """Our numbers in the form of the paper's latency statements (Sec. 1 and 4.2): at k = 100
    the fastest theta of MMR and DPP (the paper: > 850 ms), FW's fastest and slowest theta
    (40 ~ 180 ms) and FW at theta = 0.9 (about 40 ms); over k and theta >= 0.5 the smallest and
    largest MMR / FW ratio (2.4x to 22.9x). Medians over the repeats, per (k, theta) cell."""
    if rows.empty or "seconds" not in rows:
        return []
    out = []
    # the paper's unit: ms (the rows hold seconds)
    rows = rows.assign(ms=1e3 * rows["seconds"], theta=rows["theta"] if "theta" in rows else float("nan"))
    for ds, g in rows.groupby("dataset", sort=False):
        n = int(g["n"].iloc[0])
        d = int(g["d"].iloc[0]) if "d" in g and pd.notna(g["d"].iloc[0]) else 0
        label = _scale_label(n, d)
        cell = g.groupby(["method", "k", g["theta"].fillna(-1.0)])["ms"].median()

        def add(setting, method, metric, value):
            out.append({"table": "latency claims", "dataset": label, "setting": setting, "method": method,
                        "metric": metric, "value": float(value)})

        for method in ("mmr", "dpp", "fw"):
            if (method, 100) in cell.index.droplevel(2):
                at100 = cell.loc[(method, 100)]
                add("k=100", method, "ms_min", at100.min())
                if method == "fw":
                    add("k=100", method, "ms_max", at100.max())
                    if 0.9 in at100.index:
                        add("k=100,theta=0.9", method, "ms", at100.loc[0.9])
        ratios = []
        for (method, k, theta), ms in cell.items():
            if method == "fw" and theta >= 0.5 and ("mmr", k, theta) in cell.index and ms > 0:
                ratios.append(cell.loc[("mmr", k, theta)] / ms)
        if ratios:
            add("theta>=0.5", "fw", "mmr_over_fw_min", min(ratios))
            add("theta>=0.5", "fw", "mmr_over_fw_max", max(ratios))
    return out


def _latency_plot(rows: pd.DataFrame, out, options: Options) -> list:
    """Latency vs k per method (seconds), one panel per theta, log scale."""
    if (figures := _plots()) is None:
        return []
    n, d = int(LATENCY.param(options, "n")), int(LATENCY.param(options, "d"))
    fig, _ = figures.plot_latency(rows.assign(n=n, d=d), value="seconds")
    return figures.save_figure(fig, out, "latency_vs_k")


LATENCY = Recipe(
    name="ccbqp-latency",
    paper_key="ccbqp",
    paper=PAPER,
    source=SOURCE,
    target="latency vs k",
    summary="median wall-clock time of FW, MMR, DPP and top-k vs k on an n x d pool; FW's speed-up over MMR and DPP; "
            "the paper's latency statements beside ours",
    needs=Needs(gpu="for the paper's scale (--set device=cuda --set n=2000000)"),
    methods={"topk": {}, "fw": {"theta": LATENCY_THETAS}, "mmr": {"theta": LATENCY_THETAS},
             "dpp": {"theta": LATENCY_THETAS}},
    grid={"k": PAPER_KS},
    metrics=("seconds",),
    datasets=_latency_datasets,
    execute=_latency_execute,
    table=_latency_table,
    layout=(("dataset", "setting"), ("method", "metric")),
    published_tables=("latency claims", "Fig. 1"),
    # sizes declared with their ranges and a memory estimate, checked before any work (--set n=1e12
    # was an internal MemoryError): the pool's generation (measured 7.1 bytes per element) and, on
    # the CPU, the timed copy with the selectors' working set (2.3 times its dtype's bytes)
    params={"n": Param.of(Interval(int, 2, ROWS_MAX), 100_000), "d": Param.of(Interval(int, 1, ROWS_MAX), 1024),
            "repeats": Param.of(Interval(int, 1, 1000), 3), "device": Param.of(Text(), "cpu"),
            "dtype": Param.of(OneOf({"float32", "float16", "bfloat16"}), "float32")},
    memory=lambda o: (LATENCY.param(o, "n") * LATENCY.param(o, "d")
                      * (8 + (2.3 * {"float32": 4}.get(LATENCY.param(o, "dtype"), 2)
                              if LATENCY.param(o, "device") == "cpu" else 0))),
    plot=_latency_plot,
    notes="synthetic narrow-cone pool of the given shape (labelled analogue): latency depends on n, d, k and the machine",
)


# ---- Tables 1-2 -------------------------------------------------------------------------------
_LIST = ("list_precision", "list_recall", "list_f1")
#: Table 1's and Table 2's columns (the shares are of questions, Sec. 4.3 and App. E captions).
TABLE1_METRICS = (*_LIST, "share_list_recall_ge_0.8", "share_list_f1_ge_0.5")
TABLE2_METRICS = ("str_recall", "share_str_recall_eq_1")
#: The tidy rows' dataset labels and the published tables' names for the paper's pools.
_GEN_DATASETS = {"qampari-dev": ("qampari", "Table 1"), "asqa-dev": ("asqa", "Table 2")}


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
        groups = prep.answer_groups(run.query_id)
        out["answer"] = answer
        out.update(answer_scores(answer, groups, _LIST))
        hits = answers.answer_hits(answer, groups, normalize="squad") if groups else []
        out["str_recall"] = sum(hits) / len(hits) if hits else float("nan")
    return out


def _generation_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, method, setting): means over questions, and the shares of questions whose
    recall (F1) reaches the paper's thresholds. Rows of the paper's pool are labelled ``qampari``
    / ``asqa`` (the published keys); the proof-passage stand-in keeps its own label."""
    rows = rows.copy()
    if "list_recall" in rows:
        rows["share_list_recall_ge_0.8"] = (rows["list_recall"] >= 0.8).where(rows["list_recall"].notna())
        rows["share_list_f1_ge_0.5"] = (rows["list_f1"] >= 0.5).where(rows["list_f1"].notna())
    if "str_recall" in rows:
        rows["share_str_recall_eq_1"] = (rows["str_recall"] >= 1.0).where(rows["str_recall"].notna())
    parts = []
    for label, (name, tid) in _GEN_DATASETS.items():
        sub = rows[rows["dataset"].str.startswith(label)]
        if sub.empty:
            continue
        sub = sub.assign(dataset=sub["dataset"].replace({label: name}))
        metrics = (*(TABLE1_METRICS if name == "qampari" else TABLE2_METRICS), "answer_recall")
        parts.append(mean_table(sub.astype({m: float for m in metrics if m in sub}), tid, metrics, ("k", "theta")))
    return pd.concat(parts, ignore_index=True) if parts else mean_table(rows.iloc[0:0], "Table 1", ("answer_recall",), ())


GENERATION = Recipe(
    name="ccbqp-generation",
    paper_key="ccbqp",
    paper=PAPER,
    source=SOURCE,
    target="Tables 1-2",
    summary="LLM answers from each method's top-k, k in {25, 50}, theta in {0.6, ..., 0.9}: QAMPARI list P / R / F1 "
            "(Table 1) and ASQA recall (Table 2)",
    needs=Needs(data=(QAMPARI, ASQA), llm="partly"),
    methods={"topk": {}, "fw": {"theta": GENERATION_THETAS}, "mmr": {"theta": GENERATION_THETAS},
             "dpp": {"theta": GENERATION_THETAS}},
    grid={"k": GENERATION_KS},
    metrics=(*TABLE1_METRICS, *TABLE2_METRICS, "answer_recall"),
    datasets=_generation_datasets,
    execute=_generation_execute,
    table=_generation_table,
    layout=(("method", "setting"), ("dataset", "metric")),
    published_tables=("Table 1", "Table 2"),
    params={"bm25": 3000, "template": "ccbqp"},
    notes="the paper does not print its generation prompt: divopt's list prompt 'ccbqp' (override with --set template=)",
)
