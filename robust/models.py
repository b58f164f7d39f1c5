"""Robust counterparts of the sparsity-penalty retrieval model, as Pyomo builders.

Nominal model (s_i = q^T mu_i, lambda = sparsity_penalty, w_ij = mu_i^T mu_j)::

    max_x  sum_i (s_i - lambda) x_i
    s.t.   average pairwise similarity of S = {i : x_i = 1} <= rho_div   (when |S| >= 2)
           sum_i x_i <= max_size  (optional),   x binary.

The average-similarity constraint is  sum_{i<j} w_ij x_i x_j <= rho_div sum_{i<j} x_i x_j,  i.e.
``sum_{i<j} (w_ij - rho_div) x_i x_j <= 0``, which is linear in y_ij = x_i x_j.

Robust model: the embeddings mu_i may be any mu~_i in mu_i + U_i (independent per document)::

    max_x  min_{delta} sum_i (s_i(mu~_i) - lambda) x_i
    s.t.   max_{delta} [average pairwise similarity of the mu~_i, i in S] <= rho_div.

``query_similarity="cosine"`` (default, the MIO report's relevance s_i(mu~_i) = q^T mu~_i /
(||q|| ||mu~_i||)) or ``"inner"`` (q^T mu~_i: divopt's earlier form and the one the authors' code
optimizes, q^T mu_i - rho ||q||_* for the norm balls, robust_rag.ipynb; the report writes only the
cosine). For unit rows and a unit query both equal q^T mu_i at rho_vec = 0.

``similarity="cosine"`` (default, DESIGN.md: rho_div caps the average pairwise cosine; the
perturbed embeddings are renormalized) or ``"inner"`` (raw inner products mu~_i^T mu~_j).
Objective: the minimum separates over documents, so it equals ``sum_i (r_i - lambda) x_i``
with r_i the worst-case relevance of document i (:mod:`divopt_rag.robust.relevance`): for the
inner product r_i = s_i - h_i(q) (exact); for the cosine r_i is exact for the l2 ball (and a
nonnegative l1 worst case) and a sound lower bound otherwise, so the model's objective never
overstates the robust value of a selection (a safe approximation, like the diversity row).
Constraint: the adversary's problem (a bilinear maximization) is replaced by the SOUND pairwise
bounds B_ij >= sup similarity(mu~_i, mu~_j) of :func:`~divopt_rag.robust.oracles.similarity_upper_bounds`;
``sum_{i<j} (B_ij - rho_div) y_ij <= 0`` implies the robust constraint (mean of sups >= sup of
mean), so every x this model accepts is robustly feasible (a safe approximation, exact when the
pairwise bounds are attained simultaneously). With rho_vec = 0 it is the nominal model.

Linearization of y_ij = x_i x_j (McCormick, only the side the constraint needs): with
a_ij = B_ij - rho_div, pairs with a_ij > 0 get ``y_ij >= x_i + x_j - 1`` (so a_ij y_ij >= a_ij x_i x_j),
pairs with a_ij < 0 get ``y_ij <= x_i, y_ij <= x_j`` (again a_ij y_ij >= a_ij x_i x_j), y in [0, 1],
and pairs with a_ij = 0 are dropped. Hence ``sum a_ij x_i x_j <= sum a_ij y_ij <= 0`` for every
feasible (x, y), and y = x x^T is feasible whenever x is: the projection on x is exact.

Builders return a :class:`~divopt_rag.models.mip_common.BuiltModel`: a ConcreteModel with binary
``model.x`` (indexed by range(n)) and a maximized ``model.obj``, and its :class:`RobustModelInfo`
(the scores, shifts and bounds used, plain numpy, for records and cuts). They never call a
solver; solve with :func:`divopt_rag.models.runner.solve`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pe
from pyomo.core.util import quicksum

from divopt_rag.models import Instance
from divopt_rag.models.mip_common import BuiltModel, ModelInfo
from divopt_rag.models.mip_diversity import check_rho_div
from divopt_rag.models.validation import check_choice, check_k, check_nonnegative

from .relevance import QUERY_SIMILARITIES, pool_arrays, worst_case_relevance
from .oracles import SIMILARITIES, similarity_upper_bounds
from .sets import KSparse, NormBall, UncertaintySet

__all__ = [
    "RobustModelInfo",
    "build_nominal_model",
    "build_robust_norm_model",
    "build_ksparse_lpdual_model",
    "lpdual_cosine_bound",
    "AUTHORS_PROTECTED",
    "REPORT_PROTECTED",
    "build_ksparse_master_model",
    "add_scenario_cut",
    "build_robust_model",
    "robust_value",
]


def _check_common(inst: Instance, sparsity_penalty: Any, rho_div: Any, similarity: str, max_size: Any,
                  query_similarity: str = "cosine"):
    if not isinstance(inst, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    lam = check_nonnegative(sparsity_penalty, "sparsity_penalty")
    rd = check_rho_div(rho_div)
    check_choice(similarity, "similarity", SIMILARITIES)
    check_choice(query_similarity, "query_similarity", QUERY_SIMILARITIES)
    ms = None if max_size is None else check_k(max_size, inst.n, "max_size")
    return lam, rd, ms


def _selection_model(name: str, n: int, B: np.ndarray, rho_div: float, max_size: int | None) -> pe.ConcreteModel:
    """x binary, the linearized robust diversity constraint and the optional size cap."""
    m = pe.ConcreteModel(name=name)
    m.x = pe.Var(range(n), domain=pe.Binary)
    iu, ju = np.triu_indices(n, 1)
    a = B[iu, ju] - rho_div
    pos = [(int(i), int(j)) for i, j, v in zip(iu, ju, a) if v > 0]
    neg = [(int(i), int(j)) for i, j, v in zip(iu, ju, a) if v < 0]
    coef = {(int(i), int(j)): float(v) for i, j, v in zip(iu, ju, a) if v != 0}
    m.P = pe.Set(initialize=pos + neg, dimen=2, ordered=True)
    m.Ppos = pe.Set(initialize=pos, dimen=2, ordered=True)
    m.Pneg = pe.Set(initialize=neg, dimen=2, ordered=True)
    m.y = pe.Var(m.P, bounds=(0.0, 1.0))
    m.y_ge = pe.Constraint(m.Ppos, rule=lambda m, i, j: m.y[i, j] >= m.x[i] + m.x[j] - 1)
    m.y_le_xi = pe.Constraint(m.Pneg, rule=lambda m, i, j: m.y[i, j] <= m.x[i])
    m.y_le_xj = pe.Constraint(m.Pneg, rule=lambda m, i, j: m.y[i, j] <= m.x[j])
    if pos:  # without a positive coefficient the constraint holds for every x
        m.diversity = pe.Constraint(expr=quicksum(coef[p] * m.y[p] for p in pos + neg) <= 0.0)
    if max_size is not None:
        m.size = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) <= max_size)
    return m


@dataclass(frozen=True, kw_only=True, eq=False)
class RobustModelInfo(ModelInfo):
    """:class:`~divopt_rag.models.mip_common.ModelInfo` of a robust builder, with the data it used.

    scores : nominal relevance s_i (cosine or q^T mu_i); shift : worst-case relevance loss
    s_i - r_i per document (h_i(q) for the inner product); bounds : the sound pairwise
    similarity bounds B; free : the coordinates the adversary may change (n x d mask);
    sparsity_penalty, rho_div, similarity, max_size, query_similarity : the validated
    parameters; uset : the set's ``describe()`` (None: nominal model); cut_type : "multi" or
    "single" for the cutting-plane master, else None.
    """

    scores: np.ndarray
    shift: np.ndarray
    bounds: np.ndarray
    free: np.ndarray
    sparsity_penalty: float
    rho_div: float
    similarity: str
    max_size: int | None
    uset: dict | None
    cut_type: str | None = None
    query_similarity: str = "cosine"


def _built(m, **kw) -> BuiltModel:
    return BuiltModel(m, RobustModelInfo(kind=m.name, n_items=len(m.x), **kw))


def build_robust_model(
    inst: Instance,
    uset: UncertaintySet | None,
    *,
    sparsity_penalty: float,
    rho_div: float,
    similarity: str = "cosine",
    max_size: int | None = None,
    query_similarity: str = "cosine",
) -> BuiltModel:
    """Compact robust MILP for any set, with the oracle's worst-case relevance r_i.

    max sum_i (r_i - sparsity_penalty) x_i
    s.t. sum_{i<j} (B_ij - rho_div) y_ij <= 0 (McCormick), sum x <= max_size, x binary,
    with r_i the worst-case cosine of document i (``query_similarity="cosine"``: exact for the
    l2 ball, a sound lower bound otherwise) or s_i - h_i(q) (``"inner"``: h_i(q) = rho_vec
    ||q||_{p*} for an l_p ball, rho_vec * (sum of the attack_budget largest |q_j| outside P_i)
    for the k-sparse set), and B the sound worst-case pairwise similarity bounds (module
    docstring). ``uset=None`` is the nominal model. ``max_size=None`` (default) leaves the set
    size to the sparsity penalty. n binaries, at most n(n-1)/2 continuous y, at most
    n(n-1) + 2 constraints.
    """
    lam, rd, ms = _check_common(inst, sparsity_penalty, rho_div, similarity, max_size, query_similarity)
    if uset is not None and not isinstance(uset, (NormBall, KSparse)):
        raise TypeError(f"uset must be a NormBall, a KSparse set or None, got {type(uset).__name__}")
    E, q, s = pool_arrays(inst)
    ball = uset if uset is not None else NormBall(2, 0.0)
    free = ball.free_mask(E, q)
    wc = worst_case_relevance(inst, ball, query_similarity)
    B = similarity_upper_bounds(E, ball, similarity, q=q, free=free)
    m = _selection_model(f"robust_{ball.name}" if uset is not None else "nominal_sparsity", inst.n, B, rd, ms)
    coef = wc.values - lam
    m.obj = pe.Objective(expr=quicksum(float(coef[i]) * m.x[i] for i in range(inst.n)), sense=pe.maximize)
    return _built(m, scores=wc.nominal, shift=wc.shift, bounds=B, free=free, sparsity_penalty=lam, rho_div=rd,
                  similarity=similarity, max_size=ms, uset=None if uset is None else uset.describe(),
                  query_similarity=query_similarity)


def build_robust_norm_model(
    inst: Instance,
    uset: NormBall | None,
    *,
    sparsity_penalty: float,
    rho_div: float,
    similarity: str = "cosine",
    max_size: int | None = None,
    query_similarity: str = "cosine",
) -> BuiltModel:
    """Compact robust MILP for an l_p ball (p in {1, 2, inf}); ``uset=None`` is the nominal model.

    max sum_i (r_i - sparsity_penalty) x_i subject to the robust diversity constraint and the
    size cap (r_i: worst-case cosine, or s_i - rho_vec ||q||_{p*} for ``query_similarity="inner"``):
    :func:`build_robust_model` restricted to norm balls.
    """
    if uset is not None and not isinstance(uset, NormBall):
        raise TypeError(f"uset must be a NormBall or None, got {type(uset).__name__} "
                        f"(use build_ksparse_lpdual_model or build_robust_model for the k-sparse set)")
    return build_robust_model(inst, uset, sparsity_penalty=sparsity_penalty, rho_div=rho_div,
                              similarity=similarity, max_size=max_size, query_similarity=query_similarity)


def build_nominal_model(inst: Instance, *, sparsity_penalty: float, rho_div: float,
                        similarity: str = "cosine", max_size: int | None = None,
                        query_similarity: str = "cosine") -> BuiltModel:
    """The nominal sparsity-penalty model (rho_vec = 0): see the module docstring."""
    return build_robust_norm_model(inst, None, sparsity_penalty=sparsity_penalty, rho_div=rho_div,
                                   similarity=similarity, max_size=max_size, query_similarity=query_similarity)


def _candidate_coords(absq: np.ndarray, free: np.ndarray, K: int) -> list[np.ndarray]:
    """Per document i, the free coordinates among the global top-(K + |P_i|) of |q|.

    The K largest |q_j| over F_i lie there: that set has K + |P_i| coordinates, at most |P_i|
    of them protected, so it holds >= K free ones, and every free coordinate outside it has
    |q_j| <= each one inside. Restricting the LP to them leaves its value unchanged.
    """
    d = absq.size
    order = np.argsort(-absq, kind="stable")
    out = []
    for i in range(free.shape[0]):
        p = int(d - free[i].sum())
        top = order[: min(d, K + p)]
        out.append(top[free[i, top] & (absq[top] > 0)])
    return out


#: Coordinates protected from the k-sparse adversary by default: the authors' code
#: (robust_rag.ipynb, ``m_core = 20``) protects the 20 largest positive contributions of each
#: document. The report says only that protecting the "key coordinates" was necessary (Sec. 4.1:
#: without it the adversary attacked the coordinates that carry the similarity and made every
#: retrieved document irrelevant), not how many; its "twenty" (Sec. 4.2 on Table 8: "By
#: adversarially erasing only twenty such coordinates") counts erased coordinates, an attack
#: budget K, not protected ones. divopt's ``protected=m`` protects the top-m of |q_j mu_ij|
#: (the authors rank max(q_j mu_ij, 0)).
AUTHORS_PROTECTED = 20
#: The former name of :data:`AUTHORS_PROTECTED` (the number is the authors' code's, not the report's).
REPORT_PROTECTED = AUTHORS_PROTECTED


def lpdual_cosine_bound(E: np.ndarray, q: np.ndarray, uset: KSparse, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(r, N): the sound lower bound r_i = (c_i - h_i(q^)) / N_i of document i's worst-case cosine
    over the k-sparse set that :func:`build_ksparse_lpdual_model` optimizes with
    ``query_similarity="cosine"``, and the norm N_i it divides by.

    With q^ = q / ||q||, c_i = q^T mu_i and x = mu_i + delta (delta in U_i): q^T x / ||q|| >=
    c_i - h_i(q^) (the LP's worst numerator), and ||x|| lies in [N_min, N_max] with
    N_max^2 = ||mu_i||^2 + sum of the K largest (2 rho |mu_ij| + rho^2) over free j and
    N_min^2 = ||mu_i||^2 + sum of the K smallest min(-mu_ij^2, rho^2 - 2 rho |mu_ij|) over free j
    (each coordinate moves independently; both extremes are attained). So cos(q, x) >=
    (c_i - h_i)/N_max when c_i - h_i >= 0, and >= (c_i - h_i)/N_min otherwise (-inf when
    N_min = 0, i.e. the set reaches the origin). Sound for every delta in U_i; not the exact
    worst case (the numerator's and the norm's worst deltas differ)."""
    qh = q / np.linalg.norm(q)
    c = E @ qh
    h = uset.support(np.broadcast_to(qh, E.shape), free)
    rho, K = uset.rho_vec, uset.attack_budget
    absE = np.abs(E)
    grow = np.where(free, 2.0 * rho * absE + rho * rho, -np.inf)
    shrink = np.where(free, np.where(absE <= rho, -E * E, rho * rho - 2.0 * rho * absE), np.inf)
    d = E.shape[1]
    kk = min(K, d)
    base = (E * E).sum(axis=1)
    up = np.sort(grow, axis=1)[:, d - kk:] if kk else np.zeros((E.shape[0], 0))
    down = np.sort(shrink, axis=1)[:, :kk] if kk else np.zeros((E.shape[0], 0))
    n_max = np.sqrt(base + np.where(np.isfinite(up), up, 0.0).sum(axis=1))
    n_min = np.sqrt(np.maximum(base + np.where(np.isfinite(down), down, 0.0).sum(axis=1), 0.0))
    num = c - h
    with np.errstate(divide="ignore"):
        norm = np.where(num >= 0, n_max, n_min)
        r = np.where(norm > 0, num / np.where(norm > 0, norm, 1.0), -np.inf)
    return r, norm


