"""The default's 1-swap search over the members' rows of G: each step's gains a member at a time.

The same moves as :func:`.moves.best_swap`, :func:`.moves.local_search` and :func:`.moves.tabu_walk`
(same gains, same tabu rules, same ties: the row of largest b_j first, then rows in order, the
lowest member position), computed in another order. :mod:`.moves` scans the pool a row at a
time and skips the rows whose gain bound b_j + max_i a_i + 2 one max_i G_ij cannot beat the best
move; here the members' rows R = G[S, :] (k, p) are held contiguous (G is symmetric: R[q] is the
column of member q), and a step computes, member by member over the whole pool,

    m_j = max_q (a_q + 2 one R[q, j])          (every member)
    m2_j = max_q (a'_q + 2 one R[q, j])        (the members allowed to leave; a'_q = -inf if barred)

in loops that the compiler vectorizes (k p additions in SIMD lanes, no branch per row), then one
pass over the rows picks the best allowed b_j + m_j. At k = 10 on a 300-row pool a step costs a
fraction of a microsecond where the row scan costs several (docs/howto/performance.md). A swap
replaces one row of R (a contiguous copy of G's row j) and updates u in O(p).

The fused kernels run a whole stage in one call: :func:`local_searches` ends every start of a
search by 1-swaps, :func:`tabu_walks` runs every tabu walk and ends each walk's best set by
1-swaps, so a stage costs one call from Python, not one per start or walk.
"""
from __future__ import annotations

import numpy as np

from .gains import fill_u, set_f
from .jit import kernel
from .moves import tabu_mark, tabu_start

__all__ = ["fill_rows", "row_scratch", "load_set", "row_best_swap", "row_local_search", "row_tabu_walk", "local_searches", "tabu_walks"]

_G = "float64[:, ::1], float64[::1], float64"  # G, lin, one
_SET = "int64[::1], float64[::1], boolean[::1]"  # S, u, inS


@kernel("void(float64[:, ::1], int64[::1], float64[:, ::1])")
def fill_rows(G, S, R):
    """R = G[S, :] (k, p): the members' rows of G, one contiguous row per member position."""
    p = G.shape[0]
    for q in range(S.shape[0]):
        row = G[S[q]]
        for j in range(p):
            R[q, j] = row[j]


@kernel("void(float64[::1], float64[:, ::1], float64, int64, float64[::1])")
def first_row(a, R, two, q, m):
    """m_j = a_q + two R[q, j]."""
    r = R[q]
    aq = a[q]
    for j in range(R.shape[1]):
        m[j] = aq + two * r[j]


@kernel("void(float64[::1], float64[:, ::1], float64, int64[::1], int64, int64, float64[::1])")
def max_rows(a, R, two, order, lo, hi, m):
    """m_j = max(m_j, max_t a_q + two R[q, j]) over the members q = order[t], lo <= t < hi (a member at a
    time, vectorized over j)."""
    p = R.shape[1]
    for t in range(lo, hi):
        q = order[t]
        aq = a[q]
        r = R[q]
        for j in range(p):
            v = aq + two * r[j]
            x = m[j]
            m[j] = v if v > x else x


