""""fw_ms"'s moves as compiled kernels over a pool's Gram matrix: the MMR and gMMR starts, the
perturbation rounds (iterated local search) and best-improvement 2-swaps (:func:`two_swaps`, also
the 2-swaps of the default's host search, :mod:`divopt_rag.solvers.pool_search`, over its
``two_swap_out`` members of cheapest removal).

Each is a transcription of the lockstep tensor search that "fw_ms" runs on a GPU
(:mod:`divopt_rag.solvers.gram_moves`, :meth:`~divopt_rag.solvers.gram_search.GramSearch.ls`,
:mod:`divopt_rag.solvers.greedy`), in float64 over G = E_P E_P^T: the same moves in the same
order, ties to the first candidate in the same scan order; the gains are float64 here where the
lockstep search rounds them in float32, so a near-tie (within float32 rounding) can go the other
way. As in :mod:`.moves`: the set S (k positions), its mask ``inS`` and u = G[:, S] 1 are kept
consistent after every swap, G[:, S] and its row maxima too (:func:`.moves.swap_column`), the
scratch is allocated once per call, never per move, the random draws are passed in (made on the
host from the seed, as the lockstep search makes them, so both paths draw the same), and the
arrays are checked before a kernel runs (:func:`check_draws`, :mod:`.checks`).
"""
from __future__ import annotations

import numpy as np

from .checks import check_array
from .gains import apply_swap, enter_term, leave_term
from .jit import kernel
from .moves import best_swap, keep_largest, search_scratch, swap_column

__all__ = ["mmr_greedy", "gmmr_greedy", "nth_best", "descend", "perturb_rounds", "two_swaps", "check_draws"]

_G = "float64[:, ::1], float64[::1], float64"  # G, lin, one
_SET = "int64[::1], float64[::1], boolean[::1]"  # S, u, inS
_SCRATCH = "float64[:, ::1], float64[::1], float64[::1], float64[::1]"  # GS, top, diag, a


@kernel("int64(float64[::1], boolean[::1], float64)")
def lowest_within(score, taken, eps):
    """The lowest untaken index whose score is within eps (1 + |max|) of the untaken maximum (the
    tie rule of :func:`divopt_rag.solvers.greedy.lowest_within`)."""
    top = -np.inf
    for j in range(score.shape[0]):
        if not taken[j] and score[j] > top:
            top = score[j]
    thr = top - eps * (1.0 + abs(top))
    for j in range(score.shape[0]):
        if not taken[j] and score[j] >= thr:
            return j
    return -1


@kernel("void(float64[:, ::1], float64[::1], float64, float64, int64[::1])", uses=(lowest_within,))
def mmr_greedy(G, c, theta, eps, S):
    """MMR (:func:`divopt_rag.solvers.greedy.mmr`) into S (length k): first argmax c, then argmax
    theta c_i - (1-theta) max_{j in S} G_ij; ties within eps (1 + |max|) to the lowest index."""
    p = G.shape[0]
    taken = np.zeros(p, dtype=np.bool_)
    near = np.full(p, -np.inf)  # max_{j in S} G_ij
    score = np.empty(p)
    for t in range(S.shape[0]):
        if t == 0:
            j = lowest_within(c, taken, eps)
        else:
            for i in range(p):
                score[i] = theta * c[i] - (1.0 - theta) * near[i]
            j = lowest_within(score, taken, eps)
        S[t] = j
        taken[j] = True
        row = G[j]
        for i in range(p):
            near[i] = max(near[i], row[i])


@kernel("void(float64[:, ::1], float64[::1], float64, float64, int64[::1])", uses=(lowest_within,))
def gmmr_greedy(G, c, theta, eps, S):
    """gMMR (:func:`divopt_rag.solvers.greedy.gmmr`) into S: first argmax c, then argmax
    theta c_i + (1-theta) sqrt(2 - 2 cos(e_i, m_S)), m_S = sum_S e_j, cos = u_i / ||m_S|| with
    u = G[:, S] 1 and ||m_S||^2 = sum_S u_j; ties within eps (1 + |max|) to the lowest index."""
    p = G.shape[0]
    taken = np.zeros(p, dtype=np.bool_)
    u = np.zeros(p)
    score = np.empty(p)
    norm2 = 0.0
    for t in range(S.shape[0]):
        if t == 0:
            j = lowest_within(c, taken, eps)
        else:
            nrm = max(np.sqrt(max(norm2, 0.0)), 1e-12)
            for i in range(p):
                score[i] = theta * c[i] + (1.0 - theta) * np.sqrt(max(2.0 - 2.0 * u[i] / nrm, 0.0))
            j = lowest_within(score, taken, eps)
        S[t] = j
        taken[j] = True
        norm2 += 2.0 * u[j] + G[j, j]
        row = G[j]
        for i in range(p):
            u[i] += row[i]


