"""Query-adaptive relevance-diversity trade-off on divopt's sweeps (after DF-RAG, Khan et al.,
Findings of EACL 2026).

Pick theta per query at test time: select with several values of theta (any method of the
sweep; gMMR, DF-RAG's base, by default), score each selection with an evaluator, keep the best
by a median tie-breaking gate. The Oracle does the same with the ground truth, which bounds what
any per-query policy can reach. This module implements it on one query (:func:`theta_sweep`,
:func:`adaptive_select`) and on a sweep table (:func:`oracle_theta`, :func:`gated_theta`,
:func:`adaptive_report`) for ANY evaluator and retrieval metric. The published DF-RAG pipeline
(gMMR candidates at lambda in {0.1..1}, Planner steps, per-step 0-5 Evaluator, Retrieval Support,
binary-search sampling, DF-RAG+IC, answer-F1 Oracle) is :mod:`divopt_rag.experiments.rag.dfrag`; its
Evaluator plugs in here as the ``dfrag`` evaluator. :func:`dfrag_delta` keeps divopt's earlier
variant (diversity-rating planner, one-number judge, MMR, lower median) under its own name.

Median tie-breaking gate (:func:`median_gate`), exactly:
  1. drop candidates whose score is NaN; with none left, raise ValueError;
  2. s* = max score; the tied set T = {theta_i : score_i >= s* - atol} (atol = 0: exact ties);
  3. sort the distinct values of T: t_1 < ... < t_m and return t_(floor(m/2)+1) (1-based), i.e.
     the median for odd m and the UPPER of the two middle values for even m, DF-RAG's rule
     (``even="lower"`` takes the lower one, divopt's earlier default). The result is always one
     of the candidate thetas.
Why: adjacent thetas often give the same selection, so exact ties form plateaus; the median
is the plateau's most interior point, the choice least sensitive to where the grid's ends
are. The upper middle leans to relevance (theta = 1 is pure relevance).

The Oracle theta of a query is the gate applied to the ground-truth metric (ties between
thetas with equal metric broken the same way); the gated theta applies it to the evaluator's
score. :func:`adaptive_report` compares, per method and setting: every fixed theta, the best
fixed theta chosen in-sample (optimistic), the gate and the Oracle, and reports the share of
the Oracle's gain over the baseline (theta = 1, plain relevance) that the gate captures,
(gate - baseline) / (oracle - baseline), as DF-RAG reports it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from divopt_rag.experiments.methods import run_method
from divopt_rag.models.validation import check_nonnegative, check_theta

from divopt_rag.experiments.measures.metrics import selection_metrics

__all__ = [
    "median_gate",
    "AdaptiveChoice",
    "theta_sweep",
    "adaptive_select",
    "oracle_theta",
    "gated_theta",
    "adaptive_report",
    "dfrag_delta",
]


def median_gate(thetas: Sequence[float], scores: Sequence[float], *, atol: float = 0.0, even: str = "upper") -> float:
    """The median of the thetas whose score ties the best (rule in the module docstring)."""
    th = np.asarray(thetas, dtype=np.float64)
    sc = np.asarray(scores, dtype=np.float64)
    if th.ndim != 1 or th.shape != sc.shape:
        raise ValueError(f"thetas and scores must be 1-D of equal length, got {th.shape} and {sc.shape}")
    if even not in ("lower", "upper"):
        raise ValueError(f"even must be 'lower' or 'upper', got {even!r}")
    atol = check_nonnegative(atol, "atol")
    keep = ~np.isnan(sc)
    if not keep.any():
        raise ValueError("median_gate needs at least one candidate with a score (all scores are NaN or none given)")
    th, sc = th[keep], sc[keep]
    tied = np.unique(th[sc >= sc.max() - atol])
    m = tied.size
    pos = (m - 1) // 2 if even == "lower" else m // 2
    return float(tied[pos])


@dataclass
class AdaptiveChoice:
    """The gated choice on one query: theta, its selection, and every candidate's score."""

    theta: float
    indices: np.ndarray
    scores: dict[float, float]
    tied: list[float]
    selections: dict[float, np.ndarray] = field(repr=False, default_factory=dict)


def theta_sweep(
    context: Any,
    thetas: Sequence[float],
    method: str = "gmmr",
    *,
    evaluator: Any = None,
    metric: str | None = None,
    seed: int = 0,
    **params: Any,
) -> pd.DataFrame:
    """Select with ``method`` at every theta on one query; one row per theta.

    context : a :class:`~divopt_rag.experiments.rag.evaluator.QueryContext` (its instance's k is used).
    evaluator : optional; its score goes to ``eval_score``. metric : optional ground-truth metric
    name of ``selection_metrics`` (needs the context's labels), in column ``metric``.
    """
    if not len(thetas):
        raise ValueError("thetas must be a non-empty list of values in [0, 1]")
    rows = []
    for t in thetas:
        t = check_theta(t)
        ctx = _with_theta(context, t)
        res = run_method(ctx.instance, method, params, seed)
        row = {"query_id": context.query_id, "method": method, "theta": t, "objective": res.objective,
               "selected": res.indices}
        if evaluator is not None:
            row["eval_score"] = float(evaluator.score(ctx, res.indices))
        if metric is not None:
            m = selection_metrics(ctx.instance, res.indices, qrels=context.qrels, subtopics=context.subtopics)
            if metric not in m:
                raise ValueError(f"metric {metric!r} is not available; available: {sorted(m)}")
            row["metric"] = m[metric]
        rows.append(row)
    return pd.DataFrame(rows)


