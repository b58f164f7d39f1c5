"""One task of a sweep: a method with its parameters on one query of an embedded dataset, as one
tidy row (the method's fields, every metric, the evaluator's score).

The row's identity columns (run key, dataset, query, method, parameters, seed) are the task's
(:meth:`divopt_rag.experiments.engine.plan.Task.columns`); a method that raises becomes an error row
in the executor (:func:`divopt_rag.experiments.engine.backends.run_task`).

A run changes no global state: the executor's workers run one thread each (the sweep's inline
runs too, :func:`divopt_rag.experiments.engine.backends.worker_threads`), so the floating-point results do
not depend on the backend or the worker count, and the query pools a worker reuses live in its
own state (:class:`QueryPools`), not in this module.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from divopt_rag.data import EmbeddedDataset
from divopt_rag.experiments.engine.plan import Task
from divopt_rag.experiments.measures.metrics import row_metrics
from divopt_rag.experiments.methods import INSTANCE_PARAMS, run_method
from divopt_rag.experiments.rag.evaluator import QueryContext
from divopt_rag.models import Instance

__all__ = ["query_instance", "QueryPools", "query_context", "execute_run"]


def query_instance(data: EmbeddedDataset, query_index: int, pool: int | None = None) -> tuple[Instance, np.ndarray]:
    """Query ``query_index`` of ``data`` as an Instance (k=1, theta=1: set them with ``replace``)
    over its candidate rows, and those rows of ``data.E``.

    The candidates are the query's pool (``data.pools``) or all of E; ``pool`` keeps the top
    ``pool`` of them by relevance c = E q (ties by position). The Instance's ids are the doc ids.
    """
    rows = data.pools[query_index] if data.pools is not None else np.arange(data.E.shape[0])
    q = np.array(data.Q[query_index], dtype=np.float32)
    if data.pools is None and (pool is None or pool >= rows.size):
        E = np.asarray(data.E, dtype=np.float32)
        Erows = E if E.flags.writeable else np.array(E)  # torch wants a writable array (not a read-only mmap)
    else:
        Erows = np.asarray(data.E[rows], dtype=np.float32)  # fancy indexing copies: a writable array
    if pool is not None and pool < rows.size:
        top = np.argsort(-(Erows @ q), kind="stable")[:pool]
        rows, Erows = rows[top], np.ascontiguousarray(Erows[top])
    inst = Instance(torch.from_numpy(Erows), torch.from_numpy(q), k=1, theta=1.0, ids=data.doc_ids[rows])
    return inst, rows


class QueryPools:
    """The query instances (pool and its rows) one worker has built, the ``size`` most recent,
    keyed by (dataset content key, query, pool): the runs of a query are adjacent in a chunk, so
    this saves rebuilding the pool for each run. A worker's state holds one
    (:meth:`divopt_rag.experiments.studies.sweep.SweepSpec.open`); nothing is shared between workers or
    kept by this module."""

    def __init__(self, size: int = 64) -> None:
        self.size = int(size)
        self._pools: OrderedDict[tuple[str, int, Any], tuple[Instance, np.ndarray]] = OrderedDict()

    def get(self, data: EmbeddedDataset, query_index: int, pool: int | None) -> tuple[Instance, np.ndarray]:
        """(instance, rows) of query ``query_index`` on ``data`` (:func:`query_instance`)."""
        key = (data.key, int(query_index), pool)
        hit = self._pools.get(key)
        if hit is None:
            hit = self._pools[key] = query_instance(data, query_index, pool)
            while len(self._pools) > self.size:
                self._pools.popitem(last=False)
        else:
            self._pools.move_to_end(key)
        return hit

    def __len__(self) -> int:
        return len(self._pools)


def query_context(data: EmbeddedDataset, query_index: int, pool: int | None = None, k: int = 1,
                  theta: float = 1.0, *, pools: QueryPools | None = None) -> QueryContext:
    """The :class:`~divopt_rag.experiments.rag.evaluator.QueryContext` of one query (pool, labels,
    texts); ``pools``: a worker's :class:`QueryPools` to reuse built pools from (None: build it)."""
    base, rows = (pools or QueryPools(size=1)).get(data, query_index, pool)
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
                cutoffs: Sequence[int] | None = None, *, pools: QueryPools | None = None) -> dict[str, Any]:
    """The measurement columns of ``task`` on ``data``: the method's columns
    (:meth:`~divopt_rag.experiments.method_result.MethodResult.row`: objective where defined,
    objective_kind, model_objective, set_size, seconds, iterations, its measures, ``info``),
    ``n`` (the pool it chose from), ``selected`` (passage ids, in the method's order), the metrics
    of :func:`~divopt_rag.experiments.measures.metrics.row_metrics` (``metric_options``: sigma, alpha) and
    the evaluator's score. ``pools``: the worker's :class:`QueryPools`. Threads are the caller's
    (the executor's workers limit them).

    Ranking metrics are measured at the task's k (``recall@<k>``, ...); a method that does not
    read k (it sizes its own set) is measured at ``cutoffs`` instead (the sweep's k values), and
    its instance gets the placeholders k = 1, theta = 1 that it never reads.
    """
    params = dict(task.params)
    method_params = {p: v for p, v in params.items() if p not in INSTANCE_PARAMS}
    k, theta = params.get("k"), params.get("theta")
    ctx = query_context(data, int(task.extra["query_index"]), params.get("pool"),
                        1 if k is None else k, 1.0 if theta is None else theta, pools=pools)
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
