"""Valid inequalities on the lifted matrix (McCormick and triangle cuts) with Lagrange multipliers.

With Y_x = [[1, x^T], [x, x x^T]] for a binary x, Y_0i = x_i and Y_ij = x_i x_j. The cut families
(i, j, k distinct items, written on binaries; each side checked case by case):

* "mc"   (McCormick / RLT upper)   Y_ij - Y_0i <= 0                       x_i x_j <= x_i.
* "tri1" (triangle, apex i)        Y_ij + Y_ik - Y_jk - Y_0i <= 0         x_i = 0: -x_j x_k <= 0;
                                                                          x_i = 1: x_j + x_k - x_j x_k <= 1.
* "tri2"                           Y_0i + Y_0j + Y_0k - Y_ij - Y_ik - Y_jk <= 1
                                   (s - s(s-1)/2 <= 1 for s = x_i + x_j + x_k in {0, 1, 2, 3}).

For multipliers gamma >= 0, D = sum_t gamma_t T_t and d0 = sum_t gamma_t d_t satisfy
<D, Y_x> <= d0 at every lifted feasible binary, which is exactly what
:func:`divopt_rag.models.qcr.qcr_from_dual` needs (``valid_inequality=(D, d0)``) to keep its function
an upper bound of g. So any gamma >= 0 gives a valid bound; the multipliers are only tuned.

Tuning (Lagrangian relaxation of the cuts, in the manner of BiqBin's bundle over triangle
multipliers, here with projected subgradient steps): the node bound
phi(gamma) = gamma^T d + DNN(Chat - T*(gamma)) is convex in gamma with subgradient d - T(Y(gamma));
with Y from the ADMM, :meth:`CutPool.step` moves gamma <- max(0, gamma + eta (T(Y) - d)) with
Polyak's step eta = (phi - target) / ||T(Y) - d||^2 towards the incumbent value (the B&B only needs
phi <= incumbent), separates the most violated new cuts and drops inactive ones.
"""
from __future__ import annotations

import time

import numpy as np

__all__ = ["CutPool"]


_MC, _TRI1, _TRI2 = 0, 1, 2
_FAMILY = {"mc": _MC, "tri1": _TRI1, "tri2": _TRI2}


