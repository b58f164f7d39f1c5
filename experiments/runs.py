"""One run of a sweep: a :class:`~divopt_rag.experiments.grid.RunSpec` on an embedded dataset, as
one tidy row (parameters, the method's fields, every metric, the evaluator's score).

A failed run is a row too (``status == "error"`` with the message), so it is visible in the
table and retried with ``--retry-errors``. Every run sets ``torch.set_num_threads(1)`` while it
runs, so parallel workers do not oversubscribe the cores and the floating-point results do not
depend on the backend or the worker count.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch

from divopt_rag.data import EmbeddedDataset
from divopt_rag.experiments import harness
from divopt_rag.experiments.rag.evaluator import QueryContext
from divopt_rag.experiments.grid import RunSpec
from divopt_rag.experiments.methods import run_method
from divopt_rag.experiments.metrics import selection_metrics
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


def execute_run(data: EmbeddedDataset, spec: RunSpec, evaluator: Any = None) -> dict[str, Any]:
    """Run ``spec`` on ``data`` and return its tidy row (status "error" with the message if it raised)."""
    params = spec.param_dict
    row: dict[str, Any] = {
        "run_key": spec.key,
        "run_index": spec.index,
        "dataset": spec.dataset,
        "query_index": spec.query_index,
        "query_id": spec.query_id,
        "method": spec.method,
        "params": json.dumps(params, sort_keys=True),
        **params,
        "seed": spec.seed,
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ctx = query_context(data, spec.query_index, params.get("pool"), params["k"], params["theta"])
        res = run_method(ctx.instance, spec.method, spec.method_params, spec.seed)
        idx = res.pop("indices")
        metrics = selection_metrics(ctx.instance, idx, qrels=ctx.qrels, subtopics=ctx.subtopics)
        metrics.pop("objective", None)  # same value as the method's objective
        row.update(status="ok", error="", n_pool=ctx.instance.n, **res, **metrics)
        row["selected"] = [str(ctx.instance.ids[i]) for i in idx]
        if evaluator is not None:
            row["eval_name"] = evaluator.name
            row["eval_score"] = float(evaluator.score(ctx, idx))
    except Exception as exc:  # a failed run is a row too: visible in the table, retried with --retry-errors
        row.update(status="error", error=f"{type(exc).__name__}: {exc}", selected=[])
    finally:
        torch.set_num_threads(threads)
    return row
