"""Sweep-ready robust models: ``(instance, **parameters) -> dict`` (one tidy record per run).

:data:`ROBUST_MODELS` maps a model name to its record function; the sweep runner
(``divopt-rag sweep``) looks it up as ``divopt_rag.robust.ROBUST_MODELS`` and passes each function only
the grid parameters its signature names (so ``attack_budget`` multiplies k-sparse runs only).

Every function

1. works on the whole instance pool, as the report does, unless ``candidates`` restricts it to
   the ``candidates`` most relevant documents (nominal s_i = q^T mu_i; the MILPs have n(n-1)/2
   pair variables, so a restriction is a modeling choice for speed, not an exact reduction), and
   lets the sparsity penalty size the set ("rather than fixing k a priori"): ``max_size=None``
   (default) is no cap, ``"k"`` caps at the instance's k, an int at that size;
2. builds the robust model (:mod:`divopt_rag.robust.models`) with the report's cosine relevance
   (``query_similarity="cosine"``, default) or divopt's inner product (``"inner"``) and solves it
   with :func:`divopt_rag.models.runner.solve` (or runs the cutting plane);
3. returns a flat record: the parameters, ``status`` / ``proven_optimal``, ``objective`` (the
   model's worst-case objective sum_{i in S}(r_i - sparsity_penalty), r_i the oracle's
   worst-case relevance), ``bound``, ``gap``, ``seconds``, ``indices`` (rows of the given
   instance), ``n_selected``, worst-case, attacked and nominal mean relevance of the selection,
   the sound worst-case and the nominal average pairwise similarity, the CCBQP objective of the
   selection (to compare with fast selectors), and ``iterations`` / ``cuts`` for the cutting plane.
   ``indices`` (and ``selected`` / ``selected_ids``) list the set by decreasing worst-case
   relevance r_i, ties by nominal relevance, then by row: the order ranking metrics read.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import numpy as np

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.runner import solve
from divopt_rag.models.solve_config import DEFAULT_TIME_LIMIT, SolveConfig, Stopwatch
from divopt_rag.models.validation import check_k

from .cutting_planes import CuttingPlaneOptions, cutting_plane_ksparse
from .heuristic import peel
from .models import AUTHORS_PROTECTED, build_ksparse_lpdual_model, build_robust_model
from .oracles import average_similarity, worst_case_average_similarity
from .relevance import pool_arrays, worst_case_relevance
from .sets import KSparse, NormBall, UncertaintySet

__all__ = [
    "ROBUST_MODELS",
    "MODEL_PARAMETERS",
    "TEN_SECOND_POOL",
    "nominal",
    "robust_l1",
    "robust_l2",
    "robust_linf",
    "robust_ksparse",
    "robust_ksparse_lpdual",
    "robust_ksparse_cp",
    "evaluate_selection",
]

DEFAULT_CANDIDATES = None  # the whole instance pool (the report's model); an int restricts it
#: The largest candidate pool on which every solve of ``benchmarks/robust_pool_time.py`` was proven
#: optimal within 10 s on the open-source path (solver SCIP; model building included; the cutting
#: plane: optimal, or stopped on its cosine oracle's bracket within 1e-4): WordNet MiniLM pools (the
#: top-n of 2,602 passages, d = 384), rho_vec in {0.02, 0.05}, rho_div in {0.8, 0.4}, lambda = 0.2,
#: K = 20, two queries, on the 2-core machine at load 0.4-2.1 (2026-11-27). Not monotone in n: a
#: pool whose pairwise bounds straddle rho_div is slow at any size (robust_l2 proved 80 and 160 but
#: not 40). ``divopt-rag sweep`` warns up front when a robust model's pool is larger; the default
#: stays the whole pool, as the MIO report solves it.
TEN_SECOND_POOL: Mapping[str, int] = {
    "nominal_sparsity": 160,  # every size of the ladder (10..160)
    "robust_l1": 35,
    "robust_l2": 30,
    "robust_linf": 120,
    "robust_ksparse": 40,
    "robust_ksparse_lpdual": 40,
    "robust_ksparse_cp": 35,
}
TEN_SECOND_POOL_SOURCE = "WordNet MiniLM pools, SCIP, benchmarks/results/robust/pool_time_scip.csv"
DEFAULT_MAX_SIZE = None  # the sparsity penalty sizes the set; "k" or an int caps it


def _candidates(inst: Instance, candidates: int | None) -> tuple[Instance, np.ndarray]:
    if not isinstance(inst, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    if candidates is None or candidates >= inst.n:
        return inst, np.arange(inst.n, dtype=np.int64)
    check_k(candidates, inst.n, "candidates")
    _, _, s = pool_arrays(inst)
    order = np.argsort(-s, kind="stable")[: int(candidates)]
    return inst.subset(order), order.astype(np.int64)


def _max_size(inst: Instance, max_size: Any, n_cand: int) -> int | None:
    if max_size == "k":
        return min(inst.k, n_cand)
    if max_size is None:
        return None
    return min(check_k(max_size, inst.n, "max_size"), n_cand)


def _evaluate(inst: Instance, idx: np.ndarray, uset: UncertaintySet | None, *, sparsity_penalty: float,
              similarity: str, query_similarity: str) -> tuple[dict[str, Any], np.ndarray]:
    """(the fields of :func:`evaluate_selection`, the worst-case relevance r of every document)."""
    E, q, s = pool_arrays(inst)
    res = worst_case_relevance(inst, uset if uset is not None else NormBall(2, 0.0), query_similarity)
    wc, att, s = res.values, res.attained, res.nominal
    empty = idx.size == 0
    return {
        "n_selected": int(idx.size),
        "worst_case_relevance": float("nan") if empty else float(wc[idx].mean()),
        "attacked_relevance": float("nan") if empty else float(att[idx].mean()),
        "nominal_relevance": float("nan") if empty else float(s[idx].mean()),
        "worst_case_avg_similarity": (average_similarity(E, idx, similarity) if uset is None
                                      else worst_case_average_similarity(inst, idx, uset, similarity)),
        "nominal_avg_similarity": average_similarity(E, idx, similarity),
        "nominal_objective": float((s[idx] - sparsity_penalty).sum()),
        "robust_objective": float((wc[idx] - sparsity_penalty).sum()),
        "ccbqp_objective": ccbqp_objective(inst, idx, any_size=True) if not empty else 0.0,
    }, wc


def evaluate_selection(inst: Instance, indices: Any, uset: UncertaintySet | None, *,
                       sparsity_penalty: float, similarity: str = "cosine",
                       query_similarity: str = "cosine") -> dict[str, Any]:
    """Worst-case and nominal quality of a selection (rows of ``inst``), as record fields.

    worst_case_relevance: mean over S of the oracle's worst-case relevance r_i (exact for the
    inner product and the l2 ball; a sound lower bound for the cosine otherwise);
    attacked_relevance: mean over S of the relevance under the oracle's attack (>= the true
    worst case, so the two bracket it; equal where r_i is exact);
    robust_objective: sum over S of (r_i - sparsity_penalty);
    worst_case_avg_similarity: the sound upper bound on the worst average pairwise similarity
    (NaN for |S| < 2: a set without pairs has no average similarity); nominal_*: the same
    without perturbation.
    """
    return _evaluate(inst, np.asarray(indices, dtype=np.int64), uset, sparsity_penalty=sparsity_penalty,
                     similarity=similarity, query_similarity=query_similarity)[0]


def _ranked(sub_indices: np.ndarray, r: np.ndarray, nominal: np.ndarray) -> np.ndarray:
    """The selected rows by decreasing worst-case relevance r (the model's own score), ties by
    decreasing nominal relevance, then by row: the order in which ranking metrics read the set."""
    return sub_indices[np.lexsort((sub_indices, -nominal[sub_indices], -r[sub_indices]))]


@dataclass(frozen=True)
class _Settings:
    """The parameters every robust record shares: the model's (``sparsity_penalty``, ``rho_div``,
    ``similarity``, ``query_similarity``, ``max_size``, ``candidates``) and the solve's
    (``solver``, ``time_limit``, ``mip_gap``)."""

    sparsity_penalty: float
    rho_div: float
    similarity: str
    query_similarity: str
    max_size: Any
    candidates: int | None
    solver: str
    time_limit: float | None
    mip_gap: float | None

    def params(self, max_size: int | None, **extra: Any) -> dict[str, Any]:
        """The record's parameter fields (``max_size`` as resolved for the instance)."""
        return dict(sparsity_penalty=float(self.sparsity_penalty), rho_div=float(self.rho_div),
                    similarity=self.similarity, query_similarity=self.query_similarity, max_size=max_size,
                    candidates=self.candidates, time_limit=self.time_limit, **extra)