@kernel(f"float64({_G}, {_SET}, float64[:, ::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "float64[::1], int64[::1], int64[::1], int64[::1], int64, float64, int64[::1])", uses=(first_row, max_rows))
def row_best_swap(G, lin, one, S, u, inS, R, diag, a, b, m, m2, order, until_in, until_out, step, aspire, out):
    """The best 1-swap of S (:func:`.moves.best_swap`'s contract and ties): returns its gain and
    writes (member position, entering row) to out; (-inf, (-1, -1)) when every swap is barred.
    R = G[S, :] (:func:`fill_rows`), diag = the diagonal of G. A row j with until_in[j] > step may
    not enter, a member i with until_out[i] > step may not leave, unless the swap gains more than
    ``aspire``. Scratch: a (2k,), b, m, m2 (p,), order (k,) int64."""
    k = S.shape[0]
    p = G.shape[0]
    two = 2.0 * one
    barred_any = False
    for q in range(k):
        i = S[q]
        a[q] = -lin[i] + one * (2.0 * u[i] - diag[i] - 1.0)  # leave_term
        if until_out[i] > step:
            a[k + q] = -np.inf
            barred_any = True
        else:
            a[k + q] = a[q]
    for j in range(p):
        b[j] = lin[j] - one * (2.0 * u[j] + diag[j] - 1.0)  # enter_term
    # m2_j over the members allowed to leave, then m_j = max(m2_j, the barred members' terms): each
    # member's row is read once (a tabu step bars up to tenure_out + 1 members; a pass for m and
    # another for m2 read R twice), a member at a time (max_rows)
    na = 0
    for q in range(k):  # order: the allowed members' positions, then the barred ones'
        if a[k + q] != -np.inf:
            order[na] = q
            na += 1
    nb = na
    for q in range(k):
        if a[k + q] == -np.inf:
            order[nb] = q
            nb += 1
    if barred_any:
        if na > 0:
            first_row(a, R, two, order[0], m2)
            max_rows(a, R, two, order, 1, na, m2)
        else:  # every member barred
            for j in range(p):
                m2[j] = -np.inf
        for j in range(p):
            m[j] = m2[j]
        max_rows(a, R, two, order, na, k, m)
    else:
        first_row(a, R, two, 0, m)
        max_rows(a, R, two, order, 1, k, m)
    # the row of largest b_j first (its ties to the lowest row), then the rows in order
    j0, b0 = -1, -np.inf
    for j in range(p):
        if not inS[j] and b[j] > b0:
            j0, b0 = j, b[j]
    best = -np.inf
    arg, allowed = -1, False  # the best row, and whether its move is taken with the allowed members only
    for t in range(-1, p):
        j = j0 if t < 0 else t
        if j < 0 or inS[j] or (t >= 0 and j == j0):
            continue
        v = b[j] + m[j]
        if v <= best:
            continue
        if not v > aspire:  # not allowed by aspiration: the tabu rules apply
            if until_in[j] > step:
                continue
            if barred_any:
                v2 = b[j] + m2[j]
                if v2 <= best:
                    continue
                best, arg, allowed = v2, j, True
                continue
        best, arg, allowed = v, j, False
    out[0] = -1
    out[1] = -1
    if arg >= 0:
        mj = m2[arg] if allowed else m[arg]
        off = k if allowed else 0
        for q in range(k):
            if a[off + q] + two * R[q, arg] == mj:
                out[0] = q
                out[1] = arg
                break
    return best


@kernel("Tuple((float64[:, ::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], int64[::1]))"
        "(float64[:, ::1], int64[::1])", uses=(fill_rows,))
def row_scratch(G, S):
    """The scratch of a member-row search from S (:func:`row_best_swap`'s arrays), allocated once per
    call: (R = G[S, :] (k, p), diag = the diagonal of G (p,), a (2k,), b, m, m2 (p,), order (k,))."""
    k = S.shape[0]
    p = G.shape[0]
    R = np.empty((k, p))
    fill_rows(G, S, R)
    diag = np.empty(p)
    for j in range(p):
        diag[j] = G[j, j]
    return R, diag, np.empty(2 * k), np.empty(p), np.empty(p), np.empty(p), np.empty(k, dtype=np.int64)


@kernel(f"void(float64[:, ::1], {_SET}, float64[:, ::1], int64, int64)")
def _swap(G, S, u, inS, R, pos, j):
    """Member S[pos] leaves, row j enters: S, u, inS and R's row pos updated (the update of
    :func:`.gains.apply_swap`, u += G_j - G_i, in one pass that reads the leaving row from R and
    copies G_j into its place)."""
    rj = G[j]
    r = R[pos]
    for t in range(G.shape[0]):
        x = rj[t]
        u[t] += x - r[t]
        r[t] = x
    inS[S[pos]] = False
    inS[j] = True
    S[pos] = j


@kernel(f"int64({_G}, {_SET}, float64, int64)", uses=(row_best_swap, row_scratch, _swap))
def row_local_search(G, lin, one, S, u, inS, tol, max_moves):
    """Best-improvement 1-swaps while one gains more than tol (at most ``max_moves``), the moves of
    :func:`.moves.local_search`; returns the moves made. u and inS must be S's (:func:`.moves.start`)."""
    p = G.shape[0]
    k = S.shape[0]
    R, diag, a, b, m, m2, order = row_scratch(G, S)
    free = np.zeros(p, dtype=np.int64)
    out = np.empty(2, dtype=np.int64)
    moves = 0
    while moves < max_moves:
        g = row_best_swap(G, lin, one, S, u, inS, R, diag, a, b, m, m2, order, free, free, 0, np.inf, out)
        if not g > tol:
            break
        _swap(G, S, u, inS, R, out[0], out[1])
        moves += 1
    return moves


