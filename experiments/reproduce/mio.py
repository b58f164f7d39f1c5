"""Recipes of the MIO report (Zhang, Liu & Zhang, "Optimizing Knowledge Retrieval in RAG", MIT
15.C57; code and results: github.com/kbzh2558/robustness_view_of_rag), on rag-mini-wikipedia.

Protocol (the authors' notebooks as far as divopt read them): a question's passages come from the
whole mini-Wikipedia pool; Llama-3 answers with the report's strict prompt (template
``mio_llama3``); the answer is scored against the gold answer by the report's token F1 (set
overlap, ``token_f1(style="mio")``), exact match, cosine and Manhattan distance of the two
answers' embeddings (L2-normalized; divopt embeds them with the recipe's ``--model``, the
report's answer encoder could not be read) and BERTScore (with ``--set
bertscore_model=PATH``, a local model folder, e.g. distilbert-base-uncased, the report's
default). The evaluation questions are the 20 of the authors' ``grid_results`` files (ids below;
``--set questions=...`` picks others, ``--limit`` the first N).

* ``mio-encoders`` (Table 1): top-k with each embedding model given by ``--encoder PATH``
  (the report's four: BERT-base-uncased, multi-qa-mpnet-base-dot-v1, instructor-large,
  e5-small-v2); the answer metrics per encoder, and the cross-encoder consistency: the mean
  Jaccard distance between the encoders' top-k sets over questions and encoder pairs
  (``--retrieval-only`` computes only this).
* ``mio-robust`` (the robust grid tables): top-k at k in {2, 3, 5, 7, 10}, the robust l1 / l2 /
  linf models over rho_vec x sparsity_penalty x rho_div, and the k-sparse cutting plane over
  attack_budget x sparsity_penalty x rho_div, with the grids of the authors' results files.
  divopt's choices where the report could not be read: the robust models choose among the
  ``candidates`` = 100 most relevant passages (the report's Gurobi MILPs ran on its own pools;
  the whole 3,200-passage pool has 5 million pair variables), a ``time_limit`` of 60 s per solve,
  and rho_vec = 0.05 for the cutting plane.
"""
from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from divopt_rag.data import load_mini_wikipedia, load_model
from divopt_rag.experiments.rag import answers
from divopt_rag.experiments.metrics import jaccard
from divopt_rag.experiments.methods import run_method

from .data import DatasetPlan, Prepared, prepare_text
from .spec import DataNeed, Needs, Options, Recipe, ReproduceError, Run
from .steps import Env, query_instance
from .tables import long_rows, mean_table

__all__ = ["ENCODERS", "ROBUST", "EVAL_QUESTIONS"]

PAPER = "MIO report (Zhang, Liu & Zhang, MIT 15.C57)"
SOURCE = "github.com/kbzh2558/robustness_view_of_rag"
MINI_WIKI = DataNeed("rag-mini-wikipedia", "rag-mini-wikipedia", "passages.parquet", fetch="rag-mini-wikipedia",
                     url="https://huggingface.co/datasets/rag-datasets/rag-mini-wikipedia")
#: The 20 question ids of the authors' grid_results files (the questions their tables average).
EVAL_QUESTIONS = ("1492", "178", "867", "4", "1480", "428", "774", "47", "1470", "595", "875", "951", "463", "1688",
                  "1150", "1270", "158", "1045", "475", "1039")
_ANSWER = ("f1", "em", "answer_cosine", "answer_manhattan", "bertscore_precision", "bertscore_recall", "bertscore_f1")


def _label(model: Any) -> str:
    if isinstance(model, (str, os.PathLike)):
        return Path(model).name
    return str(getattr(model, "model_id", None) or type(model).__qualname__)


def _questions(recipe: Recipe, options: Options, ds) -> list[int]:
    wanted = [str(q) for q in recipe.param(options, "questions")]
    pos = [ds.query_index(q) for q in wanted if q in set(ds.query_ids)]
    if not pos:
        raise ReproduceError(f"none of the evaluation questions {wanted[:5]}... is in {ds.name}; "
                             "--set questions=ID1,ID2,... picks questions of this file")
    return pos[: options.limit] if options.limit else pos


def _datasets(recipe: Recipe, per_encoder: bool):
    def plans(options: Options) -> list[DatasetPlan]:
        models = list(options.encoders) if per_encoder and options.encoders else [options.model]

        def build_for(model: Any):
            def build(o: Options) -> Prepared:
                MINI_WIKI.locate(o.data_dir)
                ds = load_mini_wikipedia(o.data_dir / MINI_WIKI.folder)
                prep = prepare_text(ds, o, label="rag-mini-wikipedia", spec={"name": "mini-wikipedia"}, model=model)
                prep.queries = _questions(recipe, o, ds)
                prep.extra["encoder"] = _label(model) if model is not None else "all-MiniLM-L6-v2"
                return prep

            return build

        return [DatasetPlan(_label(m) if m is not None else "default", build_for(m)) for m in models]

    return plans


def _answer_embedder(env: Env) -> Any:
    model = env.options.model
    if model is None or isinstance(model, (str, os.PathLike)):
        return load_model(None if model is None else str(model))
    return model  # a callable encoder (texts -> array)


def _answer_metrics(recipe: Recipe, env: Env, prep: Prepared, run: Run, passages: list[str]) -> dict[str, Any]:
    gold = prep.answer_groups(run.query_id)[0][0]
    answer = env.generator("mio_llama3").generate(prep.question(run.query_index), passages)
    emb = answers.embedding_scores([answer], [gold], _answer_embedder(env))
    out = {"answer": answer, "f1": answers.token_f1(answer, gold, style="mio"),
           "em": answers.exact_match(answer, gold), "answer_cosine": float(emb["cosine"][0]),
           "answer_manhattan": float(emb["manhattan"][0])}
    bmodel = recipe.param(env.options, "bertscore_model")
    if bmodel:
        bs = answers.bertscore([answer], [gold], bmodel)
        out.update(bertscore_precision=float(bs["precision"][0]), bertscore_recall=float(bs["recall"][0]),
                   bertscore_f1=float(bs["f1"][0]))
    return out