def _record(model: str, inst: Instance, rows: np.ndarray, uset, params: dict, outcome: Any,
            seconds: float) -> dict[str, Any]:
    """The flat record of a solve: ``outcome`` is the solver's :class:`~divopt_rag.models.solve_results.Result`
    or the :class:`~divopt_rag.robust.cutting_planes.CuttingPlaneResult` (its ``indices`` are rows
    of ``inst.subset(rows)``; status, objective, bound, gap, solver, message, and the loop's
    iterations and cuts where it has them)."""
    sub_indices = np.asarray(outcome.indices, dtype=np.int64)
    objective, bound = outcome.objective, outcome.bound
    sub = inst.subset(rows)
    fields, r = _evaluate(sub, sub_indices, uset, sparsity_penalty=params["sparsity_penalty"],
                          similarity=params["similarity"], query_similarity=params["query_similarity"])
    indices = rows[_ranked(sub_indices, r, pool_arrays(sub)[2])]
    rec: dict[str, Any] = {"model": model}
    rec.update(uset.describe() if uset is not None else {"uncertainty": "none", "rho_vec": 0.0})
    rec.update(params)
    rec.update({
        "status": outcome.status,
        "proven_optimal": outcome.status == "optimal",
        "objective": float("nan") if objective is None else float(objective),
        "bound": float("nan") if bound is None else float(bound),
        "gap": float(outcome.gap),
        "seconds": float(seconds),
        "solver": outcome.solver,
        "iterations": int(getattr(outcome, "iterations", 0)),
        "cuts": int(getattr(outcome, "cuts", 0)),
        "candidates_used": int(rows.size),
        "indices": indices,
        "selected": [int(i) for i in indices],
        "message": outcome.message,
    })
    if inst.ids is not None:
        rec["selected_ids"] = [str(x) for x in inst.ids[indices]]
    rec.update(fields)
    # The objective is re-evaluated exactly from the oracle (the solver's value is rounded).
    if objective is not None:
        rec["solver_objective"] = float(objective)
        rec["objective"] = rec.pop("robust_objective")
    else:
        rec.pop("robust_objective")
    return rec


