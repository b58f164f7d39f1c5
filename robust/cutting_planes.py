"""Cutting planes for the k-sparse robust model (scenario generation).

Robust problem (see :mod:`divopt_rag.robust.models`), s_i(delta_i) document i's relevance under
perturbation delta_i (the report's cosine by default, or q^T (mu_i + delta_i))::

    max_x  min_{delta in U_1 x ... x U_n}  sum_i (s_i(delta_i) - lambda) x_i
    s.t.   robust diversity constraint, sum x <= max_size, x binary.

Master over the scenarios delta^(1..L) found so far (:func:`~divopt_rag.robust.models.build_ksparse_master_model`)::

    max t  s.t.  t <= sum_i (s_i(delta_i^(l)) - lambda) x_i,  l = 1..L,  (constraints on x).

Fewer scenarios = a weaker adversary, so the master optimum t* (or its proven bound) is an upper
bound on the robust optimum, and it only decreases as scenarios are added.

Separation: for the master solution x*, the most violated scenario minimizes
sum_i s_i(delta_i) x*_i; it separates over the selected documents, each taking the oracle's
attack delta_i (:func:`divopt_rag.robust.relevance.worst_case_relevance`). For the inner product it
is the exact minimizer -argmax_{delta in U_i} q^T delta (rho_vec * -sign(q_j) on the
attack_budget largest free |q_j|, protected coordinates untouched) and the value of x* is
v(x*) = sum_{i in S} (s_i - h_i(q) - lambda). For the cosine the attack scores s_i(delta_i) >=
r_i (the oracle's sound lower bound) and x* is valued with r_i, so v(x*) never overstates x*'s
robust value. Every master solution is feasible for the robust problem (the constraints on x
are the same), so v(x*) is a lower bound (the incumbent is the best one). The violation
t* - v(x*) is <= tol exactly when the master's own solution is tol-optimal; otherwise the new
cut excludes (x*, t*), unless every selected document already has its attack's cut: then no
scenario can tighten the master, and the remaining gap is the cosine oracle's (bound vs attack):
the loop stops with status "oracle_gap" (incumbent, bound and gap reported; never for "inner").

Two masters (:func:`~divopt_rag.robust.models.build_ksparse_master_model`):

* ``cut_type="multi"`` (default): one epigraph variable t_i per document and one cut per
  (document, scenario), valid because U = U_1 x ... x U_n is a product set. A document's cut
  from its worst perturbation makes t_i exact, so at most one new cut per selected document is
  ever needed: the loop ends after at most n + 1 masters (typically 2-4).
* ``cut_type="single"``: one aggregated cut t <= sum_i (s_i + q^T delta_i - lambda) x_i per
  scenario: the textbook scenario generation; it may need many rounds, because a scenario
  only covers the documents it perturbs.

``cut_support="selected"`` (default) perturbs only the selected documents in each scenario
(the adversary attacks what was retrieved; unselected rows are zero); ``"pool"`` perturbs every
document worst-case, after which the first cut(s) already equal the robust objective (a
check of the machinery, not a speed-up claim).

The loop starts from the heuristic top-k solution, as the MIO report does (Sec. 4.2: "we implement
a cutting-plane scheme and initialize with the heuristic Top-k solution"): the first cut is the
separation at the k most relevant documents (``start_k``; default max_size, else the instance's
k), and that set is the first incumbent when it is feasible. The report's code (robust_rag.ipynb)
also restricts the candidates to the heuristic top-100 (``candidates=100`` of the record). The loop stops when the violation is at most
``tol``, at ``max_iter`` rounds (status "iteration_limit") or at ``time_limit`` (status
"time_limit"); only a converged loop whose last master was proven optimal reports "optimal".
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from divopt_rag.models import Instance
from divopt_rag.models.runner import solve
from divopt_rag.models.solve_config import SolveConfig
from divopt_rag.models.validation import check_choice, check_nonnegative, check_scalar

from .models import add_scenario_cut, build_ksparse_master_model
from .relevance import pool_arrays, worst_case_relevance
from .sets import KSparse

__all__ = ["CuttingPlaneOptions", "CuttingPlaneResult", "cutting_plane_ksparse"]

LOG_COLUMNS = ["iteration", "cuts", "master_objective", "bound", "incumbent", "violation", "gap",
               "master_status", "master_seconds", "n_selected", "seconds"]


@dataclass
class CuttingPlaneResult:
    """Outcome of :func:`cutting_plane_ksparse`.

    indices : the incumbent (best robust value found), sorted int64 (may be empty: selecting
        nothing is always feasible, value 0).
    objective : its robust (worst-case) value sum_{i in S} (r_i - sparsity_penalty) (exact for
        the inner product; with the cosine r_i is the oracle's sound lower bound).
    bound : the best upper bound proven on the robust optimum (min over masters of their bound).
    gap : (bound - objective) / max(|objective|, 1e-10) (the convention of divopt_rag.models.runner),
        ``abs_gap`` = bound - objective.
    status : "optimal" (violation <= tol and the last master proven optimal), "time_limit",
        "iteration_limit", "oracle_gap" (no new scenario left, the gap is the cosine oracle's
        bound-vs-attack gap), or the last master's non-optimal status (e.g. "gap_limit").
    log : one row per master solve (LOG_COLUMNS), a pandas DataFrame.
    perturbation : (n, d) worst-case perturbation of the incumbent (rows of unselected
        documents are zero); protected coordinates are zero.
    cuts : adversarial cut constraints added (aggregated cuts, or per-document cuts for
        ``cut_type="multi"``; the initial zero-perturbation cuts are not counted).
    scenarios : the q^T delta vectors (length n) of every scenario, in order.
    """

    indices: np.ndarray
    objective: float
    bound: float
    gap: float
    abs_gap: float
    status: str
    seconds: float
    iterations: int
    cuts: int
    log: pd.DataFrame
    perturbation: np.ndarray
    scenarios: list = field(default_factory=list)
    solver: str = ""
    message: str = ""

    @property
    def proven_optimal(self) -> bool:
        return self.status == "optimal"


def _rel_gap(obj: float, bound: float) -> float:
    if not (math.isfinite(obj) and math.isfinite(bound)):
        return math.inf
    return max(bound - obj, 0.0) / max(abs(obj), 1e-10)


@dataclass(frozen=True)
class CuttingPlaneOptions:
    """How the scenario-generation loop of :func:`cutting_plane_ksparse` runs (the model it solves
    is the function's other parameters), in one object as Pyomo's solver configs.

    tol : the violation t* - v(x*) at or below which the loop stops.
    max_iter : master solves at most (status "iteration_limit" beyond).
    time_limit : seconds for the whole loop; each master gets the time left (None: no limit).
    solver, mip_gap : of every master solve (:func:`divopt_rag.models.runner.solve`).
    cut_support : "selected" (a scenario perturbs the selected documents) or "pool" (every one).
    cut_type : "multi" (one cut per document and scenario) or "single" (one aggregated cut).
    start_k : size of the heuristic top-k start (None: max_size, else the instance's k).
    progress : show a progress bar.
    """

    tol: float = 1e-6
    max_iter: int = 200
    time_limit: float | None = None
    solver: str = "auto"
    mip_gap: float | None = None
    cut_support: str = "selected"
    cut_type: str = "multi"
    start_k: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        check_choice(self.cut_support, "cut_support", ("selected", "pool"))
        check_choice(self.cut_type, "cut_type", ("multi", "single"))
        object.__setattr__(self, "tol", check_nonnegative(self.tol, "tol"))
        object.__setattr__(self, "max_iter", check_scalar(self.max_iter, "max_iter", int, min_val=1))
        if self.time_limit is not None:
            object.__setattr__(self, "time_limit", check_nonnegative(self.time_limit, "time_limit"))


def cutting_plane_ksparse(
    inst: Instance,
    uset: KSparse,
    *,
    sparsity_penalty: float,
    rho_div: float,
    similarity: str = "cosine",
    max_size: int | None = None,
    query_similarity: str = "cosine",
    options: CuttingPlaneOptions | None = None,
) -> CuttingPlaneResult:
    """Solve the k-sparse robust model by scenario generation (module docstring).

    The model's parameters as in :func:`divopt_rag.robust.models.build_ksparse_master_model`
    (``query_similarity``: "cosine", the report's, default, or "inner"); how the loop runs
    (tolerance, caps, solver, cuts, start): ``options`` (:class:`CuttingPlaneOptions`, default
    its defaults).
    """
    if not isinstance(uset, KSparse):
        raise TypeError(f"uset must be a KSparse set, got {type(uset).__name__}")
    opt = CuttingPlaneOptions() if options is None else options
    if not isinstance(opt, CuttingPlaneOptions):
        raise TypeError(f"options must be a CuttingPlaneOptions, got {type(opt).__name__}")
    tol, max_iter, time_limit = opt.tol, opt.max_iter, opt.time_limit
    cut_support, cut_type = opt.cut_support, opt.cut_type
    t0 = time.perf_counter()
    model, info = build_ksparse_master_model(inst, uset, sparsity_penalty=sparsity_penalty, rho_div=rho_div,
                                             similarity=similarity, max_size=max_size, cut_type=cut_type,
                                             query_similarity=query_similarity)
    lam, B = info.sparsity_penalty, info.bounds
    E, q, _ = pool_arrays(inst)
    n, d = E.shape
    wc = worst_case_relevance(inst, uset, query_similarity)
    s = wc.nominal
    worst = wc.perturbation  # per-document attack, row i in U_i, scoring wc.attained[i]
    robust_coef = wc.values - lam  # the oracle's worst case r_i (exact for "inner")
    change = wc.attained - s  # relevance change of each document under its attack

    cut_docs: set[int] = set()  # multi-cut: documents whose worst-case cut is in the master
    seen: set[tuple] = set()  # single-cut: scenarios (attacked documents) already in the master
    n_cuts = 0

    def add_cut(idx: np.ndarray) -> bool:
        """Separate at the selection idx and add the scenario's cut(s); False if nothing is new."""
        nonlocal n_cuts
        hit = np.arange(n) if cut_support == "pool" else np.asarray(idx, dtype=np.int64)
        docs = None
        if cut_type == "multi":
            docs = [int(i) for i in hit if int(i) not in cut_docs]
            if not docs:
                return False
            cut_docs.update(docs)
        else:
            key = tuple(sorted(int(i) for i in hit))
            if key in seen:
                return False
            seen.add(key)
        qd = np.zeros(n)
        qd[hit] = change[hit]
        scenarios.append(qd)
        n_cuts += add_scenario_cut(model, info, qd, docs)
        return True

    def robust_value(idx: np.ndarray) -> float:
        return float(robust_coef[idx].sum())

    def feasible(idx: np.ndarray) -> bool:
        if info.max_size is not None and idx.size > info.max_size:
            return False
        if idx.size < 2:
            return True
        sub = B[np.ix_(idx, idx)]
        iu = np.triu_indices(idx.size, 1)
        return float((sub[iu] - info.rho_div).sum()) <= 1e-9

    # First cut: separation at the heuristic (nominal) top-k solution.
    if opt.start_k is not None:
        k0 = check_scalar(opt.start_k, "start_k", int, min_val=1, max_val=n)
    else:
        k0 = info.max_size if info.max_size is not None else inst.k
    x0 = np.sort(np.argsort(-s, kind="stable")[:k0])
    scenarios: list[np.ndarray] = []
    add_cut(x0)
    # Selecting nothing is always feasible (value 0); the top-k set is an incumbent if feasible.
    inc_idx, inc_val = np.zeros(0, dtype=np.int64), 0.0
    if feasible(x0) and robust_value(x0) > inc_val:
        inc_idx, inc_val = x0, robust_value(x0)

    rows: list[dict] = []
    bound = math.inf
    status, message, used_solver = "iteration_limit", "", ""
    iterations = 0
    bar = None
    if opt.progress:
        bar = tqdm(total=max_iter, desc="cutting planes", leave=False)
    for it in range(1, max_iter + 1):
        left = None
        if time_limit is not None:
            left = time_limit - (time.perf_counter() - t0)
            if left <= 0:
                status, message = "time_limit", f"time limit {time_limit} s reached before master {it}"
                break
        r = solve(model, opt.solver, SolveConfig(time_limit=left, mip_gap=opt.mip_gap),
                  warm_start=inc_idx if inc_idx.size else None, info=info)
        used_solver = r.solver
        iterations = it
        if r.bound is not None and math.isfinite(r.bound):
            bound = min(bound, r.bound)
        if r.objective is None:
            status = r.status
            message = f"master {it} returned no solution ({r.status}): {r.message}"
            break
        x = r.indices
        val = robust_value(x)
        violation = r.objective - val
        if val > inc_val + 1e-12:
            inc_idx, inc_val = x, val
        rows.append({
            "iteration": it, "cuts": n_cuts, "master_objective": r.objective, "bound": bound,
            "incumbent": inc_val, "violation": violation, "gap": _rel_gap(inc_val, bound),
            "master_status": r.status, "master_seconds": r.seconds, "n_selected": int(x.size),
            "seconds": time.perf_counter() - t0,
        })
        if bar is not None:
            bar.update(1)
            bar.set_postfix(bound=f"{bound:.4g}", incumbent=f"{inc_val:.4g}")
        if r.status != "optimal":
            # A time-limited or gap-limited master gives a valid bound but no optimality proof.
            status, message = r.status, f"master {it} stopped with status {r.status}: {r.message}"
            break
        if violation <= tol:
            status = "optimal"
            break
        if not add_cut(x):
            status = "oracle_gap"
            message = (f"master {it}: every selected document already has its attack's cut; the remaining "
                       f"violation {violation:.3g} is the {query_similarity} oracle's bound-vs-attack gap")
            break
    else:
        message = f"no convergence within max_iter={max_iter} master solves"
    if bar is not None:
        bar.close()
    if status == "optimal":
        # Converged: the incumbent is within tol of the master optimum.
        message = f"converged after {iterations} master solves, {n_cuts} cuts"
    log = pd.DataFrame(rows, columns=LOG_COLUMNS)
    delta = np.zeros((n, d))
    delta[inc_idx] = worst[inc_idx]
    return CuttingPlaneResult(
        indices=np.sort(inc_idx).astype(np.int64), objective=inc_val, bound=bound,
        gap=_rel_gap(inc_val, bound), abs_gap=(bound - inc_val) if math.isfinite(bound) else math.inf,
        status=status, seconds=time.perf_counter() - t0, iterations=iterations, cuts=n_cuts,
        log=log, perturbation=delta, scenarios=scenarios, solver=used_solver, message=message,
    )
