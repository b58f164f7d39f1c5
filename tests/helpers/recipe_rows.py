"""Tidy rows a recipe's run would write (random metric values), for every recipe: what its
table is built from in the tests of the published numbers."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from divopt_rag.experiments.reproduce.dfrag import PAPER_TASKS, PAPER_WORDS, llm_label
from divopt_rag.experiments.reproduce.spec import expand_settings

_METRICS = ("answer_recall", "ilad", "list_precision", "list_recall", "list_f1", "str_recall", "seconds", "f1",
            "thetas_scored", "evaluator_calls", "plan_steps", "accuracy", "ndcg", "component_ndcg", "sim", "div",
            "answer_cosine", "answer_manhattan", "bertscore_precision", "bertscore_recall", "bertscore_f1", "em",
            "n_selected", "context_words", "cosine_orig", "cosine_mod", "cosine_mod_renormalized", "erased")


def tidy_rows(recipe, contexts, n_queries=3, seed=0):
    """Tidy rows covering the recipe's grid: one per (context, query, method, setting), every metric
    column random, the context's columns (dataset label, llm, w, encoder, pool shape) as a run writes them."""
    rng = np.random.default_rng(seed)
    recs = []
    for ctx in contexts:
        for q in range(n_queries):
            for method, setting in expand_settings(recipe.methods, recipe.grid):
                r = {"dataset": ctx["dataset"], "query_id": f"q{q}", "method": method, "status": "ok",
                     "params": json.dumps(setting, sort_keys=True), **setting,
                     **{k: v for k, v in ctx.items() if k != "dataset"}}
                r.update({m: float(rng.random()) for m in _METRICS})
                r["selected"] = [f"p{i}" for i in rng.choice(20, size=5, replace=False)]
                recs.append(r)
    return pd.DataFrame(recs)


_LLMS = ("meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen2.5-72B-Instruct")
CONTEXTS = {
    "ccbqp-generation": [{"dataset": "qampari-dev"}, {"dataset": "asqa-dev"}],
    "ccbqp-latency": [{"dataset": "narrow-cone n=2000000 d=1024", "n": 2_000_000, "d": 1024}],
    "dfrag-table1": [{"dataset": t, "llm": llm_label(m), "w": w} for t in PAPER_TASKS for m in _LLMS
                     for w in PAPER_WORDS],
    "dfrag-table3": [{"dataset": t, "llm": llm_label(_LLMS[0]), "w": 100} for t in PAPER_TASKS],
    "dfrag-table4": [{"dataset": t, "llm": llm_label(m), "w": 100} for t in PAPER_TASKS for m in _LLMS],
    "dartboard-rgb": [{"dataset": "simple"}, {"dataset": "integration"}],
    "dartboard-sigma": [{"dataset": "simple"}, {"dataset": "integration"}],
    "vrsd-tables": [{"dataset": d, "encoder": "all-mpnet-base-v2"} for d in ("arc-da", "openbookqa", "sciq")]
    + [{"dataset": "arc-da", "encoder": e} for e in ("bge-m3", "all-MiniLM-L6-v2")],
    "mio-encoders": [{"dataset": "rag-mini-wikipedia", "encoder": e} for e in (
        "bert-base-uncased", "multi-qa-mpnet-base-dot-v1", "hkunlp-instructor-large", "intfloat-e5-small-v2")],
    "mio-robust": [{"dataset": "rag-mini-wikipedia"}],
    "mio-table8": [{"dataset": "rag-mini-wikipedia", "encoder": "bert-base-uncased"}],
    "ccbqp-pareto": [{"dataset": "qampari-dev"}],
}
