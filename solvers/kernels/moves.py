"""The moves of divopt's default search, as compiled kernels over a pool's Gram matrix.

Each kernel works in place on a set S (k positions in the pool), its membership mask ``inS`` and
u = G[:, S] 1 (:func:`~.gains.fill_u`), which stay consistent after every move (u in O(p) per
swap, :func:`~.gains.apply_swap`). Scratch arrays are allocated once per call, never per move.
Ties go to the first candidate in scan order (lowest row, then lowest member position), so a
kernel is deterministic given its inputs and RNG state. The 2-swaps are
:func:`.ms_moves.two_swaps` (one kernel for the default and "fw_ms").
"""
from __future__ import annotations

import numpy as np

from .gains import apply_swap, enter_term, fill_u, leave_term, set_f
from .jit import kernel
from .rng import below

__all__ = ["greedy", "fill_columns", "swap_column", "best_swap", "search_scratch", "local_search", "tabu_start", "tabu_mark", "tabu_walk", "keep_largest", "perturb", "random_set"]

_G = "float64[:, ::1], float64[::1], float64"  # G, lin, one
_SET = "int64[::1], float64[::1], boolean[::1]"  # S, u, inS


@kernel(f"void({_G}, {_SET})")
def greedy(G, lin, one, S, u, inS):
    """The CCBQP greedy into S (its length is k): each step adds the row of largest marginal gain
    lin_j + one (1 - G_jj - 2 u_j); u and inS are reset first."""
    p = G.shape[0]
    for j in range(p):
        u[j] = 0.0
        inS[j] = False
    for t in range(S.shape[0]):
        best, arg = -np.inf, -1
        for j in range(p):
            if not inS[j]:
                g = lin[j] + one * (1.0 - G[j, j] - 2.0 * u[j])
                if g > best:
                    best, arg = g, j
        S[t] = arg
        inS[arg] = True
        row = G[arg]
        for j in range(p):
            u[j] += row[j]


@kernel("void(float64[:, ::1], int64[::1], float64[:, ::1], float64[::1])")
def fill_columns(G, S, GS, top):
    """GS = G[:, S] (p, k), the members' columns, contiguous per row, and top = the row maxima of GS
    (the gain bound of :func:`best_swap`)."""
    for j in range(G.shape[0]):
        row = G[j]
        m = -np.inf
        for q in range(S.shape[0]):
            GS[j, q] = row[S[q]]
            m = max(m, GS[j, q])
        top[j] = m


@kernel("void(float64[:, ::1], float64[:, ::1], float64[::1], int64, int64)")
def swap_column(G, GS, top, pos, j):
    """GS[:, pos] = G[:, j] after row j entered at position pos (G symmetric: row j), and the row
    maxima ``top`` kept (a row's maximum is recomputed, O(k), only where the leaving entry was it)."""
    row = G[j]
    k = GS.shape[1]
    for t in range(G.shape[0]):
        old = GS[t, pos]
        new = row[t]
        GS[t, pos] = new
        if new >= top[t]:
            top[t] = new
        elif old == top[t]:
            m = -np.inf
            for q in range(k):
                m = max(m, GS[t, q])
            top[t] = m


@kernel(f"float64({_G}, {_SET}, float64[:, ::1], float64[::1], float64[::1], float64[::1], int64[::1], int64[::1], "
        "int64, float64, int64[::1])")
