"""Recipe of VRSD (Gao, Deng & Zhang, "Vector Retrieval with Similarity and Diversity: How Hard
Is It?", arXiv:2407.04573v3; v1-v2 "VRSD: Rethinking Similarity and Diversity for Retrieval in
Large Language Models").

``vrsd-tables`` (Tables 1 and 3, and the win rates of App. E.2, a figure): on ARC-DA, OpenBookQA
and SciQ, every method selects from the query's ``candidates`` most similar passages (Sec. 3.1:
"the candidate vectors are identified from the entire set of vectors (size = N) using cosine
similarity metrics, resulting in a subset of vectors (size = n)"; the paper does not give n, divopt
takes 20, LangChain's ``fetch_k`` default, since the paper runs MMR "out-of-the-box" from
LangChain, App. D.1), a seeded 20 % of the questions are the queries (Sec. 4.2: "20% of each data set was
used as a set of retrieval queries"; ``--set query_share=...``; ``--limit N`` takes the first N
questions instead, a quick run); VRSD, k-DPP and MMR with lambda in {0.2, ..., 0.9} select
k in {6, 12, 18}; per method and k the **Sim. Mean** (Eq. 6: mean over queries of cos(sum of the
k selected embeddings, q), VRSD's objective, :func:`divopt_rag.experiments.measures.metrics.vrsd_score`)
and the **Div. Mean** (Eq. 7: mean over queries of the mean pairwise cosine of the selection;
lower is more diverse), and VRSD's win rates over each baseline setting (Eqs. 8-9 as
:func:`divopt_rag.experiments.measures.metrics.win_rates` reads them). MMR's lambda is divopt's theta
(1 = relevance only). Table 1 uses all-mpnet-base-v2, Table 3 (ARC) also bge-m3 and
all-MiniLM-L6-v2: every cell is keyed by the encoder (``encoder=...``), read from ``--model``'s
name (divopt's default encoder is all-MiniLM-L6-v2, Table 3's third column); the synthetic
analogue's planted vectors come from no encoder and are keyed ``encoder=none``.

Choices where the paper leaves one open: "k-DPP (implemented via Fast-MAP)" is divopt's greedy
DPP MAP (``dpp``, Chen et al.'s Fast-MAP) at ``kdpp_theta`` = 0.5 (a relevance-weighted kernel,
r_i = exp(c_i / 2); the paper names no quality model); the candidate pools are divopt's loaders'
(:mod:`divopt_rag.data.science_qa`): SciQ's support paragraphs, OpenBookQA's open book, and for
ARC-DA an external corpus (``--corpus``, e.g. the ARC Corpus); ARC-DA is skipped without one (the
paper does not say what its candidate set n is drawn from). The metrics need no labels, so the
analogues (``wordnet``, ``synthetic``) measure the same quantities on offline pools.
"""
from __future__ import annotations

from typing import Any

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from divopt_rag.data import load_arc_da, load_openbookqa, load_sciq
from divopt_rag.experiments.measures.metrics import win_rates

from .data import DatasetPlan, Prepared, prepare_text, synthetic_analogue, wordnet_analogue
from .spec import DataNeed, MissingData, Needs, Options, Recipe, ReproduceError, Run
from .steps import Env, query_instance, retrieval_metrics, select_rows
from .tables import mean_table, setting_labels

__all__ = ["TABLES", "PAPER_KS", "MMR_LAMBDAS", "encoder_label"]

PAPER = "VRSD (Gao, Deng & Zhang 2024)"
SOURCE = "arXiv:2407.04573v3"
PAPER_KS = (6, 12, 18)
#: MMR's lambdas in Tables 1 and 3 (Sec. 4.2: "from 0.2 to 0.9").
MMR_LAMBDAS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
_ENCODERS = {"all-mpnet-base-v2": "all-mpnet-base-v2", "bge-m3": "bge-m3", "minilm-l6-v2": "all-MiniLM-L6-v2"}
ARC_DA = DataNeed("ARC-DA", "arc-da", "test.jsonl", fetch="arc-da",
                  url="https://aristo-data-public.s3-us-west-2.amazonaws.com/arc-da/ARC-DA-v1.1.zip")
OBQA = DataNeed("OpenBookQA", "openbookqa", "openbook.txt", fetch="openbookqa",
                url="https://s3-us-west-2.amazonaws.com/ai2-website/data/OpenBookQA-V1-Sep2018.zip")
SCIQ = DataNeed("SciQ", "sciq", "test.json", fetch="sciq", url="https://s3-us-west-2.amazonaws.com/ai2-website/data/SciQ.zip")


def encoder_label(model: Any) -> str:
    """The encoder's name as Tables 1 and 3 spell it (all-mpnet-base-v2, bge-m3, all-MiniLM-L6-v2)
    when ``model`` (a local directory, a name or a callable with ``model_id``) names one of them,
    else its own name; None is divopt's default, all-MiniLM-L6-v2."""
    if model is None:
        return "all-MiniLM-L6-v2"
    name = Path(model).name if isinstance(model, (str, os.PathLike)) else str(getattr(model, "model_id", None)
                                                                                 or type(model).__qualname__)
    low = name.lower()
    for key, label in _ENCODERS.items():
        if key in low:
            return label
    return name.replace(",", "_").replace("=", "_")


