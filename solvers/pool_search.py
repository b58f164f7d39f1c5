"""The default's search on the host: pool -> starts -> search -> certify -> polish, over one state.

One problem (one query, one theta) on a CPU pool, in the compiled kernels of
:mod:`divopt_rag.solvers.kernels`. Each stage is a function over :class:`PoolState`:

1. :func:`choose_pool` - the candidate pool P: every row when n <= ``pool_size``; else the
   ``pool_size`` rows that interleave the best by the swap score b_j at "k times the mean row"
   (the v of the paper's FW start x0 = (k/n) 1; :func:`divopt_rag.models.ccbqp.swap_terms}`)
   with the most relevant (two GEMVs over the pool; where relevance ranks the promising rows the
   two lists agree). One BLAS syrk gives G = E_P E_P^T (:func:`gram`).
2. :func:`starts` - the top-k rows, the CCBQP greedy and ``n_random`` seeded random sets, each
   ended by best-improvement 1-swaps (kernels.moves.local_search).
3. :func:`search` - where the starts end in different local optima (a rugged pool), tabu walks
   from the best distinct start optima (one in the first search of a guided pool, which a search
   around its set follows: :data:`GUIDED_FIRST_WALKS`), then best-improvement 2-swaps on the best set.
4. :func:`certify` - one GEMV u = E v_S over the whole pool bounds every 1-swap gain
   (Delta(i, j) <= b_j + max_i a_i + 2 (1-theta), since w_ij <= 1 for unit rows); the rows the
   bound keeps are compared exactly (one small GEMM E_J E_S^T); where a row sample says the
   bound keeps most rows (small k, low theta), one blocked GEMM E E_S^T gives u and every gain in a
   single pass instead. It only certifies, and a set it holds for is not certified again after a
   rebuilt pool's search returns it: where it fails, :func:`extend` adds its improving entrants
   and nearest rows to P and the search resumes from the set (each round raises f; ``max_passes``
   caps them).
5. :func:`polish` - best-improvement 1-swaps in float64 over the set and the rows whose gain is
   within the float32 tolerance of 0, at ``polish_gap`` k (k-1); a set that moves is certified again.

The answer is a 1-swap optimum over all swaps of the whole pool, as that of the lockstep search
(:mod:`divopt_rag.solvers.ws_multistart`), which runs instead on a GPU with many problems
(:func:`divopt_rag.solvers.ws_multistart.use_kernels` holds the rule).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from divopt_rag.models.ccbqp import linear_term, objective_scale, swap_terms

from .kernels import gains, moves, ms_moves, row_moves
from .kernels.checks import check_array, check_pool, check_set
from .kernels.moves import start as set_state
from .candidate_pools import _rank_correlation as rank_correlation
from .kernels.rng import rng_state
from .swap_certificate import DENSE_SHARE

__all__ = ["GUIDED_FIRST_WALKS", "PoolState", "Certificate", "pool_search", "choose_pool", "gram", "starts", "search", "certify",
           "extend", "polish"]


#: Largest k at which the searches run on the member-row kernels (kernels.row_moves: every member's gains
#: over the whole pool each step, 2-2.5x faster than the bounded row scan of kernels.moves at k = 10 on
#: 300-800 rows); above it the row scan, whose gain bound skips most rows (at n = 2000, k = 1000 the member
#: rows cost 5.5 s against 0.7 s). Both make the same moves.
ROW_MOVES_MAX_K = 16

#: Tabu walks of the first search on a guided pool (relevance misleads), where the start optima differ:
#: the search around the found set that follows (a rebuilt pool, ``tabu_walks`` walks) does the rest.
#: On the 512 development calls (benchmarks/results/speed/quality_knobs_2026-12-03/): 511 >= d1cdffb
#: with 1 walk against 510 with 9, 0.64x the time at theta 0.3 / 0.5 on the development RAG calls.
GUIDED_FIRST_WALKS = 1

#: Rows per block of a certificate's single pass (:func:`_compare_all`): a (k, block) W of at most
#: 16384 k entries of E's dtype stays in the cache hierarchy while the pool streams through.
CERT_BLOCK = 16384


@dataclass
class Certificate:
    """One certificate: the best 1-swap gain over the whole pool, its improving entrants (rows of
    E, best first) and the compared rows of highest gain (improving or not)."""

    best_gain: float
    entrants: np.ndarray
    near: np.ndarray
    compared: int
    u: np.ndarray  # (n,) u = E v_S over the whole pool
    rows: np.ndarray = None  # the certified set (rows of E, sorted)

    def holds_for(self, rows: np.ndarray, tol: float) -> bool:
        """Is this a holding certificate of the set ``rows``? (Then certifying it again is the same pass.)"""
        return self.best_gain <= tol and self.rows is not None and np.array_equal(self.rows, np.sort(rows))


@dataclass
class PoolState:
    """One problem's run: the pool's rows and relevance, the candidate pool P with its Gram
    matrix, the current set (positions in P) and the diagnostics of every stage."""

    E: np.ndarray  # (n, d) float32 or float64, the whole pool (host, C order)
    c: np.ndarray  # (n,) float64 relevance
    k: int
    theta: float
    tol: float  # the search's tolerance (ls_tolerance of the pool's precision)
    cfg: object  # WsMultistartConfig at this k (for_k)
    lin_all: np.ndarray = None  # theta (k-1) c over the whole pool
    P: np.ndarray = None  # (p,) rows of E
    G: np.ndarray = None  # (p, p) float64 = E_P E_P^T
    lin: np.ndarray = None  # (p,) lin_all[P]
    S: np.ndarray = None  # (k,) positions in P
    f: float = -np.inf
    names: list = field(default_factory=list)
    f_starts: np.ndarray = None
    best_start: int = 0
    phase: str = "starts"
    passes: int = 0
    optimal: bool = False
    whole: bool = False
    rugged: bool = False  # the start optima differed
    guided: bool = False  # relevance misleads: P interleaves the best rows by b_j at the mean row
    pool_size: int = 0  # rows of the first pool (and of a pool rebuilt around the set)
    rounds: int = 0  # perturbation rounds run
    b_mean: np.ndarray = None  # (n,) b_j at k times the mean row
    sample: np.ndarray = None  # a seeded row sample (sorted), drawn once per run
    cert: Certificate | None = None
    seconds: dict = field(default_factory=dict)
    _t: float = field(default_factory=time.perf_counter)

    @property
    def one(self) -> float:
        return 1.0 - self.theta

    @property
    def rows(self) -> np.ndarray:
        """The current set as rows of E."""
        return self.P[self.S]

    def lap(self, stage: str) -> None:
        t = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + t - self._t
        self._t = t


def _mm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B through torch (its thread setting governs every BLAS call of a selection)."""
    return torch.mm(torch.from_numpy(A), torch.from_numpy(B)).numpy()


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    return torch.mv(torch.from_numpy(A), torch.from_numpy(x)).numpy()


