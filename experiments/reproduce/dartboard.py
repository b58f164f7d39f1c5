"""Recipes of Dartboard (Pickett et al., "Better RAG using Relevant Information Gain",
arXiv:2407.12101), on RGB (Chen et al., 2024).

Protocol (the paper's Section 3 and Appendix A.2, read with the authors' retrieval code,
github.com/EmergenceAI/dartboard, ``end2end/do_eval.py``):

* **Collection** (``--set pool=collection``, the default): every question of a file retrieves
  k = 5 passages from ONE collection, the positive and negative passages of all its questions
  merged (Sec. 3: 11,641 passages for the 300 simple questions of ``en.json``, 5,701 for the
  100 integration questions of ``en_int.json``). divopt's loader de-duplicates passages by
  text; the authors' code concatenates the lists and keeps repeats, so the paper's counts are
  the number of listed passages (``Dataset.meta["n_listed"]``), divopt's pool the distinct
  ones. ``--set pool=own`` gives the older per-question pool (a question's own passages only,
  RGB's generation protocol), not the paper's retrieval experiment.
* **NDCG** (``ndcg``): the paper's retrieval score "on retrieving any one of the positive
  passages" (Sec. 3, which cites Wang et al. 2013 and gives no formula), one positive suffices.
  The score is the authors' code's (``get_single_ndcg``), not the paper's text: 1 / log2(1 + r)
  for the first positive passage at rank r <= k, 0 when none is retrieved (the ideal ranking
  scores 1). On the integration questions (``component_ndcg``, Table 2's "Integrated NDCG",
  "at least one positive passage for each component") the same score per answer component
  (its positive group), averaged over the question's components. Table 2 says k = 5; the
  authors' code scores NDCG on 40-passage lists (``ndcg_num = 40``), a difference the paper
  does not mention. QA accuracy is RGB's string match of an LLM's answer (every part matched,
  no decline) with RGB's prompt (template ``dartboard``), in percent as the paper prints it.
* **Rows** (App. A.2; cosine ones, ``--cross-encoder`` adds the paper's ``dartboard_hybrid``
  (D-H), ``dartboard_cc`` (D-CC), ``knn_cc``, ``mmr_cc``, which triage the top 100 by cosine
  first): ``topk`` (KNN cossim), ``mmr_cs`` (MMR cossim: the paper's set-average MMR,
  :func:`divopt_rag.solvers.mmr_cc`, on cosine distances (1 - cos)/2 over the 100-passage KNN
  triage, diversity = 1 - theta), ``dartboard`` (D-CS), ``random`` (k passages drawn from the
  whole collection; the mean over 10 draws per question), ``empty`` (no passage: NDCG 0; the
  LLM answers from the question alone), ``oracle`` (the question's positives first,
  round-robin over the components on integration questions, then its negatives), and divopt's
  plain ``mmr`` (Carbonell & Goldstein, not the paper's MMR) for reference, beside the table's
  keys of no published cell.
* **Best over the sweep**: "We performed a grid search over these parameters, reporting the
  best results for each method" (Sec. 3; Table 2's caption): the table keeps, per dataset and
  column, the best mean over a tunable method's grid (``Table 2``: sigma over
  :data:`SIGMA_GRID`, theta over :data:`MMR_GRID`), naming the setting it took (``chosen``,
  printed ``value @sigma=...``), and every grid point with its setting (``Table 2 (grid)``).
  Its keys (table, dataset, setting, method, metric) are those of
  ``published/dartboard.csv``, so the paper's number sits beside each cell.

* ``dartboard-rgb`` (Table 2).
* ``dartboard-sigma`` (Fig. 2 / Sec. 3.1): the Dartboard variants over the sigma grid; with an
  LLM, the sigma of the best QA accuracy on the simple questions beside the paper's 0.096 (D-H).

Encoder: the authors' code embeds with ``multi-qa-mpnet-base-cos-v1`` and scores with the
cross-encoder ``ms-marco-MiniLM-L-6-v2``; divopt's offline default is all-MiniLM-L6-v2
(``--model PATH`` takes a local copy of the paper's encoder).
"""
from __future__ import annotations

import math
import time
from typing import Any, Collection, Sequence

import numpy as np
import torch
import pandas as pd

from divopt_rag.data import load_rgb
from divopt_rag.models import Instance
from divopt_rag.solvers import select