@kernel(f"float64({_G}, {_SET}, int64, int64, int64, float64, int64[::1])", uses=(row_best_swap, row_scratch, _swap, tabu_start, tabu_mark))
def row_tabu_walk(G, lin, one, S, u, inS, iters, tenure_in, tenure_out, tol, best):
    """A 1-swap tabu walk of ``iters`` steps from S, the walk of :func:`.moves.tabu_walk` (same
    moves, tenures and aspiration): the best set seen is written to ``best`` (k,) and its f
    returned; S, u, inS end at the last step."""
    R, diag, a, b, m, m2, order = row_scratch(G, S)
    until_in, until_out, out, f = tabu_start(G, lin, one, S, best)
    f_best = f
    for step in range(1, iters + 1):
        g = row_best_swap(G, lin, one, S, u, inS, R, diag, a, b, m, m2, order, until_in, until_out, step,
                          f_best - f + tol, out)
        if out[0] < 0:
            break
        i = S[out[0]]
        j = out[1]
        _swap(G, S, u, inS, R, out[0], j)
        f += g
        f_best = tabu_mark(S, best, until_in, until_out, i, j, step, tenure_in, tenure_out, f, f_best, tol)
    return f_best


@kernel("void(float64[:, ::1], int64[:, ::1], int64, int64[::1], float64[::1], boolean[::1])", uses=(fill_u,))
def load_set(G, sets, r, S, u, inS):
    """S = sets[r], its rows marked in inS (clear before) and u = G[:, S] 1: the state a fused kernel's
    search starts from."""
    for q in range(S.shape[0]):
        S[q] = sets[r, q]
        inS[S[q]] = True
    fill_u(G, S, u)


@kernel(f"void({_G}, int64[:, ::1], float64, int64, float64[::1])", uses=(load_set, row_local_search, set_f))
def local_searches(G, lin, one, sets, tol, max_moves, f):
    """Each row of ``sets`` (r, k) ended by best-improvement 1-swaps (:func:`row_local_search`), in
    place; f (r,) = f of each set after its search."""
    p = G.shape[0]
    k = sets.shape[1]
    u = np.empty(p)
    inS = np.zeros(p, dtype=np.bool_)
    S = np.empty(k, dtype=np.int64)
    for r in range(sets.shape[0]):
        load_set(G, sets, r, S, u, inS)
        row_local_search(G, lin, one, S, u, inS, tol, max_moves)
        for q in range(k):
            sets[r, q] = S[q]
            inS[S[q]] = False
        f[r] = set_f(G, lin, one, S)


@kernel(f"void({_G}, int64[:, ::1], int64, int64, int64, float64, int64, int64[:, ::1], float64[::1])",
        uses=(fill_u, load_set, row_tabu_walk, row_local_search, set_f))
def tabu_walks(G, lin, one, starts, iters, tenure_in, tenure_out, tol, max_moves, found, f):
    """A tabu walk (:func:`row_tabu_walk`) from each row of ``starts`` (w, k), each walk's best set
    ended by best-improvement 1-swaps (at most ``max_moves``): found[r] = that set, f[r] = its f."""
    p = G.shape[0]
    k = starts.shape[1]
    u = np.empty(p)
    inS = np.zeros(p, dtype=np.bool_)
    S = np.empty(k, dtype=np.int64)
    T = np.empty(k, dtype=np.int64)
    for r in range(starts.shape[0]):
        load_set(G, starts, r, S, u, inS)
        row_tabu_walk(G, lin, one, S, u, inS, iters, tenure_in, tenure_out, tol, T)
        for q in range(k):
            inS[S[q]] = False
        for q in range(k):
            inS[T[q]] = True
        fill_u(G, T, u)
        row_local_search(G, lin, one, T, u, inS, tol, max_moves)
        for q in range(k):
            found[r, q] = T[q]
            inS[T[q]] = False
        f[r] = set_f(G, lin, one, T)
