"""u = G[:, S] 1, f(S), the swap terms and one swap applied, over a pool's Gram matrix G (float64).

``one`` is 1 - theta; ``lin`` is theta (k-1) c. The terms are those of
:func:`divopt_rag.models.ccbqp.swap_terms` with ||e_j||^2 = G_jj, written per row so that a kernel
reads them in O(1): b_j = lin_j - one (2 u_j + G_jj - 1) (row j entering), a_i = -lin_i + one
(2 u_i - G_ii - 1) (member i leaving), Delta(i, j) = b_j + a_i + 2 one G_ij.
"""
from __future__ import annotations

import numpy as np

from .jit import kernel

__all__ = ["fill_u", "set_f", "apply_swap", "enter_term", "leave_term", "member_sums_max", "column_sums", "symmetric_from_lower", "gather_block"]


@kernel("void(float64[:, ::1], int64[::1], float64[::1])")
def fill_u(G, S, u):
    """u = G[:, S] 1 (G symmetric: the sum of the members' rows), in place."""
    p = G.shape[0]
    for j in range(p):
        u[j] = 0.0
    for s in range(S.shape[0]):
        row = G[S[s]]
        for j in range(p):
            u[j] += row[j]


@kernel("float64(float64[:, ::1], float64[::1], float64, int64[::1])")
def set_f(G, lin, one, S):
    """f(S) = sum_S lin + one (|S| - sum_{S x S} G), summed in float64."""
    k = S.shape[0]
    ls = 0.0
    gs = 0.0
    for a in range(k):
        ls += lin[S[a]]
        row = G[S[a]]
        for b in range(k):
            gs += row[S[b]]
    return ls + one * (k - gs)


@kernel("float64(float64[:, ::1], float64[::1], float64, float64[::1], int64)")
def enter_term(G, lin, one, u, j):
    """b_j: the part of a swap's gain that depends on the entering row j only."""
    return lin[j] - one * (2.0 * u[j] + G[j, j] - 1.0)


@kernel("float64(float64[:, ::1], float64[::1], float64, float64[::1], int64)")
def leave_term(G, lin, one, u, i):
    """a_i: the part of a swap's gain that depends on the leaving member i only."""
    return -lin[i] + one * (2.0 * u[i] - G[i, i] - 1.0)


@kernel("void(float64[:, ::1], int64[::1], float64[::1], boolean[::1], int64, int64)")
def apply_swap(G, S, u, inS, pos, j):
    """Member S[pos] leaves, row j enters: S, the membership mask and u updated in O(p)."""
    i = S[pos]
    ri = G[i]
    rj = G[j]
    for t in range(G.shape[0]):
        u[t] += rj[t] - ri[t]
    inS[i] = False
    inS[j] = True
    S[pos] = j


@kernel(["void(float32[:, ::1], float64[::1], float64, float64[::1], float64[::1])",
         "void(float64[:, ::1], float64[::1], float64, float64[::1], float64[::1])"])
def member_sums_max(W, a, two, u, h):
    """For a block of rows j against the k members (W = E_S E_block^T, (k, m), one row per member):
    u_j = sum_i W_ij (float64; u = E v_S on the block) and h_j = max_i (a_i + two W_ij), so that the
    best 1-swap gain with row j entering is b_j + h_j. A member at a time, vectorized over j: one
    pass over W, no (m, k) temporaries."""
    k, m = W.shape
    w = W[0]
    a0 = a[0]
    for j in range(m):
        x = np.float64(w[j])
        u[j] = x
        h[j] = a0 + two * x
    for i in range(1, k):
        w = W[i]
        ai = a[i]
        for j in range(m):
            x = np.float64(w[j])
            u[j] += x
            v = ai + two * x
            y = h[j]
            h[j] = v if v > y else y


@kernel(["void(float32[:, ::1], float64[::1])", "void(float64[:, ::1], float64[::1])"])
def column_sums(X, out):
    """out = X^T 1 in float64, the rows added in order (numpy's ``X.sum(0, dtype=np.float64)``, the
    same additions in the same order), vectorized over the columns."""
    n, d = X.shape
    for j in range(d):
        out[j] = 0.0
    for i in range(n):
        x = X[i]
        for j in range(d):
            out[j] += np.float64(x[j])


@kernel(["void(float32[:, ::1], float64[:, ::1])", "void(float64[:, ::1], float64[:, ::1])"])
def symmetric_from_lower(L, G):
    """G (float64) = the symmetric matrix whose lower triangle (diagonal included) is L's, in 64 x 64
    tiles (a syrk product gives one triangle: the other is its transpose, written tile by tile so
    that the transposed writes stay in the cache)."""
    n = L.shape[0]
    bs = 64
    for r0 in range(0, n, bs):
        r1 = min(n, r0 + bs)
        for c0 in range(0, r1, bs):
            c1 = min(n, c0 + bs)
            for r in range(r0, r1):
                for c in range(c0, min(c1, r + 1)):
                    G[r, c] = np.float64(L[r, c])
            for c in range(c0, c1):
                for r in range(max(r0, c), r1):
                    G[c, r] = G[r, c]


@kernel("void(float64[:, ::1], int64[::1], float64[:, ::1])")
def gather_block(G, idx, out):
    """out[a, b] = G[idx[a], idx[b]] for a, b < len(idx) (out may be larger: its leading block is
    written), a row of G at a time."""
    m = idx.shape[0]
    for a in range(m):
        row = G[idx[a]]
        for b in range(m):
            out[a, b] = row[idx[b]]
