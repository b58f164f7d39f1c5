"""Recipes of Dartboard (Pickett et al., "Better RAG using Relevant Information Gain",
arXiv:2407.12101), on RGB (Chen et al., 2024).

Protocol, as Sec. 3 states it: RGB's positive and negative passages of every question are merged
into one collection (the paper counts 11,641 passages for the 300 simple questions, ``en``, and
5,701 for the 100 information-integration questions, ``en_int``; divopt merges them with
duplicate texts counted once, :func:`divopt_rag.data.load_rgb`), and each question retrieves
k = 5 passages from the whole collection (``--set pool=own`` keeps divopt's earlier per-question
pools). Retrieval: NDCG@5 of the question's positives; on the integration questions the paper's
NDCG "for retrieving at least one positive passage for each component", divopt's mean over the
answer components of nDCG@5 against each component's positives (``component_ndcg``). QA accuracy
is RGB's string match of an LLM's answer (every part matched, no decline) with RGB's prompt
(template ``dartboard``), in percent as the paper prints it.

Methods (App. A.2) by their plain names: ``topk`` (KNN cossim), ``mmr`` (MMR cossim, best over
theta in {0, 0.1, ..., 1}), ``dartboard`` (D-CS, best over the sigma grid), and with
``--cross-encoder`` ``dartboard_hybrid`` (D-H), ``dartboard_cc`` (D-CC), ``knn_cc``, ``mmr_cc``
(the cross-encoder ones triage the top 100 by cosine first, as the paper says), plus the paper's
reference rows: ``oracle`` (the positives, for the integration questions taken in turn from each
component, filled with the question's negatives up to k), ``random`` (k passages drawn from the
whole collection, seeded) and ``empty`` (no passage; the LLM answers from the question alone).
"For methods with tunable parameters, the best score over a parameter sweep is reported"
(Table 2's caption): the table keeps, per dataset and column, the best mean over the method's
grid (``Table 2``) and every grid point (``Table 2 (grid)``).

* ``dartboard-rgb`` (Table 2).
* ``dartboard-sigma`` (Fig. 2 / Sec. 3.1): the Dartboard variants over the sigma grid; with an
  LLM, the sigma of the best QA accuracy on the simple questions beside the paper's 0.096 (D-H).
"""
from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import numpy as np
import pandas as pd

from divopt_rag.data import load_rgb

from .data import DatasetPlan, Prepared, prepare_text, subset_queries, wordnet_analogue
from .spec import DataNeed, Needs, Options, Recipe, ReproduceError, Run
from .steps import Env, answer_scores, query_instance, retrieval_metrics, select_rows
from .tables import long_rows, mean_table

__all__ = ["TABLE2", "SIGMA", "SIGMA_GRID", "MMR_GRID", "oracle_rows"]

PAPER = "Dartboard (Pickett et al. 2024)"
SOURCE = "arXiv:2407.12101"
_RGB = "https://raw.githubusercontent.com/chen700564/RGB/master/data/"
RGB_EN = DataNeed("RGB en (simple questions)", "rgb", "en.json", fetch="rgb/en", url=_RGB + "en.json")
RGB_INT = DataNeed("RGB en_int (integration questions)", "rgb", "en_int.json", fetch="rgb/en_int", url=_RGB + "en_int.json")
#: The sigma grid (divopt's: the paper's Fig. 2 has no numbers; a log-spaced grid through its 0.096).
SIGMA_GRID = (0.01, 0.02, 0.05, 0.075, 0.096, 0.15, 0.2, 0.3, 0.5, 1.0)
#: MMR's diversity parameter "varies from 0 to 1" (Sec. 3); divopt's grid step is 0.1.
MMR_GRID = tuple(round(0.1 * i, 1) for i in range(11))
_CE = ("dartboard_hybrid", "dartboard_cc", "knn_cc", "mmr_cc")
_REFERENCE = ("oracle", "random", "empty")
_RETRIEVAL = ("ndcg", "component_ndcg")