_BLAS = None  # threadpoolctl's controller of the BLAS libraries (found once, on the first Gram matrix)


def _syrk(A: np.ndarray) -> np.ndarray:
    """A A^T in float64 from one BLAS syrk in A's precision (half a GEMM's products), mirrored by
    kernels.gains.symmetric_from_lower: with the mirror, 0.70x the time of torch's GEMM and its float64
    copy at 800 x 384 float32, whose values it matched there to the bit. On torch's thread count, as
    every BLAS call of a selection."""
    global _BLAS
    from scipy.linalg import blas
    from threadpoolctl import ThreadpoolController

    if _BLAS is None:
        _BLAS = ThreadpoolController()
    syrk = blas.ssyrk if A.dtype == np.float32 else blas.dsyrk
    with _BLAS.limit(limits=torch.get_num_threads(), user_api="blas"):
        C = syrk(1.0, A.T, trans=1)  # A^T is A's Fortran view: no copy; C's upper triangle (Fortran) = C.T's lower
    G = np.empty((A.shape[0], A.shape[0]))
    gains.symmetric_from_lower(C.T, G)
    return G


def _f(st: PoolState, S: np.ndarray) -> float:
    return float(moves.set_f(st.G, st.lin, st.one, S))


def choose_pool(st: PoolState) -> None:
    """Step 1: P (module docstring)."""
    n, k, cfg = st.E.shape[0], st.k, st.cfg
    st.lin_all = linear_term(st.c, st.theta, k)
    if n <= cfg.pool_size:
        st.P, st.whole = np.arange(n, dtype=np.int64), True
    else:
        # relevance guides when it ranks the rows as the swap score b_j at k times the mean row
        # does (rank correlation >= guide_correlation on a seeded sample of guide_sample rows, as
        # candidate_pools.relevance_misleads); else the pool interleaves both, with
        # guided_pool_size rows
        m = min(n, cfg.guide_sample)
        whole = m == n  # the sample is every row (a retriever's top-n): no copy, and its b is the pool's
        sample = st.sample = np.arange(n) if whole else np.sort(np.random.default_rng(cfg.seed).choice(n, m, replace=False))
        ES = st.E if whole else st.E[sample]
        v = np.empty(ES.shape[1])
        gains.column_sums(ES, v)
        v = (v / m * k).astype(st.E.dtype)  # k times the mean row (in float64, as ES.mean(0, dtype=float64))
        b = swap_terms(st.lin_all[sample], _mv(ES, v).astype(np.float64), st.theta)[0]
        st.guided = bool(rank_correlation(b, st.c[sample]) < cfg.guide_correlation)
        # b_j at the mean row over the whole pool: one pass, only where relevance misleads
        if st.guided:
            st.b_mean = b if whole else swap_terms(st.lin_all, _mv(st.E, v).astype(np.float64), st.theta)[0]
        else:
            st.b_mean = st.c
        st.passes += int(st.guided)
        p = min(cfg.guided_pool_size, n) if st.guided else cfg.pool_size
        st.P = _interleave([], [st.b_mean, st.c], p) if st.guided else _top(st.c, p)
        st.whole = st.P.size >= n
    st.pool_size = st.P.size
    st.lap("shortlist")
    gram(st)


