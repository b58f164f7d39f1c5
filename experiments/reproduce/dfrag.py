"""Recipes of DF-RAG (Khan et al., "DF-RAG: Query-Aware Diversity for Retrieval-Augmented
Generation", Findings of EACL 2026, arXiv:2601.17212v1), on LongBench and InfiniteBench.

Protocol, as the paper states it (:mod:`divopt_rag.experiments.rag.dfrag` implements the method):

* data (Sec. 3.5, App. A.1): LongBench's HotpotQA, MuSiQue, 2WikiMQA (200 questions each) and
  MultiFieldQA-en (150), InfiniteBench's En.QA (351); each question retrieves from its own
  context cut into w-word chunks, w in {100, 200, 300} (context lengths of about 500, 1000 and
  1500 words with k = 5 chunks); ``--set words=100`` runs one size;
* embeddings: the paper's multi-qa-mpnet-base-cos-v1 (``--model``; divopt's default encoder
  otherwise, named in the run's config);
* every lambda of {0, 0.1, ..., 1.0} gives a gMMR candidate set; the LLM answers from it
  (Fig. 12's prompt, passages in decreasing relevance as the authors' code orders them); its F1
  (:func:`~divopt_rag.experiments.rag.dfrag_oracle.dfrag_f1`, LongBench's and InfiniteBench's official
  F1: the best over the gold answers) is a row;
* ``dfrag`` / ``dfrag_ic``: the whole pipeline (Planner, Evaluator over lambda in {0.1, ..., 1.0},
  upper-median gate, generation; +IC adds the plan and the Evaluator's reply), one row per
  question.

Table 1 (``dfrag-table1``), per task, chunk size w and backbone LLM: vanilla RAG (lambda = 1:
cosine top-k), "RAG with gMMR" (``fixed-lambda``: the best single dataset-level lambda of {0, 0.1,
..., 1.0}, Sec. 3.2, chosen on the task's own questions as the paper does), DF-RAG, DF-RAG + IC
and the Oracle (per question the best lambda of {0, ..., 1.0}, Sec. 3.3), and the share of the
Oracle's gain each captures, (x - vanilla) / (Oracle - vanilla). Beside them divopt's
``fixed-lambda (held out)``: the lambda best on the OTHER questions of the task (leave one question
out), so no question is scored with a lambda tuned on it. F1 is printed x 100, as the paper
prints it. The paper's other systems (LongRAG, RAPTOR, HippoRAG) are not run: their rows print
the published value beside "-".

The published cells join on ``llm=<backbone>,w=<chunk words>``: the backbone is read from the
configured model's name (``llama-3.3-70b`` or ``qwen-2.5-72b`` when it names one of the paper's
two, else the name itself). Table 2 (App. A.1, with ``dfrag-table1``): per task the number of questions and
their mean context length in words (LongBench's ``length`` field, else the context's words).
Table 3 (``dfrag-table3``): DF-RAG with classical MMR vs gMMR candidate sets (Llama 3.3 70B, w =
100 in the paper); classical MMR is App. B.2's: gMMR with the cosine similarity to the centroid in
place of the distance ("the only difference ... is the distance metric"),
:func:`~divopt_rag.experiments.rag.dfrag_candidates.classical_mmr`, not divopt's plain ``mmr``
(the published key keeps the paper's column name, ``base=mmr``). Table 4 (``dfrag-table4``):
DF-RAG + IC with uniform vs binary-search sampling of lambda (w = 100): F1, lambdas scored and
Evaluator calls. Sec. 5.4: the Planner's mean number of steps per multi-hop task.

``--retrieval-only``: no LLM; each candidate set is scored by answer recall (a gold answer
contained in the chunks), and the Oracle / fixed-lambda / vanilla rows are computed on it (a
divopt analogue: no published number joins it).
"""
from __future__ import annotations

import math
import re
import time
from typing import Any