def _datasets(recipe: Recipe):
    def plans(options: Options) -> list[DatasetPlan]:
        if options.analogue == "wordnet":
            return [DatasetPlan("wordnet", lambda o: wordnet_analogue(o))]
        pool = str(recipe.param(options, "pool"))
        if pool not in ("collection", "own"):
            raise ReproduceError(f"--set pool: expected 'collection' (the paper's merged passages) or 'own', got {pool!r}")
        out = []
        for need, label in ((RGB_EN, "simple"), (RGB_INT, "integration")):
            def build(o: Options, need=need, label=label) -> Prepared:
                ds = load_rgb(need.locate(o.data_dir))
                own = dict(ds.candidates or {})
                if pool == "own":
                    # every question retrieves from its own passages: the limit does not change a question's pool
                    ds = subset_queries(ds, o.limit)
                else:
                    # the paper's collection: every question ranks all passages of the file, so a limited run
                    # keeps the whole collection and its rows equal the full run's
                    ds = dataclasses.replace(ds, candidates=None)
                prep = prepare_text(ds, o, label=label, spec={"name": "rgb", "file": need.marker, "pool": pool})
                prep.extra["own"] = own
                return prep

            out.append(DatasetPlan(label, build))
        return out

    return plans


def oracle_rows(prep: Prepared, query_id: str, inst, k: int) -> np.ndarray:
    """App. A.2's Oracle: the question's positive passages (for an integration question the
    components' positives in turn: first of each component, then second, ...), then its
    negatives in file order, up to k; positions in ``inst``'s pool."""
    qrels = dict((prep.data.qrels or {}).get(query_id) or {})
    own = prep.extra.get("own", {}).get(query_id) or list(qrels)
    labels = dict((prep.data.subtopics or {}).get(query_id) or {})
    positives = [p for p in own if qrels.get(p, 0) > 0]
    if labels:
        parts: dict[str, list[str]] = {}
        for p in positives:
            parts.setdefault(labels.get(p, ""), []).append(p)
        turns = [p for i in range(max(map(len, parts.values()), default=0))
                 for g in parts.values() if i < len(g) for p in [g[i]]]
        positives = turns
    negatives = [p for p in own if qrels.get(p, 0) <= 0]
    where = {str(pid): i for i, pid in enumerate(inst.ids)}
    picked = [where[p] for p in positives + negatives if p in where][:k]
    return np.asarray(picked, dtype=np.int64)


def _reference_selection(prep: Prepared, run: Run, inst, k: int, seed: int) -> np.ndarray:
    if run.method == "empty":
        return np.zeros(0, dtype=np.int64)
    if run.method == "random":
        rng = np.random.default_rng([seed, zlib.crc32(f"{prep.key}/{run.query_id}".encode())])
        return rng.choice(inst.n, size=min(k, inst.n), replace=False).astype(np.int64)
    return oracle_rows(prep, run.query_id, inst, k)


def _execute(recipe: Recipe):
    def execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
        p = run.params
        inst, rows = query_instance(prep, run.query_index, env=env)
        if run.method in _REFERENCE:
            idx, seconds = _reference_selection(prep, run, inst, int(p["k"]), env.options.seed), 0.0
        else:
            extra = {"sigma": p["sigma"]} if "sigma" in p else {}
            idx, info = select_rows(inst, run.method, k=p["k"], theta=p.get("theta", 1.0), env=env, prep=prep,
                                    rows=rows, query_index=run.query_index, **extra)
            seconds = info["seconds"]
        out: dict[str, Any] = {"n": inst.n, "seconds": seconds, "selected": [str(inst.ids[i]) for i in idx]}
        if len(idx):
            out.update(retrieval_metrics(prep, run.query_id, inst, rows, idx, _RETRIEVAL))
        else:  # nothing retrieved: no relevant passage found
            out.update(ndcg=0.0, component_ndcg=0.0 if (prep.data.subtopics or {}).get(run.query_id) else np.nan)
        if env.llm is not None:
            answer = env.generator("dartboard").generate(prep.question(run.query_index), prep.texts(rows[idx]))
            out["answer"] = answer
            out["accuracy"] = answer_scores(answer, prep.answer_groups(run.query_id), ("rgb_correct",))["rgb_correct"]
        return out

    return execute


def _per_setting(rows: pd.DataFrame, table: str) -> pd.DataFrame:
    t = mean_table(rows, table, ("accuracy", "ndcg", "component_ndcg"), ("k", "theta", "sigma"))
    t.loc[t["metric"] == "accuracy", "value"] *= 100.0  # the paper prints QA accuracy in percent
    # per-component NDCG is the integration questions' column
    return t[~((t["metric"] == "component_ndcg") & (t["dataset"] == "simple"))].reset_index(drop=True)