def _top(x: np.ndarray, p: int) -> np.ndarray:
    """The p rows of largest x, best first (ties to the lower row): O(n) selection, then a sort of p."""
    if p >= x.size:
        return np.argsort(-x, kind="stable")
    part = np.argpartition(-x, p - 1)[:p]
    return part[np.lexsort((part, -x[part]))]


def _interleave(head: list, scores: list, p: int) -> np.ndarray:
    """The rows of ``head`` (in order), then the best rows by each score in turn, p distinct rows."""
    lists = [_top(x, p) for x in scores]
    tail = np.stack(lists, 1).reshape(-1)
    both = np.concatenate([np.asarray(h, dtype=np.int64) for h in head] + [tail]) if head else tail
    _, first = np.unique(both, return_index=True)
    return both[np.sort(first)[:p]]


def repool(st: PoolState, cert: Certificate) -> np.ndarray:
    """A pool around the set: the set, the certificate's improving entrants and near rows, then in
    turn the best rows by b_j at the set, by b_j at the mean row and by relevance (``pool_size``
    rows); G recomputed. Returns the set's positions in the new pool."""
    rows = st.rows
    b_S = swap_terms(st.lin_all, cert.u, st.theta)[0]
    P = _interleave([rows, cert.entrants, cert.near], [b_S, st.b_mean, st.c], st.pool_size)
    st.lap("shortlist")
    # the rows both pools hold keep their block of G; only the new rows' products are computed
    pos = np.full(st.E.shape[0], -1, dtype=np.int64)
    pos[st.P] = np.arange(st.P.size)
    old = pos[P] >= 0
    gram(st, P[~old], keep=pos[P[old]])
    st.S = _positions(st.P, rows)
    return st.S.copy()


