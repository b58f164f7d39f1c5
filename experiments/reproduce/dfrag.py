"""Recipes of DF-RAG (Khan et al., "DF-RAG: Query-Aware Diversity for Retrieval-Augmented
Generation", Findings of EACL 2026, arXiv:2601.17212v1), on LongBench's QA tasks.

Protocol (the paper as :mod:`divopt_rag.experiments.rag.dfrag` implements it, with the authors' public
run script's defaults: 100-word chunks of the sample's own context, k = 5 chunks, the first 200
samples of a task, the F1 of DF-RAG's script against the first gold answer):

* every lambda of the grid {0.1, ..., 1.0} gives a gMMR candidate set; the LLM answers from it
  (passages in decreasing relevance, as the authors' code orders them); its F1 is a row;
* ``dfrag`` / ``dfrag_ic``: the whole pipeline (Planner, Evaluator, upper-median gate,
  generation; +IC adds the plan and the Evaluator's short answers), one row per question.

Table 1 (``dfrag-table1``): vanilla RAG (lambda = 1: cosine top-k), fixed-lambda (one lambda
for the dataset), DF-RAG, DF-RAG+IC and the Oracle (per question the best lambda's F1), and the
gap each captures, (DF-RAG - vanilla) / (Oracle - vanilla). Decision where the paper could not
be read: the fixed lambda is chosen by leave-one-question-out on the same task (each question
gets the lambda best on the OTHER questions), so no question is scored with a lambda tuned on it.
Table 3 (``dfrag-table3``): the same with MMR and gMMR candidate sets. Table 4
(``dfrag-table4``): uniform vs binary-search sampling of lambda: F1 and Evaluator calls.

``--retrieval-only``: no LLM; each candidate set is scored by answer recall (a gold answer
contained in the chunks), and the Oracle / fixed-lambda / vanilla rows are computed on it.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from divopt_rag.data import LONGBENCH_QA_TASKS, load_longbench
from divopt_rag.experiments.rag.dfrag import DFRAG, DFRAG_THETAS, dfrag_f1
from divopt_rag.experiments.rag.evaluator import QueryContext

from .data import DatasetPlan, Prepared, prepare_text, wordnet_analogue
from .spec import DataNeed, Needs, Options, Recipe, ReproduceError, Run
from .steps import Env, generation_order, query_instance, retrieval_metrics, select_rows
from .tables import leave_one_out_choice, long_rows

__all__ = ["TABLE1", "TABLE3", "TABLE4", "PAPER_TASKS"]

PAPER = "DF-RAG (Khan et al. 2026)"
SOURCE = "arXiv:2601.17212v1"
#: LongBench tasks run by default (``--set tasks=...`` picks others among LONGBENCH_QA_TASKS).
PAPER_TASKS = ("hotpotqa", "2wikimqa", "musique", "multifieldqa_en")
_LONGBENCH = "https://huggingface.co/datasets/THUDM/LongBench/resolve/main/data.zip"


def _need(task: str) -> DataNeed:
    return DataNeed(f"LongBench {task}", "longbench", f"{task}.jsonl", fetch="longbench", url=_LONGBENCH)


# the recipe needs LongBench's folder; each task present runs, the others are named as skipped
_ANY_TASK = DataNeed(f"LongBench ({', '.join(PAPER_TASKS)} by default)", "longbench", "*.jsonl", fetch="longbench",
                     url=_LONGBENCH)


def _tasks(recipe: Recipe, options: Options) -> list[str]:
    tasks = [str(t) for t in recipe.param(options, "tasks")]
    bad = [t for t in tasks if t not in LONGBENCH_QA_TASKS]
    if bad:
        raise ReproduceError(f"--set tasks: {bad[0]!r} is not a LongBench QA task; expected some of {list(LONGBENCH_QA_TASKS)}")
    return tasks


def _datasets(recipe: Recipe):
    def plans(options: Options) -> list[DatasetPlan]:
        if options.analogue == "wordnet":
            return [DatasetPlan("wordnet", lambda o: wordnet_analogue(o))]
        words = int(recipe.param(options, "words"))
        out = []
        for task in _tasks(recipe, options):
            need = _need(task)

            def build(o: Options, task=task, need=need) -> Prepared:
                ds = load_longbench(need.locate(o.data_dir), words=words, limit=o.limit)
                # each sample retrieves from its own chunks: the limit does not change a sample's pool
                return prepare_text(ds, o, label=task, spec={"name": "longbench", "task": task, "words": words})

            out.append(DatasetPlan(task, build))
        return out

    return plans


# ---- one run -------------------------------------------------------------------------------------
def _context(prep: Prepared, run: Run, inst, rows) -> QueryContext:
    groups = prep.answer_groups(run.query_id)
    return QueryContext(query_id=run.query_id, instance=inst, query_text=prep.question(run.query_index),
                        passages=prep.texts(rows), answers=[a for part in groups for a in part] or None)


def _score(prep: Prepared, run: Run, answer: str) -> float:
    groups = prep.answer_groups(run.query_id)
    return dfrag_f1(answer, groups[0]) if groups else math.nan


def _execute(recipe: Recipe):
    def execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
        p = run.params
        k = int(recipe.param(env.options, "k"))
        inst, rows = query_instance(prep, run.query_index, env=env)
        if run.method in ("gmmr", "mmr"):
            idx, info = select_rows(inst, run.method, k=k, theta=p["theta"], env=env)
            out: dict[str, Any] = {"n": inst.n, "seconds": info["seconds"],
                                   "selected": [str(inst.ids[i]) for i in idx],
                                   **retrieval_metrics(prep, run.query_id, inst, rows, idx, ("answer_recall",))}
            if env.llm is not None:
                order = generation_order(inst, idx, "relevance")
                answer = env.generator("dfrag").generate(prep.question(run.query_index), prep.texts(rows[order]))
                out.update(answer=answer, f1=_score(prep, run, answer))
            return out
        # the whole DF-RAG pipeline (LLM): one row per question
        pipeline = DFRAG.from_chat(env.llm, in_context=run.method == "dfrag_ic", sampling=p.get("sampling", "uniform"),
                                   method=p.get("base", "gmmr"))
        res = pipeline.answer(_context(prep, run, inst.replace(k=k, theta=1.0), rows))
        distinct = {tuple(int(i) for i in s) for s in res.selections.values()}
        return {"n": inst.n, "chosen_theta": res.theta, "thetas_scored": len(res.visited),
                "evaluator_calls": len(distinct), "plan_steps": len(res.plan), "answer": res.answer,
                "f1": _score(prep, run, res.answer), "selected": [str(inst.ids[i]) for i in res.indices],
                **retrieval_metrics(prep, run.query_id, inst, rows, np.asarray(res.indices), ("answer_recall",))}

    return execute


# ---- tables ------------------------------------------------------------------------------------
def _metric(rows: pd.DataFrame) -> str:
    return "f1" if "f1" in rows.columns and rows["f1"].notna().any() else "answer_recall"


def _fixed_and_oracle(sub: pd.DataFrame, metric: str) -> tuple[float, float, float]:
    """(vanilla, fixed-lambda by leave-one-question-out, Oracle) means of one task and base method."""
    per = sub[["query_id", "theta", metric]].rename(columns={metric: "value"})
    vanilla = per[np.isclose(per["theta"], 1.0)]["value"].mean()
    oracle = per.groupby("query_id")["value"].max().mean()
    chosen = leave_one_out_choice(per)
    lookup = per.set_index(["query_id", "theta"])["value"]
    fixed = float(np.mean([lookup[(q, t)] for q, t in chosen.items()])) if len(chosen) else math.nan
    return float(vanilla), fixed, float(oracle)


def _captured(x: float, vanilla: float, oracle: float) -> float:
    return (x - vanilla) / (oracle - vanilla) if oracle - vanilla > 0 else math.nan


def _table1(rows: pd.DataFrame) -> pd.DataFrame:
    metric = _metric(rows)
    recs, gains = [], {"dfrag": [], "oracle": [], "captured": []}
    for ds, sub in rows.groupby("dataset", sort=False):
        base = sub[sub["method"] == "gmmr"]
        if base.empty:
            continue
        vanilla, fixed, oracle = _fixed_and_oracle(base, metric)
        cells = {"vanilla": vanilla, "fixed-lambda": fixed, "oracle": oracle}
        for m in ("dfrag", "dfrag_ic"):
            mine = sub[sub["method"] == m]
            if len(mine):
                cells[m] = float(mine[metric].mean())
        for name, v in cells.items():
            recs.append({"table": "Table 1", "dataset": ds, "setting": "", "method": name, "metric": metric, "value": v})
        for name in ("fixed-lambda", "dfrag", "dfrag_ic"):
            if name in cells:
                recs.append({"table": "Table 1", "dataset": ds, "setting": "", "method": name, "metric": "gap_captured",
                             "value": _captured(cells[name], vanilla, oracle)})
        gains["oracle"].append(oracle - vanilla)
        if "dfrag" in cells:
            gains["dfrag"].append(cells["dfrag"] - vanilla)
            gains["captured"].append(_captured(cells["dfrag"], vanilla, oracle))
    if metric == "f1" and gains["dfrag"]:  # the abstract's claims, over the tasks run
        recs += [
            {"table": "abstract", "dataset": "all", "setting": "", "method": "dfrag", "metric": "f1_gain_vs_vanilla_min",
             "value": min(gains["dfrag"])},
            {"table": "abstract", "dataset": "all", "setting": "", "method": "dfrag", "metric": "f1_gain_vs_vanilla_max",
             "value": max(gains["dfrag"])},
            {"table": "abstract", "dataset": "all", "setting": "", "method": "oracle", "metric": "f1_gain_vs_vanilla_max",
             "value": max(gains["oracle"])},
            {"table": "abstract", "dataset": "all", "setting": "", "method": "dfrag", "metric": "gap_captured_max",
             "value": float(np.nanmax(gains["captured"])) if not all(math.isnan(c) for c in gains["captured"]) else math.nan},
        ]
    return long_rows(recs)


def _table3(rows: pd.DataFrame) -> pd.DataFrame:
    metric = _metric(rows)
    recs = []
    for ds, sub in rows.groupby("dataset", sort=False):
        for base in ("mmr", "gmmr"):
            cand = sub[sub["method"] == base]
            if cand.empty:
                continue
            vanilla, fixed, oracle = _fixed_and_oracle(cand, metric)
            cells = {"fixed-lambda": fixed, "oracle": oracle}
            mine = sub[(sub["method"] == "dfrag") & (sub.get("base") == base)] if "base" in sub else sub.iloc[0:0]
            if len(mine):
                cells["dfrag"] = float(mine[metric].mean())
            for name, v in cells.items():
                recs.append({"table": "Table 3", "dataset": ds, "setting": f"base={base}", "method": name,
                             "metric": metric, "value": v})
    return long_rows(recs)


def _table4(rows: pd.DataFrame) -> pd.DataFrame:
    recs = []
    for (ds, sampling), sub in rows.groupby(["dataset", "sampling"], sort=False):
        for metric in ("f1", "thetas_scored", "evaluator_calls"):
            recs.append({"table": "Table 4", "dataset": ds, "setting": f"sampling={sampling}", "method": "dfrag",
                         "metric": metric, "value": float(sub[metric].mean())})
    return long_rows(recs)


def _recipe(name: str, target: str, summary: str, methods: dict, table, llm: str, llm_methods: tuple,
            layout) -> Recipe:
    r = Recipe(
        name=name, paper_key="dfrag", paper=PAPER, source=SOURCE, target=target, summary=summary,
        needs=Needs(data=(_ANY_TASK,), llm=llm),
        methods=methods, grid={}, metrics=("f1", "answer_recall"),
        datasets=lambda o: [], execute=lambda *a: {}, table=table, layout=layout,
        analogues=("wordnet",) if llm == "partly" else (), llm_methods=llm_methods,
        published_tables=("Table 1", "abstract") if name == "dfrag-table1" else (target,),
        params={"k": 5, "words": 100, "tasks": PAPER_TASKS},
    )
    r.datasets, r.execute = _datasets(r), _execute(r)
    return r


_THETAS = {"theta": DFRAG_THETAS}
TABLE1 = _recipe(
    "dfrag-table1", "Table 1",
    "F1 of vanilla RAG, fixed-lambda, DF-RAG, DF-RAG+IC and the Oracle on LongBench QA; gap captured",
    {"gmmr": _THETAS, "dfrag": {}, "dfrag_ic": {}}, _table1, "partly", ("dfrag", "dfrag_ic"),
    (("method",), ("dataset", "metric")))
TABLE3 = _recipe(
    "dfrag-table3", "Table 3", "MMR vs gMMR candidate sets: fixed-lambda, Oracle and DF-RAG F1",
    {"mmr": _THETAS, "gmmr": _THETAS, "dfrag": {"base": ("mmr", "gmmr")}}, _table3, "partly", ("dfrag",),
    (("method", "setting"), ("dataset", "metric")))
TABLE4 = _recipe(
    "dfrag-table4", "Table 4", "uniform vs binary-search sampling of lambda: F1 and Evaluator calls",
    {"dfrag": {"sampling": ("uniform", "binary")}}, _table4, "required", ("dfrag",),
    (("method", "setting"), ("dataset", "metric")))