def _table2(rows: pd.DataFrame) -> pd.DataFrame:
    grid = _per_setting(rows, "Table 2 (grid)")
    best = []
    for (ds, method, metric), g in grid.groupby(["dataset", "method", "metric"], sort=False):
        k = str(g["setting"].iloc[0]).split(",")[0]  # "k=5": every setting of a method shares its k
        best.append({"table": "Table 2", "dataset": ds, "setting": k, "method": method, "metric": metric,
                     "value": float(g["value"].max())})
    return pd.concat([long_rows(best), grid], ignore_index=True)


def _sigma_table(rows: pd.DataFrame) -> pd.DataFrame:
    t = _per_setting(rows, "sigma sweep")
    t = t.assign(table="sigma sweep")
    recs = []
    acc = t[(t["metric"] == "accuracy") & (t["dataset"] == "simple")]
    for method in dict.fromkeys(rows["method"]):
        g = acc[acc["method"] == method]
        sig = np.nan
        if len(g):  # Sec. 3.1: the sigma of the best end-to-end QA on the simple questions (ties: the smallest)
            settings = dict(kv.split("=") for kv in str(g.loc[g["value"].idxmax(), "setting"]).split(","))
            sig = float(settings.get("sigma", np.nan))
        ks = sorted(rows["k"].dropna().unique()) if "k" in rows else []
        recs.append({"table": "Sec. 3.1", "dataset": "simple", "setting": f"k={int(ks[0])}" if len(ks) == 1 else "",
                     "method": method, "metric": "best_sigma", "value": sig})
    return pd.concat([t, long_rows(recs)], ignore_index=True)


TABLE2 = Recipe(
    name="dartboard-rgb", paper_key="dartboard", paper=PAPER, source=SOURCE, target="Table 2",
    summary="RGB QA accuracy and NDCG (simple and integration questions, per-component NDCG) of KNN, MMR, Dartboard, "
            "the cross-encoder variants, Oracle, Random and Empty, each tunable one at its best grid point",
    needs=Needs(data=(RGB_EN, RGB_INT), llm="partly", cross_encoder="optional"),
    methods={"oracle": {}, "dartboard_hybrid": {"sigma": SIGMA_GRID}, "dartboard_cc": {"sigma": SIGMA_GRID},
             "dartboard": {"sigma": SIGMA_GRID}, "mmr_cc": {"theta": MMR_GRID}, "mmr": {"theta": MMR_GRID},
             "knn_cc": {}, "topk": {}, "empty": {}, "random": {}},
    grid={"k": (5,)}, metrics=("accuracy", "ndcg", "component_ndcg"),
    datasets=lambda o: [], execute=lambda *a: {}, table=_table2,
    layout=(("method",), ("dataset", "metric")), analogues=("wordnet",), ce_methods=_CE,
    published_tables=("Table 2",), params={"pool": "collection"},
)
TABLE2.datasets, TABLE2.execute = _datasets(TABLE2), _execute(TABLE2)

SIGMA = Recipe(
    name="dartboard-sigma", paper_key="dartboard", paper=PAPER, source=SOURCE, target="sigma sweep",
    summary="Dartboard's NDCG (and QA accuracy with an LLM) over sigma on RGB; the best sigma beside the paper's 0.096",
    needs=Needs(data=(RGB_EN, RGB_INT), llm="partly", cross_encoder="optional"),
    methods={"dartboard": {"sigma": SIGMA_GRID}, "dartboard_hybrid": {"sigma": SIGMA_GRID},
             "dartboard_cc": {"sigma": SIGMA_GRID}},
    grid={"k": (5,)}, metrics=("accuracy", "ndcg", "component_ndcg"),
    datasets=lambda o: [], execute=lambda *a: {}, table=_sigma_table,
    layout=(("setting",), ("method", "dataset", "metric")), analogues=("wordnet",), ce_methods=_CE,
    published_tables=("Sec. 3.1", "Fig. 2", "Fig. 3"), params={"pool": "collection"},
)
SIGMA.datasets, SIGMA.execute = _datasets(SIGMA), _execute(SIGMA)