from .data import DatasetPlan, Prepared, prepare_text, subset_queries, wordnet_analogue
from .spec import DataNeed, Needs, Options, Recipe, ReproduceError, Run
from .steps import Env, answer_scores, query_instance, select_rows
from .tables import long_rows, mean_table

__all__ = ["TABLE2", "SIGMA", "SIGMA_GRID", "MMR_GRID", "best_over_grid", "paper_ndcg", "positive_groups", "oracle_ranking",
           "random_rankings", "mmr_cosine", "build_rgb", "rank_ids"]

PAPER = "Dartboard (Pickett et al. 2024)"
SOURCE = "arXiv:2407.12101"
_RGB = "https://raw.githubusercontent.com/chen700564/RGB/master/data/"
RGB_EN = DataNeed("RGB en (simple questions)", "rgb", "en.json", fetch="rgb", url=_RGB + "en.json")
RGB_INT = DataNeed("RGB en_int (integration questions)", "rgb", "en_int.json", fetch="rgb", url=_RGB + "en_int.json")
#: The sigma grid (divopt's: the paper's Fig. 2 has no numbers; a log-spaced grid through its 0.096).
SIGMA_GRID = (0.01, 0.02, 0.05, 0.075, 0.096, 0.15, 0.2, 0.3, 0.5, 1.0)
_CE = ("dartboard_hybrid", "dartboard_cc", "knn_cc", "mmr_cc")
#: The grid of the MMR rows: the diversity parameter "varies from 0 to 1" (Sec. 3); theta = 1 - the
#: paper's diversity; the authors swept diversity in steps of 0.001, divopt in steps of 0.1.
MMR_GRID = tuple(round(0.1 * i, 1) for i in range(11))
#: The paper's triage: the 100 passages nearest the query by cosine (Appendix A.2).
TRIAGE = 100
#: Draws averaged per question for the Random row.
RANDOM_DRAWS = 10
_POOLS = ("collection", "own")


def paper_ndcg(ranked: Sequence[str], relevant: Collection[str]) -> float:
    """Table 2's NDCG as the authors' code scores it (``get_single_ndcg``; the paper's Sec. 3 names
    NDCG "on retrieving any one of the positive passages" without a formula): 1 / log2(1 + r) for
    the first passage of ``relevant`` at rank r (1-based) in ``ranked``, 0 when none is there (one
    positive passage answers a simple question, so the ideal ranking scores 1)."""
    for r, pid in enumerate(ranked, 1):
        if pid in relevant:
            return 1.0 / math.log2(1 + r)
    return 0.0


def positive_groups(prep: Prepared, query_id: str) -> list[list[str]]:
    """The question's positive passages (ids in file order), one list per answer component:
    RGB ``en_int``'s groups (the subtopic labels), else one group of every judged-relevant passage."""
    ds = prep.dataset
    own = [str(p) for p in ds.candidates[query_id]] if ds is not None and ds.candidates else []
    grades = dict((prep.data.qrels or {}).get(query_id) or {})
    labels = dict((prep.data.subtopics or {}).get(query_id) or {})
    if not own:  # an analogue: judged passages in id order
        own = sorted(grades, key=str)
    if labels:
        comps = sorted(set(labels.values()), key=str)
        return [[p for p in own if labels.get(p) == c] for c in comps]
    return [[p for p in own if grades.get(p, 0) > 0]]


def oracle_ranking(prep: Prepared, query_id: str, k: int) -> list[str]:
    """The Oracle row (Appendix A.2): the question's positives, round-robin over its
    components, then its negatives, first k."""
    groups = [list(g) for g in positive_groups(prep, query_id)]
    out: list[str] = []
    while any(groups):
        for g in groups:
            if g:
                p = g.pop(0)
                if p not in out:
                    out.append(p)
    grades = dict((prep.data.qrels or {}).get(query_id) or {})
    ds = prep.dataset
    own = [str(p) for p in ds.candidates[query_id]] if ds is not None and ds.candidates else sorted(grades, key=str)
    out += [p for p in own if grades.get(p, 0) <= 0 and p not in out]
    return out[:k]


def random_rankings(ids: Sequence[str], k: int, seed: int, draws: int = RANDOM_DRAWS) -> list[list[str]]:
    """``draws`` rankings of k passages drawn without replacement from the whole pool ``ids``."""
    rng = np.random.default_rng(seed)
    k = min(k, len(ids))
    return [[str(ids[i]) for i in rng.choice(len(ids), size=k, replace=False)] for _ in range(draws)]


