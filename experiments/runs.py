"""One task of a sweep: a method with its parameters on one query of an embedded dataset, as one
tidy row (the method's fields, every metric, the evaluator's score).

The row's identity columns (run key, dataset, query, method, parameters, seed) are the task's
(:meth:`divopt_rag.experiments.executor.Task.columns`); a method that raises becomes an error row
in the executor (:func:`divopt_rag.experiments.backends.run_task`). Every run sets
``torch.set_num_threads(1)`` while it runs, so parallel workers do not oversubscribe the cores
and the floating-point results do not depend on the backend or the worker count.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from divopt_rag.data import EmbeddedDataset
from divopt_rag.experiments import harness
from divopt_rag.experiments.executor import Task
from divopt_rag.experiments.grid import INSTANCE_PARAMS
from divopt_rag.experiments.methods import run_method
from divopt_rag.experiments.metrics import row_metrics
from divopt_rag.experiments.rag.evaluator import QueryContext
from divopt_rag.models import Instance

__all__ = ["query_context", "execute_run"]

# the query instances of the dataset in use, keyed by (dataset key, query, pool): the runs of a
# query are adjacent in a chunk, so a small cache saves rebuilding the pool for each run
_BASE_CACHE: dict[tuple[str, int, Any], tuple[Instance, np.ndarray]] = {}


def _query_instance(data: EmbeddedDataset, query_index: int, pool: int | None) -> tuple[Instance, np.ndarray]:
    ck = (data.key, int(query_index), pool)
    hit = _BASE_CACHE.get(ck)
    if hit is not None:
        return hit
    if len(_BASE_CACHE) > 64 or any(k[0] != data.key for k in _BASE_CACHE):
        _BASE_CACHE.clear()
    _BASE_CACHE[ck] = harness.query_instance(data, query_index, pool)
    return _BASE_CACHE[ck]


def query_context(data: EmbeddedDataset, query_index: int, pool: int | None = None, k: int = 1,
                  theta: float = 1.0) -> QueryContext:
    """The :class:`~divopt_rag.experiments.rag.evaluator.QueryContext` of one query (pool, labels, texts)."""
    base, rows = _query_instance(data, query_index, pool)
    qid = data.query_ids[query_index]
    return QueryContext(
        query_id=qid,
        instance=base.replace(k=k, theta=theta),
        query_text=None if data.query_texts is None else data.query_texts[query_index],
        passages=None if data.doc_texts is None else [data.doc_texts[int(r)] for r in rows],
        qrels=None if data.qrels is None else data.qrels.get(qid, {}),
        subtopics=None if data.subtopics is None else data.subtopics.get(qid),
    )


def execute_run(data: EmbeddedDataset, task: Task, evaluator: Any = None,
                metric_options: Mapping[str, Any] | None = None,
                cutoffs: Sequence[int] | None = None) -> dict[str, Any]:
    """The measurement columns of ``task`` on ``data``: the method's columns
    (:meth:`~divopt_rag.experiments.method_result.MethodResult.row`: objective where defined,
    objective_kind, model_objective, set_size, seconds, iterations, its measures, ``info``),
    ``n`` (the pool it chose from), ``selected`` (passage ids, in the method's order), the metrics
    of :func:`~divopt_rag.experiments.metrics.row_metrics` (``metric_options``: sigma, alpha) and
    the evaluator's score.

    Ranking metrics are measured at the task's k (``recall@<k>``, ...); a method that does not
    read k (it sizes its own set) is measured at ``cutoffs`` instead (the sweep's k values), and
    its instance gets the placeholders k = 1, theta = 1 that it never reads.
    """
    params = dict(task.params)
    method_params = {p: v for p, v in params.items() if p not in INSTANCE_PARAMS}
    k, theta = params.get("k"), params.get("theta")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ctx = query_context(data, int(task.extra["query_index"]), params.get("pool"),
                            1 if k is None else k, 1.0 if theta is None else theta)
        res = run_method(ctx.instance, task.method, method_params, int(task.extra["seed"]))
        idx = res.indices
        metrics = row_metrics(ctx.instance, idx, qrels=ctx.qrels, subtopics=ctx.subtopics,
                              cutoffs=[ctx.instance.k] if k is not None else list(cutoffs or ()),
                              **dict(metric_options or {}))
        row: dict[str, Any] = {**res.row(), "n": ctx.instance.n, "selected": [str(ctx.instance.ids[i]) for i in idx],
                               **metrics}
        if evaluator is not None:
            row["eval_name"] = evaluator.name
            row["eval_score"] = float(evaluator.score(ctx, idx))
        return row
    finally:
        torch.set_num_threads(threads)