def best_swap(G, lin, one, S, u, inS, GS, top, diag, a, until_in, until_out, step, aspire, out):
    """The best 1-swap of S: returns its gain and writes (member position, entering row) to out.
    GS = G[:, S] with its row maxima ``top`` (:func:`fill_columns`), diag = the diagonal of G.
    A row j with until_in[j] > step may not enter, a member
    i with until_out[i] > step may not leave, unless the swap gains more than ``aspire`` (tabu
    with aspiration; all zeros: none barred). ``a``: scratch (2k,). Returns -inf with
    out = (-1, -1) when every swap is barred."""
    k = S.shape[0]
    p = G.shape[0]
    two = 2.0 * one
    barred_any = False
    a_max = -np.inf
    for q in range(k):
        i = S[q]
        a[q] = -lin[i] + one * (2.0 * u[i] - diag[i] - 1.0)  # leave_term, with G_ii from diag
        a_max = max(a_max, a[q])
        if until_out[S[q]] > step:
            a[k + q] = -np.inf
            barred_any = True
        else:
            a[k + q] = a[q]
    # candidate list by the gain bound Delta(i, j) <= b_j + max_i a_i + 2 one max_i G_ij (the row
    # maxima ``top``): the row of largest b_j first, then only rows whose bound beats the best
    j0, b0 = -1, -np.inf
    for j in range(p):
        if not inS[j]:
            bj = lin[j] - one * (2.0 * u[j] + diag[j] - 1.0)  # enter_term, with G_jj from diag
            if bj > b0:
                j0, b0 = j, bj
    best = -np.inf
    out[0] = -1
    out[1] = -1
    for t in range(-1, p):
        j = j0 if t < 0 else t
        if j < 0 or inS[j] or (t >= 0 and j == j0):
            continue
        bj = lin[j] - one * (2.0 * u[j] + diag[j] - 1.0)
        if bj + a_max + two * top[j] <= best:
            continue
        row = GS[j]
        m = -np.inf  # the best swap with any member (branch-free max)
        for q in range(k):
            m = max(m, a[q] + two * row[q])
        if bj + m <= best:
            continue
        if not bj + m > aspire:  # not allowed by aspiration: the tabu rules apply
            if until_in[j] > step:
                continue
            if barred_any:  # the best swap with an allowed member
                m = -np.inf
                for q in range(k):
                    m = max(m, a[k + q] + two * row[q])
                if bj + m <= best:
                    continue
                for q in range(k):
                    if a[k + q] + two * row[q] == m:
                        best, out[0], out[1] = bj + m, q, j
                        break
                continue
        for q in range(k):
            if a[q] + two * row[q] == m:
                best, out[0], out[1] = bj + m, q, j
                break
    return best


@kernel("Tuple((float64[::1], float64[:, ::1], float64[::1], float64[::1]))(float64[:, ::1], int64[::1])",
        uses=(fill_columns,))
def search_scratch(G, S):
    """The scratch of a 1-swap search from S (:func:`best_swap`'s arrays), allocated once per call:
    (a (2k,), GS = G[:, S] (p, k), top = its row maxima (p,), diag = the diagonal of G (p,))."""
    k = S.shape[0]
    p = G.shape[0]
    a = np.empty(2 * k)
    GS = np.empty((p, k))
    top = np.empty(p)
    fill_columns(G, S, GS, top)
    diag = np.empty(p)
    for j in range(p):
        diag[j] = G[j, j]
    return a, GS, top, diag


@kernel(f"int64({_G}, {_SET}, float64, int64)", uses=(best_swap, apply_swap, search_scratch, swap_column))
def local_search(G, lin, one, S, u, inS, tol, max_moves):
    """Best-improvement 1-swaps while one gains more than tol (at most ``max_moves``); returns the
    moves made."""
    p = G.shape[0]
    a, GS, top, diag = search_scratch(G, S)
    free = np.zeros(p, dtype=np.int64)
    out = np.empty(2, dtype=np.int64)
    moves = 0
    while moves < max_moves:
        g = best_swap(G, lin, one, S, u, inS, GS, top, diag, a, free, free, 0, np.inf, out)
        if not g > tol:
            break
        apply_swap(G, S, u, inS, out[0], out[1])
        swap_column(G, GS, top, out[0], out[1])
        moves += 1
    return moves


@kernel("Tuple((int64[::1], int64[::1], int64[::1], float64))(float64[:, ::1], float64[::1], float64, int64[::1], "
        "int64[::1])", uses=(set_f,))
def tabu_start(G, lin, one, S, best):
    """A tabu walk's state at its start from S: (until_in, until_out (p,) zeros: nothing barred, out
    (2,) for the moves, f(S)); ``best`` = S, the best set seen."""
    p = G.shape[0]
    for q in range(S.shape[0]):
        best[q] = S[q]
    return np.zeros(p, dtype=np.int64), np.zeros(p, dtype=np.int64), np.empty(2, dtype=np.int64), set_f(G, lin, one, S)


@kernel("float64(int64[::1], int64[::1], int64[::1], int64[::1], int64, int64, int64, int64, int64, float64, float64, "
        "float64)")
