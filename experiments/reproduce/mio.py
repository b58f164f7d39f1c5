"""Recipes of the MIO report (Zhang, Liu & Zhang, "Optimizing Knowledge Retrieval in Retrieval
Augmented Generation", MIT 15.C57 final report; code and result files:
github.com/kbzh2558/robustness_view_of_rag), on rag-mini-wikipedia.

Protocol (the report, with the authors' code where the report is silent): a question's passages
come from the whole mini-Wikipedia pool (3,200 passages, Sec. 2); Llama-3 answers with the
report's prompt (Table 2, template ``mio_llama3``); the answer is scored against the gold answer
by token F1 (the notebook's set overlap, ``token_f1(style="mio")``), exact match, cosine and
Manhattan distance of the two answers' embeddings (L2-normalized; the report does not name the
encoder, the authors' notebook uses multi-qa-mpnet-base-dot-v1: ``--set answer_model=PATH``, else
the recipe's ``--model``) and BERTScore (with ``--set bertscore_model=PATH``, a local model folder;
the notebook's default is distilbert-base-uncased).

* ``mio-encoders`` (Table 1 and Sec. 3.2): top-k with k = 5 with each embedding model given by
  ``--encoder PATH`` (the report's four: bert-base-uncased, multi-qa-mpnet-base-dot-v1,
  hkunlp/instructor-large, intfloat/e5-small-v2); per encoder the mean and standard deviation
  (pandas', ddof = 1) of the answer F1, cosine and BERTScore F1; and the mean pairwise Jaccard
  distance between the encoders' top-k sets over questions and encoder pairs (Sec. 3.2: 0.8935;
  ``--retrieval-only`` computes only this). The questions are the 100 of the authors'
  ``result/rag_evaluation_results.csv`` (:data:`TABLE1_QUESTIONS`; the report states neither k nor
  the questions, the file gives both and reproduces Table 1's means and the 0.8935).
* ``mio-robust`` (Tables 3-7): top-k at k in {2, 3, 5, 7, 10} (Table 3), the robust l1 / l2 /
  linf models over rho_vec x sparsity_penalty x rho_div (Tables 4-6) and the k-sparse model by
  cutting planes over attack_budget x sparsity_penalty x rho_div (Table 7), on the 20 questions
  of the authors' grid_results files (:data:`EVAL_QUESTIONS`); and the per-method means of the
  authors' ``result/pipeline_summary.csv`` (``grid means``, from the repository, not the report).

Protocol details taken from the report: the cutting plane "initialize[s] with the heuristic Top-k
solution" (Sec. 4.2): its first cut set is the heuristic top-k, ``cp_start_k`` = 5 (the report's
heuristic at the k of Table 1 and Sec. 3.2, k = 5 per the authors' result/retrieval_results_heuristic_k5.csv),
and it iterates from there; the candidate filter is separate (below). The k-sparse adversary may
not touch each document's key coordinates (Sec. 4.1: protection "restored meaningful retrieval
behavior"; the report gives no count, ``protected`` = 20 is the authors' code's ``m_core``,
:data:`~divopt_rag.robust.models.AUTHORS_PROTECTED`; the report's "twenty" erased coordinates of
Table 8 are an attack budget). Where the report is silent, the authors' code: the robust models
choose among the ``candidates`` = 100 most relevant passages (robust_rag.ipynb filters to the
top-100 of multi-qa-mpnet-base-dot-v1, ``k_warmstart_cp = 100``: a candidate filter, not the
first cut set). divopt's choices: a ``time_limit`` of 60 s per solve and rho_vec = 0.05 for the
cutting plane (Table 7 has no rho_vec). Differences that remain (docs/concepts/methods.md):
divopt's k-sparse set moves up to K coordinates by +-rho_vec where the report's erases up to K
positive contributions, and the doc-doc similarities enter through sound bounds where the
authors' code cuts them too.

* ``mio-table8`` (Table 8, the toy example of Sec. 4.2): for the question "Was Abraham Lincoln the
  sixteenth President of the United States?" the cosine of passages 278 (the correct one) and 2971
  before and after erasing coordinates. The report says only "By adversarially erasing only twenty
  such coordinates, the relationship reverses"; the procedure is the authors' notebook's
  (robust_rag.ipynb, ``erase_for_higher_similarity!``): with bert-base-uncased embeddings, erase
  in both passages the 20 coordinates of smallest q_s mu_1s still active, and repeat until q^T mu_1
  reaches passage 2's original cosine (three rounds, 60 coordinates, in the notebook); the
  "Cosine (mod.)" column is q^T mu of the erased vectors, not renormalized (``cosine_mod``;
  ``cosine_mod_renormalized`` beside it).
"""
from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from divopt_rag.data import load_mini_wikipedia, load_model
from divopt_rag.experiments.measures.metrics import jaccard
from divopt_rag.experiments.methods import run_method
from divopt_rag.experiments.rag import answers
from divopt_rag.models import Instance
from divopt_rag.robust.models import AUTHORS_PROTECTED

