"""Recipe of VRSD (Gao, Deng & Zhang, "Vector Retrieval with Similarity and Diversity: How Hard
Is It?", arXiv:2407.04573v3; v1-v2 "VRSD: Rethinking Similarity and Diversity for Retrieval in
Large Language Models").

``vrsd-tables`` (Tables 1/3 and the win rates): for every question of ARC-DA, OpenBookQA and
SciQ, VRSD, k-DPP and MMR select k in {6, 12, 18} passages; per method and k the **Sim. Mean**
(mean over questions of cos(sum of the selected embeddings, q), VRSD's objective,
:func:`divopt_rag.experiments.metrics.vrsd_score`) and the **Div. Mean** (mean ILAD of the
selection); and VRSD's win rates over each baseline (Eq. 8-9 as
:func:`divopt_rag.experiments.metrics.win_rates` reads them: the share of questions where VRSD's
value is strictly larger). Decisions where the paper could not be read: "k-DPP" is divopt's
greedy DPP MAP (``dpp``) and MMR runs at theta 0.5 (``--set theta=...`` changes both); the
candidate pools are divopt's loaders' (:mod:`divopt_rag.data.science_qa`): SciQ's support
paragraphs, OpenBookQA's open book, and for ARC-DA an external corpus (``--corpus``, e.g. the ARC
Corpus); ARC-DA is skipped without one. The metrics need no labels, so the analogues
(``wordnet``, ``synthetic``) measure the same quantities on offline pools.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from divopt_rag.data import load_arc_da, load_openbookqa, load_sciq
from divopt_rag.experiments.metrics import win_rates

from .data import DatasetPlan, Prepared, prepare_text, synthetic_analogue, wordnet_analogue
from .spec import DataNeed, MissingData, Needs, Options, Recipe, Run
from .steps import Env, query_instance, retrieval_metrics, select_rows
from .tables import mean_table, setting_labels

__all__ = ["TABLES", "PAPER_KS"]

PAPER = "VRSD (Gao, Deng & Zhang 2024)"
SOURCE = "arXiv:2407.04573v3"
PAPER_KS = (6, 12, 18)
ARC_DA = DataNeed("ARC-DA", "arc-da", "test.jsonl", fetch="arc-da",
                  url="https://aristo-data-public.s3-us-west-2.amazonaws.com/arc-da/ARC-DA-v1.1.zip")
OBQA = DataNeed("OpenBookQA", "openbookqa", "openbook.txt", fetch="openbookqa",
                url="https://s3-us-west-2.amazonaws.com/ai2-website/data/OpenBookQA-V1-Sep2018.zip")
SCIQ = DataNeed("SciQ", "sciq", "test.json", fetch="sciq", url="https://s3-us-west-2.amazonaws.com/ai2-website/data/SciQ.zip")


def _science(need: DataNeed, label: str):
    def build(options: Options) -> Prepared:
        path = need.locate(options.data_dir)
        if label == "arc-da":
            if options.corpus is None:
                raise MissingData("ARC-DA ships no passages: give --corpus (e.g. the ARC Corpus, ARC_Corpus.txt)")
            ds = load_arc_da(path, corpus=options.corpus, limit=options.limit)
        elif label == "openbookqa":
            ds = load_openbookqa(path.parent.parent if path.parent.name == "Main" else path.parent, limit=options.limit)
        else:
            ds = load_sciq(path, limit=options.limit)
        # the pool gathers the loaded questions' passages: a limited run has its own key
        spec = {"name": label, "limit": options.limit, "corpus": None if options.corpus is None else str(options.corpus)}
        return prepare_text(ds, options, label=label, spec=spec)

    return DatasetPlan(label, build)


def _datasets(options: Options) -> list[DatasetPlan]:
    if options.analogue == "wordnet":
        return [DatasetPlan("wordnet", lambda o: wordnet_analogue(o))]
    if options.analogue == "synthetic":
        return [DatasetPlan("synthetic", lambda o: synthetic_analogue(o, n=400, d=64, n_queries=16))]
    return [_science(ARC_DA, "arc-da"), _science(OBQA, "openbookqa"), _science(SCIQ, "sciq")]


def _execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
    p = run.params
    inst, rows = query_instance(prep, run.query_index, env=env)
    idx, info = select_rows(inst, run.method, k=p["k"], theta=p.get("theta", 1.0), env=env)
    m = retrieval_metrics(prep, run.query_id, inst, rows, idx, ("vrsd", "ilad"))
    return {"n": inst.n, "seconds": info["seconds"], "selected": [str(inst.ids[i]) for i in idx],
            "sim": m["vrsd"], "div": m["ilad"]}


def _table(rows: pd.DataFrame) -> pd.DataFrame:
    means = mean_table(rows, "Tables 1/3", ("sim", "div"), ("k",))
    means["metric"] = means["metric"].map({"sim": "sim_mean", "div": "div_mean"})
    means["method"] = means["method"].replace({"dpp": "k-dpp"})
    df = rows.assign(k_label=setting_labels(rows, ("k",)), theta_label=setting_labels(rows, ("theta",)))
    recs = []
    ours = df[df["method"] == "vrsd"]
    for b in ("dpp", "mmr"):  # one comparison per baseline setting (theta)
        for t, base in df[df["method"] == b].groupby("theta_label", sort=False):
            if ours.empty:
                continue
            wr = win_rates(pd.concat([ours, base]), "vrsd", b, by=("dataset", "k_label"), similarity="sim",
                           diversity="div")
            name = f"vrsd vs {'k-dpp' if b == 'dpp' else b}" + (f" ({t})" if t else "")
            for _, r in wr.iterrows():
                for metric in ("similarity_win_rate", "diversity_win_rate"):
                    recs.append({"table": "win rates", "dataset": r["dataset"], "setting": r["k_label"],
                                 "method": name, "metric": metric, "value": r[metric]})
    return pd.concat([means, pd.DataFrame(recs, columns=means.columns)], ignore_index=True)


TABLES = Recipe(
    name="vrsd-tables", paper_key="vrsd", paper=PAPER, source=SOURCE, target="Tables 1/3, win rates",
    summary="Sim. Mean and Div. Mean of VRSD, k-DPP, MMR at k in {6, 12, 18}; VRSD's win rates over each",
    needs=Needs(data=(ARC_DA, OBQA, SCIQ)),
    methods={"vrsd": {}, "dpp": {"theta": (0.5,)}, "mmr": {"theta": (0.5,)}},
    grid={"k": PAPER_KS}, metrics=("sim", "div"),
    datasets=_datasets, execute=_execute, table=_table,
    layout=(("method",), ("dataset", "setting", "metric")), analogues=("wordnet", "synthetic"),
    published_tables=("Tables 1/3", "win rates"),
)