@kernel("int64(float64[::1], int64[::1], int64, int64)")
def nth_best(v, idx, cnt, t):
    """The entry of rank t (0: the best) among idx[:cnt] in the order (v descending, then the lower
    index first; a strict order), found by quickselect in expected O(cnt); idx[:cnt] is reordered
    in place (the same entries), so further ranks can be asked of it."""
    lo, hi = 0, cnt - 1
    while lo < hi:
        mid = (lo + hi) // 2
        pi = idx[mid]
        pv = v[pi]
        idx[mid] = idx[hi]
        idx[hi] = pi
        store = lo
        for r in range(lo, hi):
            x = idx[r]
            if v[x] > pv or (v[x] == pv and x < pi):
                idx[r] = idx[store]
                idx[store] = x
                store += 1
        idx[hi] = idx[store]
        idx[store] = pi
        if t == store:
            return pi
        if t < store:
            hi = store - 1
        else:
            lo = store + 1
    return idx[lo]


@kernel(f"float64({_G}, {_SET}, {_SCRATCH}, int64, int64, int64[:, ::1], int64[::1])",
        uses=(leave_term, enter_term, apply_swap, swap_column))
def logged_swap(G, lin, one, S, u, inS, GS, top, diag, a, pos, j, journal, jn):
    """S[pos] out, row j in: S, inS, u and GS = G[:, S] (with ``top``) updated, (pos, the row that
    left) appended to ``journal`` at jn[0]; returns the swap's gain b_j + a_i + 2 one G_ij."""
    i = S[pos]
    g = enter_term(G, lin, one, u, j) + leave_term(G, lin, one, u, i) + 2.0 * one * G[i, j]
    journal[jn[0], 0] = pos
    journal[jn[0], 1] = i
    jn[0] += 1
    apply_swap(G, S, u, inS, pos, j)
    swap_column(G, GS, top, pos, j)
    return g


@kernel(f"float64({_G}, {_SET}, {_SCRATCH}, int64[::1], int64[::1], float64, int64, int64[:, ::1], int64[::1])",
        uses=(best_swap, logged_swap))
def descend(G, lin, one, S, u, inS, GS, top, diag, a, free, out, tol, max_moves, journal, jn):
    """Best-improvement 1-swaps (:func:`.moves.best_swap`, nothing barred: ``free`` all zeros) while
    one gains more than tol, at most ``max_moves``, each logged (:func:`logged_swap`); returns the
    total gain. ``a`` (2k,), ``out`` (2,): scratch; ``journal`` needs max_moves free rows."""
    total = 0.0
    for _ in range(max_moves):
        g = best_swap(G, lin, one, S, u, inS, GS, top, diag, a, free, free, 0, np.inf, out)
        if not g > tol:
            break
        logged_swap(G, lin, one, S, u, inS, GS, top, diag, a, out[0], out[1], journal, jn)
        total += g
    return total


@kernel(f"int64({_G}, {_SET}, int64[:, ::1], int64[:, ::1], float64, int64)",
        uses=(search_scratch, enter_term, nth_best, logged_swap, descend, apply_swap, swap_column))