def _with_theta(context: Any, theta: float) -> Any:
    return replace(context, instance=context.instance.replace(theta=theta))


def adaptive_select(
    context: Any,
    thetas: Sequence[float],
    evaluator: Any,
    method: str = "gmmr",
    *,
    atol: float = 0.0,
    even: str = "upper",
    planner: Callable[[Any, list[float]], Sequence[float]] | None = None,
    seed: int = 0,
    **params: Any,
) -> AdaptiveChoice:
    """Adaptive theta on one query: select at each candidate theta, score with ``evaluator``, gate.

    For the published DF-RAG pipeline use :class:`divopt_rag.experiments.rag.dfrag.DFRAG`; with the
    ``dfrag`` evaluator and ``thetas`` = {0.1, ..., 1} this is DF-RAG's uniform sampling.
    planner : optional ``planner(context, thetas) -> candidate thetas`` run first (e.g.
        :class:`~divopt_rag.experiments.rag.evaluator.DeltaPlanner`, which narrows the range for the
        query); it must return a non-empty subset of ``thetas``.
    """
    if evaluator is None:
        raise ValueError("adaptive_select needs an evaluator (see divopt_rag.experiments.rag.evaluator)")
    cands = [check_theta(t) for t in thetas]
    if planner is not None:
        planned = [check_theta(t) for t in planner(context, list(cands))]
        if not planned or not set(planned) <= set(cands):
            raise ValueError(f"planner must return a non-empty subset of {cands}, got {planned}")
        cands = planned
    table = theta_sweep(context, cands, method, evaluator=evaluator, seed=seed, **params)
    theta = median_gate(table["theta"], table["eval_score"], atol=atol, even=even)
    best = table["eval_score"].max()
    tied = sorted(set(table.loc[table["eval_score"] >= best - atol, "theta"]))
    pick = table.index[table["theta"] == theta][0]
    return AdaptiveChoice(
        theta=theta,
        indices=np.asarray(table.at[pick, "selected"]),
        scores=dict(zip(table["theta"], table["eval_score"])),
        tied=tied,
        selections=dict(zip(table["theta"], table["selected"])),
    )


# ---------------------------------------------------------------------------------------------
# On a sweep table (one row per (query, method, parameters))
# ---------------------------------------------------------------------------------------------
def _settings(table: pd.DataFrame) -> pd.Series:
    """The parameters of each row except theta, as a canonical JSON string."""
    if "params" in table:
        def strip(s: str) -> str:
            p = json.loads(s)
            p.pop("theta", None)
            return json.dumps(p, sort_keys=True)

        return table["params"].map(strip)
    return pd.Series([""] * len(table), index=table.index)


def _prepare(table: pd.DataFrame, needed: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in ("query_id", "method", "theta", *needed) if c not in table]
    if missing:
        raise ValueError(f"the table lacks columns {missing}; available: {list(table.columns)}")
    t = table
    if "status" in t:
        t = t[t["status"] == "ok"]
    t = t.copy()
    t["setting"] = _settings(t)
    if "dataset" not in t:
        t["dataset"] = ""
    return t


_GROUP = ["dataset", "method", "setting", "query_id"]


def _gate_groups(t: pd.DataFrame, by: str, metric: str, prefix: str, atol: float, even: str) -> pd.DataFrame:
    rows = []
    for keys, g in t.groupby(_GROUP, sort=True):
        g = g.dropna(subset=[by])
        if g.empty:
            continue
        theta = median_gate(g["theta"], g[by], atol=atol, even=even)
        best = g[by].max()
        n_tied = int(g.loc[g[by] >= best - atol, "theta"].nunique())
        at = g[g["theta"] == theta]
        rows.append({**dict(zip(_GROUP, keys)), f"theta_{prefix}": theta, f"{metric}_{prefix}": float(at[metric].iloc[0]),
                     f"n_tied_{prefix}": n_tied})
    return pd.DataFrame(rows, columns=[*_GROUP, f"theta_{prefix}", f"{metric}_{prefix}", f"n_tied_{prefix}"])