def build_ksparse_lpdual_model(
    inst: Instance,
    uset: KSparse,
    *,
    sparsity_penalty: float,
    rho_div: float,
    similarity: str = "cosine",
    max_size: int | None = None,
    query_similarity: str = "inner",
) -> BuiltModel:
    """Compact LP-dual (Bertsimas-Sim style) MILP for the k-sparse set.

    For document i with free coordinates F_i and K = attack_budget, the adversary's worst loss of
    the LINEAR score a^T mu~_i is the LP (totally unimodular, so equal to the combinatorial value
    rho * sum of the K largest |a_j| over F_i)::

        h_i(a) x_i = max { sum_{j in F_i} rho |a_j| x_i z_j : sum_j z_j <= K, 0 <= z_j <= 1 }
                   = min { K pi_i + sum_j sigma_ij : pi_i + sigma_ij >= rho |a_j| x_i, pi, sigma >= 0 }

    by LP strong duality (the primal is feasible and bounded). Substituting the dual into the
    maximization gives the compact MILP.

    ``query_similarity="inner"`` (default; the linear score q^T mu~_i, a = q)::

        max sum_i (s_i - sparsity_penalty) x_i - sum_i (K pi_i + sum_j sigma_ij)

    whose optimum equals the robust optimum of the inner-product model.

    ``query_similarity="cosine"`` (the MIO report's relevance q^T mu~_i / (||q|| ||mu~_i||), a = q^):
    the cosine has no LP dual itself, so the model optimizes the sound bound r_i = (c_i - h_i(q^)) /
    N_i of :func:`lpdual_cosine_bound` (N_i a per-document constant, the largest or smallest norm
    of mu_i + delta)::

        max sum_i ((c_i x_i - K pi_i - sum_j sigma_ij) / N_i - sparsity_penalty x_i)

    whose optimum is max_x sum_i (r_i - sparsity_penalty) x_i: a safe approximation (never
    overstates a selection's worst-case cosine; the oracle's bound of :func:`build_robust_model`
    may be tighter or looser per document, both are sound).

    Either way: pi_i + sigma_ij >= rho |a_j| x_i (j in F_i), pi, sigma >= 0, the robust diversity
    constraint, the size cap, x binary. For fixed x the inner minimum is x_i h_i(a), so the
    optimum is the stated one. Only coordinates in the global top-(K + |P_i|) of |a| are kept
    (see :func:`_candidate_coords`). The relevance part does NOT use the oracle, so comparing this
    model with the cutting plane (which does) is an independent cross-check.
    """
    lam, rd, ms = _check_common(inst, sparsity_penalty, rho_div, similarity, max_size, query_similarity)
    if not isinstance(uset, KSparse):
        raise TypeError(f"uset must be a KSparse set, got {type(uset).__name__}")
    E, q, s = pool_arrays(inst)
    free = uset.free_mask(E, q)
    B = similarity_upper_bounds(E, uset, similarity, q=q, free=free)
    m = _selection_model("robust_ksparse_lpdual", inst.n, B, rd, ms)
    cosine = query_similarity == "cosine"
    a = q / np.linalg.norm(q) if cosine else q
    scores = E @ a if cosine else s
    scale = np.ones(inst.n)
    if cosine:
        r, norm = lpdual_cosine_bound(E, q, uset, free)
        if not np.all(np.isfinite(r)):
            bad = int(np.flatnonzero(~np.isfinite(r))[0])
            raise ValueError(f"query_similarity='cosine': document {bad}'s perturbation set reaches the origin "
                             f"(rho_vec {uset.rho_vec} too large for its embedding), so its cosine is unbounded below")
        scale = 1.0 / norm
        scores = scores / np.linalg.norm(E, axis=1)  # the nominal cosine, for the record
    absq = np.abs(a)
    K, rho = uset.attack_budget, uset.rho_vec
    coords = _candidate_coords(absq, free, K)
    idx = [(i, int(j)) for i in range(inst.n) for j in coords[i]]
    m.J = pe.Set(initialize=idx, dimen=2, ordered=True)
    m.pi = pe.Var(range(inst.n), bounds=(0.0, None))
    m.sigma = pe.Var(m.J, bounds=(0.0, None))
    m.dual_cover = pe.Constraint(
        m.J, rule=lambda m, i, j: m.pi[i] + m.sigma[i, j] >= float(rho * absq[j]) * m.x[i])
    num = E @ a
    nominal = quicksum(float(num[i] * scale[i] - lam) * m.x[i] for i in range(inst.n))
    by_doc: dict[int, list] = {}
    for p in idx:
        by_doc.setdefault(p[0], []).append(p)
    loss = quicksum(float(scale[i]) * (K * m.pi[i] + quicksum(m.sigma[p] for p in by_doc.get(i, [])))
                    for i in range(inst.n))
    m.obj = pe.Objective(expr=nominal - loss, sense=pe.maximize)
    # pi and sigma are bounded at the optimum (<= rho max|a|), bound them for the solver too.
    cap = float(rho * absq.max()) if absq.size else 0.0
    for i in range(inst.n):
        m.pi[i].setub(cap)
    for p in idx:
        m.sigma[p].setub(cap)
    if cosine:
        shift = scores - r
    else:
        shift = uset.support(np.broadcast_to(q, E.shape), free)
    return _built(m, scores=scores, shift=shift, bounds=B, free=free, sparsity_penalty=lam, rho_div=rd,
                  similarity=similarity, max_size=ms, uset=uset.describe(), query_similarity=query_similarity)


