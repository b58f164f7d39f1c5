"""Safe screening for the CCBQP: rules that remove items no optimal k-set contains, with proofs.

CCBQP on a k-set S of the pool (w_ij = e_i . e_j, c = relevance, l = theta (k-1) c the linear
term, :func:`divopt_rag.models.ccbqp.linear_term`):
    f(S) = sum_{i in S} l_i + (1-theta)(k - ||sum_{i in S} e_i||^2)
         = sum_{i in S} l_i - (1-theta) sum_{i != j in S} w_ij      (ordered pairs)

Swap identity (DESIGN.md; :func:`divopt_rag.models.ccbqp.swap_gains`): for i in S, j not in S,
S' = S - i + j,
    f(S') - f(S) = l_j - l_i - 2 (1-theta) sum_{l in S - i} (w_jl - w_il).       (*)

Safe screening (per-item form, :func:`safe_screen`)
---------------------------------------------------
Let P be a pool that contains every optimal set (the whole pool at the start), T ANY set of k
items of P, and for j in T and i in P - T
    U_j >= sum_{l in R} w_jl   and   L_i <= sum_{l in R} w_il   for every (k-1)-subset R of P - {i, j}.
Put a_j = l_j - 2 (1-theta) U_j, B = min_{j in T} a_j and b_i = l_i - 2 (1-theta) L_i.

**Claim.** If b_i < B, no optimal set contains i.

*Proof.* Let S* be optimal with i in S*. As i is not in T and |T| = |S*| = k, some j in T is
not in S*. With R = S* - i (a (k-1)-subset of P - {i, j}), (*) gives
f(S* - i + j) - f(S*) >= a_j - b_i >= B - b_i > 0, contradicting optimality of S*.  []

The optimal sets of the problem restricted to the survivors P' are exactly those of the
original (all optimal sets lie in P', so both optima are equal), hence the rule is re-applied
on P' with U, L recomputed over P' (they can only tighten) until nothing more is removed.

T is taken as the k items with the largest a_j among candidates (the whole pool when the exact
Gram matrix is affordable, else the ``n_candidates`` most relevant), which maximizes B.

DESIGN.md's scalar rule is the special case T = top-k by relevance, U_j = (k-1) w_hi, L_i = (k-1) w_lo with
w_lo <= w_il, w_jl <= w_hi over distinct pairs of P: b_i < B reads
c_i < c_(k) - 2 (1-theta)(w_hi - w_lo) / theta (theta > 0); it is :func:`design_screen`.

Bounds used (:func:`pool_cosine_bounds`), all O(n k d) or O(n d) on a pool of size
m > ``exact_below`` (no m x m matrix):
* U_j (j a candidate): the sum of the k-1 largest w_jl, l in P - {j}: exact, one GEMV each.
* L_i by geometry: for any unit anchor u with beta_l = angle(e_l, u), the spherical triangle
  inequality gives angle(e_i, e_l) <= beta_i + beta_l, so w_il >= cos(min(pi, beta_i + beta_l)),
  decreasing in beta_l; the k-1 smallest such bounds over l != i come from the k-1 largest
  beta_l. Anchors: the query q (when present), the normalized centroid of P, and "clusters":
  a seeded spherical k-means partition of P with one anchor per cluster, each l bounded through
  its own cluster's center (:func:`_cluster_lower`). The largest of the sums is used (each is a
  valid lower bound).
* once m <= ``exact_below``: exact cosines of P, a row block at a time (O(m^2 d) time, no m x m
  matrix kept), so U_j and L_i are exact top/bottom-(k-1) sums.
Rows of E are unit only up to a tolerance delta (validation); |w - cos(angle)| <= 2 delta + delta^2,
so geometric bounds are loosened by 3 delta + 1e-6, and the test b_i < B uses a margin ``tol``.

Incumbent screening (:func:`incumbent_screen`)
----------------------------------------------
Given the objective LB of any feasible k-set, every i with UB_i < LB is in no optimal set
(proof in the docstring), UB_i the pair bound of :func:`pair_bounds`; iterated on the
survivors like the safe rule.

Upper bounds on the optimum are in :mod:`divopt_rag.solvers.bounds`; the full-scale certificate
that chains screening, bounds and an exact solve is :mod:`divopt_rag.solvers.certificates`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from divopt_rag.models import Instance, objective_scale
from divopt_rag.models.ccbqp import linear_term, pair_weight
from divopt_rag.models.kernels import gather_rows, matmul, matvec
from divopt_rag.models.validation import check_choice, check_nonnegative

__all__ = [
    "ScreeningResult",
    "safe_screen",
    "design_screen",
    "pair_bounds",
    "incumbent_screen",
    "pool_cosine_bounds",
]


@dataclass
class ScreeningResult:
    """Survivors of safe screening.

    survivors : sorted int64 indices (rows of the screened instance) that may be in an optimal set.
    rounds : screening rounds run (the last one removed nothing or hit ``max_rounds``).
    removed : items removed per round.
    rule : "per_item" or "design".
    """

    survivors: np.ndarray
    rounds: int
    removed: list[int] = field(default_factory=list)
    rule: str = "per_item"
    seconds: float = 0.0

    @property
    def n_survivors(self) -> int:
        return int(self.survivors.size)


# --------------------------------------------------------------------------------------------
# bound ingredients on a pool P (rows `pool` of inst)
# --------------------------------------------------------------------------------------------
def _norm_slack(E: torch.Tensor) -> float:
    # delta = max | ||e|| - 1 |; |w - cos| <= 2 delta + delta^2 <= 3 delta for delta <= 1
    acc = torch.float64 if E.dtype == torch.float64 else torch.float32
    nrm = torch.linalg.vector_norm(E, dim=1, dtype=acc)
    return 3.0 * float((nrm.double() - 1.0).abs().max()) + 1e-6


def _sum_extreme(vals: torch.Tensor, m: int, largest: bool) -> torch.Tensor:
    """Row-wise sum of the m largest (or smallest) entries; vals has +-inf on excluded entries."""
    if m == 0:
        return torch.zeros(vals.shape[0], dtype=vals.dtype, device=vals.device)
    return torch.topk(vals, m, dim=1, largest=largest).values.sum(1)


def _geometric_lower(EP: torch.Tensor, anchor: torch.Tensor, k: int, slack: float) -> torch.Tensor:
    """L_i <= sum of the k-1 smallest w_il (l != i) from angles to a unit anchor, O(m d)."""
    m = EP.shape[0]
    cos = matvec(EP, anchor).double().clamp(-1.0, 1.0)
    # lower the cosines by the slack before arccos: larger angles, smaller (safe) bounds
    beta = torch.arccos((cos - slack).clamp(-1.0, 1.0))
    kk = min(k, m)
    top_beta, top_idx = torch.topk(beta, kk)
    vals = torch.cos(torch.clamp(beta[:, None] + top_beta[None, :], max=math.pi)) - slack
    self_mask = top_idx[None, :] == torch.arange(m, device=EP.device)[:, None]
    vals = vals.masked_fill(self_mask, math.inf)
    return _sum_extreme(vals, k - 1, largest=False)


def _cluster_lower(EP: torch.Tensor, k: int, slack: float, n_clusters: int, seed: int = 0,
                   iters: int = 3, block: int = 4096) -> torch.Tensor:
    """L_i <= sum of the k-1 smallest w_il (l != i) from a spherical k-means partition of the pool.

    For l in cluster C with unit center u_C: angle(e_i, e_l) <= angle(e_i, u_C) + angle(u_C, e_l)
    (triangle inequality on the sphere), so w_il >= cos(min(pi, beta_iC + beta_l)) - slack. Within a
    cluster the bound decreases in beta_l, so only each cluster's k largest beta_l can be among the
    k-1 smallest bounds of any i (k, not k-1, because i itself is excluded). The partition only
    affects tightness, never soundness. O(iters m M d) for M clusters.
    """
    m = EP.shape[0]
    M = max(1, min(int(n_clusters), m))
    acc = torch.float64 if EP.dtype == torch.float64 else torch.float32
    g = torch.Generator().manual_seed(seed)
    C = gather_rows(EP, torch.randperm(m, generator=g)[:M].to(EP.device))
    for _ in range(iters):
        assign = matmul(EP, C.T).argmax(1)
        new = torch.zeros_like(C)
        for s0 in range(0, m, 1 << 14):  # row blocks: no m x d upcast copy of low-precision E
            new.index_add_(0, assign[s0 : s0 + (1 << 14)], EP[s0 : s0 + (1 << 14)].to(acc))
        nrm = new.norm(dim=1, keepdim=True)
        C = torch.where(nrm > 1e-12, new / nrm.clamp_min(1e-12), C)  # an empty cluster keeps its center
    S = matmul(EP, C.T).double()  # m x M cosines to the centers
    assign = S.argmax(1)
    beta = torch.arccos((S - slack).clamp(-1.0, 1.0))
    own = beta[torch.arange(m, device=EP.device), assign]
    # per cluster: its k largest own-angles and their items (padding: angle -inf, item -1)
    order = torch.argsort(assign * 8.0 - own / (own.max() + 1.0))  # by cluster, then angle descending
    a_sorted = assign[order]
    starts = torch.searchsorted(a_sorted, torch.arange(M, device=EP.device))
    rank = torch.arange(m, device=EP.device) - starts[a_sorted]
    keep = rank < k
    TB = torch.full((M, k), -math.inf, dtype=torch.float64, device=EP.device)
    TI = torch.full((M, k), -1, dtype=torch.long, device=EP.device)
    TB[a_sorted[keep], rank[keep]] = own[order[keep]]
    TI[a_sorted[keep], rank[keep]] = order[keep]
    L = torch.empty(m, dtype=torch.float64, device=EP.device)
    rows_per = max(1, block * 32 // (M * k))
    for s0 in range(0, m, rows_per):
        b = beta[s0 : s0 + rows_per]  # (B, M)
        vals = torch.cos(torch.clamp(b[:, :, None] + TB[None, :, :], max=math.pi)) - slack  # (B, M, k)
        ids = torch.arange(s0, s0 + b.shape[0], device=EP.device)
        bad = (TI[None, :, :] == ids[:, None, None]) | (TI[None, :, :] < 0)
        vals = vals.masked_fill(bad, math.inf).reshape(b.shape[0], -1)
        L[s0 : s0 + b.shape[0]] = _sum_extreme(vals, k - 1, largest=False)
    return L


def pool_cosine_bounds(inst: Instance, pool: np.ndarray, cand_pos: np.ndarray, exact: bool,
                       anchors: tuple[str, ...], n_clusters: int = 64):
    """(U over the candidates, L over P, w_lo, w_hi) for the pool P = rows ``pool`` of inst (float64).

    cand_pos are positions (rows of ``pool``) whose U_j is wanted: the sum of the k-1 largest
    w_jl over l in P - {j}, exact. L_i lower-bounds the sum of the k-1 smallest w_il, l in P - {i}
    (exact when ``exact``, else from the ``anchors``: module docstring). w_lo <= w_il <= w_hi over
    distinct pairs of P.
    """
    k = inst.k
    t = torch.as_tensor(pool, device=inst.device)
    EP = inst.E.index_select(0, t)
    m = EP.shape[0]
    Ct = torch.as_tensor(cand_pos, device=inst.device)
    if exact:
        # exact cosines, a row block at a time (O(m^2 d) time, O(block m) memory), float64
        R = EP.double()
        Uall = torch.empty(m, dtype=torch.float64, device=inst.device)
        L = torch.empty(m, dtype=torch.float64, device=inst.device)
        w_lo, w_hi = math.inf, -math.inf
        blk = max(1, min(m, 2_000_000 // max(m, 1)))
        for s0 in range(0, m, blk):
            G = R[s0 : s0 + blk] @ R.T
            rows = torch.arange(G.shape[0], device=inst.device)
            G[rows, rows + s0] = -math.inf
            Uall[s0 : s0 + G.shape[0]] = _sum_extreme(G, k - 1, largest=True)
            if m > 1:
                w_hi = max(w_hi, float(G.max()))
            G[rows, rows + s0] = math.inf
            L[s0 : s0 + G.shape[0]] = _sum_extreme(G, k - 1, largest=False)
            if m > 1:
                w_lo = min(w_lo, float(G.min()))
        eps = 1e-9 * k
        return Uall[Ct] + eps, L - eps, w_lo - 1e-9, w_hi + 1e-9
    slack = _norm_slack(EP)
    # U_j exact: k GEMVs over the pool
    U = torch.empty(len(cand_pos), dtype=torch.float64, device=inst.device)
    for s0 in range(0, len(cand_pos), 64):  # 64 GEMVs at a time keeps the temporary at 64 x m
        blk = Ct[s0 : s0 + 64]
        GT = matmul(EP, gather_rows(EP, blk).T).double().T
        GT[torch.arange(blk.numel()), blk] = -math.inf
        U[s0 : s0 + blk.numel()] = _sum_extreme(GT, k - 1, largest=True) + 1e-6 * k
    L = torch.full((m,), -(k - 1) * (1.0 + slack), dtype=torch.float64, device=inst.device)
    w_lo = -1.0
    for a in anchors:
        if a == "clusters":
            if k > 1:
                L = torch.maximum(L, _cluster_lower(EP, k, slack, n_clusters))
            continue
        if a == "query":
            if inst.q is None:
                continue
            u = inst.q.to(torch.float64)
        else:
            u = matvec(EP.T.contiguous(), torch.ones(m, dtype=EP.dtype, device=inst.device)).double()
            if float(u.norm()) == 0.0:
                continue
        u = (u / u.norm()).to(EP.dtype if EP.dtype in (torch.float32, torch.float64) else torch.float32)
        L = torch.maximum(L, _geometric_lower(EP, u, k, slack))
        cos = matvec(EP, u).double().clamp(-1, 1)
        bmax = float(torch.arccos((cos - slack).clamp(-1, 1)).max())
        w_lo = max(w_lo, math.cos(min(math.pi, 2 * bmax)) - slack)
    return U, L, w_lo, 1.0 + slack


def _top_k_positions(c: torch.Tensor, k: int) -> np.ndarray:
    return torch.topk(c, k).indices.cpu().numpy()


def _screen(inst: Instance, rule: str, max_rounds: int, exact_below: int, anchors, tol: float | None,
            n_candidates: int) -> ScreeningResult:
    t0 = time.perf_counter()
    k, th = inst.k, inst.theta
    pool = np.arange(inst.n, dtype=np.int64)
    tol = 1e-7 * objective_scale(k) if tol is None else check_nonnegative(tol, "tol")
    removed: list[int] = []
    rounds = 0
    c_all = inst.relevance.double()
    while rounds < max_rounds and pool.size > k:
        rounds += 1
        c = c_all[torch.as_tensor(pool, device=inst.device)]
        lin = linear_term(c, th, k)
        exact = pool.size <= exact_below
        if rule == "design":
            T_pos = _top_k_positions(c, k)
            _, L, w_lo, w_hi = pool_cosine_bounds(inst, pool, T_pos[:0], exact, anchors)
            B = float(linear_term(c[torch.as_tensor(T_pos)].min(), th, k)) - pair_weight(th) * (k - 1) * w_hi
            L = torch.full((pool.size,), (k - 1) * w_lo, dtype=torch.float64, device=inst.device)
        else:
            # T: the k candidates with the largest a_j (any k items make the proof work)
            M = pool.size if exact else min(pool.size, max(n_candidates, k))
            cand = _top_k_positions(c, M)
            U, L, _, _ = pool_cosine_bounds(inst, pool, cand, exact, anchors)
            a = lin[torch.as_tensor(cand)] - pair_weight(th) * U
            best = torch.topk(a, k)
            T_pos, B = cand[best.indices.cpu().numpy()], float(best.values.min())
        b = lin - pair_weight(th) * L
        drop = (b < B - tol).cpu().numpy()
        drop[T_pos] = False  # the proof needs i outside T
        n_drop = int(drop.sum())
        removed.append(n_drop)
        if n_drop == 0:
            break
        pool = pool[~drop]
    return ScreeningResult(np.sort(pool), rounds, removed, rule, time.perf_counter() - t0)


def safe_screen(
    inst: Instance,
    *,
    max_rounds: int = 50,
    exact_below: int = 4096,
    anchors: tuple[str, ...] = ("query", "centroid"),
    tol: float | None = None,
    n_candidates: int = 256,
) -> ScreeningResult:
    """Iterated per-item safe screening (module docstring: claim and proof).

    T is chosen as the k items with the largest a_j among the ``n_candidates`` most relevant
    (all of the pool in the exact regime): any k-set T makes the proof work, and this one
    maximizes B over the candidates.
    exact_below : pools of at most this size use exact cosines (m^2 d work, blocked memory);
        larger pools use the O(m k d) bounds (exact U_j, geometric L_i from ``anchors``).
    anchors : "query", "centroid" (default) and "clusters" (a 64-cluster spherical k-means,
        O(m 64 d) more work; tighter on clustered pools, measured to add little on narrow cones).
    tol : margin of the test b_i < B - tol (default 1e-7 k(k-1)) against rounding.
    Returns the survivors; every optimal k-set of ``inst`` lies inside them.
    """
    for a in anchors:
        check_choice(a, "anchor", ("query", "centroid", "clusters"))
    return _screen(inst, "per_item", max_rounds, exact_below, tuple(anchors), tol, n_candidates)


def design_screen(
    inst: Instance,
    *,
    max_rounds: int = 50,
    exact_below: int = 4096,
    anchors: tuple[str, ...] = ("query", "centroid"),
    tol: float | None = None,
) -> ScreeningResult:
    """DESIGN.md's scalar rule, iterated: drop i when c_i < c_(k) - 2 (1-theta)(w_hi - w_lo)/theta.

    w_lo, w_hi bound the cosines of distinct pairs of the surviving pool: exact min/max when the
    pool has at most ``exact_below`` items, else w_hi = 1 and w_lo = cos(2 max_l beta_l) from the
    anchors' spherical caps (every item lies within angle beta_max of the anchor, so two items are
    at most 2 beta_max apart). Weaker than :func:`safe_screen`, kept as the documented baseline.
    """
    for a in anchors:
        check_choice(a, "anchor", ("query", "centroid", "clusters"))
    return _screen(inst, "design", max_rounds, exact_below, tuple(anchors), tol, 0)


# --------------------------------------------------------------------------------------------
# incumbent-based screening and the pair bound (exact cosines)
# --------------------------------------------------------------------------------------------
def pair_bounds(inst: Instance, block_elems: int = 2_000_000) -> torch.Tensor:
    """UB_i >= f(S) for every k-set S of the pool containing i (float64, one per item).

    Split f(S) for S = {i} + R: f(S) = theta (k-1) c_i - 2 (1-theta) sum_{l in R} w_il + f_R with
    f_R = sum_{l in R} (theta (k-1) c_l - (1-theta) sum_{m in R - l} w_lm) <= sum_{l in R} base_l,
    base_l = theta (k-1) c_l - (1-theta) L2_l, L2_l = the sum of the k-2 smallest w_lm (m != l).
    Hence f(S) <= UB_i = theta (k-1) c_i + (sum of the k-1 largest of base_l - 2 (1-theta) w_il, l != i),
    and OPT <= max_i UB_i. Exact cosines a row block at a time: O(n^2 d) time, O(block n) memory.
    """
    k, th, n = inst.k, inst.theta, inst.n
    R = inst.E.double()
    c = inst.relevance.double()
    if k == 1:
        return th * 0.0 * c  # f = 0 for every 1-set
    blk = max(1, min(n, block_elems // max(n, 1)))
    L2 = torch.zeros(n, dtype=torch.float64, device=inst.device)
    if k > 2:
        for s0 in range(0, n, blk):
            G = R[s0 : s0 + blk] @ R.T
            rows = torch.arange(G.shape[0], device=inst.device)
            G[rows, rows + s0] = math.inf
            L2[s0 : s0 + G.shape[0]] = _sum_extreme(G, k - 2, largest=False)
    lin = linear_term(c, th, k)
    base = lin - (1 - th) * L2
    UB = torch.empty(n, dtype=torch.float64, device=inst.device)
    for s0 in range(0, n, blk):
        G = R[s0 : s0 + blk] @ R.T
        V = base[None, :] - pair_weight(th) * G
        rows = torch.arange(G.shape[0], device=inst.device)
        V[rows, rows + s0] = -math.inf
        UB[s0 : s0 + G.shape[0]] = lin[s0 : s0 + G.shape[0]] + _sum_extreme(V, k - 1, largest=True)
    return UB + 1e-9 * objective_scale(k)


def incumbent_screen(inst: Instance, lower_bound: float, *, max_rounds: int = 20,
                     tol: float | None = None) -> tuple[ScreeningResult, float]:
    """Drop every i with UB_i < lower_bound - tol (:func:`pair_bounds`), iterated on the survivors.

    ``lower_bound`` must be the objective of a feasible k-set (an incumbent), so LB <= OPT.
    *Proof.* An optimal S containing i has OPT = f(S) <= UB_i < LB <= OPT, a contradiction; so no
    optimal set contains i, the optimum over the survivors is OPT, and the bounds recomputed over
    the survivors (where L2 can only grow) stay valid. Returns the survivors and the pair upper
    bound max_i UB_i over the last pool (an upper bound on OPT). O(rounds n^2 d).
    """
    t0 = time.perf_counter()
    tol = 1e-7 * objective_scale(inst.k) if tol is None else check_nonnegative(tol, "tol")
    pool = np.arange(inst.n, dtype=np.int64)
    removed: list[int] = []
    rounds, ub = 0, math.inf
    while rounds < max_rounds:
        rounds += 1
        UB = pair_bounds(inst.subset(pool))
        ub = float(UB.max())
        drop = (UB < lower_bound - tol).cpu().numpy()
        if pool.size - int(drop.sum()) < inst.k:  # LB above every bound: LB was not feasible
            raise ValueError(f"lower_bound {lower_bound} exceeds the pair bound {ub}: it is not an incumbent value")
        removed.append(int(drop.sum()))
        if not drop.any():
            break
        pool = pool[~drop]
    return ScreeningResult(pool, rounds, removed, "incumbent", time.perf_counter() - t0), ub