def perturb_rounds(G, lin, one, S, u, inS, out_pos, into_rank, tol, max_moves):
    """Iterated local search from S (a 1-swap optimum), "fw_ms"'s perturbation phase
    (:func:`divopt_rag.solvers.gram_moves.ils` with one copy and no patience stop): round r swaps
    the members at positions out_pos[r] for the rows of ranks into_rank[r] among the entrants in
    the order of b_j at the best set (descending, the lower row first), then makes
    best-improvement 1-swaps (at most ``max_moves``); the result is kept when the round gained more
    than tol, else every swap of the round is undone. Returns the rounds that gained; S, u and
    inS end at the best set. out_pos (R, s): distinct positions per row; into_rank (R, s):
    distinct ranks below p - k per row (:func:`check_draws`)."""
    p = G.shape[0]
    R = out_pos.shape[0]
    s = out_pos.shape[1]
    a, GS, top, diag = search_scratch(G, S)
    free = np.zeros(p, dtype=np.int64)
    out = np.empty(2, dtype=np.int64)
    b = np.empty(p)
    idx = np.empty(p, dtype=np.int64)
    picks = np.empty(s, dtype=np.int64)
    journal = np.empty((s + max_moves, 2), dtype=np.int64)
    jn = np.zeros(1, dtype=np.int64)
    won = 0
    for r in range(R):
        cnt = 0
        for j in range(p):
            if not inS[j]:
                b[j] = enter_term(G, lin, one, u, j)
                idx[cnt] = j
                cnt += 1
        for c in range(s):
            picks[c] = nth_best(b, idx, cnt, into_rank[r, c])
        jn[0] = 0
        gain = 0.0
        for c in range(s):
            gain += logged_swap(G, lin, one, S, u, inS, GS, top, diag, a, out_pos[r, c], picks[c], journal, jn)
        gain += descend(G, lin, one, S, u, inS, GS, top, diag, a, free, out, tol, max_moves, journal, jn)
        if gain > tol:
            won += 1
            continue
        for t in range(jn[0] - 1, -1, -1):  # back to the best set
            apply_swap(G, S, u, inS, journal[t, 0], journal[t, 1])
            swap_column(G, GS, top, journal[t, 0], journal[t, 1])
    return won


@kernel(f"float64({_G}, int64[::1], float64[::1], float64[:, ::1], float64[::1], int64[::1], int64[::1], float64, "
        "float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], int64[::1])",
        uses=(enter_term,))
def best_pair(G, lin, one, S, u, GS, a, J, Q, tol, D, H, GQ, A, B, out):
    """The best 2-swap of S over the entrants J (m rows) and the member positions Q (r): remove
    S[Q[y1]], S[Q[y2]], add J[x1], J[x2], gain

        D(x1, y1) + D(x2, y2) - 2 one (G_j1j2 + G_i1i2 - G_j1i2 - G_j2i1),

    D the 1-swap gains. Returns the best gain above tol and writes (x1, x2, y1, y2) to out (the
    first in (x1 < x2, y1, y2) order), or returns tol with out[0] = -1 when none beats tol.
    Exact, and rarely O(m^2 r^2): per entrant pair the gain splits as A(y1) + B(y2) - 2 one
    (G_j1j2 + G_i1i2), so with g_min = min_{y1 != y2} G_i1i2 the pair is skipped when
    max A + max B - 2 one (G_j1j2 + g_min) cannot beat the best so far, and so is every y1 whose
    A(y1) + max B cannot (the same float operations on larger operands: rounding is monotone,
    so no pair or member that can win is skipped). ``a``: the members' a_i (k,); D, H (m, r),
    GQ (r, r), A, B (r,): scratch; GS = G[:, S], u = G[:, S] 1."""
    m = J.shape[0]
    r = Q.shape[0]
    two = 2.0 * one
    for x in range(m):
        bj = enter_term(G, lin, one, u, J[x])
        row = GS[J[x]]
        for y in range(r):
            H[x, y] = row[Q[y]]  # G[j_x, i_y]
            D[x, y] = bj + a[Q[y]] + two * H[x, y]
    g_min = np.inf
    for y in range(r):
        row = GS[S[Q[y]]]
        for y2 in range(r):
            GQ[y, y2] = row[Q[y2]]
            if y2 != y and GQ[y, y2] < g_min:
                g_min = GQ[y, y2]
    best = tol
    out[0] = -1
    for x1 in range(m):
        for x2 in range(x1 + 1, m):  # (j1, j2) and (j2, j1) with the members swapped: one 2-swap
            ngjj = -two * G[J[x1], J[x2]]
            c = ngjj - two * g_min
            top_a = -np.inf
            top_b = -np.inf
            for y in range(r):
                A[y] = D[x1, y] + two * H[x2, y]
                B[y] = D[x2, y] + two * H[x1, y]
                top_a = max(top_a, A[y])
                top_b = max(top_b, B[y])
            if (top_a + top_b) + c <= best:
                continue
            for y1 in range(r):
                if (A[y1] + top_b) + c <= best:
                    continue
                row = GQ[y1]
                for y2 in range(r):
                    if y2 == y1:
                        continue
                    g = (A[y1] + B[y2]) + (ngjj - two * row[y2])
                    if g > best:
                        best = g
                        out[0] = x1
                        out[1] = x2
                        out[2] = y1
                        out[3] = y2
    return best