import numpy as np
import pandas as pd

from divopt_rag.data import INFINITEBENCH_QA_TASKS, LONGBENCH_QA_TASKS, load_infinitebench_qa, load_longbench
from divopt_rag.experiments.rag.dfrag import DFRAG
from divopt_rag.experiments.rag.dfrag_candidates import DFRAG_THETAS, FIXED_THETAS, ORACLE_THETAS, candidate_set
from divopt_rag.experiments.rag.dfrag_oracle import dfrag_f1
from divopt_rag.experiments.rag.evaluator import QueryContext

from .data import DatasetPlan, Prepared, prepare_text, wordnet_analogue
from .spec import DataNeed, Needs, Options, Recipe, ReproduceError, Run
from .steps import Env, generation_order, query_instance, retrieval_metrics
from .tables import leave_one_out_choice, long_rows

__all__ = ["TABLE1", "TABLE3", "TABLE4", "PAPER_TASKS", "PAPER_WORDS", "BASES", "llm_label", "best_fixed_theta"]

PAPER = "DF-RAG (Khan et al. 2026)"
SOURCE = "arXiv:2601.17212v1"
#: The paper's five tasks (Sec. 3.5): four LongBench files and InfiniteBench's En.QA.
PAPER_TASKS = ("hotpotqa", "musique", "2wikimqa", "multifieldqa_en", "en_qa")
#: Chunk sizes w (Sec. 3.5): contexts of about 500, 1000 and 1500 words with k = 5.
PAPER_WORDS = (100, 200, 300)
_MULTI_HOP = ("hotpotqa", "musique", "2wikimqa")
_LONGBENCH = "https://huggingface.co/datasets/THUDM/LongBench/resolve/main/data.zip"
_INFINITEBENCH = "https://huggingface.co/datasets/xinrongzhang2022/InfiniteBench/resolve/main/longbook_qa_eng.jsonl"
_TASKS = (*LONGBENCH_QA_TASKS, *INFINITEBENCH_QA_TASKS)
#: Table 3's columns (the published key's ``base``) and the retrieval function of each: classical
#: MMR is App. B.2's (the centroid kept, the cosine in place of the distance).
BASES = {"mmr": "classical_mmr", "gmmr": "gmmr"}


def _need(task: str) -> DataNeed:
    if task in INFINITEBENCH_QA_TASKS:
        return DataNeed("InfiniteBench En.QA", "infinitebench", INFINITEBENCH_QA_TASKS[task], url=_INFINITEBENCH)
    return DataNeed(f"LongBench {task}", "longbench", f"{task}.jsonl", fetch="longbench", url=_LONGBENCH)


# the recipe needs LongBench's folder or InfiniteBench's file; each task present runs, the others are named as skipped
_ANY_TASK = DataNeed("LongBench (hotpotqa, musique, 2wikimqa, multifieldqa_en)", "longbench", "*.jsonl",
                     fetch="longbench", url=_LONGBENCH)
_EN_QA = _need("en_qa")


def _tasks(recipe: Recipe, options: Options) -> list[str]:
    tasks = [str(t) for t in recipe.param(options, "tasks")]
    bad = [t for t in tasks if t not in _TASKS]
    if bad:
        raise ReproduceError(f"--set tasks: {bad[0]!r} is not a QA task divopt reads; expected some of {list(_TASKS)}")
    return tasks


def _words(recipe: Recipe, options: Options) -> list[int]:
    raw = recipe.param(options, "words")
    vals = list(raw) if isinstance(raw, (tuple, list)) else [raw]
    try:
        out = [int(v) for v in vals]
    except (TypeError, ValueError):
        out = []
    if not out or any(w < 1 for w in out):
        raise ReproduceError(f"--set words: expected chunk sizes in words (integers >= 1), got {vals}")
    return out