class CutPool:
    """A working set of cuts on a node's lifted matrix ((p+1) x (p+1)), with multipliers.

    Cut t is (family, i, j, k) on positions 1..p of the lifted matrix (0 is the constant row);
    stored as integer arrays, evaluated and adjoined by fancy indexing (no per-cut Python work).
    """

    def __init__(self, p: int) -> None:
        self.p = int(p)
        self.fam = np.zeros(0, dtype=np.int64)
        self.ijk = np.zeros((0, 3), dtype=np.int64)
        self.gamma = np.zeros(0)

    def __len__(self) -> int:
        return int(self.fam.size)

    def _codes(self, fam: np.ndarray, ijk: np.ndarray) -> np.ndarray:
        P = self.p + 1
        return ((fam * P + ijk[:, 0]) * P + ijk[:, 1]) * P + ijk[:, 2]

    def _rhs(self) -> np.ndarray:
        return (self.fam == _TRI2).astype(np.float64)

    def violation(self, Y: np.ndarray) -> np.ndarray:
        """T(Y) - d for the cuts in the pool (> 0: violated)."""
        if not len(self):
            return np.zeros(0)
        i, j, k = self.ijk.T
        yij, y0i = Y[i, j], Y[0, i]
        out = np.empty(len(self))
        f = self.fam
        m = f == _MC
        out[m] = yij[m] - y0i[m]
        m = f == _TRI1
        out[m] = yij[m] + Y[i[m], k[m]] - Y[j[m], k[m]] - y0i[m]
        m = f == _TRI2
        out[m] = y0i[m] + Y[0, j[m]] + Y[0, k[m]] - yij[m] - Y[i[m], k[m]] - Y[j[m], k[m]] - 1.0
        return out

    def shift(self) -> tuple[np.ndarray, float] | None:
        """(D, d0) = (sum gamma_t T_t, sum gamma_t d_t) with D symmetric, or None when gamma = 0."""
        act = self.gamma > 0
        if not act.any():
            return None
        g, f, (i, j, k) = self.gamma[act], self.fam[act], self.ijk[act].T
        N = self.p + 1
        D = np.zeros((N, N))
        # each term c * Y_ab enters D as c/2 at (a, b) and (b, a); add one triangle, symmetrize after
        def add(a, b, c):
            np.add.at(D, (a, b), c)
        m, t1, t2 = f == _MC, f == _TRI1, f == _TRI2
        zero = np.zeros_like(i)
        add(i[m], j[m], g[m])
        add(zero[m], i[m], -g[m])
        add(i[t1], j[t1], g[t1])
        add(i[t1], k[t1], g[t1])
        add(j[t1], k[t1], -g[t1])
        add(zero[t1], i[t1], -g[t1])
        for a in (i, j, k):
            add(zero[t2], a[t2], g[t2])
        add(i[t2], j[t2], -g[t2])
        add(i[t2], k[t2], -g[t2])
        add(j[t2], k[t2], -g[t2])
        D = 0.5 * (D + D.T)
        return D, float(g[t2].sum())

    # --- separation and multiplier steps -------------------------------------------------------
    def separate(self, Y: np.ndarray, max_new: int, families=("mc", "tri1", "tri2"), tol: float = 1e-6,
                 support_tol: float = 1e-3, deadline: float | None = None) -> int:
        """Add up to ``max_new`` of the most violated cuts (by violation) not yet in the pool.

        Enumerates every McCormick cut (p^2) and every triangle on the items with Y_0i > support_tol
        (q^3/2 + q^3/6 for q such items), vectorized in blocks of apexes; past ``deadline``
        (``time.perf_counter()``) no further block is enumerated (any subset of valid cuts is valid).
        """
        p = self.p
        if p < 2 or max_new <= 0:
            return 0
        X, x = Y[1:, 1:], Y[0, 1:]
        cand_v, cand_f, cand_ijk = [], [], []

        def keep_top(vals: np.ndarray, fam: int, idx_fn) -> None:
            flat = vals.ravel()
            r = min(max_new, flat.size)
            top = np.argpartition(-flat, r - 1)[:r]
            top = top[flat[top] > tol]
            if top.size:
                cand_v.append(flat[top])
                cand_f.append(np.full(top.size, fam))
                cand_ijk.append(idx_fn(top))

        eye = np.eye(p, dtype=bool)
        if "mc" in families:
            V = np.where(eye, -np.inf, X - x[:, None])
            keep_top(V, _MC, lambda t: np.stack([t // p + 1, t % p + 1, np.zeros_like(t)], 1))
        # a triangle cut can only be violated when its items carry mass (for tri1: Y_ij, Y_ik <=
        # ~x_i; for tri2 the sum of x's must exceed 1): enumerate triples of the support only
        sup = np.flatnonzero(x > support_tol)
        q = sup.size
        if q >= 3:
            Xs, xs = X[np.ix_(sup, sup)], x[sup]
            lower = np.tril(np.ones((q, q), dtype=bool))  # mask j >= k
            block = max(1, 2_000_000 // (q * q))
            for i0 in range(0, q, block):
                if deadline is not None and time.perf_counter() > deadline:
                    break
                ii = np.arange(i0, min(q, i0 + block))
                if "tri1" in families:
                    V = Xs[ii][:, :, None] + Xs[ii][:, None, :] - Xs[None, :, :] - xs[ii][:, None, None]
                    V[:, lower] = -np.inf
                    V[np.arange(ii.size), ii, :] = -np.inf
                    V[np.arange(ii.size), :, ii] = -np.inf
                    keep_top(V, _TRI1, lambda t, ii=ii: np.stack(
                        [sup[ii[t // (q * q)]] + 1, sup[(t // q) % q] + 1, sup[t % q] + 1], 1))
                if "tri2" in families:
                    V = (xs[ii][:, None, None] + xs[None, :, None] + xs[None, None, :] - Xs[ii][:, :, None]
                         - Xs[ii][:, None, :] - Xs[None, :, :] - 1.0)
                    V[:, lower] = -np.inf
                    jj = np.arange(q)
                    V[(jj[None, :] <= ii[:, None])] = -np.inf  # i < j (then j < k)
                    keep_top(V, _TRI2, lambda t, ii=ii: np.stack(
                        [sup[ii[t // (q * q)]] + 1, sup[(t // q) % q] + 1, sup[t % q] + 1], 1))
        if not cand_v:
            return 0
        v = np.concatenate(cand_v)
        f = np.concatenate(cand_f)
        ijk = np.concatenate(cand_ijk).astype(np.int64)
        new = ~np.isin(self._codes(f, ijk), self._codes(self.fam, self.ijk))
        v, f, ijk = v[new], f[new], ijk[new]
        order = np.argsort(-v, kind="stable")[:max_new]
        self.fam = np.concatenate([self.fam, f[order]])
        self.ijk = np.concatenate([self.ijk, ijk[order]])
        self.gamma = np.concatenate([self.gamma, np.zeros(order.size)])
        return int(order.size)

    def step(self, Y: np.ndarray, value: float, target: float, scale: float = 1.0) -> None:
        """Projected subgradient step with Polyak's step size towards ``target``, then drop cuts with
        gamma = 0 that Y satisfies."""
        if not len(self):
            return
        s = self.violation(Y)
        s_eff = np.where((self.gamma > 0) | (s > 0), s, 0.0)
        nrm = float(s_eff @ s_eff)
        if nrm > 0 and value > target:
            eta = scale * (value - target) / nrm
            self.gamma = np.maximum(0.0, self.gamma + eta * s_eff)
        keep = (self.gamma > 0) | (s > 1e-9)
        if not keep.all():
            self.fam, self.ijk, self.gamma = self.fam[keep], self.ijk[keep], self.gamma[keep]

    def restrict(self, keep: np.ndarray) -> "CutPool":
        """The cuts whose items all stay free (``keep``: kept positions 0..p-1), renumbered."""
        out = CutPool(len(keep))
        if not len(self):
            return out
        new_pos = np.full(self.p + 1, -1, dtype=np.int64)
        new_pos[np.asarray(keep, dtype=np.int64) + 1] = np.arange(1, len(keep) + 1)
        new_pos[0] = 0
        ijk = new_pos[self.ijk]
        ok = (ijk[:, 0] > 0) & (ijk[:, 1] > 0) & ((ijk[:, 2] > 0) | (self.fam == _MC))
        out.fam, out.ijk, out.gamma = self.fam[ok], ijk[ok], self.gamma[ok].copy()
        return out