@kernel(f"int64({_G}, {_SET}, int64, int64, float64, int64, int64)",
        uses=(search_scratch, enter_term, leave_term, keep_largest, best_pair, logged_swap, descend))
def two_swaps(G, lin, one, S, u, inS, entrants, members, tol, max_moves, ls_moves):
    """Best-improvement 2-swaps of S (:func:`best_pair`), each followed by best-improvement 1-swaps
    (at most ``ls_moves``), while one gains more than tol, at most ``max_moves`` of them
    (:func:`divopt_rag.solvers.gram_moves.two_swap`): the entrants are the ``entrants`` rows of
    largest best 1-swap gain (ties: the lower row), the members the ``members`` of largest a_i
    (ties: the lower position; all k when members >= k), taken in position order. Returns the
    2-swaps made; S, u, inS end at the last set."""
    k = S.shape[0]
    p = G.shape[0]
    m = min(entrants, p - k)
    r = min(members, k)
    if m < 2 or r < 2 or max_moves < 1:
        return 0
    two = 2.0 * one
    a2, GS, top, diag = search_scratch(G, S)
    a = np.empty(k)
    J = np.empty(m, dtype=np.int64)
    Jv = np.empty(m)
    Q = np.empty(r, dtype=np.int64)
    Qv = np.empty(r)
    D = np.empty((m, r))
    H = np.empty((m, r))
    GQ = np.empty((r, r))
    A = np.empty(r)
    B = np.empty(r)
    pick = np.empty(4, dtype=np.int64)
    free = np.zeros(p, dtype=np.int64)
    out = np.empty(2, dtype=np.int64)
    journal = np.empty((ls_moves + 2, 2), dtype=np.int64)
    jn = np.zeros(1, dtype=np.int64)
    made = 0
    while made < max_moves:
        for q in range(k):
            a[q] = leave_term(G, lin, one, u, S[q])
        cnt = 0  # the m entrants of largest best 1-swap gain
        for j in range(p):
            if inS[j]:
                continue
            bj = enter_term(G, lin, one, u, j)
            row = GS[j]
            v = -np.inf
            for q in range(k):
                v = max(v, a[q] + two * row[q])
            cnt = keep_largest(Jv, J, cnt, bj + v, j)
        if r == k:
            for q in range(k):
                Q[q] = q
        else:  # the r members of largest a, then in position order
            cr = 0
            for q in range(k):
                cr = keep_largest(Qv, Q, cr, a[q], q)
            for y in range(1, r):
                t = y
                while t > 0 and Q[t - 1] > Q[t]:
                    Q[t - 1], Q[t] = Q[t], Q[t - 1]
                    t -= 1
        if not best_pair(G, lin, one, S, u, GS, a, J, Q, tol, D, H, GQ, A, B, pick) > tol or pick[0] < 0:
            break
        jn[0] = 0
        logged_swap(G, lin, one, S, u, inS, GS, top, diag, a2, Q[pick[2]], J[pick[0]], journal, jn)
        logged_swap(G, lin, one, S, u, inS, GS, top, diag, a2, Q[pick[3]], J[pick[1]], journal, jn)
        descend(G, lin, one, S, u, inS, GS, top, diag, a2, free, out, tol, ls_moves, journal, jn)
        made += 1
    return made


def check_draws(out_pos: object, into_rank: object, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The perturbation draws checked for :func:`perturb_rounds`: out_pos and into_rank (R, s) int64
    C order, s <= k, each row of out_pos distinct positions in [0, k), each row of into_rank
    distinct ranks in [0, m) (m: the entrants drawn from, at most p - k); else ValueError."""
    out_pos = check_array("out_pos", out_pos, np.int64, 2)
    into_rank = check_array("into_rank", into_rank, np.int64, 2)
    if out_pos.shape != into_rank.shape or out_pos.shape[1] > k:
        raise ValueError(f"out_pos and into_rank must be (rounds, s) with s <= k = {k}, got {out_pos.shape} and "
                         f"{into_rank.shape}")
    for name, x, hi in (("out_pos", out_pos, k), ("into_rank", into_rank, m)):
        if x.size and (x.min() < 0 or x.max() >= hi or (np.diff(np.sort(x, 1), axis=1) == 0).any()):
            raise ValueError(f"{name} must hold distinct values in [0, {hi}) per row")
    return out_pos, into_rank
