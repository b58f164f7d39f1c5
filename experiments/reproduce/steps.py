"""The steps most recipes share: a query's instance, a selection by a published method, the
retrieval metrics of the selection, a generated answer and its answer metrics.

Each is a plain function of plain inputs, so a recipe's ``execute`` reads like its protocol::

    inst, rows = query_instance(prep, run.query_index, pool)
    idx, info = select_rows(inst, "fw", k=25, theta=0.5, env=env, prep=prep, rows=rows, query_index=...)
    row = retrieval_metrics(prep, run.query_id, inst, rows, idx, ("answer_recall", "ilad"))
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from divopt_rag.experiments.measures.metrics import alpha_ndcg, ilad, ir_scores, subtopic_recall, vrsd_score
from divopt_rag.experiments.rag import answers
from divopt_rag.experiments.rag.generation import Generator
from divopt_rag.experiments.studies import runs
from divopt_rag.models import Instance
from divopt_rag.solvers import METHOD_NEEDS, select

from .data import Prepared
from .spec import Options, ReproduceError

__all__ = ["Env", "query_instance", "select_rows", "retrieval_metrics", "answer_scores", "generation_order",
           "RETRIEVAL_METRICS"]

#: Retrieval metrics :func:`retrieval_metrics` computes (each documented there).
RETRIEVAL_METRICS = ("answer_recall", "ilad", "ndcg", "recall", "component_ndcg", "alpha_ndcg", "s_recall", "vrsd",
                     "relevance_mean")


@dataclass
class Env:
    """What runs share: the options, the LLM client and its generators (one per prompt
    template), the cross-encoder, and a cache of query instances."""

    options: Options
    llm: Any = None
    cross_encoder: Any = None
    _generators: dict[str, Generator] = field(default_factory=dict)
    _instances: dict[tuple, tuple[Instance, np.ndarray]] = field(default_factory=dict)

    def generator(self, template: str) -> Generator:
        if self.llm is None:
            raise ReproduceError("this step needs an LLM but none is configured (run without --retrieval-only "
                                 "and set DIVOPT_LLM_BASE_URL / DIVOPT_LLM_MODEL)")
        if template not in self._generators:
            self._generators[template] = Generator(self.llm, template)
        return self._generators[template]


def query_instance(prep: Prepared, query_index: int, pool: int | None = None, env: Env | None = None
                   ) -> tuple[Instance, np.ndarray]:
    """Query ``query_index`` of ``prep`` over its candidates (the top ``pool`` by relevance when
    given): :func:`divopt_rag.experiments.studies.runs.query_instance`, cached per (dataset, query, pool)."""
    ck = (prep.key, int(query_index), pool)
    if env is not None and ck in env._instances:
        return env._instances[ck]
    out = runs.query_instance(prep.data, query_index, pool)
    if env is not None:
        if len(env._instances) > 32:
            env._instances.clear()
        env._instances[ck] = out
    return out


def select_rows(inst: Instance, method: str, *, k: int, theta: float = 1.0, env: Env | None = None,
                prep: Prepared | None = None, rows: np.ndarray | None = None, query_index: int | None = None,
                **params: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """Rows of ``inst`` chosen by the published ``method`` (:func:`divopt_rag.solvers.select`) at
    (k, theta) with ``params``; the cross-encoder methods get the environment's cross-encoder,
    the question and the pool's texts. A pool smaller than k gives all of it (k is clipped to
    the pool size, ``info["k_used"]``, as the papers' code retrieves "up to k"). Returns
    (indices in pick order, info with ``seconds``)."""
    k = min(int(k), inst.n)
    kwargs = dict(params)
    if "cross_encoder" in METHOD_NEEDS.get(method, ()):
        if env is None or env.cross_encoder is None:
            raise ReproduceError(f"method {method!r} needs a cross-encoder: pass --cross-encoder PATH "
                                 "(a local sentence-transformers CrossEncoder directory)")
        kwargs.update(cross_encoder=env.cross_encoder, query=prep.question(query_index), passages=prep.texts(rows))
    t0 = time.perf_counter()
    sel = select(inst.replace(k=k, theta=theta), method, **kwargs)
    info = {"seconds": time.perf_counter() - t0, "objective": sel.objective, "iterations": sel.iterations, "k_used": k}
    return sel.indices, info


def _labels(prep: Prepared, query_id: str) -> dict[str, Any]:
    return dict((prep.data.subtopics or {}).get(query_id) or {})


def retrieval_metrics(prep: Prepared, query_id: str, inst: Instance, rows: np.ndarray, idx: np.ndarray,
                      names: Sequence[str]) -> dict[str, float]:
    """The retrieval metrics ``names`` of the selection ``idx`` (rows of ``inst``, ranked in pick order):

    * ``answer_recall``: the CCBQP paper's answer recall@k, the fraction of the query's answer
      parts with an alias contained (lower-cased substring) in the joined selected texts
      (:func:`divopt_rag.experiments.rag.answers.answer_recall`); on an analogue without answer strings,
      the fraction of the query's labelled subtopics covered (S-recall over its labels);
    * ``ilad``: mean 1 - cos over the selected pairs; ``relevance_mean``: mean cos(q, e) of the
      selection; ``vrsd``: cos(sum of the selected, q);
    * ``ndcg``, ``recall``: ir-measures nDCG@k / R@k against the qrels (NaN without relevant);
    * ``component_ndcg``: mean over the answer components (subtopic labels, RGB's ``en_int``
      parts) of nDCG@k against each component's passages;
    * ``alpha_ndcg`` (alpha 0.5), ``s_recall``: against the subtopic labels.
    """
    unknown = sorted(set(names) - set(RETRIEVAL_METRICS))
    if unknown:
        raise ReproduceError(f"unknown retrieval metric(s) {unknown}; expected some of {list(RETRIEVAL_METRICS)}")
    k = int(len(idx))
    ranked = [str(inst.ids[int(i)]) for i in idx]
    out: dict[str, float] = {}
    labels = _labels(prep, query_id)
    if "answer_recall" in names:
        groups = prep.answer_groups(query_id)
        if groups:
            out["answer_recall"] = answers.answer_recall(prep.texts(rows[idx]), groups)
        else:
            out["answer_recall"] = subtopic_recall(ranked, labels, k) if labels else math.nan
    if "ilad" in names:
        out["ilad"] = ilad(inst.E, idx) if k > 1 else math.nan
    if "relevance_mean" in names:
        out["relevance_mean"] = float(inst.relevance.double()[list(map(int, idx))].mean())
    if "vrsd" in names:
        out["vrsd"] = vrsd_score(inst.E, inst.q, idx)
    if "ndcg" in names or "recall" in names:
        qrels = dict((prep.data.qrels or {}).get(query_id) or {})
        sc = ir_scores({"q": ranked}, {"q": qrels}, k, ("R", "nDCG"))["q"]
        if "ndcg" in names:
            out["ndcg"] = sc[f"nDCG@{k}"]
        if "recall" in names:
            out["recall"] = sc[f"R@{k}"]
    if "component_ndcg" in names:
        per = answers.component_ndcg(ranked, labels, k) if labels else {}
        out["component_ndcg"] = float(np.mean(list(per.values()))) if per else math.nan
    if "alpha_ndcg" in names:
        out["alpha_ndcg"] = alpha_ndcg(ranked, labels, k) if labels else math.nan
    if "s_recall" in names:
        out["s_recall"] = subtopic_recall(ranked, labels, k) if labels else math.nan
    return out


def answer_scores(prediction: str, groups: Sequence[Sequence[str]], names: Sequence[str], *,
                  f1_style: str = "squad", list_sep: str = ",", first_gold: bool = False) -> dict[str, float]:
    """Answer-level metrics of one generated answer (:mod:`divopt_rag.experiments.rag.answers`):
    ``f1`` / ``em`` (token F1 / exact match, best alias; ``first_gold``: against the first alias
    of the first part only, DF-RAG's script), ``rgb_correct`` (RGB accuracy: every part matched,
    no decline), ``str_match`` (fraction of parts matched), ``list_precision`` / ``list_recall``
    / ``list_f1`` (QAMPARI's list metric on the answer split at ``list_sep``)."""
    if not groups:
        return {n: math.nan for n in names}
    aliases = [a for part in groups for a in part]
    refs: Any = groups[0][0] if first_gold else aliases
    out: dict[str, float] = {}
    if "f1" in names:
        out["f1"] = answers.token_f1(prediction, refs, style=f1_style)
    if "em" in names:
        out["em"] = answers.exact_match(prediction, refs)
    if "rgb_correct" in names:
        out["rgb_correct"] = float(answers.rgb_correct(prediction, groups))
    if "str_match" in names:
        labels = answers.string_match(prediction, groups)
        out["str_match"] = sum(labels) / len(labels)
    if {"list_precision", "list_recall", "list_f1"} & set(names):
        p, r, f = answers.list_prf(answers.split_list_answer(prediction, list_sep), groups)
        out.update(list_precision=p, list_recall=r, list_f1=f)
    return out


def generation_order(inst: Instance, idx: np.ndarray, order: str = "selection") -> np.ndarray:
    """The passages' order in the prompt: pick order, or decreasing relevance."""
    if order == "selection":
        return np.asarray(idx)
    rel = inst.relevance.double().cpu().numpy()[idx]
    return np.asarray(idx)[np.argsort(-rel, kind="stable")]