def mmr_cosine(inst: Instance, k: int, theta: float, triage: int = TRIAGE) -> np.ndarray:
    """The paper's MMR cossim: its set-average MMR (:func:`divopt_rag.solvers.mmr_cc`) on the cosine
    distances (1 - cos)/2 of the ``triage`` passages nearest the query (ties keep the pool
    order); rows of ``inst`` in pick order."""
    E = inst.E.to(torch.float64)
    c = inst.relevance.to(torch.float64)
    K = min(int(triage), inst.n)
    order = np.argsort(-c.cpu().numpy(), kind="stable")[:K]
    pool = torch.from_numpy(order)
    F = E.index_select(0, pool)
    sub = Instance(F, inst.q.to(torch.float64), k=min(int(k), K), theta=float(theta))
    sel = select(sub, "mmr_cc", triage=K, query_scores=c.index_select(0, pool), pair_scores=F @ F.T, ce_range=(-1.0, 1.0))
    return order[np.asarray(sel.indices)]


def rank_ids(inst: Instance, idx: Sequence[int]) -> list[str]:
    return [str(inst.ids[int(i)]) for i in idx]


def _scores(prep: Prepared, query_id: str, ranked: list[str]) -> dict[str, float]:
    groups = positive_groups(prep, query_id)
    allpos = {p for g in groups for p in g}
    labelled = bool((prep.data.subtopics or {}).get(query_id))
    comp = [paper_ndcg(ranked, set(g)) for g in groups if g] if labelled else []
    return {"ndcg": paper_ndcg(ranked, allpos) if allpos else math.nan,
            "component_ndcg": float(np.mean(comp)) if comp else math.nan}


def _check_pool(pool: Any) -> None:
    if pool not in _POOLS:
        raise ReproduceError(f"--set pool: expected 'collection' (the paper's merged passages) or 'own' "
                             f"(each question's own), got {pool!r}")


def build_rgb(path: Any, options: Options, *, label: str, pool: str = "collection", file: str | None = None) -> Prepared:
    """An RGB file as the recipe runs it: ``pool="collection"`` (the paper's: every question
    ranks the merged passages of the whole file; ``--limit`` keeps the first questions and the
    whole collection, so limited rows equal full-run rows) or ``"own"`` (each question
    its own passages). The ``positive_wrong`` passages of ``en_fact.json`` (RGB's counterfactual
    rewrites of the positives) are left out: the paper merges positives and negatives."""
    _check_pool(pool)
    full = load_rgb(path)
    fakes = {p for ids in full.meta.get("fake_positives", {}).values() for p in ids}
    if fakes:  # en_fact's counterfactual rewrites of the positives: not passages of the paper's collection
        full = full.restrict([i for i, p in enumerate(full.passage_ids) if p not in fakes], name=full.name)
    spec = {"name": "rgb", "file": file or str(getattr(path, "name", path)), "pool": pool}
    if pool == "collection":
        prep = prepare_text(full, options, label=label, spec=spec)
        prep.data.pools = None
    else:
        prep = prepare_text(subset_queries(full, options.limit), options, label=label, spec=spec)
    prep.extra.update(n_listed=full.meta.get("n_listed"), n_passages=full.n_passages)
    return prep


def _datasets(recipe: Recipe):
    def datasets(options: Options) -> list[DatasetPlan]:
        if options.analogue == "wordnet":
            return [DatasetPlan("wordnet", lambda o: wordnet_analogue(o))]
        pool = recipe.param(options, "pool")
        _check_pool(pool)  # before any work: a bad value is one line, not a traceback mid-run
        plans = []
        for need, label in ((RGB_EN, "simple"), (RGB_INT, "integration")):
            def build(o: Options, need=need, label=label) -> Prepared:
                return build_rgb(need.locate(o.data_dir), o, label=label, pool=pool, file=need.marker)

            plans.append(DatasetPlan(label, build))
        return plans

    return datasets