def _execute(recipe: Recipe):
    def execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
        p = dict(run.params)
        inst, rows = query_instance(prep, run.query_index, env=env)
        inst = inst.replace(k=int(p.pop("k", 1)), theta=1.0)
        if run.method != "topk":
            p.setdefault("candidates", int(recipe.param(env.options, "candidates")))
            p.setdefault("time_limit", float(recipe.param(env.options, "time_limit")))
            if run.method == "robust_ksparse_cp":
                p.setdefault("rho_vec", float(recipe.param(env.options, "cp_rho_vec")))
        res = run_method(inst, run.method, p, env.options.seed)
        idx = np.asarray(res.pop("indices"), dtype=np.int64)
        out: dict[str, Any] = {"encoder": prep.extra.get("encoder", ""), "n": inst.n, "n_selected": int(idx.size),
                               "seconds": res.get("seconds"), "selected": [str(inst.ids[i]) for i in idx],
                               "status_solver": str(res.get("info_status", "")), "gap": res.get("info_gap")}
        if env.llm is not None:
            out.update(_answer_metrics(recipe, env, prep, run, prep.texts(rows[idx])))
        return out

    return execute


def _jaccard_rows(rows: pd.DataFrame) -> list[dict]:
    recs = []
    ks = sorted(rows["k"].dropna().unique()) if "k" in rows else []
    for k in ks:
        sub = rows[rows["k"] == k]
        dists = []
        for _, g in sub.groupby("query_id"):
            sets = {e: set(s) for e, s in zip(g["encoder"], g["selected"])}
            dists += [1.0 - jaccard(sets[a], sets[b]) for a, b in itertools.combinations(sorted(sets), 2)]
        if dists:
            recs.append({"table": "Table 1", "dataset": "rag-mini-wikipedia", "setting": "" if len(ks) == 1 else f"k={int(k)}",
                         "method": "topk", "metric": "mean_jaccard_distance", "value": float(np.mean(dists))})
    return recs


def _encoders_table(rows: pd.DataFrame) -> pd.DataFrame:
    t = mean_table(rows.assign(method=rows["encoder"]), "Table 1", ("f1", "answer_cosine", "bertscore_f1"), ("k",))
    return pd.concat([t, long_rows(_jaccard_rows(rows))], ignore_index=True)


def _robust_table(rows: pd.DataFrame) -> pd.DataFrame:
    keys = ("k", "rho_vec", "attack_budget", "sparsity_penalty", "rho_div")
    metrics = ("answer_cosine", "answer_manhattan", "bertscore_precision", "bertscore_recall", "bertscore_f1",
               "n_selected")
    grid = mean_table(rows, "robust grid", metrics, keys)
    means = mean_table(rows.assign(setting="{}"), "grid means", ("em", "f1", "bertscore_f1", "answer_cosine"), ())
    return pd.concat([grid, means], ignore_index=True)


_PARAMS = {"questions": EVAL_QUESTIONS, "bertscore_model": "", "candidates": 100, "time_limit": 60.0,
           "cp_rho_vec": 0.05}

ENCODERS = Recipe(
    name="mio-encoders", paper_key="mio", paper=PAPER, source=SOURCE, target="Table 1",
    summary="top-k with each --encoder: answer F1 / cosine / BERTScore, and the mean Jaccard distance between encoders",
    needs=Needs(data=(MINI_WIKI,), llm="partly"),
    methods={"topk": {}}, grid={"k": (5,)}, metrics=("f1", "answer_cosine", "bertscore_f1", "mean_jaccard_distance"),
    datasets=lambda o: [], execute=lambda *a: {}, table=_encoders_table,
    layout=(("method",), ("dataset", "setting", "metric")), published_tables=("Table 1",), params=_PARAMS,
    config=lambda o: {"encoders": [_label(m) for m in o.encoders]},
)
ENCODERS.datasets, ENCODERS.execute = _datasets(ENCODERS, per_encoder=True), _execute(ENCODERS)

_NORM = {"rho_vec": (0.02, 0.05), "sparsity_penalty": (0.5, 0.65, 0.72), "rho_div": (0.8, 0.9)}
ROBUST = Recipe(
    name="mio-robust", paper_key="mio", paper=PAPER, source=SOURCE, target="robust grid tables",
    summary="top-k (k 2-10), robust l1/l2/linf and the k-sparse cutting plane over the report's grids: answer "
            "cosine / Manhattan / BERTScore",
    needs=Needs(data=(MINI_WIKI,), llm="required", gpu="no (Gurobi recommended for the MILPs)"),
    methods={"topk": {"k": (2, 3, 5, 7, 10)}, "robust_l1": _NORM, "robust_l2": _NORM, "robust_linf": _NORM,
             "robust_ksparse_cp": {"attack_budget": (20, 40, 80), "sparsity_penalty": (0.5, 0.65, 0.7),
                                   "rho_div": (0.8, 0.9)}},
    grid={}, metrics=_ANSWER, datasets=lambda o: [], execute=lambda *a: {}, table=_robust_table,
    layout=(("method", "setting"), ("dataset", "metric")), published_tables=("robust grid", "grid means"),
    params=_PARAMS,
)
ROBUST.datasets, ROBUST.execute = _datasets(ROBUST, per_encoder=False), _execute(ROBUST)