from .data import DatasetPlan, Prepared, prepare_text
from .spec import DataNeed, Needs, Options, Recipe, ReproduceError, Run
from .steps import Env, query_instance
from .tables import long_rows, mean_table

__all__ = ["ENCODERS", "ROBUST", "TABLE8", "EVAL_QUESTIONS", "TABLE1_QUESTIONS", "encoder_label", "run_parameters",
           "erase_for_higher_similarity"]

PAPER = "MIO report (Zhang, Liu & Zhang, MIT 15.C57)"
SOURCE = "MIT 15.C57 report (Robustness_in_RAG.pdf); github.com/kbzh2558/robustness_view_of_rag"
MINI_WIKI = DataNeed("rag-mini-wikipedia", "rag-mini-wikipedia", "passages.parquet", fetch="rag-mini-wikipedia",
                     url="https://huggingface.co/datasets/rag-datasets/rag-mini-wikipedia")
#: The 20 question ids of the authors' grid_results files (the questions their tables average).
EVAL_QUESTIONS = ("1492", "178", "867", "4", "1480", "428", "774", "47", "1470", "595", "875", "951", "463", "1688",
                  "1150", "1270", "158", "1045", "475", "1039")
#: The 100 questions of Table 1 and Sec. 3.2: the dataset ids of the rows of the authors'
#: result/rag_evaluation_results.csv (whose ``question_idx`` is the row of their q-and-a file).
TABLE1_QUESTIONS = (
    "1269", "1649", "1053", "848", "820", "1064", "1472", "1272", "10", "176", "1478", "1187", "1113", "931", "593",
    "214", "26", "1427", "1144", "1603", "1681", "1206", "1594", "1565", "869", "1292", "1155", "1042", "1096", "1306",
    "1040", "465", "1312", "711", "1266", "1618", "1119", "1698", "144", "1574", "1296", "1004", "28", "123", "1355",
    "450", "131", "190", "949", "1339", "526", "709", "812", "245", "856", "623", "1087", "1616", "483", "381", "1415",
    "1602", "1208", "1390", "430", "777", "153", "842", "1319", "223", "1424", "1446", "1707", "625", "605", "667",
    "941", "1202", "705", "391", "1086", "1401", "432", "1268", "1492", "520", "1059", "147", "885", "1706", "744",
    "1536", "739", "1683", "166", "1456", "438", "1101", "1516", "738")
#: Table 1's encoder names (the report's spelling), by a fragment of a local folder's name.
_ENCODER_NAMES = {"bert-base-uncased": "bert-base-uncased", "multi-qa-mpnet-base-dot-v1": "multi-qa-mpnet-base-dot-v1",
                  "instructor-large": "hkunlp-instructor-large", "e5-small-v2": "intfloat-e5-small-v2"}
#: The robust tables of the report (Appendix A) by method.
ROBUST_TABLES = {"topk": "Table 3", "robust_l1": "Table 4", "robust_l2": "Table 5", "robust_linf": "Table 6",
                 "robust_ksparse_cp": "Table 7"}
_ANSWER = ("f1", "em", "answer_cosine", "answer_manhattan", "bertscore_precision", "bertscore_recall", "bertscore_f1")