def _solve_compact(model_name: str, build: Callable, inst: Instance, uset, st: _Settings) -> dict:
    t0 = time.perf_counter()
    sub, rows = _candidates(inst, st.candidates)
    ms = _max_size(inst, st.max_size, sub.n)
    model = build(sub, uset, sparsity_penalty=st.sparsity_penalty, rho_div=st.rho_div, similarity=st.similarity,
                  max_size=ms, query_similarity=st.query_similarity)
    # a feasible start (greedy peeling): where the McCormick bound is weak, a solver stopped by
    # its time limit otherwise keeps whatever it found, e.g. one document where dozens fit
    info = model.info
    start = peel(info.scores - info.shift - info.sparsity_penalty, info.bounds - info.rho_div, info.max_size)
    # a stopwatch started at t0: the time limit is wall clock for the record, building the model included
    r = solve(model, st.solver, SolveConfig(time_limit=st.time_limit, mip_gap=st.mip_gap),
              stopwatch=Stopwatch(started=t0), warm_start=start if start.size else None)
    return _record(model_name, inst, rows, uset, st.params(ms), r, time.perf_counter() - t0)


def nominal(instance: Instance, *, sparsity_penalty: float, rho_div: float, similarity: str = "cosine",
            query_similarity: str = "cosine", max_size: int | str | None = DEFAULT_MAX_SIZE,
            candidates: int | None = DEFAULT_CANDIDATES, solver: str = "auto",
            time_limit: float | None = DEFAULT_TIME_LIMIT, mip_gap: float | None = None) -> dict:
    """Nominal sparsity model: max sum (s_i - sparsity_penalty) x_i, average similarity <= rho_div."""
    return _solve_compact("nominal_sparsity", build_robust_model, instance, None,
                          _Settings(sparsity_penalty, rho_div, similarity, query_similarity, max_size, candidates,
                                    solver, time_limit, mip_gap))