def _datasets(recipe: Recipe):
    def plans(options: Options) -> list[DatasetPlan]:
        if options.analogue == "wordnet":
            return [DatasetPlan("wordnet", lambda o: wordnet_analogue(o))]
        out = []
        for w in _words(recipe, options):
            for task in _tasks(recipe, options):
                need = _need(task)

                def build(o: Options, task=task, need=need, w=w) -> Prepared:
                    path = need.locate(o.data_dir)
                    if task in INFINITEBENCH_QA_TASKS:
                        ds = load_infinitebench_qa(path, words=w, limit=o.limit)
                    else:
                        ds = load_longbench(path, words=w, limit=o.limit)
                    # each sample retrieves from its own chunks: the limit does not change a sample's pool
                    prep = prepare_text(ds, o, label=task, spec={"name": "dfrag", "task": task, "words": w})
                    prep.extra["w"] = w
                    return prep

                out.append(DatasetPlan(f"{task} w={w}", build))
        return out

    return plans


# ---- one run -------------------------------------------------------------------------------------
def llm_label(model: Any) -> str:
    """The backbone's name as the published keys spell it: ``llama-3.3-70b`` / ``qwen-2.5-72b`` when
    ``model`` names one of the paper's two, else the name itself (``none`` without an LLM)."""
    if model is None:
        return "none"
    name = str(getattr(model, "model", model))
    low = name.lower()
    if re.search(r"llama[-_ .]*3\.3.*70b", low):
        return "llama-3.3-70b"
    if re.search(r"qwen[-_ .]*2\.5.*72b", low):
        return "qwen-2.5-72b"
    return re.sub(r"[,=\s]+", "_", name) or "none"


def _context(prep: Prepared, run: Run, inst, rows) -> QueryContext:
    groups = prep.answer_groups(run.query_id)
    return QueryContext(query_id=run.query_id, instance=inst, query_text=prep.question(run.query_index),
                        passages=prep.texts(rows), answers=[a for part in groups for a in part] or None)


def _score(prep: Prepared, run: Run, answer: str) -> float:
    aliases = [a for part in prep.answer_groups(run.query_id) for a in part]
    return dfrag_f1(answer, aliases) if aliases else math.nan


def _execute(recipe: Recipe):
    def execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
        p = run.params
        k = int(recipe.param(env.options, "k"))
        inst, rows = query_instance(prep, run.query_index, env=env)
        common = {"w": prep.extra.get("w", math.nan), "llm": llm_label(env.llm), "n": inst.n,
                  "context_words": _context_words(prep, run.query_id)}
        if run.method in BASES.values():
            t0 = time.perf_counter()
            idx = candidate_set(inst.replace(k=min(k, inst.n), theta=p["theta"]), run.method)
            out: dict[str, Any] = {**common, "seconds": time.perf_counter() - t0, "selected": [str(inst.ids[i]) for i in idx],
                                   **retrieval_metrics(prep, run.query_id, inst, rows, idx, ("answer_recall",))}
            if env.llm is not None:
                order = generation_order(inst, idx, "relevance")
                answer = env.generator("dfrag").generate(prep.question(run.query_index), prep.texts(rows[order]))
                out.update(answer=answer, f1=_score(prep, run, answer))
            return out
        # the whole DF-RAG pipeline (LLM): one row per question
        pipeline = DFRAG.from_chat(env.llm, in_context=run.method == "dfrag_ic", sampling=p.get("sampling", "uniform"),
                                   method=BASES[p.get("base", "gmmr")])
        res = pipeline.answer(_context(prep, run, inst.replace(k=k, theta=1.0), rows))
        distinct = {tuple(int(i) for i in s) for s in res.selections.values()}
        return {**common, "chosen_theta": res.theta, "thetas_scored": len(res.visited),
                "evaluator_calls": len(distinct), "plan_steps": len(res.plan), "answer": res.answer,
                "f1": _score(prep, run, res.answer), "selected": [str(inst.ids[i]) for i in res.indices],
                **retrieval_metrics(prep, run.query_id, inst, rows, np.asarray(res.indices), ("answer_recall",))}

    return execute


