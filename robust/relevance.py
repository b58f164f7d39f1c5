"""Worst-case relevance of each document: the report's cosine (default) or divopt's inner product.

Notation: mu_i is row i of E (m_i = ||mu_i||_2), q the query, q^ = q / ||q||, x = mu_i + delta
the perturbed embedding, delta in U_i (:mod:`divopt_rag.robust.sets`, symmetric, independent per
document), h_i its support function, R_i = sup ||delta||_2 its l2 radius, c_i = q^T mu_i / ||q||
and phi_i = arccos(c_i / m_i) the angle between q and mu_i.

``query_similarity="cosine"`` (default; the MIO report's s_i(mu~_i) = q^T mu~_i / (||q|| ||mu~_i||),
"Optimizing Knowledge Retrieval in RAG", Zhang, Liu & Zhang, MIT 15.C57)::

    r_i = inf { q^T x / (||q|| ||x||) : x = mu_i + delta, delta in U_i, x != 0 }.

(1) l2 ball, EXACT. For R < m the directions of the ball {mu + delta : ||delta|| <= R} are the
    spherical cap of half-angle alpha = arcsin(R / m) around mu (the tangents from the origin
    touch the ball at angle alpha). The angle between q and any direction of the cap is at most
    phi + alpha (triangle inequality for angles on the sphere), so
        r = cos(min(pi, phi + alpha)),
    attained in the plane of q and mu: for phi + alpha <= pi by the tangent point
    x* = m cos(alpha) (cos(phi + alpha) q^ + sin(phi + alpha) e), e the unit vector of
    mu - (q^T mu) q^ (||x* - mu|| = m sin(alpha) = R); for phi + alpha > pi by x* = c q^ (cosine -1,
    ||x* - mu|| = m sin(phi) <= R). For R > m the ball holds a neighbourhood of the origin, every
    direction is reached and r = -1 (x* = -(R - m)/2 q^). For R = m the same formula is the
    infimum (the tangent point is the origin). The same cap argument bounds every other set
    from below, since U_i lies in the l2 ball of radius R_i (the "cap bound").

(2) Positive part, any set (SOUND). For t >= 0, beta > 0 and any x, t ||x|| <= (beta/2) ||x||^2 +
    t^2 / (2 beta) (AM-GM). With ||x||^2 = m^2 + 2 mu^T delta + ||delta||^2, ||delta|| <= R and
    v^T delta >= -h(v) for v = q^ - beta mu:
        q^T x / ||q|| - t ||x|| >= g(beta) - t^2 / (2 beta),
        g(beta) = c - (beta/2)(m^2 + R^2) - h(q^ - beta mu).
    If g(beta) > 0, the choice t = sqrt(2 beta g(beta)) makes the right side 0, so every x != 0
    has cos(q, x) >= t (and x = 0 is impossible: t = 0 gives 0 >= g(beta)). Hence
        r >= T := sup_{beta > 0} sqrt(2 beta max(g(beta), 0)).
    g is concave in beta (linear minus the convex beta -> h(q^ - beta mu)), so log(2 beta g) is
    concave where g > 0: 2 beta g(beta) is unimodal and a log-spaced grid refined by golden-section
    search finds its maximum. At the true minimizer x* the AM-GM step is tight for
    beta = r / ||x*||; the only slack is that the linear term and ||delta||^2 are bounded apart
    (none for the l2 ball, where T equals (1) up to the search tolerance; vertices of the box
    and of the k-sparse set have ||delta|| = R exactly).

(3) Negative part, any set (SOUND). For tau >= 0 and ||u||_2 <= 1, ||x|| >= u^T x, so
        q^T x / ||q|| + tau ||x|| >= (q^ + tau u)^T x >= (q^ + tau u)^T mu - h(q^ + tau u) =: n(tau, u).
    If n(tau, u) >= 0 then cos(q, x) >= -tau for every x != 0. Maximizing over the whole ball of
    u is the minimax dual of min over conv(U) of q^T x / ||q|| + tau ||x|| (exact on conv(U));
    we search u = cos(psi) q^ + sin(psi) e on a grid of psi in the plane of q and mu, tau on a
    grid of (0, 1] refined by bisection (n is concave in tau, so the feasible taus form an
    interval), and keep the smallest feasible tau. Used where (2) gives no positive bound.

(4) l1 ball, exact when nonnegative. For t >= 0 the set {delta : q^T x / ||q|| >= t ||x||} is
    convex (a concave function >= 0). If all 2d vertices +-rho e_j of the l1 ball lie in it, so
    does the ball: min over the vertices, when >= 0, is the exact r (cost O(d) per document).

Reported value: the largest of the applicable sound bounds (cap, (2), (3), and (4) when it
applies); it is exact (``exact``) for the l2 ball, for a nonnegative l1 worst case, for rho = 0,
and wherever the returned perturbation attains it. The perturbation is the best attack found
(the l2 tangent point; the vertex of (4); otherwise the support maximizers at the optimal beta,
tau, and at v = q^), so ``attained`` >= true worst case >= ``values`` brackets r.

``query_similarity="inner"`` (divopt's earlier form, and the one the authors' code optimizes; the
report writes only the cosine): min_{delta in U_i} q^T (mu_i + delta) = q^T mu_i - h_i(q), exact and attained by
-argmax_{delta in U_i} q^T delta. It ignores that a perturbation also changes ||mu~_i||.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from divopt_rag.models import Instance
from divopt_rag.models.validation import check_choice

from .sets import KSparse, NormBall, UncertaintySet

__all__ = ["QUERY_SIMILARITIES", "WorstCaseRelevance", "worst_case_relevance", "pool_arrays"]

#: How a document's relevance to the query is measured: the report's cosine, or the raw inner product.
QUERY_SIMILARITIES = ("cosine", "inner")

_BETA_GRID = np.geomspace(1e-5, 1e3, 41)
_GOLDEN_STEPS = 40
_PSI_GRID = np.linspace(0.0, math.pi, 7)[1:]  # psi = 0 (u = q^) never certifies a negative value
_TAU_GRID = np.linspace(0.0, 1.0, 17)[1:]
_BISECT_STEPS = 30
_RAY_GRID = np.geomspace(1e-2, 3.0, 12)
_DESCENT_STEPS = 60


def pool_arrays(inst: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E, q, s) in float64 numpy with s = E q, the nominal relevance the robust models use.

    The robust scores are defined from the query (s_i = q^T mu_i), so an Instance built from
    user-supplied relevance alone is refused.
    """
    if not isinstance(inst, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    if inst.q is None:
        raise ValueError(
            "robust models need the query vector q (scores are s_i = q^T mu_i); "
            "the instance was built from relevance scores only"
        )
    E = inst.E.detach().to("cpu").double().numpy()
    q = inst.q.detach().to("cpu").double().numpy()
    return E, q, E @ q


def check_set(uset: Any) -> UncertaintySet:
    if not isinstance(uset, (NormBall, KSparse)):
        raise TypeError(f"uset must be a NormBall or KSparse uncertainty set, got {type(uset).__name__}")
    return uset


@dataclass
class WorstCaseRelevance:
    """Worst-case relevance of every document, a perturbation that attacks it, and their gap.

    values[i] : the worst case of document i's relevance over U_i (exact for the inner
        product and where ``exact``; otherwise a sound lower bound: no perturbation in U_i
        scores below it).
    nominal[i] : the unperturbed relevance (cosine or inner product); shift = nominal - values.
    perturbation[i] : a member of U_i; ``attained[i]`` is document i's relevance under it
        (>= the true worst case >= values[i]).
    exact[i] : values[i] is the exact worst case (attained, or proven in the module docstring).
    free : the k-sparse free-coordinate mask (None for norm balls).
    """

    values: np.ndarray
    nominal: np.ndarray
    shift: np.ndarray
    perturbation: np.ndarray
    free: np.ndarray | None
    attained: np.ndarray | None = None
    exact: np.ndarray | None = None
    query_similarity: str = "inner"

    def __post_init__(self) -> None:
        if self.attained is None:
            self.attained = self.values.copy()
        if self.exact is None:
            self.exact = np.ones(self.values.shape, dtype=bool)


def worst_case_relevance(inst: Instance, uset: UncertaintySet, query_similarity: str = "cosine") -> WorstCaseRelevance:
    """Worst case of each document's relevance over its uncertainty set (module docstring).

    ``query_similarity="cosine"`` (default, the report's s_i(mu~_i)): exact for the l2 ball
    (cap angle) and for a nonnegative l1 worst case, a sound lower bound otherwise.
    ``"inner"``: q^T mu_i - h_i(q), exact. Cost O(n d) (inner), O(n d) times ~150 support
    evaluations for the cosine bound of the l_inf and k-sparse sets.
    """
    uset = check_set(uset)
    check_choice(query_similarity, "query_similarity", QUERY_SIMILARITIES)
    E, q, s = pool_arrays(inst)
    free = uset.free_mask(E, q)
    if query_similarity == "inner":
        Q = np.broadcast_to(q, E.shape)
        shift = uset.support(Q, free)
        delta = -uset.maximizer(Q, free)
        return WorstCaseRelevance(values=s - shift, nominal=s, shift=shift, perturbation=delta, free=free,
                                  query_similarity="inner")
    nominal, values, delta, attained, exact = worst_case_cosine(E, q, uset, free)
    return WorstCaseRelevance(values=values, nominal=nominal, shift=nominal - values, perturbation=delta,
                              free=free, attained=attained, exact=exact, query_similarity="cosine")


# --------------------------------------------------------------------------------------------
# The cosine oracle
# --------------------------------------------------------------------------------------------
def _cosines(X: np.ndarray, qh: np.ndarray) -> np.ndarray:
    """cos(q, x_r) per row (rows of norm 0 get +inf: they are never a worst case)."""
    nx = np.linalg.norm(X, axis=1)
    out = np.full(X.shape[0], np.inf)
    ok = nx > 0
    out[ok] = (X[ok] @ qh) / nx[ok]
    return out


def _plane(E: np.ndarray, qh: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Unit e_i orthogonal to q^ in the plane of q^ and mu_i (any orthogonal unit vector if mu_i ∥ q)."""
    P = E - c[:, None] * qh[None, :]
    pn = np.linalg.norm(P, axis=1)
    flat = pn <= 1e-12 * np.maximum(np.linalg.norm(E, axis=1), 1e-300)
    if flat.any():
        j = int(np.argmin(np.abs(qh)))  # the basis vector least aligned with q
        b = np.zeros_like(qh)
        b[j] = 1.0
        b -= (b @ qh) * qh
        P[flat] = b / np.linalg.norm(b)
        pn[flat] = 1.0
    return P / pn[:, None]


def _cap(phi: np.ndarray, m: np.ndarray, R: np.ndarray) -> np.ndarray:
    """cos(min(pi, phi + arcsin(R / m))), -1 where R > m (the ball holds the origin)."""
    ratio = R / m
    out = np.cos(np.minimum(math.pi, phi + np.arcsin(np.minimum(ratio, 1.0))))
    out[ratio > 1.0] = -1.0
    return out


def _l2_attack(E, qh, c, m, R, phi, e) -> np.ndarray:
    """The perturbation attaining the l2 cap bound (module docstring, case (1))."""
    alpha = np.arcsin(np.minimum(R / m, 1.0))
    psi = phi + alpha
    X = (m * np.cos(alpha))[:, None] * (np.cos(psi)[:, None] * qh[None, :] + np.sin(psi)[:, None] * e)
    back = psi > math.pi  # the cap holds -q: project mu on the q axis
    X[back] = c[back, None] * qh[None, :]
    inside = R > m
    X[inside] = -((R[inside] - m[inside]) / 2)[:, None] * qh[None, :]
    return X - E


def _golden_max(fun, lo: np.ndarray, hi: np.ndarray, steps: int) -> np.ndarray:
    """Per-row maximizer of a unimodal fun(x) (vector in, vector out) on [lo, hi] (golden section)."""
    r = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo.copy(), hi.copy()
    x1, x2 = b - r * (b - a), a + r * (b - a)
    f1, f2 = fun(x1), fun(x2)
    for _ in range(steps):
        left = f1 >= f2  # the maximum lies in [a, x2]: drop (x2, b]; else drop [a, x1)
        a, b = np.where(left, a, x1), np.where(left, x2, b)
        x1n = np.where(left, b - r * (b - a), x2)
        x2n = np.where(left, x1, a + r * (b - a))
        fnew = fun(np.where(left, x1n, x2n))
        f1, f2 = np.where(left, fnew, f2), np.where(left, f1, fnew)
        x1, x2 = x1n, x2n
    return np.where(f1 >= f2, x1, x2)


def _positive_bound(E, qh, c, m, R, uset, free):
    """(T, beta*) of case (2): T = sup_beta sqrt(2 beta max(g, 0)); T = 0 where g <= 0 throughout."""
    mR = m * m + R * R

    def twice_beta_g(beta: np.ndarray) -> np.ndarray:
        g = c - 0.5 * beta * mR - uset.support(qh[None, :] - beta[:, None] * E, free)
        return 2.0 * beta * np.maximum(g, 0.0)

    n = E.shape[0]
    grid = np.stack([twice_beta_g(np.full(n, b)) for b in _BETA_GRID], axis=1)
    best = grid.argmax(axis=1)
    lo = np.log(_BETA_GRID[np.maximum(best - 1, 0)])
    hi = np.log(_BETA_GRID[np.minimum(best + 1, _BETA_GRID.size - 1)])
    logb = _golden_max(lambda lb: twice_beta_g(np.exp(lb)), lo, hi, _GOLDEN_STEPS)
    beta = np.exp(logb)
    val = twice_beta_g(beta)
    use_grid = grid.max(axis=1) > val  # keep the grid point if the refinement did not beat it
    beta = np.where(use_grid, _BETA_GRID[best], beta)
    val = np.maximum(val, grid.max(axis=1))
    return np.sqrt(val), beta


def _negative_bound(E, qh, c, U_list, uset, free):
    """tau* per row: the smallest tau in (0, 1] with n(tau, u) >= 0 for some u in ``U_list``
    (case (3); each entry an (n, d) array of rows with ||u|| <= 1); 1 (bound -1) if none certifies.

    n(tau, u) = c + tau u^T mu - h(q^ + tau u) is concave in tau, so its nonnegative set is an
    interval: a grid finds the first feasible tau, bisection against the previous grid point
    (infeasible) refines it, keeping the feasible end.
    """
    n = E.shape[0]
    best = np.ones(n)
    for U in U_list:
        umu = np.einsum("ij,ij->i", U, E)

        def slack(rows, tau):
            fr = None if free is None else free[rows]
            return c[rows] + tau * umu[rows] - uset.support(qh[None, :] + tau[:, None] * U[rows], fr)

        hit_tau, hit_prev = np.full(n, np.inf), np.zeros(n)
        left, prev = np.arange(n), 0.0
        for tau in _TAU_GRID:
            left = left[best[left] > tau]  # rows certified at a smaller tau cannot improve here
            if not left.size:
                break
            ok = slack(left, np.full(left.size, tau)) >= 0
            hit_tau[left[ok]], hit_prev[left[ok]] = tau, prev
            left, prev = left[~ok], tau
        rows = np.flatnonzero(np.isfinite(hit_tau))
        lo, hi = hit_prev[rows], hit_tau[rows]
        for _ in range(_BISECT_STEPS):
            mid = 0.5 * (lo + hi)
            ok = slack(rows, mid) >= 0
            hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
        best[rows] = np.minimum(best[rows], hi)
    return best


def _descend(E, qh, delta, uset, free, steps: int) -> np.ndarray:
    """Projected gradient descent on cos(q, mu + delta) over U from ``delta`` (an attack, never a bound).

    grad_x cos(q, x) = q^ / ||x|| - (q^T x) x / ||x||^3; a step is kept only if it lowers the cosine,
    otherwise the row's step halves.
    """
    R = np.broadcast_to(np.asarray(uset.l2_radius(free, E.shape[1]), dtype=np.float64), (E.shape[0],))
    eta = R.copy()
    cur = _cosines(E + delta, qh)
    for _ in range(steps):
        X = E + delta
        nx = np.maximum(np.linalg.norm(X, axis=1), 1e-300)
        G = qh[None, :] / nx[:, None] - ((X @ qh) / nx**3)[:, None] * X
        gn = np.maximum(np.linalg.norm(G, axis=1), 1e-300)
        trial = _project(uset, delta - (eta / gn)[:, None] * G, free)
        val = _cosines(E + trial, qh)
        better = val < cur
        delta = np.where(better[:, None], trial, delta)
        cur = np.where(better, val, cur)
        eta = np.where(better, eta * 1.5, eta * 0.5)
    return delta


def _project(uset: UncertaintySet, W: np.ndarray, free: np.ndarray | None) -> np.ndarray:
    """Euclidean projection of each row of W onto U (attacks only: any member of U is valid)."""
    rho = uset.rho_vec
    if isinstance(uset, NormBall):
        if uset.p == math.inf:
            return np.clip(W, -rho, rho)
        if uset.p == 2.0:
            nw = np.linalg.norm(W, axis=1, keepdims=True)
            return W * np.minimum(1.0, rho / np.maximum(nw, 1e-300))
        # l1 ball: soft-threshold at the level that makes ||.||_1 = rho (sort-based, exact)
        A = np.abs(W)
        srt = -np.sort(-A, axis=1)
        css = np.cumsum(srt, axis=1) - rho
        idx = np.arange(1, W.shape[1] + 1)
        k = (srt - css / idx > 0).sum(axis=1)
        level = np.maximum(css[np.arange(W.shape[0]), np.maximum(k - 1, 0)] / np.maximum(k, 1), 0.0)
        out = np.sign(W) * np.maximum(A - level[:, None], 0.0)
        inside = A.sum(axis=1) <= rho
        out[inside] = W[inside]
        return out
    # k-sparse: clip every free coordinate, keep the attack_budget with the largest squared-distance gain
    F = np.ones(W.shape, dtype=bool) if free is None else np.broadcast_to(free, W.shape)
    D = np.clip(W, -rho, rho)
    gain = np.where(F, W * W - (W - D) ** 2, -np.inf)
    K = min(uset.attack_budget, W.shape[1])
    out = np.zeros_like(W)
    if K == 0:
        return out
    top = np.argpartition(-gain, K - 1, axis=1)[:, :K]
    keep = np.take_along_axis(gain, top, axis=1) > 0
    np.put_along_axis(out, top, np.where(keep, np.take_along_axis(D, top, axis=1), 0.0), axis=1)
    return out


def _ray_attacks(E, qh, directions, uset, free) -> list[np.ndarray]:
    """Members of U bringing mu_i closest to points t * direction_i (t on a log grid)."""
    out = []
    for Dir in directions:
        for t in _RAY_GRID:
            out.append(_project(uset, t * Dir - E, free))
    return out


def worst_case_cosine(E: np.ndarray, q: np.ndarray, uset: UncertaintySet, free: np.ndarray | None = None):
    """(nominal, values, perturbation, attained, exact) of the cosine relevance (module docstring).

    E (n, d) and q (d,) float64; ``free`` the k-sparse free mask of the rows of E.
    """
    E = np.asarray(E, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    n, d = E.shape
    qh = q / np.linalg.norm(q)
    m = np.linalg.norm(E, axis=1)
    if np.any(m == 0):
        raise ValueError("every document embedding must be nonzero (its cosine to the query is undefined)")
    c = E @ qh
    nominal = c / m
    phi = np.arccos(np.clip(nominal, -1.0, 1.0))
    R = np.broadcast_to(np.asarray(uset.l2_radius(free, d), dtype=np.float64), (n,)).copy()
    e = _plane(E, qh, c)
    values = _cap(phi, m, R)
    still = R > 0  # rho = 0 (or nothing free): the nominal cosine, exactly
    values[~still] = nominal[~still]
    if isinstance(uset, NormBall) and uset.p == 2.0:
        delta = _l2_attack(E, qh, c, m, R, phi, e)
        delta[~still] = 0.0
        return nominal, values, delta, values.copy(), np.ones(n, dtype=bool)
    delta = np.zeros_like(E)
    attained = nominal.copy()
    exact = ~still
    if not still.any():
        return nominal, values, delta, attained, exact
    rows = np.flatnonzero(still)
    Er, cr, mr, Rr, er = E[rows], c[rows], m[rows], R[rows], e[rows]
    fr = None if free is None else free[rows]
    nr = rows.size
    # attacks (members of U): the linear score's worst case, the support maximizer at the best
    # beta, projections of rays toward -q and toward the l2 cap's worst direction, l1 vertices
    pos, beta = _positive_bound(Er, qh, cr, mr, Rr, uset, fr)
    cands = [-uset.maximizer(np.broadcast_to(qh, Er.shape), fr), -uset.maximizer(qh[None, :] - beta[:, None] * Er, fr)]
    psi = np.minimum(math.pi, phi[rows] + np.arcsin(np.minimum(Rr / mr, 1.0)))
    cap_dir = np.cos(psi)[:, None] * qh[None, :] + np.sin(psi)[:, None] * er
    cands += _ray_attacks(Er, qh, (np.broadcast_to(-qh, Er.shape), cap_dir), uset, fr)
    bound = np.maximum(values[rows], np.where(pos > 0, pos, -np.inf))
    vertex_exact = np.zeros(nr, dtype=bool)
    if isinstance(uset, NormBall) and uset.p == 1.0:
        rho = uset.rho_vec
        vals = np.concatenate([(cr[:, None] + s * rho * qh[None, :])
                               / np.sqrt(mr[:, None] ** 2 + 2 * s * rho * Er + rho * rho) for s in (1.0, -1.0)], axis=1)
        j = vals.argmin(axis=1)
        vmin = vals[np.arange(nr), j]
        V = np.zeros_like(Er)
        V[np.arange(nr), j % d] = np.where(j < d, rho, -rho)
        cands.append(V)
        vertex_exact = vmin >= 0  # case (4): the vertex minimum is the exact worst case
        bound = np.where(vertex_exact, vmin, bound)
    scores = np.stack([_cosines(Er + D, qh) for D in cands], axis=1)
    pick = scores.argmin(axis=1)
    att_delta = _descend(Er, qh, np.stack(cands, axis=1)[np.arange(nr), pick], uset, fr, _DESCENT_STEPS)
    att = _cosines(Er + att_delta, qh)
    neg_rows = np.flatnonzero((pos <= 0) & ~vertex_exact)
    if neg_rows.size:  # case (3) with u from the best attack (the minimax-optimal u if it is optimal)
        X = Er[neg_rows] + att_delta[neg_rows]
        U_list = [X / np.linalg.norm(X, axis=1, keepdims=True)]
        U_list += [np.cos(p)[None] * qh[None, :] + np.sin(p) * er[neg_rows] for p in _PSI_GRID]
        fn = None if fr is None else fr[neg_rows]
        tau = _negative_bound(Er[neg_rows], qh, cr[neg_rows], U_list, uset, fn)
        bound[neg_rows] = np.maximum(bound[neg_rows], -tau)
    delta[rows] = att_delta
    values[rows] = bound
    attained[rows] = att
    exact[rows] = vertex_exact | (att - bound <= 1e-12)
    return nominal, values, delta, attained, exact