def _label(model: Any) -> str:
    if isinstance(model, (str, os.PathLike)):
        return Path(model).name
    return str(getattr(model, "model_id", None) or type(model).__qualname__)


def encoder_label(model: Any) -> str:
    """Table 1's name of an encoder (bert-base-uncased, hkunlp-instructor-large, ...) when the
    model's folder name contains one of the report's four, else the folder's (or callable's) name."""
    if model is None:
        return "all-MiniLM-L6-v2"
    name = _label(model)
    low = name.lower().replace("/", "-").replace("_", "-")
    for key, label in _ENCODER_NAMES.items():
        if key in low:
            return label
    return name


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
                prep.extra["encoder"] = encoder_label(model)
                return prep

            return build

        return [DatasetPlan(encoder_label(m), build_for(m)) for m in models]

    return plans


def _answer_embedder(recipe: Recipe, env: Env) -> Any:
    """The encoder of the answer metrics: ``--set answer_model=PATH`` (the authors' notebook embeds
    answers with multi-qa-mpnet-base-dot-v1), else the recipe's ``--model``."""
    model = recipe.param(env.options, "answer_model") or env.options.model
    if model is None or isinstance(model, (str, os.PathLike)):
        return load_model(None if model is None else str(model))
    return model  # a callable encoder (texts -> array)


def _answer_metrics(recipe: Recipe, env: Env, prep: Prepared, run: Run, passages: list[str]) -> dict[str, Any]:
    gold = prep.answer_groups(run.query_id)[0][0]
    answer = env.generator("mio_llama3").generate(prep.question(run.query_index), passages)
    emb = answers.embedding_scores([answer], [gold], _answer_embedder(recipe, env))
    out = {"answer": answer, "f1": answers.token_f1(answer, gold, style="mio"),
           "em": answers.exact_match(answer, gold), "answer_cosine": float(emb["cosine"][0]),
           "answer_manhattan": float(emb["manhattan"][0])}
    bmodel = recipe.param(env.options, "bertscore_model")
    if bmodel:
        bs = answers.bertscore([answer], [gold], bmodel)
        out.update(bertscore_precision=float(bs["precision"][0]), bertscore_recall=float(bs["recall"][0]),
                   bertscore_f1=float(bs["f1"][0]))
    return out


def run_parameters(recipe: Recipe, options: Options, inst: Instance, method: str,
                   params: Mapping[str, Any]) -> tuple[Instance, dict[str, Any]]:
    """The instance and parameters one run of ``method`` gets (module docstring): top-k at its k;
    every robust model among the ``candidates`` most relevant passages; the cutting plane with its
    first cut set the heuristic top ``cp_start_k`` (the instance's k, which the cutting plane
    starts from), ``cp_rho_vec`` and ``protected``."""
    p = dict(params)
    k = p.pop("k", None)
    if method == "robust_ksparse_cp":
        k = recipe.param(options, "cp_start_k")
        p.setdefault("rho_vec", float(recipe.param(options, "cp_rho_vec")))
        p.setdefault("protected", recipe.param(options, "protected"))
    inst = inst.replace(k=min(int(k if k is not None else 1), inst.n), theta=1.0)
    if method != "topk":
        p.setdefault("candidates", int(recipe.param(options, "candidates")))
        p.setdefault("time_limit", float(recipe.param(options, "time_limit")))
    return inst, p