def _context_words(prep: Prepared, query_id: str) -> float:
    """Table 2's length of a question's context in words: LongBench's own ``length`` field, else
    the context's whitespace-separated words (InfiniteBench has no such field); NaN on analogues."""
    info = ((getattr(prep.dataset, "meta", None) or {}).get("samples") or {}).get(query_id) or {}
    value = info.get("length", info.get("context_words"))
    return math.nan if value is None else float(value)


# ---- tables ------------------------------------------------------------------------------------
def _metric(rows: pd.DataFrame) -> str:
    return "f1" if "f1" in rows.columns and rows["f1"].notna().any() else "answer_recall"


def _scale(metric: str) -> float:
    """F1 prints x 100, as the paper (and LongBench) print it; answer recall stays a fraction."""
    return 100.0 if metric == "f1" else 1.0


def best_fixed_theta(per_query: pd.DataFrame, score: str = "value", key: str = "theta") -> float:
    """The paper's fixed-lambda choice (Sec. 3.2): the lambda with the highest mean ``score`` over
    the task's questions (ties: the upper median of the tied lambdas, as DF-RAG's gate)."""
    means = per_query.groupby(key)[score].mean()
    best = means.max()
    tied = sorted(float(t) for t, v in means.items() if v == best)
    return tied[len(tied) // 2]


def _fixed_and_oracle(sub: pd.DataFrame, metric: str) -> dict[str, float]:
    """vanilla (lambda = 1), fixed-lambda (best single lambda), its held-out twin, and the Oracle
    (best lambda per question) of one task's candidate rows, means over questions."""
    per = sub[["query_id", "theta", metric]].rename(columns={metric: "value"})
    lookup = per.set_index(["query_id", "theta"])["value"]
    chosen = leave_one_out_choice(per)
    return {
        "vanilla": float(per[np.isclose(per["theta"], 1.0)]["value"].mean()),
        "fixed-lambda": float(per[np.isclose(per["theta"], best_fixed_theta(per))]["value"].mean()),
        "fixed-lambda (held out)": (float(np.mean([lookup[(q, t)] for q, t in chosen.items()])) if len(chosen)
                                    else math.nan),
        "oracle": float(per.groupby("query_id")["value"].max().mean()),
    }


def _captured(x: float, vanilla: float, oracle: float) -> float:
    return (x - vanilla) / (oracle - vanilla) if oracle - vanilla > 0 else math.nan


def _setting(llm: str, w: Any, **extra: Any) -> str:
    parts = {"llm": llm, **({} if w is None or (isinstance(w, float) and math.isnan(w)) else {"w": int(w)}), **extra}
    return ",".join(f"{k}={parts[k]}" for k in sorted(parts))


def _groups(rows: pd.DataFrame):
    """(dataset, llm, w) groups of the tidy rows (columns absent on old rows count as one group)."""
    rows = rows.assign(llm=rows["llm"].fillna("none") if "llm" in rows else "none",
                       w=rows["w"].fillna(-1) if "w" in rows else -1)
    return rows.groupby(["dataset", "llm", "w"], sort=False)


#: The paper's other systems in Table 1: printed with their published value, not run by divopt.
REFERENCE_SYSTEMS = ("longrag", "raptor", "hipporag")


def _table1(rows: pd.DataFrame) -> pd.DataFrame:
    metric = _metric(rows)
    scale = _scale(metric)
    recs: list[dict] = []
    gains: dict[str, list] = {"dfrag": [], "oracle": [], "captured": []}
    llms: list[str] = []
    for (ds, llm, w), sub in _groups(rows):
        w = None if w == -1 else w
        base = sub[sub["method"] == "gmmr"]
        if base.empty:
            continue
        llms.append(llm)
        cells = _fixed_and_oracle(base, metric)
        for m in ("dfrag", "dfrag_ic"):
            mine = sub[sub["method"] == m]
            if len(mine):
                cells[m] = float(mine[metric].mean())
        s = _setting(llm, w)
        for name, v in cells.items():
            recs.append({"table": "Table 1", "dataset": ds, "setting": s, "method": name, "metric": metric,
                         "value": scale * v})
        for name in ("fixed-lambda", "fixed-lambda (held out)", "dfrag", "dfrag_ic"):
            if name in cells:
                recs.append({"table": "Table 1", "dataset": ds, "setting": s, "method": name, "metric": "gap_captured",
                             "value": _captured(cells[name], cells["vanilla"], cells["oracle"])})
        variants = [cells[m] for m in ("dfrag", "dfrag_ic") if m in cells]
        gains["oracle"].append(cells["oracle"] - cells["vanilla"])
        if variants:  # the abstract speaks of DF-RAG's best variant (91.3 % is DF-RAG + IC's)
            gains["dfrag"].append(max(variants) - cells["vanilla"])
            gains["captured"].append(_captured(max(variants), cells["vanilla"], cells["oracle"]))
    for ds in dict.fromkeys(rows["dataset"]):
        for llm in dict.fromkeys(llms):
            for name in REFERENCE_SYSTEMS:
                recs.append({"table": "Table 1", "dataset": ds, "setting": _setting(llm, None), "method": name,
                             "metric": metric, "value": math.nan})
    recs += _table2(rows)
    if metric == "f1":  # the abstract's claims, over the tasks, chunk sizes and backbones run
        caps = [c for c in gains["captured"] if not math.isnan(c)]
        for method, m, v in (("dfrag", "f1_gain_vs_vanilla_min", min(gains["dfrag"], default=math.nan)),
                             ("dfrag", "f1_gain_vs_vanilla_max", max(gains["dfrag"], default=math.nan)),
                             ("oracle", "f1_gain_vs_vanilla_max", max(gains["oracle"], default=math.nan)),
                             ("dfrag", "gap_captured_max", max(caps, default=math.nan))):
            recs.append({"table": "abstract", "dataset": "all", "setting": "", "method": method, "metric": m,
                         "value": v * (scale if m.startswith("f1") else 1.0)})
        for ds in _MULTI_HOP:  # Sec. 5.4: the Planner's mean number of steps
            steps = rows[(rows["dataset"] == ds) & rows["method"].isin(("dfrag", "dfrag_ic"))]
            if "plan_steps" in rows and len(steps):
                recs.append({"table": "Sec. 5.4", "dataset": ds, "setting": "", "method": "dfrag",
                             "metric": "plan_steps", "value": float(steps["plan_steps"].mean())})
    return long_rows(recs)


def _table2(rows: pd.DataFrame) -> list[dict]:
    """App. A.1, Table 2: per task the number of questions run and their mean context length
    (each question once, whatever the chunk size)."""
    if "context_words" not in rows or rows["context_words"].isna().all():
        return []
    recs = []
    for ds, sub in rows.dropna(subset=["context_words"]).groupby("dataset", sort=False):
        per = sub.drop_duplicates("query_id")
        recs += [{"table": "Table 2", "dataset": ds, "setting": "", "method": "dataset", "metric": "instances",
                  "value": float(len(per))},
                 {"table": "Table 2", "dataset": ds, "setting": "", "method": "dataset", "metric": "avg_words",
                  "value": float(per["context_words"].mean())}]
    return recs


def _table3(rows: pd.DataFrame) -> pd.DataFrame:
    metric = _metric(rows)
    scale = _scale(metric)
    recs = []
    for (ds, llm, w), sub in _groups(rows):
        w = None if w == -1 else w
        for base, method in BASES.items():
            s = _setting(llm, w, base=base)
            cand = sub[sub["method"] == method]
            if len(cand):  # divopt's extra cells: the fixed lambda and the Oracle of each candidate family
                cells = _fixed_and_oracle(cand, metric)
                for name in ("fixed-lambda", "oracle"):
                    recs.append({"table": "Table 3", "dataset": ds, "setting": s, "method": name, "metric": metric,
                                 "value": scale * cells[name]})
            mine = sub[(sub["method"] == "dfrag") & (sub["base"] == base)] if "base" in sub else sub.iloc[0:0]
            if len(mine):
                recs.append({"table": "Table 3", "dataset": ds, "setting": s, "method": "dfrag", "metric": metric,
                             "value": scale * float(mine[metric].mean())})
    return long_rows(recs)


def _table4(rows: pd.DataFrame) -> pd.DataFrame:
    recs = []
    for (ds, llm, w), sub in _groups(rows):
        w = None if w == -1 else w
        for sampling, part in sub.groupby("sampling", sort=False):
            s = _setting(llm, w, sampling=sampling)
            for metric in ("f1", "thetas_scored", "evaluator_calls"):
                recs.append({"table": "Table 4", "dataset": ds, "setting": s, "method": "dfrag_ic", "metric": metric,
                             "value": float(part[metric].mean()) * (100.0 if metric == "f1" else 1.0)})
    return long_rows(recs)


def _recipe(name: str, target: str, summary: str, methods: dict, table, llm: str, llm_methods: tuple,
            layout, published_tables: tuple, words: tuple) -> Recipe:
    r = Recipe(
        name=name, paper_key="dfrag", paper=PAPER, source=SOURCE, target=target, summary=summary,
        needs=Needs(data=(_ANY_TASK, _EN_QA), llm=llm),
        methods=methods, grid={}, metrics=("f1", "answer_recall"),
        datasets=lambda o: [], execute=lambda *a: {}, table=table, layout=layout,
        analogues=("wordnet",) if llm == "partly" else (), llm_methods=llm_methods,
        published_tables=published_tables,
        params={"k": 5, "words": words, "tasks": PAPER_TASKS},
    )
    r.datasets, r.execute = _datasets(r), _execute(r)
    return r


TABLE1 = _recipe(
    "dfrag-table1", "Table 1",
    "F1 of vanilla RAG, fixed-lambda, DF-RAG, DF-RAG+IC and the Oracle on five QA tasks, w in {100, 200, 300}; "
    "gap captured; Table 2's questions and context lengths",
    {"gmmr": {"theta": ORACLE_THETAS}, "dfrag": {}, "dfrag_ic": {}}, _table1, "partly", ("dfrag", "dfrag_ic"),
    (("method",), ("dataset", "setting", "metric")), ("Table 1", "Table 2", "abstract", "Sec. 5.4", "Fig. 7", "Fig. 6"),
    PAPER_WORDS)
TABLE3 = _recipe(
    "dfrag-table3", "Table 3", "DF-RAG with classical MMR (App. B.2: the centroid kept, the cosine in place of "
    "the distance) vs gMMR candidate sets (w = 100)",
    {"classical_mmr": {"theta": FIXED_THETAS}, "gmmr": {"theta": FIXED_THETAS}, "dfrag": {"base": tuple(BASES)}}, _table3,
    "partly", ("dfrag",), (("method", "setting"), ("dataset", "metric")), ("Table 3",), (100,))
TABLE4 = _recipe(
    "dfrag-table4", "Table 4", "DF-RAG + IC with uniform vs binary-search sampling of lambda: F1 and Evaluator calls",
    {"dfrag_ic": {"sampling": ("uniform", "binary")}}, _table4, "required", ("dfrag_ic",),
    (("method", "setting"), ("dataset", "metric")), ("Table 4",), (100,))

#: The candidate lambdas DF-RAG's own pipeline scores (Sec. 3.4), for the docs.
CANDIDATE_THETAS = DFRAG_THETAS