def build_ksparse_master_model(
    inst: Instance,
    uset: KSparse,
    *,
    sparsity_penalty: float,
    rho_div: float,
    similarity: str = "cosine",
    max_size: int | None = None,
    cut_type: str = "multi",
    query_similarity: str = "cosine",
) -> BuiltModel:
    """Cutting-plane master for the k-sparse set, with no adversarial scenario yet.

    s_i(delta_i) is document i's relevance under perturbation delta_i: the cosine
    q^T (mu_i + delta_i) / (||q|| ||mu_i + delta_i||) (default) or q^T (mu_i + delta_i)
    (``query_similarity="inner"``); s_i = s_i(0) and r_i <= s_i(delta_i) the oracle's worst case
    (a sound lower bound for the cosine).

    ``cut_type="single"`` (one epigraph variable, aggregated cuts)::

        max t  s.t.  t <= sum_i (s_i(delta_i^(l)) - lambda) x_i   for each scenario l

    t is bounded by [sum_i min(0, r_i - lambda) - 1, sum_i max(0, s_i - lambda) + 1],
    which contains every scenario's value since s_i(delta_i) >= r_i for delta_i in U_i.

    ``cut_type="multi"`` (one epigraph variable per document; valid because the uncertainty set
    is a product U_1 x ... x U_n, so the worst case separates over documents)::

        max sum_i t_i  s.t.  t_i <= (s_i(delta_i^(l)) - lambda) x_i   for each cut (i, l),

    starting with the zero-perturbation cut t_i <= (s_i - lambda) x_i of every document (it
    forces t_i <= 0 when x_i = 0); t_i in [min(0, r_i - lambda) - 1, max(0, s_i - lambda)].
    Either way: robust diversity constraint, size cap, x binary, and any set of scenarios gives
    an upper bound on the robust optimum (a weaker adversary). Cuts: :func:`add_scenario_cut`.
    """
    lam, rd, ms = _check_common(inst, sparsity_penalty, rho_div, similarity, max_size, query_similarity)
    if not isinstance(uset, KSparse):
        raise TypeError(f"uset must be a KSparse set, got {type(uset).__name__}")
    check_choice(cut_type, "cut_type", ("multi", "single"))
    E, q, _ = pool_arrays(inst)
    n = inst.n
    free = uset.free_mask(E, q)
    B = similarity_upper_bounds(E, uset, similarity, q=q, free=free)
    wc = worst_case_relevance(inst, uset, query_similarity)
    s, shift = wc.nominal, wc.shift
    m = _selection_model(f"robust_ksparse_master_{cut_type}", n, B, rd, ms)
    m.cuts = pe.ConstraintList()
    if cut_type == "single":
        lo = float(np.minimum(0.0, s - shift - lam).sum()) - 1.0
        hi = float(np.maximum(0.0, s - lam).sum()) + 1.0
        m.t = pe.Var(bounds=(lo, hi))
        m.obj = pe.Objective(expr=m.t, sense=pe.maximize)
    else:
        lo = np.minimum(0.0, s - shift - lam) - 1.0
        hi = np.maximum(0.0, s - lam)
        m.t = pe.Var(range(n), bounds=lambda m, i: (float(lo[i]), float(hi[i])))
        m.obj = pe.Objective(expr=quicksum(m.t[i] for i in range(n)), sense=pe.maximize)
        for i in range(n):
            m.cuts.add(m.t[i] <= float(s[i] - lam) * m.x[i])
    return _built(m, scores=s, shift=shift, bounds=B, free=free, sparsity_penalty=lam, rho_div=rd,
                  similarity=similarity, max_size=ms, uset=uset.describe(), cut_type=cut_type,
                  query_similarity=query_similarity)