def _execute(recipe: Recipe):
    def execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
        p = run.params
        k = int(p["k"])
        inst, rows = query_instance(prep, run.query_index, env=env)
        out: dict[str, Any] = {"n": inst.n}
        t0 = time.perf_counter()
        draws: list[list[str]] = []
        if run.method == "random":  # RANDOM_DRAWS draws, scored by their mean; the first draw is the one answered
            draws = random_rankings(inst.ids, k, env.options.seed * 1_000_003 + run.query_index)
            ranked = draws[0]
        elif run.method in ("empty", "oracle"):
            ranked = [] if run.method == "empty" else oracle_ranking(prep, run.query_id, k)
        elif run.method == "mmr_cs":
            ranked = rank_ids(inst, mmr_cosine(inst, k, p["theta"]))
        else:
            extra = {"sigma": p["sigma"]} if "sigma" in p else {}
            idx, _ = select_rows(inst, run.method, k=k, theta=p.get("theta", 1.0), env=env, prep=prep, rows=rows,
                                 query_index=run.query_index, **extra)
            ranked = rank_ids(inst, idx)
        out["seconds"] = time.perf_counter() - t0  # the selection alone, as the executor's other rows time it
        if draws:
            vals = [_scores(prep, run.query_id, r) for r in draws]
            scores = {m: float(np.mean([v[m] for v in vals])) for m in vals[0]}
        else:
            scores = _scores(prep, run.query_id, ranked)
        out.update(selected=ranked, **scores)
        if env.llm is not None:
            where = {str(d): int(r) for r, d in zip(rows, inst.ids)}
            texts = prep.texts([where[d] for d in ranked if d in where])
            answer = env.generator("dartboard").generate(prep.question(run.query_index), texts)
            out["answer"] = answer
            out["accuracy"] = answer_scores(answer, prep.answer_groups(run.query_id), ("rgb_correct",))["rgb_correct"]
        return out

    return execute


def _per_setting(rows: pd.DataFrame, table: str) -> pd.DataFrame:
    t = mean_table(rows, table, ("accuracy", "ndcg", "component_ndcg"), ("k", "theta", "sigma"))
    t.loc[t["metric"] == "accuracy", "value"] *= 100.0  # the paper prints QA accuracy in percent
    # per-component NDCG is the integration questions' column
    return t[~((t["metric"] == "component_ndcg") & (t["dataset"] == "simple"))].reset_index(drop=True)


def best_over_grid(grid: pd.DataFrame, table: str) -> pd.DataFrame:
    """Per (dataset, method, metric) the best value over the method's grid (Sec. 3: "reporting the
    best results for each method"), keyed by its k as the published cells are, with the setting it
    was taken at in ``chosen`` (the first in grid order among ties, "+n tied" when others tie; empty
    for a method without a grid)."""
    best = []
    for (ds, method, metric), g in grid.groupby(["dataset", "method", "metric"], sort=False):
        settings = [str(x) for x in g["setting"]]
        k = settings[0].split(",")[0]  # "k=5": every setting of a method shares its k
        vals = g["value"].astype(float).to_numpy()
        chosen = ""
        if len(g) > 1 and not np.isnan(vals).all():
            top = np.flatnonzero(vals == np.nanmax(vals))
            chosen = ",".join(p for p in settings[top[0]].split(",") if not p.startswith("k="))
            chosen += f" (+{top.size - 1} tied)" if top.size > 1 else ""
        best.append({"table": table, "dataset": ds, "setting": k, "method": method, "metric": metric,
                     "value": float(np.nanmax(vals)) if not np.isnan(vals).all() else np.nan, "chosen": chosen})
    return pd.DataFrame(best, columns=["table", "dataset", "setting", "method", "metric", "value", "chosen"])


def _table2(rows: pd.DataFrame) -> pd.DataFrame:
    grid = _per_setting(rows, "Table 2 (grid)")
    return pd.concat([best_over_grid(grid, "Table 2"), grid.assign(chosen="")], ignore_index=True)


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
    summary="RGB QA accuracy and NDCG (simple and integration questions, per-component NDCG; the paper's "
            "first-positive NDCG on the merged collection) of KNN, MMR cossim, Dartboard, the cross-encoder "
            "variants, Oracle, Random and Empty, each tunable one at its best grid point",
    needs=Needs(data=(RGB_EN, RGB_INT), llm="partly", cross_encoder="optional"),
    methods={"oracle": {}, "dartboard_hybrid": {"sigma": SIGMA_GRID}, "dartboard_cc": {"sigma": SIGMA_GRID},
             "dartboard": {"sigma": SIGMA_GRID}, "mmr_cc": {"theta": MMR_GRID}, "mmr_cs": {"theta": MMR_GRID},
             "knn_cc": {}, "topk": {}, "empty": {}, "random": {}, "mmr": {"theta": MMR_GRID}},
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