def tabu_mark(S, best, until_in, until_out, i, j, step, tenure_in, tenure_out, f, f_best, tol):
    """A tabu step's bookkeeping after row i left and row j entered S at ``step`` (f: S's new value):
    i may not re-enter and j may not leave for their tenures; S is copied to ``best`` when it beats
    the best f seen by more than tol. Returns the best f seen."""
    until_in[i] = step + tenure_in + 1
    until_out[j] = step + tenure_out + 1
    if f > f_best + tol:
        for q in range(S.shape[0]):
            best[q] = S[q]
        return f
    return f_best


@kernel(f"float64({_G}, {_SET}, int64, int64, int64, float64, int64[::1])",
        uses=(best_swap, apply_swap, search_scratch, swap_column, tabu_start, tabu_mark))
def tabu_walk(G, lin, one, S, u, inS, iters, tenure_in, tenure_out, tol, best):
    """A 1-swap tabu walk of ``iters`` steps from S: each step takes the best allowed swap, gaining
    or not; a row that left may not re-enter for ``tenure_in`` steps, a row that entered may not
    leave for ``tenure_out`` steps, unless the swap beats the best f seen by more than tol. The
    best set seen is written to ``best`` (k,) and its f returned; S, u, inS end at the last step."""
    a, GS, top, diag = search_scratch(G, S)
    until_in, until_out, out, f = tabu_start(G, lin, one, S, best)
    f_best = f
    for step in range(1, iters + 1):
        g = best_swap(G, lin, one, S, u, inS, GS, top, diag, a, until_in, until_out, step, f_best - f + tol, out)
        if out[0] < 0:
            break
        i = S[out[0]]
        j = out[1]
        apply_swap(G, S, u, inS, out[0], j)
        swap_column(G, GS, top, out[0], j)
        f += g
        f_best = tabu_mark(S, best, until_in, until_out, i, j, step, tenure_in, tenure_out, f, f_best, tol)
    return f_best


@kernel("int64(float64[::1], int64[::1], int64, float64, int64)")
def keep_largest(vals, idx, cnt, v, i):
    """Insert (v, i) into the first ``cnt`` entries of the descending buffer ``vals`` / ``idx`` of
    capacity m = len(vals), dropping the smallest when full; equal values keep the earlier entry
    first. Returns the new count, min(cnt + 1, m)."""
    m = vals.shape[0]
    if cnt == m and not v > vals[m - 1]:
        return cnt
    t = cnt if cnt < m else m - 1
    while t > 0 and vals[t - 1] < v:
        if t < m:
            vals[t] = vals[t - 1]
            idx[t] = idx[t - 1]
        t -= 1
    vals[t] = v
    idx[t] = i
    return cnt + 1 if cnt < m else cnt


@kernel(f"void({_G}, {_SET}, int64, int64, uint64[::1])", uses=(enter_term, apply_swap, below))
def perturb(G, lin, one, S, u, inS, strength, entrants, state):
    """A perturbation: ``strength`` times, a random member leaves and a random row among the
    ``entrants`` of largest b_j (outside S) enters; draws from the RNG state passed in."""
    k = S.shape[0]
    p = G.shape[0]
    m = min(entrants, p - k)
    if m < 1:
        return
    b = np.empty(p)
    for _ in range(strength):
        for j in range(p):
            b[j] = -np.inf if inS[j] else enter_term(G, lin, one, u, j)
        order = np.argsort(-b, kind="mergesort")
        apply_swap(G, S, u, inS, below(state, k), order[below(state, m)])


@kernel("void(int64, int64[::1], int64[::1], uint64[::1])", uses=(below,))
def random_set(p, S, scratch, state):
    """A uniform random k-subset of range(p) into S (k = len(S)): a partial Fisher-Yates shuffle
    of ``scratch`` (p,), drawn from the RNG state passed in."""
    for j in range(p):
        scratch[j] = j
    for t in range(S.shape[0]):
        r = t + below(state, p - t)
        tmp = scratch[t]
        scratch[t] = scratch[r]
        scratch[r] = tmp
        S[t] = scratch[t]


def start(G: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(u, inS) of the set S on G: the state the move kernels keep (host helper)."""
    u = np.empty(G.shape[0])
    fill_u(G, S, u)
    inS = np.zeros(G.shape[0], dtype=np.bool_)
    inS[S] = True
    return u, inS