def gram(st: PoolState, new: np.ndarray | None = None, keep: np.ndarray | None = None) -> None:
    """G = E_P E_P^T (float64 from the pool's BLAS syrk, :func:`_syrk`); with ``new`` rows, P grows by
    them and only the new blocks are computed; with ``keep`` (positions in P), only those rows of P
    stay, in that order, their block of G gathered in one pass (kernels.gains.gather_block), before
    the new rows."""
    if new is None:
        st.G = _syrk(st.E[st.P])
    elif new.size or keep is not None:
        kept = st.P if keep is None else st.P[keep]
        p, m = kept.size, new.size
        G = np.empty((p + m, p + m))
        if keep is None:
            G[:p, :p] = st.G
        else:
            gains.gather_block(st.G, keep, G)
        if m:
            EN = st.E[new]
            X = _mm(EN, st.E[kept].T)
            G[p:, :p] = X
            G[:p, p:] = X.T
            G[p:, p:] = _mm(EN, EN.T)
        st.G, st.P = G, np.concatenate([kept, new])
    st.lin = np.ascontiguousarray(st.lin_all[st.P])
    check_pool(st.G, st.lin, st.theta, finite=False)  # G: products of the rows checked in pool_search
    st.lap("gram")


def _ls(st: PoolState, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    u, inS = set_state(st.G, S)
    _local_search(st.G, st.lin, st.one, S, u, inS, st.tol, 100 * st.k + 1000)
    return u, inS, _f(st, S)


def _local_search(G, lin, one, S, u, inS, tol, max_moves) -> int:
    """Best-improvement 1-swaps on the kernel of S's size (:data:`ROW_MOVES_MAX_K`)."""
    ls = row_moves.row_local_search if S.shape[0] <= ROW_MOVES_MAX_K else moves.local_search
    return ls(G, lin, one, S, u, inS, tol, max_moves)


def starts(st: PoolState, first: np.ndarray | None = None, keep: bool = False) -> list[np.ndarray]:
    """Step 2: the start optima (top-k, greedy, seeded random sets; ``first`` first), each ended by
    1-swaps; the best becomes the set. Returns the start optima, in start order."""
    p, k, cfg = st.P.size, st.k, st.cfg
    sets, names = [], []
    if first is not None:
        sets.append(check_set(np.array(first, dtype=np.int64), p, k)), names.append("previous")
    sets.append(np.argsort(-st.lin, kind="stable")[:k].astype(np.int64)), names.append("topk")
    S = np.empty(k, dtype=np.int64)
    u, inS = np.empty(p), np.empty(p, dtype=np.bool_)
    moves.greedy(st.G, st.lin, st.one, S, u, inS)
    sets.append(S), names.append("greedy")
    state, scratch = rng_state(cfg.seed), np.empty(p, dtype=np.int64)
    for r in range(cfg.n_random):
        S = np.empty(k, dtype=np.int64)
        moves.random_set(p, S, scratch, state)
        sets.append(S), names.append(f"random{r}")
    st.lap("starts")
    if k <= ROW_MOVES_MAX_K:
        block = np.stack(sets)  # every start's 1-swap search in one kernel call
        f = np.empty(len(sets))
        row_moves.local_searches(st.G, st.lin, st.one, block, st.tol, 100 * k + 1000, f)
        sets = list(block)
    else:
        f = np.array([_ls(st, S)[2] for S in sets])
    b = int(np.argmax(f))
    if not keep:  # the first search: its starts are the run's diagnostics
        st.names, st.f_starts, st.best_start = names, f, b
    if not keep or f[b] > st.f + st.tol:
        st.S, st.f = sets[b].copy(), float(f[b])
    st.lap("ls")
    return sets


def search(st: PoolState, optima: list[np.ndarray]) -> None:
    """Step 3: where the start optima differ, tabu walks from the ``tabu_walks`` best distinct ones
    (each walk's best set ended by 1-swaps), then 2-swaps on the best set."""
    cfg, k = st.cfg, st.k
    f = np.array([_f(st, S) for S in optima])
    if f.max() - f.min() <= st.tol:
        return
    st.rugged = True
    distinct, seen = [], set()
    for i in np.argsort(-f, kind="stable"):
        key = tuple(sorted(optima[i].tolist()))
        if key not in seen:
            seen.add(key)
            distinct.append(optima[i])
    if cfg.tabu_iters > 0:
        # the first search of a guided pool that is not the whole pool: a second search around its set
        # follows (pool_search, max_phases > 1), so one walk, from the best start optimum, finds the region
        first_guided = st.guided and st.passes <= 1 and not st.whole and cfg.max_phases > 1
        walk = np.ascontiguousarray(np.stack(distinct[: GUIDED_FIRST_WALKS if first_guided else cfg.tabu_walks]))
        found, fw = np.empty_like(walk), np.empty(walk.shape[0])
        if k <= ROW_MOVES_MAX_K:  # every walk, each walk's best set ended by 1-swaps, in one kernel call
            row_moves.tabu_walks(st.G, st.lin, st.one, walk, cfg.tabu_iters, cfg.tabu_tenure_in, cfg.tabu_tenure_out,
                                 st.tol, 100 * k + 1000, found, fw)
        else:
            for r, S in enumerate(walk.copy()):
                u, inS = set_state(st.G, S)
                moves.tabu_walk(st.G, st.lin, st.one, S, u, inS, cfg.tabu_iters, cfg.tabu_tenure_in,
                                cfg.tabu_tenure_out, st.tol, found[r])
                fw[r] = _ls(st, found[r])[2]
        for T, fT in zip(found, fw):
            if fT > st.f + st.tol:
                st.S, st.f, st.phase = T.copy(), float(fT), "+tabu"
        st.lap("tabu")
    if cfg.two_swap:
        S = st.S.copy()
        u, inS = set_state(st.G, S)
        if ms_moves.two_swaps(st.G, st.lin, st.one, S, u, inS, cfg.two_swap_entrants, cfg.two_swap_out, st.tol,
                              cfg.two_swap_moves, 100 * k + 100):
            fS = _f(st, S)
            if fS > st.f + st.tol:
                st.S, st.f, st.phase = S, fS, "+2swap"
        st.lap("two_swap")
    if cfg.perturb_rounds > 0 and cfg.perturb_batch > 0:
        state, idle = rng_state(cfg.seed + 1), 0
        for _ in range(cfg.perturb_rounds):
            st.rounds += 1
            gained = False
            for _ in range(cfg.perturb_batch):
                S = st.S.copy()
                u, inS = set_state(st.G, S)
                moves.perturb(st.G, st.lin, st.one, S, u, inS, cfg.perturb_strength, cfg.perturb_entrants, state)
                _local_search(st.G, st.lin, st.one, S, u, inS, st.tol, 100 * k + 1000)
                fS = _f(st, S)
                if fS > st.f + st.tol:
                    st.S, st.f, st.phase, gained = S, fS, "+perturb", True
            idle = 0 if gained else idle + 1
            if idle >= cfg.patience:
                break
        st.lap("perturb")


def certify(st: PoolState, rows: np.ndarray | None = None, tol: float | None = None) -> Certificate:
    """Step 4: the certificate of the set ``rows`` (default: the current set) over the whole
    pool; it searches nothing (module docstring).

    Every 1-swap gain Delta(i, j) = b_j + a_i + 2 (1-theta) w_ij is at most b_j + max_i a_i +
    2 (1-theta) (w_ij <= 1 for unit rows), so only the rows J that this bound keeps are compared
    exactly. a needs u only at the members (u_S = E_S v_S, from the k rows). Where the bound keeps
    more than ``DENSE_SHARE`` of a seeded row sample (small k, low theta), nearly every row is
    compared anyway: one blocked GEMM E E_S^T then gives u (its row sums) and every gain in a
    single pass over E, instead of a GEMV for u and then that GEMM over the kept rows (two passes).
    """
    E, k, one, cfg = st.E, st.k, st.one, st.cfg
    tol = st.tol if tol is None else tol
    S = st.rows if rows is None else rows
    ES = E[S]
    v = ES.sum(0, dtype=np.float64).astype(E.dtype)
    a = swap_terms(st.lin_all[S], ES.astype(np.float64) @ v.astype(np.float64), st.theta)[1]
    reach = a.max() + 2.0 * one - tol  # Delta(i, j) > tol needs b_j > -reach (within tol of 0: the polish's rows)
    if _dense(st, v, reach):
        u, J, g = _compare_all(st, S, ES, a, reach)
    else:
        u = _mv(E, v).astype(np.float64)
        b = swap_terms(st.lin_all, u, st.theta)[0]
        b[S] = -np.inf
        J = np.flatnonzero(b > -reach)
        h = np.empty(J.size)
        if J.size:
            gains.member_sums_max(_mm(ES, E[J].T), a, 2.0 * one, np.empty(J.size), h)
        g = b[J] + h
    order = _top(g, max(cfg.near_rows, cfg.certificate_entrants, 1))  # best first, O(|J|) selection
    best = float(g[order[0]]) if g.size else -np.inf
    imp = order[g[order] > tol][: cfg.certificate_entrants]
    cert = Certificate(best, J[imp], J[order[: cfg.near_rows]], int(J.size), u, np.sort(S))
    st.passes += 1
    st.lap("certify")
    return cert


def _dense(st: PoolState, v: np.ndarray, reach: float) -> bool:
    """Does the bound keep more than ``DENSE_SHARE`` of the rows? Estimated on ``dense_sample``
    rows of the seeded sample (a binomial share: its standard error is below 0.016 at 1024 rows)."""
    n = st.E.shape[0]
    if n <= 4 * st.cfg.dense_sample:
        return False  # a small pool: the GEMV and the kept rows' product cost less than the estimate matters
    if st.sample is None:
        st.sample = np.sort(np.random.default_rng(st.cfg.seed).choice(n, st.cfg.dense_sample, replace=False))
    R = st.sample[:: max(1, st.sample.size // st.cfg.dense_sample)][: st.cfg.dense_sample]  # spread over E
    b = swap_terms(st.lin_all[R], st.E[R] @ v.astype(np.float64), st.theta)[0]  # 1024 rows: numpy's product
    return bool(np.mean(b > -reach) > DENSE_SHARE)


def _compare_all(st: PoolState, S: np.ndarray, ES: np.ndarray, a: np.ndarray, reach: float):
    """(u, J, g): one pass over E in blocks of ``CERT_BLOCK`` rows, W = E_S E_block^T (k, block: a
    member per row, so that kernels.gains.member_sums_max reads it once, vectorized over the rows);
    u is W's column sums, g_j = max_i Delta(i, j) over the kept rows J (members excluded)."""
    E, one = st.E, st.one
    n = E.shape[0]
    u, g = np.empty(n), np.empty(n)
    keep = np.zeros(n, dtype=np.bool_)
    for s in range(0, n, CERT_BLOCK):
        e = min(n, s + CERT_BLOCK)
        gains.member_sums_max(_mm(ES, E[s:e].T), a, 2.0 * one, u[s:e], g[s:e])
        b = swap_terms(st.lin_all[s:e], u[s:e], st.theta)[0]
        keep[s:e] = b > -reach
        g[s:e] += b
    keep[S] = False
    J = np.flatnonzero(keep)
    return u, J, g[J]


def extend(st: PoolState, cert: Certificate) -> None:
    """A failed certificate: its improving entrants, its nearest rows and the ``extend_rows`` best
    rows join P; the 1-swap search resumes from the set."""
    inP = np.zeros(st.E.shape[0], dtype=np.bool_)
    inP[st.P] = True
    new = np.concatenate([cert.entrants, cert.near])
    new = new[~inP[new]]
    _, first = np.unique(new, return_index=True)
    rows = st.rows
    gram(st, new[np.sort(first)])
    st.S = _positions(st.P, rows)
    st.f, st.phase = _ls(st, st.S)[2], "+pool"
    st.lap("ls")


def _positions(P: np.ndarray, rows: np.ndarray) -> np.ndarray:
    pos = {int(r): i for i, r in enumerate(P)}
    return np.array([pos[int(r)] for r in rows], dtype=np.int64)


def polish(st: PoolState) -> bool:
    """Step 5: best-improvement 1-swaps in float64 at ``polish_gap`` k (k-1) over the set and the
    rows whose gain is within tol of 0 (the float32 search cannot see smaller gains). Returns
    whether the set moved."""
    cfg, k = st.cfg, st.k
    fine = cfg.polish_gap * objective_scale(k)
    if not cfg.polish or fine >= st.tol or st.E.dtype == np.float64:
        return False
    S = st.rows
    if st.whole:
        u = (st.G[:, st.S].sum(1))
        b, a = swap_terms(st.lin, u, st.theta, sq_norms=np.diag(st.G))
        g = b[:, None] + a[None, st.S] + 2.0 * st.one * st.G[:, st.S]
        g[st.S] = -np.inf
        near = st.P[np.flatnonzero(g.max(1) > -st.tol)]
    else:
        cert = st.cert
        if cert is None or cert.best_gain <= -st.tol or not cert.near.size:
            return False
        near = cert.near
    near = near[~np.isin(near, S)]
    if not near.size:
        return False
    R = np.concatenate([S, near])
    ER = st.E[R].astype(np.float64)
    G = _mm(ER, ER.T)
    lin = np.ascontiguousarray(st.lin_all[R])
    T = np.arange(k, dtype=np.int64)
    f0 = float(moves.set_f(G, lin, st.one, T))
    u, inS = set_state(G, T)
    _local_search(G, lin, st.one, T, u, inS, fine, 100 * k + 1000)
    f1 = float(moves.set_f(G, lin, st.one, T))
    st.lap("polish")
    if f1 - f0 > fine:
        new = R[T]
        extra = new[~np.isin(new, st.P)]
        if extra.size:
            gram(st, extra)
        st.S, st.f, st.phase = _positions(st.P, new), _f(st, _positions(st.P, new)), "+polish"
        return True
    return False


def pool_search(E: np.ndarray, c: np.ndarray, k: int, theta: float, tol: float, cfg, *,
                finite_checked: bool = False) -> PoolState:
    """"fw_ws_ms" on one problem on the host (module docstring): returns the final state; its set
    is ``state.rows``. E (n, d) float32 or float64 C order, c (n,) relevance; ``cfg`` the knobs
    at k (WsMultistartConfig.for_k). ``finite_checked``: E's values were already checked finite
    (an Instance's rows are), so the O(n d) scan is skipped (at 10^6 rows it costs seconds)."""
    E = np.ascontiguousarray(E)
    if E.dtype not in (np.float32, np.float64):
        raise ValueError(f"E must be float32 or float64, got {E.dtype}")
    check_array("E", E, E.dtype, 2, finite=not finite_checked)
    c = check_array("c", np.ascontiguousarray(c, dtype=np.float64), np.float64, 1)
    st = PoolState(E, c, int(k), float(theta), float(tol), cfg)
    choose_pool(st)
    search(st, starts(st))
    if st.whole:
        st.optimal = True
    else:
        phases = 1
        while True:
            # a rebuilt pool whose search returned the set a certificate already holds for: no new pass
            if st.cert is None or not st.cert.holds_for(st.rows, st.tol):
                st.cert = certify(st)
            st.optimal = st.cert.best_gain <= st.tol
            if st.passes >= cfg.max_passes:
                break
            # a failed certificate, or a rugged guided first pool: the pool around the set holds the rows
            # its neighbours need; searched again from the set (max_phases searches in all)
            if phases < cfg.max_phases and (not st.optimal or (st.guided and st.rugged and phases == 1)):
                phases += 1
                f0 = st.f
                first = repool(st, st.cert)
                search(st, starts(st, first, keep=True))
                if st.f > f0 + st.tol:
                    st.phase = "+repool"
                continue
            if st.optimal:
                break
            extend(st, st.cert)  # after the last phase: the pool grows until a certificate holds
    if polish(st) and not st.whole:
        st.cert = certify(st)
        while st.cert.best_gain > st.tol and st.passes < cfg.max_passes:
            extend(st, st.cert)
            st.cert = certify(st)
        st.optimal = st.cert.best_gain <= st.tol
    return st