def _execute(recipe: Recipe):
    def execute(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
        inst, rows = query_instance(prep, run.query_index, env=env)
        inst, p = run_parameters(recipe, env.options, inst, run.method, run.params)
        res = run_method(inst, run.method, p, env.options.seed)
        idx = res.indices
        out: dict[str, Any] = {"encoder": prep.extra.get("encoder", ""), "n": inst.n, "n_selected": int(idx.size),
                               "seconds": res.seconds, "selected": [str(inst.ids[i]) for i in idx],
                               "status_solver": str(res.measures.get("model_status", "")),
                               "gap": res.measures.get("model_gap")}
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
            recs.append({"table": "Sec. 3.2", "dataset": "rag-mini-wikipedia", "setting": f"k={int(k)}",
                         "method": "topk", "metric": "mean_jaccard_distance", "value": float(np.mean(dists))})
    return recs


def _encoders_table(rows: pd.DataFrame) -> pd.DataFrame:
    by_encoder = rows.assign(method=rows["encoder"])
    metrics = ("f1", "answer_cosine", "bertscore_f1")
    t = mean_table(by_encoder, "Table 1", metrics, ("k",))
    sd = mean_table(by_encoder, "Table 1", metrics, ("k",), agg="std")
    sd["metric"] = sd["metric"] + "_std"
    return pd.concat([t, sd, long_rows(_jaccard_rows(rows))], ignore_index=True)


def _robust_table(rows: pd.DataFrame) -> pd.DataFrame:
    keys = ("k", "rho_vec", "attack_budget", "sparsity_penalty", "rho_div")
    metrics = ("answer_cosine", "answer_manhattan", "bertscore_precision", "bertscore_recall", "bertscore_f1",
               "n_selected")
    parts = []
    for method, sub in rows.groupby("method", sort=False):
        tid = ROBUST_TABLES.get(method, "robust grid")
        # Table 7 has no rho_vec column: the cutting plane's rho_vec is the recipe's cp_rho_vec
        use = tuple(k for k in keys if not (method == "robust_ksparse_cp" and k == "rho_vec"))
        parts.append(mean_table(sub, tid, metrics, use))
    parts.append(mean_table(rows.assign(setting="{}"), "grid means", ("em", "f1", "bertscore_f1", "answer_cosine"), ()))
    return pd.concat(parts, ignore_index=True)


_PARAMS = {"questions": EVAL_QUESTIONS, "bertscore_model": "", "candidates": 100, "time_limit": 60.0,
           "cp_rho_vec": 0.05, "cp_start_k": 5, "protected": AUTHORS_PROTECTED, "answer_model": ""}

ENCODERS = Recipe(
    name="mio-encoders", paper_key="mio", paper=PAPER, source=SOURCE, target="Table 1",
    summary="top-k with each --encoder: answer F1 / cosine / BERTScore, and the mean Jaccard distance between encoders",
    needs=Needs(data=(MINI_WIKI,), llm="partly"),
    methods={"topk": {}}, grid={"k": (5,)}, metrics=("f1", "answer_cosine", "bertscore_f1", "mean_jaccard_distance"),
    datasets=lambda o: [], execute=lambda *a: {}, table=_encoders_table,
    layout=(("method",), ("dataset", "setting", "metric")), published_tables=("Table 1", "Sec. 3.2"),
    params={**_PARAMS, "questions": TABLE1_QUESTIONS},
    config=lambda o: {"encoders": [encoder_label(m) for m in o.encoders]},
)
ENCODERS.datasets, ENCODERS.execute = _datasets(ENCODERS, per_encoder=True), _execute(ENCODERS)

_NORM = {"rho_vec": (0.02, 0.05), "sparsity_penalty": (0.5, 0.65, 0.72), "rho_div": (0.8, 0.9)}
ROBUST = Recipe(
    name="mio-robust", paper_key="mio", paper=PAPER, source=SOURCE, target="Tables 3-7",
    summary="top-k (k 2-10), robust l1/l2/linf and the k-sparse cutting plane over the report's grids: answer "
            "cosine / Manhattan / BERTScore",
    needs=Needs(data=(MINI_WIKI,), llm="required", gpu="no (Gurobi recommended for the MILPs)"),
    methods={"topk": {"k": (2, 3, 5, 7, 10)}, "robust_l1": _NORM, "robust_l2": _NORM, "robust_linf": _NORM,
             "robust_ksparse_cp": {"attack_budget": (20, 40, 80), "sparsity_penalty": (0.5, 0.65, 0.7),
                                   "rho_div": (0.8, 0.9)}},
    grid={}, metrics=_ANSWER, datasets=lambda o: [], execute=lambda *a: {}, table=_robust_table,
    layout=(("method", "setting"), ("dataset", "metric")),
    published_tables=("Table 3", "Table 4", "Table 5", "Table 6", "Table 7", "grid means"),
    params=_PARAMS,
)
ROBUST.datasets, ROBUST.execute = _datasets(ROBUST, per_encoder=False), _execute(ROBUST)


# ---- Table 8: the toy example of Sec. 4.2 -------------------------------------------------------
#: Table 8's question and passages (rag-mini-wikipedia ids; the authors' robust_rag.ipynb, cells 11-15).
TABLE8_QUESTION = "0"
TABLE8_PASSAGES = ("278", "2971")


def erase_for_higher_similarity(q: np.ndarray, doc1: np.ndarray, doc2: np.ndarray, *, step: int = 20,
                                target: float | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """The authors' erasure behind Table 8 (robust_rag.ipynb, ``erase_for_higher_similarity!``): while
    q^T doc1 < ``target`` (default: q^T doc2) and more than ``step`` coordinates are active, zero in
    both documents the ``step`` active coordinates of smallest q_s doc1_s (ties: the lower index).
    Returns the erased copies and the number of coordinates erased."""
    q, d1, d2 = (np.asarray(v, dtype=np.float64) for v in (q, doc1, doc2))
    d1, d2 = d1.copy(), d2.copy()
    target = float(q @ d2) if target is None else float(target)
    active = np.arange(q.size)
    while float(q @ d1) < target and active.size > step:
        worst = np.argsort(q[active] * d1[active], kind="stable")[:step]
        d1[active[worst]] = 0.0
        d2[active[worst]] = 0.0
        active = np.delete(active, worst)
    return d1, d2, int(q.size - active.size)


def _execute_table8(prep: Prepared, run: Run, env: Env) -> dict[str, Any]:
    ids = [str(p) for p in TABLE8.param(env.options, "passages")]
    where = {str(d): i for i, d in enumerate(prep.data.doc_ids)}
    lost = [p for p in ids if p not in where]
    if len(ids) != 2 or lost:
        raise ReproduceError(f"--set passages: expected two passage ids of {prep.label}, got {ids} "
                             f"({'missing: ' + ', '.join(lost) if lost else 'not two'})")
    E = np.asarray(prep.data.E[[where[p] for p in ids]], dtype=np.float64)
    q = np.asarray(prep.data.Q[run.query_index], dtype=np.float64)
    erased = erase_for_higher_similarity(q, E[0], E[1], step=int(TABLE8.param(env.options, "erase_step")))
    which = 0 if run.method == "doc1" else 1
    mod = erased[which]
    return {"encoder": prep.extra.get("encoder", ""), "passage": ids[which], "n": len(where),
            "cosine_orig": float(q @ E[which]), "cosine_mod": float(q @ mod),
            "cosine_mod_renormalized": float(q @ mod / max(np.linalg.norm(mod), 1e-300)), "erased": erased[2]}


def _table8(rows: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for enc, sub in rows.groupby("encoder", sort=False):
        t = mean_table(sub, "Table 8", ("cosine_orig", "cosine_mod", "cosine_mod_renormalized", "erased"), ())
        parts.append(t.assign(setting=f"encoder={enc}"))
    return pd.concat(parts, ignore_index=True)


TABLE8 = Recipe(
    name="mio-table8", paper_key="mio", paper=PAPER, source=SOURCE, target="Table 8",
    summary="the toy example: cosine of the correct and a distracting passage before and after erasing "
            "coordinates (the authors' procedure; --model bert-base-uncased)",
    needs=Needs(data=(MINI_WIKI,)),
    methods={"doc1": {}, "doc2": {}}, grid={},
    metrics=("cosine_orig", "cosine_mod", "cosine_mod_renormalized", "erased"),
    datasets=lambda o: [], execute=_execute_table8, table=_table8,
    layout=(("method",), ("dataset", "setting", "metric")), published_tables=("Table 8",),
    params={"questions": (TABLE8_QUESTION,), "passages": TABLE8_PASSAGES, "erase_step": 20},
)
TABLE8.datasets = _datasets(TABLE8, per_encoder=False)
