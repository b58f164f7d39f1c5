"""Recipes of Dartboard (Pickett et al., "Better RAG using Relevant Information Gain",
arXiv:2407.12101), on RGB (Chen et al., 2024).

Protocol: each RGB question retrieves k = 5 passages (RGB's default number of documents) from
its own passages (positives and negatives, :func:`divopt_rag.data.load_rgb`); NDCG@k against the
positives; on the information-integration questions (``en_int``) also the nDCG per answer
component (each part's positive group), averaged; QA accuracy is RGB's string match of an
LLM's answer (every part matched, no decline) with RGB's prompt (template ``dartboard``).
Methods by their plain names: ``topk`` (the paper's KNN), ``mmr`` (theta 0.5: the paper's
lambda could not be read; ``--set theta=...``), ``dartboard`` (cosine, sigma 0.096), and with
``--cross-encoder`` the paper's ``dartboard_hybrid``, ``dartboard_cc``, ``knn_cc``, ``mmr_cc``.

* ``dartboard-rgb`` (Table 2): every method on the simple (``en``) and integration
  (``en_int``) questions.
* ``dartboard-sigma`` (the sigma sweep): ``dartboard`` (and the cross-encoder variants with
  ``--cross-encoder``) over a sigma grid around the paper's 0.096.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from divopt_rag.data import load_rgb

from .data import DatasetPlan, Prepared, prepare_text, subset_queries, wordnet_analogue
from .spec import DataNeed, Needs, Options, Recipe, Run
from .steps import Env, answer_scores, query_instance, retrieval_metrics, select_rows
from .tables import mean_table

__all__ = ["TABLE2", "SIGMA", "SIGMA_GRID"]

PAPER = "Dartboard (Pickett et al. 2024)"
SOURCE = "arXiv:2407.12101"
_RGB = "https://raw.githubusercontent.com/chen700564/RGB/master/data/"
RGB_EN = DataNeed("RGB en (simple questions)", "rgb", "en.json", fetch="rgb/en", url=_RGB + "en.json")
RGB_INT = DataNeed("RGB en_int (integration questions)", "rgb", "en_int.json", fetch="rgb/en_int", url=_RGB + "en_int.json")
#: The sigma sweep's grid (divopt's: a log-spaced grid through the paper's 0.096).
SIGMA_GRID = (0.01, 0.02, 0.05, 0.075, 0.096, 0.15, 0.2, 0.3, 0.5, 1.0)
_CE = ("dartboard_hybrid", "dartboard_cc", "knn_cc", "mmr_cc")
_RETRIEVAL = ("ndcg", "component_ndcg")


def _datasets(options: Options) -> list[DatasetPlan]:
    if options.analogue == "wordnet":
        return [DatasetPlan("wordnet", lambda o: wordnet_analogue(o))]
    plans = []
    for need, label in ((RGB_EN, "simple"), (RGB_INT, "integration")):
        def build(o: Options, need=need, label=label) -> Prepared:
            # every question retrieves from its own passages: the limit does not change a question's pool
            ds = subset_queries(load_rgb(need.locate(o.data_dir)), o.limit)
            return prepare_text(ds, o, label=label, spec={"name": "rgb", "file": need.marker})

        plans.append(DatasetPlan(label, build))
    return plans


def _execute(recipe: Recipe):
    def execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
        p = run.params
        inst, rows = query_instance(prep, run.query_index, env=env)
        extra = {"sigma": p["sigma"]} if "sigma" in p else {}
        idx, info = select_rows(inst, run.method, k=p["k"], theta=p.get("theta", 1.0), env=env, prep=prep, rows=rows,
                                query_index=run.query_index, **extra)
        out: dict[str, Any] = {"n": inst.n, "seconds": info["seconds"], "selected": [str(inst.ids[i]) for i in idx],
                               **retrieval_metrics(prep, run.query_id, inst, rows, idx, _RETRIEVAL)}
        if env.llm is not None:
            answer = env.generator("dartboard").generate(prep.question(run.query_index), prep.texts(rows[idx]))
            out["answer"] = answer
            out["accuracy"] = answer_scores(answer, prep.answer_groups(run.query_id), ("rgb_correct",))["rgb_correct"]
        return out

    return execute


def _table2(rows: pd.DataFrame) -> pd.DataFrame:
    t = mean_table(rows, "Table 2", ("accuracy", "ndcg", "component_ndcg"), ("k", "theta", "sigma"))
    # per-component nDCG is reported for the integration questions only
    return t[~((t["metric"] == "component_ndcg") & (t["dataset"] == "simple"))].reset_index(drop=True)


def _sigma_table(rows: pd.DataFrame) -> pd.DataFrame:
    t = mean_table(rows, "sigma sweep", ("accuracy", "ndcg", "component_ndcg"), ("sigma",))
    return t[~((t["metric"] == "component_ndcg") & (t["dataset"] == "simple"))].reset_index(drop=True)


TABLE2 = Recipe(
    name="dartboard-rgb", paper_key="dartboard", paper=PAPER, source=SOURCE, target="Table 2",
    summary="RGB QA accuracy and NDCG (simple and integration questions, per-component NDCG) of KNN, MMR and Dartboard",
    needs=Needs(data=(RGB_EN, RGB_INT), llm="partly", cross_encoder="optional"),
    methods={"topk": {}, "mmr": {"theta": (0.5,)}, "dartboard": {"sigma": (0.096,)},
             "dartboard_hybrid": {"sigma": (0.096,)}, "dartboard_cc": {"sigma": (0.096,)}, "knn_cc": {},
             "mmr_cc": {"theta": (0.5,)}},
    grid={"k": (5,)}, metrics=("accuracy", "ndcg", "component_ndcg"),
    datasets=_datasets, execute=lambda *a: {}, table=_table2,
    layout=(("method", "setting"), ("dataset", "metric")), analogues=("wordnet",), ce_methods=_CE,
    published_tables=("Table 2",),
)
TABLE2.execute = _execute(TABLE2)

SIGMA = Recipe(
    name="dartboard-sigma", paper_key="dartboard", paper=PAPER, source=SOURCE, target="sigma sweep",
    summary="Dartboard's NDCG (and QA accuracy with an LLM) over sigma on RGB",
    needs=Needs(data=(RGB_EN, RGB_INT), llm="partly", cross_encoder="optional"),
    methods={"dartboard": {"sigma": SIGMA_GRID}, "dartboard_hybrid": {"sigma": SIGMA_GRID},
             "dartboard_cc": {"sigma": SIGMA_GRID}},
    grid={"k": (5,)}, metrics=("accuracy", "ndcg", "component_ndcg"),
    datasets=_datasets, execute=lambda *a: {}, table=_sigma_table,
    layout=(("setting",), ("method", "dataset", "metric")), analogues=("wordnet",), ce_methods=_CE,
    published_tables=("sigma sweep",),
)
SIGMA.execute = _execute(SIGMA)