def _norm_record(p: Any, name: str):
    def fn(instance: Instance, *, rho_vec: float, sparsity_penalty: float, rho_div: float,
           similarity: str = "cosine", query_similarity: str = "cosine",
           max_size: int | str | None = DEFAULT_MAX_SIZE, candidates: int | None = DEFAULT_CANDIDATES,
           solver: str = "auto", time_limit: float | None = DEFAULT_TIME_LIMIT,
           mip_gap: float | None = None) -> dict:
        return _solve_compact(name, build_robust_model, instance, NormBall(p, rho_vec),
                              _Settings(sparsity_penalty, rho_div, similarity, query_similarity, max_size, candidates,
                                        solver, time_limit, mip_gap))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Robust model, {name[7:]} ball of radius rho_vec: max sum (r_i - sparsity_penalty) x_i "
                  f"with r_i the worst-case cosine to the query (the report's; "
                  f"{'exact' if p == 2 else 'a sound lower bound'}) or, with query_similarity='inner', "
                  f"s_i - rho_vec ||q||_*; sound worst-case average similarity <= rho_div (compact MILP, "
                  f":func:`divopt_rag.robust.models.build_robust_model`).")
    return fn


robust_l1 = _norm_record(1, "robust_l1")
robust_l2 = _norm_record(2, "robust_l2")
robust_linf = _norm_record(math.inf, "robust_linf")


def robust_ksparse(instance: Instance, *, rho_vec: float, attack_budget: int, sparsity_penalty: float,
                   rho_div: float, protected: int | None = AUTHORS_PROTECTED, similarity: str = "cosine",
                   query_similarity: str = "cosine", max_size: int | str | None = DEFAULT_MAX_SIZE,
                   candidates: int | None = DEFAULT_CANDIDATES, solver: str = "auto",
                   time_limit: float | None = DEFAULT_TIME_LIMIT, mip_gap: float | None = None) -> dict:
    """k-sparse robust model, compact form with the oracle's worst-case relevance: the cosine's
    sound lower bound (default) or, with query_similarity="inner", the exact s_i - rho_vec * (sum
    of the attack_budget largest |q_j| outside the top-``protected`` coordinates of |q * mu_i|).
    ``protected`` defaults to the authors' code's protection of 20 key coordinates (the report
    protects key coordinates but gives no count; :data:`~divopt_rag.robust.models.AUTHORS_PROTECTED`;
    None protects nothing).
    n binaries: fits the size-limited Gurobi license."""
    return _solve_compact("robust_ksparse", build_robust_model, instance, KSparse(rho_vec, attack_budget, protected),
                          _Settings(sparsity_penalty, rho_div, similarity, query_similarity, max_size, candidates,
                                    solver, time_limit, mip_gap))


def robust_ksparse_lpdual(instance: Instance, *, rho_vec: float, attack_budget: int, sparsity_penalty: float,
                          rho_div: float, protected: int | None = AUTHORS_PROTECTED, similarity: str = "cosine",
                          query_similarity: str = "inner", max_size: int | str | None = DEFAULT_MAX_SIZE,
                          candidates: int | None = DEFAULT_CANDIDATES, solver: str = "auto",
                          time_limit: float | None = DEFAULT_TIME_LIMIT, mip_gap: float | None = None) -> dict:
    """k-sparse robust model, compact LP-dual (Bertsimas-Sim) reformulation of the budgeted set
    (:func:`divopt_rag.robust.models.build_ksparse_lpdual_model`). The LP dual is exact for the linear
    score q^T mu~_i (query_similarity="inner", the default here: the same optimum as robust_ksparse
    with query_similarity="inner"); with query_similarity="cosine" it optimizes a sound lower bound of
    the worst-case cosine (:func:`divopt_rag.robust.models.lpdual_cosine_bound`), another bound than
    the oracle's of robust_ksparse and robust_ksparse_cp."""
    return _solve_compact("robust_ksparse_lpdual", build_ksparse_lpdual_model, instance,
                          KSparse(rho_vec, attack_budget, protected),
                          _Settings(sparsity_penalty, rho_div, similarity, query_similarity, max_size, candidates,
                                    solver, time_limit, mip_gap))