def add_scenario_cut(model: pe.ConcreteModel, info: RobustModelInfo, q_delta: Any, docs: Any = None) -> int:
    """Add the cut(s) of one scenario to a master (``model, info`` from
    :func:`build_ksparse_master_model`); returns how many constraints were added.

    ``q_delta[i] = s_i(delta_i) - s_i`` is the relevance change of document i in the scenario
    (q^T delta_i for the inner product; the change of the cosine for ``query_similarity="cosine"``).
    Single-cut master: ``t <= sum_i (s_i + q_delta_i - lambda) x_i``. Multi-cut master:
    ``t_i <= (s_i + q_delta_i - lambda) x_i`` for each i in ``docs`` (default: the documents
    the scenario perturbs, q_delta_i != 0).
    """
    s, lam = info.scores, info.sparsity_penalty
    qd = np.asarray(q_delta, dtype=np.float64).reshape(-1)
    if qd.shape != s.shape:
        raise ValueError(f"q_delta must have length {s.size} (the pool size n), got {qd.size}")
    coef = s + qd - lam
    if info.cut_type == "single":
        model.cuts.add(model.t <= quicksum(float(coef[i]) * model.x[i] for i in range(s.size)))
        return 1
    docs = np.flatnonzero(qd != 0) if docs is None else np.asarray(docs, dtype=np.int64)
    for i in docs:
        model.cuts.add(model.t[int(i)] <= float(coef[i]) * model.x[int(i)])
    return int(len(docs))


def robust_value(inst: Instance, uset: UncertaintySet | None, indices: Any, sparsity_penalty: float,
                 query_similarity: str = "cosine") -> float:
    """Worst-case objective sum_{i in S} (r_i - sparsity_penalty) of a selection: exact for the
    inner product (r_i = s_i - h_i(q)) and the l2 ball, a sound lower bound for the cosine otherwise."""
    idx = np.asarray(indices, dtype=np.int64)
    wc = worst_case_relevance(inst, uset if uset is not None else NormBall(2, 0.0), query_similarity)
    return float((wc.values[idx] - sparsity_penalty).sum())