def oracle_theta(table: pd.DataFrame, metric: str, *, atol: float = 0.0, even: str = "upper") -> pd.DataFrame:
    """Per (dataset, method, setting, query): the Oracle theta, best by the ground-truth ``metric``
    (ties broken by :func:`median_gate`), with its metric value and the number of tied thetas."""
    t = _prepare(table, [metric])
    return _gate_groups(t, metric, metric, "oracle", atol, even)


def gated_theta(
    table: pd.DataFrame, metric: str, *, score: str = "eval_score", atol: float = 0.0, even: str = "upper"
) -> pd.DataFrame:
    """Per query: the theta the median gate picks by the evaluator's ``score`` column, and the
    ground-truth ``metric`` of that choice."""
    t = _prepare(table, [metric, score])
    return _gate_groups(t, score, metric, "gate", atol, even)


def adaptive_report(
    table: pd.DataFrame,
    metric: str,
    *,
    score: str = "eval_score",
    baseline_theta: float = 1.0,
    atol: float = 0.0,
    even: str = "upper",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-query choices, policy comparison) of a sweep table with a theta grid.

    Policies, per (dataset, method, setting), each the mean of ``metric`` over queries:
    ``theta=<t>`` for every fixed theta of the grid; ``best fixed (in-sample)``: the fixed theta
    with the best mean, chosen on these same queries; ``gate(<score>)`` when the table has the
    evaluator's ``score`` column; ``oracle``. ``captured`` = (policy - baseline) / (oracle -
    baseline), baseline = the fixed ``baseline_theta`` (NaN if it is not in the grid or the
    Oracle gains nothing over it).
    """
    t = _prepare(table, [metric])
    per_query = oracle_theta(t, metric, atol=atol, even=even)
    has_score = score in t and t[score].notna().any()
    if has_score:
        per_query = per_query.merge(gated_theta(t, metric, score=score, atol=atol, even=even), on=_GROUP, how="left")
    base = t[np.isclose(t["theta"], baseline_theta)][[*_GROUP, metric]].rename(columns={metric: f"{metric}_baseline"})
    per_query = per_query.merge(base, on=_GROUP, how="left")
    rows = []
    for keys, g in t.groupby(["dataset", "method", "setting"], sort=True):
        pq_ = per_query[(per_query["dataset"] == keys[0]) & (per_query["method"] == keys[1]) & (per_query["setting"] == keys[2])]
        fixed = g.groupby("theta")[metric].mean()
        oracle = float(pq_[f"{metric}_oracle"].mean())
        at_base = fixed[np.isclose(fixed.index.to_numpy(dtype=float), baseline_theta)]
        baseline = float(at_base.iloc[0]) if len(at_base) else float("nan")

        def captured(v: float) -> float:
            gain = oracle - baseline
            return (v - baseline) / gain if np.isfinite(gain) and gain > 0 else float("nan")

        common = dict(zip(["dataset", "method", "setting"], keys))
        for th, v in fixed.items():
            rows.append({**common, "policy": f"theta={th:g}", "theta": th, metric: float(v), "captured": captured(v)})
        best_th = float(fixed.idxmax())
        rows.append({**common, "policy": "best fixed (in-sample)", "theta": best_th, metric: float(fixed.max()),
                     "captured": captured(float(fixed.max()))})
        if has_score:
            v = float(pq_[f"{metric}_gate"].mean())
            rows.append({**common, "policy": f"gate({score})", "theta": np.nan, metric: v, "captured": captured(v)})
        rows.append({**common, "policy": "oracle", "theta": np.nan, metric: oracle, "captured": captured(oracle)})
    return per_query, pd.DataFrame(rows)


def dfrag_delta(
    context: Any,
    thetas: Sequence[float],
    planner: Callable[[Any, list[float]], Sequence[float]],
    judge: Any,
    method: str = "mmr",
    *,
    even: str = "lower",
    seed: int = 0,
    **params: Any,
) -> AdaptiveChoice:
    """divopt's earlier DF-RAG variant, kept under its own name (NOT the published pipeline).

    ``adaptive_select(context, thetas, judge, method, planner=planner, even=even)`` with its
    old defaults. What differs from DF-RAG (:class:`divopt_rag.experiments.rag.dfrag.DFRAG`):
    the planner (:class:`~divopt_rag.experiments.rag.evaluator.DeltaPlanner`) rates the diversity delta
    a question needs and keeps the thetas within a window of 1 - delta, where DF-RAG's Planner
    writes plan steps and every lambda of the grid stays a candidate; the judge
    (:class:`~divopt_rag.experiments.rag.evaluator.OpenAIJudge`) returns one 0-10 score of the set for
    the question, where DF-RAG's Evaluator scores each plan step 0-5 and sums them; MMR is the
    base, not gMMR; ties go to the lower median, not the upper; the grid is the caller's (DF-RAG:
    {0.1, ..., 1}, no 0); no binary-search sampling, no +IC, no answer-F1 Oracle.
    """
    return adaptive_select(context, thetas, judge, method, even=even, planner=planner, seed=seed, **params)