def _query_sample(n: int, options: Options) -> list[int]:
    """Sec. 4.2's query set: a seeded share (``query_share``, default 20 %) of the questions, in
    file order; with ``--limit N`` the first N questions instead (a quick run)."""
    if options.limit is not None:
        return list(range(min(options.limit, n)))
    share = float(TABLES.param(options, "query_share"))
    if not 0 < share <= 1:
        raise ReproduceError(f"--set query_share: expected a share in (0, 1], got {share}")
    size = max(1, math.ceil(share * n))
    return sorted(int(i) for i in np.random.default_rng(options.seed).choice(n, size=size, replace=False))


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
        prep = prepare_text(ds, options, label=label, spec=spec)
        prep.queries = _query_sample(ds.n_queries, options)
        prep.extra["encoder"] = encoder_label(options.model)
        return prep

    return DatasetPlan(label, build)


#: The encoder key of rows no encoder made (the synthetic analogue's planted vectors).
NO_ENCODER = "none"


def _datasets(options: Options) -> list[DatasetPlan]:
    if options.analogue == "wordnet":
        return [DatasetPlan("wordnet", lambda o: _tag(wordnet_analogue(o), encoder_label(o.model)))]
    if options.analogue == "synthetic":
        return [DatasetPlan("synthetic", lambda o: _tag(synthetic_analogue(o, n=400, d=64, n_queries=16), NO_ENCODER))]
    return [_science(ARC_DA, "arc-da"), _science(OBQA, "openbookqa"), _science(SCIQ, "sciq")]


def _encoder(options: Options) -> str:
    """The encoder that made the run's vectors: ``--model``'s name, or "none" for synthetic vectors."""
    return NO_ENCODER if options.analogue == "synthetic" else encoder_label(options.model)


def _tag(prep: Prepared, encoder: str) -> Prepared:
    prep.extra["encoder"] = encoder
    return prep


def _execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
    p = run.params
    pool = TABLES.param(env.options, "candidates")
    inst, rows = query_instance(prep, run.query_index, None if pool in (None, "", 0) else int(pool), env=env)
    theta = float(TABLES.param(env.options, "kdpp_theta")) if run.method == "dpp" else p.get("theta", 1.0)
    idx, info = select_rows(inst, run.method, k=p["k"], theta=theta, env=env)
    m = retrieval_metrics(prep, run.query_id, inst, rows, idx, ("vrsd", "ilad"))
    # Eq. 7: the mean pairwise cosine of the selection (1 - ILAD); lower is more diverse
    return {"n": inst.n, "seconds": info["seconds"], "selected": [str(inst.ids[i]) for i in idx],
            "encoder": prep.extra.get("encoder", _encoder(env.options)), "sim": m["vrsd"],
            "div": 1.0 - m["ilad"]}


def _table(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.assign(encoder=rows["encoder"] if "encoder" in rows else "all-MiniLM-L6-v2")
    rows = rows.assign(method=rows["method"].replace({"dpp": "k-dpp"}))
    parts = []
    for enc, sub in rows.groupby("encoder", sort=False):
        # Table 1: every dataset; Table 3: ARC(-DA), the encoder ablation
        for tid, part in (("Table 1", sub), ("Table 3", sub[sub["dataset"] == "arc-da"])):
            if part.empty:
                continue
            means = mean_table(part, tid, ("sim", "div"), ("k", "theta"))
            means["setting"] = f"encoder={enc}," + means["setting"]  # keys sort as encoder < k < theta
            means["metric"] = means["metric"].map({"sim": "sim_mean", "div": "div_mean"})
            parts.append(means)
    means = pd.concat(parts, ignore_index=True) if parts else mean_table(rows.iloc[0:0], "Table 1", ("sim",), ())
    # Eq. 9 counts VRSD's lower mean pairwise cosine as a win: win_rates counts the higher ILAD (1 - cosine)
    df = rows.assign(k_label=setting_labels(rows, ("k",)), theta_label=setting_labels(rows, ("theta",)),
                     ilad=1.0 - rows["div"])
    recs = []
    ours = df[df["method"] == "vrsd"]
    for b in ("k-dpp", "mmr"):  # one comparison per baseline setting (theta)
        for t, base in df[df["method"] == b].groupby("theta_label", sort=False):
            if ours.empty:
                continue
            wr = win_rates(pd.concat([ours, base]), "vrsd", b, by=("dataset", "encoder", "k_label"), similarity="sim",
                           diversity="ilad")
            name = f"vrsd vs {b}" + (f" ({t})" if t else "")
            for _, r in wr.iterrows():
                for metric in ("similarity_win_rate", "diversity_win_rate"):
                    recs.append({"table": "win rates", "dataset": r["dataset"],
                                 "setting": f"encoder={r['encoder']},{r['k_label']}", "method": name, "metric": metric,
                                 "value": r[metric]})
    return pd.concat([means, pd.DataFrame(recs, columns=means.columns)], ignore_index=True)


TABLES = Recipe(
    name="vrsd-tables", paper_key="vrsd", paper=PAPER, source=SOURCE, target="Tables 1 and 3, win rates",
    summary="Sim. Mean and Div. Mean of VRSD, k-DPP, MMR (lambda 0.2-0.9) at k in {6, 12, 18} per encoder; VRSD's "
            "win rates over each",
    needs=Needs(data=(ARC_DA, OBQA, SCIQ)),
    methods={"vrsd": {}, "dpp": {}, "mmr": {"theta": MMR_LAMBDAS}},
    grid={"k": PAPER_KS}, metrics=("sim", "div"),
    datasets=_datasets, execute=_execute, table=_table,
    layout=(("method", "setting"), ("dataset", "metric")), analogues=("wordnet", "synthetic"),
    published_tables=("Table 1", "Table 3", "Fig. 3"), params={"query_share": 0.2, "kdpp_theta": 0.5, "candidates": 20},
    config=lambda o: {"encoder": _encoder(o)},
)