def robust_ksparse_cp(instance: Instance, *, rho_vec: float, attack_budget: int, sparsity_penalty: float,
                      rho_div: float, protected: int | None = AUTHORS_PROTECTED, similarity: str = "cosine",
                      query_similarity: str = "cosine", max_size: int | str | None = DEFAULT_MAX_SIZE,
                      candidates: int | None = DEFAULT_CANDIDATES, solver: str = "auto",
                      time_limit: float | None = DEFAULT_TIME_LIMIT, mip_gap: float | None = None,
                      tol: float = 1e-6, max_iter: int = 200, cut_support: str = "selected",
                      cut_type: str = "multi") -> dict:
    """k-sparse robust model by cutting planes (:func:`divopt_rag.robust.cutting_planes.cutting_plane_ksparse`);
    ``time_limit`` covers the whole loop. Adds ``iterations`` and ``cuts``."""
    t0 = time.perf_counter()
    st = _Settings(sparsity_penalty, rho_div, similarity, query_similarity, max_size, candidates, solver, time_limit,
                   mip_gap)
    sub, rows = _candidates(instance, candidates)
    ms = _max_size(instance, max_size, sub.n)
    uset = KSparse(rho_vec, attack_budget, protected)
    cp = cutting_plane_ksparse(sub, uset, sparsity_penalty=sparsity_penalty, rho_div=rho_div, similarity=similarity,
                               max_size=ms, query_similarity=query_similarity,
                               options=CuttingPlaneOptions(tol=tol, max_iter=max_iter, time_limit=time_limit,
                                                           solver=solver, mip_gap=mip_gap, cut_support=cut_support,
                                                           cut_type=cut_type))
    cp = replace(cp, bound=cp.bound if math.isfinite(cp.bound) else None)  # no bound proven: NaN in the record
    return _record("robust_ksparse_cp", instance, rows, uset,
                   st.params(ms, tol=tol, cut_support=cut_support, cut_type=cut_type), cp, time.perf_counter() - t0)


#: model name -> record function ``(instance, **parameters) -> dict``.
ROBUST_MODELS: Mapping[str, Callable[..., dict]] = {
    "nominal_sparsity": nominal,
    "robust_l1": robust_l1,
    "robust_l2": robust_l2,
    "robust_linf": robust_linf,
    "robust_ksparse": robust_ksparse,
    "robust_ksparse_lpdual": robust_ksparse_lpdual,
    "robust_ksparse_cp": robust_ksparse_cp,
}

_COMMON = ("sparsity_penalty", "rho_div", "similarity", "query_similarity", "max_size", "candidates", "solver",
           "time_limit", "mip_gap")
#: model name -> the parameters it accepts (the sweep runner reads the signatures; this is for humans).
MODEL_PARAMETERS: Mapping[str, tuple[str, ...]] = {
    "nominal_sparsity": _COMMON,
    "robust_l1": ("rho_vec",) + _COMMON,
    "robust_l2": ("rho_vec",) + _COMMON,
    "robust_linf": ("rho_vec",) + _COMMON,
    "robust_ksparse": ("rho_vec", "attack_budget", "protected") + _COMMON,
    "robust_ksparse_lpdual": ("rho_vec", "attack_budget", "protected") + _COMMON,
    "robust_ksparse_cp": ("rho_vec", "attack_budget", "protected") + _COMMON + ("tol", "max_iter", "cut_support", "cut_type"),
}
