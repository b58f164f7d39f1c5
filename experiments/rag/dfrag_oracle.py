"""DF-RAG's ground truth (Khan et al., arXiv:2601.17212v1): the answer F1 it reports and the
Oracle it measures the gate against.

* Metric (Sec. 3.5): "the official metrics of LongBench and InfiniteBench", the answer F1 after
  SQuAD normalization, the best over the gold answers (:func:`dfrag_f1`); the authors' run
  script's F1 is kept apart under divopt's name (:func:`dfrag_script_f1`).
* Oracle (Sec. 3.3, :func:`dfrag_oracle`): per question the lambda of {0, 0.1, ..., 1.0}
  (lambda = 0 included) whose generated answer scores the best F1 against the gold answers; any
  other ground-truth metric plugs in. Ties: the upper median, as DF-RAG's gate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from divopt_rag.experiments.measures.metrics import selection_metrics
from divopt_rag.models.validation import check_choice, check_theta

from .answers import token_f1
from .dfrag_candidates import ORACLE_THETAS, candidate_set, generator_order, question_texts
from .dfrag_sampling import upper_median_gate

__all__ = ["dfrag_f1", "dfrag_script_f1", "OracleResult", "dfrag_oracle"]


def dfrag_f1(prediction: str, answers: Sequence[str]) -> float:
    """DF-RAG's metric (Sec. 3.5: "the official metrics of LongBench and InfiniteBench"): token
    F1 after SQuAD normalization (lower case, no punctuation, no articles), the best over the
    gold ``answers``, as both benchmarks' ``qa_f1_score`` compute it:
    :func:`divopt_rag.experiments.rag.answers.token_f1` with ``style="squad"``. So
    ``dfrag_f1("Paris", ["London", "Paris"]) == 1``. In [0, 1]; the paper prints it x 100."""
    if not answers:
        raise ValueError("dfrag_f1 needs at least one gold answer")
    return token_f1(prediction, list(answers), style="squad")


def dfrag_script_f1(prediction: str, answers: Sequence[str]) -> float:
    """The F1 of the authors' public run script (divopt's name for it, not the paper's metric):
    ``\\w+`` tokens of the lower-cased text, multiset overlap, against the FIRST gold answer only
    (:func:`~divopt_rag.experiments.rag.answers.token_f1` with ``style="dfrag"``)."""
    if not answers:
        raise ValueError("dfrag_script_f1 needs at least one gold answer")
    return token_f1(prediction, answers[0], style="dfrag")


@dataclass
class OracleResult:
    """The Oracle theta of one question and the ground-truth value of every theta."""

    theta: float
    value: float
    values: dict[float, float]
    tied: list[float]
    answers: dict[float, str] = field(default_factory=dict)  # generated answer per theta (answer metrics)
    selections: dict[float, np.ndarray] = field(repr=False, default_factory=dict)


def dfrag_oracle(context: Any, generator: Callable[[str, Sequence[str], str | None], str] | None = None, *,
                 answers: Sequence[str] | None = None,
                 metric: Callable[[str, Sequence[str]], float] | str | None = None,
                 thetas: Sequence[float] = ORACLE_THETAS, method: str = "gmmr", order: str = "relevance") -> OracleResult:
    """DF-RAG's Oracle (Sec. 3.3): the theta whose answer scores best against the ground truth.

    Default: generate an answer from the candidate set of every theta of {0, 0.1, ..., 1.0}
    (:data:`ORACLE_THETAS`, lambda = 0 included as the paper's Oracle grid; no extra context)
    and score it by :func:`dfrag_f1` against the gold ``answers`` (default ``context.answers``).
    metric : a callable ``metric(answer, gold_answers) -> float`` for another answer metric, or
    the name of a retrieval metric of ``selection_metrics`` ("alpha_ndcg", "recall", ...) for
    questions without answers (no generator needed). Ties: the upper median, as the gate.
    """
    order = check_choice(order, "order", ("relevance", "selection"))
    grid = sorted(set(check_theta(t) for t in thetas))
    if not grid:
        raise ValueError("thetas must hold at least one value in [0, 1]")
    retrieval = isinstance(metric, str)
    if not retrieval:
        if generator is None:
            raise ValueError("dfrag_oracle needs a generator(question, passages, extra_context) -> str "
                             "for an answer metric (or metric='<retrieval metric>')")
        golds = answers if answers is not None else getattr(context, "answers", None)
        if not golds:
            raise ValueError(f"dfrag_oracle needs gold answers (answers= or context.answers) for query "
                             f"{getattr(context, 'query_id', '?')!r}, or metric='<retrieval metric>'")
        score = metric if metric is not None else dfrag_f1
        question, texts = question_texts(context)
    values: dict[float, float] = {}
    generated: dict[float, str] = {}
    selections: dict[float, np.ndarray] = {}
    for t in grid:
        idx = candidate_set(context.instance.replace(theta=t), method)
        selections[t] = idx
        if retrieval:
            m = selection_metrics(context.instance, idx, qrels=getattr(context, "qrels", None),
                                  subtopics=getattr(context, "subtopics", None))
            if metric not in m:
                raise ValueError(f"metric {metric!r} is not available; available: {sorted(m)}")
            values[t] = float(m[metric])
        else:
            passages = [str(texts[i]) for i in generator_order(context, idx, order)]
            generated[t] = str(generator(question, passages, None))
            values[t] = float(score(generated[t], list(golds)))
    theta = upper_median_gate(list(values), list(values.values()))
    best = max(values.values())
    return OracleResult(theta=theta, value=values[theta], values=values,
                        tied=sorted(t for t, v in values.items() if v == best), answers=generated,
                        selections=selections)
