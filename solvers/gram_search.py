"""Swap search on small pools through their Gram matrices, for many sets and many problems at once.

For a pool of p rows (p a few hundred: the candidate pool of "fw_ms" / "fw_ws_ms", or a whole
small pool) the Gram matrix G = E E^T (p x p, float64) turns every swap gain into a few array
operations. With u = G[:, S].sum(1) the 1-swap gains are those of
:func:`divopt_rag.models.ccbqp.swap_terms` with the true squared norms G_ii:

    Delta(i, j) = f(S - i + j) - f(S) = b_j + a_i + 2 (1-theta) G_ij,      i in S, j not in S.

A :class:`GramSearch` holds B problems of the same size (p rows, k picks; B = 1 for one
instance, B = queries x thetas for a sweep), each with its own Gram matrix, relevance and theta.
Every search runs on many sets at once, each tagged with its problem: the gains of M sets are one
(M, k, p) array per step, and each set follows exactly the swaps of its own single run, so a
problem searched alone or inside a batch ends at the same sets. Provided:

* :meth:`ls_batch`  best-improvement 1-swap local search;
* :meth:`fw`        Frank-Wolfe on the relaxation from many starting points: the FW kernel of
                    :mod:`divopt_rag.solvers.frank_wolfe` on each problem's pool rows;
* :meth:`greedy`    the greedy on f itself;
* :meth:`ils_batched` perturbation search (rounds of several perturbations, a patience stop);
  :meth:`two_swap` best-improvement 2-swaps;
* :meth:`tabu_batch` 1-swap tabu search (losing swaps allowed, recent moves barred).

The arrays are float64 numpy on the host: p is a few hundred, so one host copy of the p rows
(made once) is cheaper than device kernels whose launch cost exceeds their work.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from divopt_rag.models.ccbqp import gram_objective, linear_term, pair_weight, set_value, swap_terms
from divopt_rag.models.kernels import gather_rows

from .frank_wolfe import fw_rows

__all__ = ["GramSearch"]


class GramSearch:
    """Swap search on B problems of p rows each, through their Gram matrices.

    rows : (p, d) or (B, p, d) tensor/array of the pools' rows; relevance : (p,) or (B, p);
    theta : a float or (B,) trade-offs; k : picks per problem; tol : minimum accepted gain.
    """

    def __init__(self, rows: Any, relevance: Any, theta: Any, k: int, tol: float):
        R = torch.as_tensor(rows).to(torch.float64).cpu()
        if R.ndim == 2:
            R = R.unsqueeze(0)
        self.rows = R.numpy()  # (B, p, d): the pools' rows, for Frank-Wolfe
        self.G = torch.bmm(R, R.transpose(1, 2)).numpy()  # torch's BLAS: one thread inside single_thread()
        self.B, self.p = self.G.shape[0], self.G.shape[1]
        self.diag = np.diagonal(self.G, axis1=1, axis2=2).copy()
        self._rows = self.G.reshape(self.B * self.p, self.p)  # row b p + i: G[b, i, :]
        self.th = np.broadcast_to(np.asarray(theta, dtype=np.float64), (self.B,)).copy()
        self.two = pair_weight(self.th)
        self.k, self.tol = int(k), float(tol)
        c = torch.as_tensor(relevance).to(torch.float64).cpu().numpy().reshape(self.B, self.p)
        self.relevance = c
        self.lin = linear_term(c, self.th[:, None], self.k)
        # the swap terms at u = 0: b = b0 - 2 (1-theta) u and a = a0 + 2 (1-theta) u (linear in u)
        self._b0, self._a0 = swap_terms(self.lin, 0.0, self.th[:, None], sq_norms=self.diag)

    @classmethod
    def from_instance(cls, inst: Any, tol: float, rows: torch.Tensor | None = None) -> "GramSearch":
        """The instance's problem on all its rows, or on the pool ``rows`` (indices into inst.E)."""
        if rows is None:
            return cls(inst.E, inst.relevance, inst.theta, inst.k, tol)
        return cls(gather_rows(inst.E, rows), inst.relevance.index_select(0, rows), inst.theta, inst.k, tol)

    def _prob(self, prob: Any, m: int) -> np.ndarray:
        if prob is None:
            if self.B != 1:
                raise ValueError(f"prob (the problem of each set) is required with B = {self.B} problems")
            return np.zeros(m, dtype=np.int64)
        return np.broadcast_to(np.asarray(prob, dtype=np.int64), (m,))

    # --- objective and gains --------------------------------------------------------------
    def f(self, S: Any, prob: int = 0) -> float:
        """f(S) of problem ``prob`` from its G (float64), :func:`divopt_rag.models.ccbqp.gram_objective`."""
        return gram_objective(self.lin[prob], self.G[prob], np.asarray(S, dtype=np.int64), self.th[prob])

    def f_many(self, S: np.ndarray, prob: np.ndarray) -> np.ndarray:
        """f of each set S[m] (M, k) under problem prob[m]: :meth:`f` as one array expression (the
        same sums in the same order, so equal to it bit for bit)."""
        th = self.th[prob]
        GSS = self.G[prob[:, None, None], S[:, :, None], S[:, None, :]]  # (M, k, k)
        return set_value(self.lin[prob[:, None], S].sum(1), GSS.sum((1, 2)), th, S.shape[1])

    def gains(self, S: Any, prob: int = 0) -> np.ndarray:
        """(p, k) matrix of Delta(S[q] out, j in) for problem ``prob``; rows j in S are -inf."""
        S = np.asarray(S, dtype=np.int64)[None, :]
        pm = np.array([prob])
        H, b = self._split_gains(self._columns(S, pm), S, pm)
        H += b[:, None, :]
        return H[0].T

    def _columns(self, S: np.ndarray, pm: np.ndarray) -> np.ndarray:
        """(M, k, p): G[pm[m], S[m, q], :], the columns of the members (rows of the symmetric G,
        so each is one contiguous copy)."""
        return self._rows[pm[:, None] * self.p + S]

    def _split_gains(self, GT: np.ndarray, S: np.ndarray, pm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(H, b) with Delta(S[m, q] out, j in) = H[m, q, j] + b[m, j] for M sets S (M, k) under
        problems pm (M,), from their columns GT = :meth:`_columns` (M, k, p): H = a_i + 2 (1-theta)
        G_ij (M, k, p), b (M, p) with the members at -inf. u and the swap terms are recomputed from
        the exact columns at every call, so rounding never accumulates."""
        ar = np.arange(S.shape[0])[:, None]
        two = self.two[pm][:, None]
        u = GT.sum(1)  # (M, p)
        b = self._b0[pm] - two * u
        b[ar, S] = -np.inf
        H = GT * two[:, :, None]
        H += (self._a0[pm[:, None], S] + two * u[ar, S])[:, :, None]
        return H, b

    @staticmethod
    def _best_split(H: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(j, q, gain) of each set's largest gain H[m, q, j] + b[m, j] (:meth:`_split_gains`);
        ties to the first (entrant, position). b is added after the max over members: the same
        value, since rounding is monotone."""
        ar = np.arange(H.shape[0])
        top = H.max(1)  # (M, p): best gain per entrant
        top += b
        j = top.argmax(1)
        return j, H[ar, :, j].argmax(1), top[ar, j]

    # --- 1-swap local search ----------------------------------------------------------------
    def ls(self, S: Any, prob: int = 0, max_swaps: int = 1000) -> tuple[np.ndarray, float]:
        """Best-improvement 1-swaps from one set until no gain exceeds tol; (set, f)."""
        Sb, fb = self.ls_batch(np.asarray(S, dtype=np.int64)[None, :], np.array([prob]), max_swaps)
        return Sb[0], float(fb[0])

    def ls_batch(self, S: Any, prob: Any = None, max_swaps: int = 1000) -> tuple[np.ndarray, np.ndarray]:
        """Best-improvement 1-swap local search on M sets at once: S (M, k), prob (M,) their
        problems (default: problem 0 when B = 1) -> (sets, f values).

        Each step forms the gains of every still-moving set as one (M', k, p) array (u and the swap
        terms recomputed from G, so rounding never accumulates) and applies each set's best swap
        (ties: the first in (entrant, position) order, as a single run would). A set stops when
        its best gain is <= tol or after ``max_swaps`` swaps.
        """
        S = np.array(S, dtype=np.int64, copy=True)
        if S.ndim != 2 or S.shape[1] != self.k:
            raise ValueError(f"S must have shape (M, {self.k}), got {S.shape}")
        pm = self._prob(prob, S.shape[0]).copy()
        active = np.arange(S.shape[0])
        GT = self._columns(S, pm)  # (A, k, p) columns of the still-moving sets, compacted as sets stop
        for _ in range(int(max_swaps)):
            if active.size == 0:
                break
            j, q, gain = self._best_split(*self._split_gains(GT, S[active], pm[active]))
            move = gain > self.tol
            if not move.any():
                break
            j, q, mv = j[move], q[move], active[move]
            S[mv, q] = j
            if not move.all():
                GT = GT[move]
            GT[np.arange(mv.size), q] = self._rows[pm[mv] * self.p + j]
            active = mv
        return S, self.f_many(S, pm)

    # --- constructions -----------------------------------------------------------------------
    def greedy(self) -> np.ndarray:
        """(B, k): the greedy on f itself for every problem: add the item of largest marginal gain
        l_j - (1-theta)(2 u_j + G_jj - 1) (the b_j of :func:`swap_terms` at u = G[:, S].sum(1));
        ties to the lowest index."""
        u = np.zeros((self.B, self.p))
        taken = np.zeros((self.B, self.p), dtype=bool)
        picks = np.empty((self.B, self.k), dtype=np.int64)
        ar = np.arange(self.B)
        for t in range(self.k):
            score = swap_terms(self.lin, u, self.th[:, None], sq_norms=self.diag)[0]
            score[taken] = -np.inf
            j = score.argmax(1)
            picks[:, t] = j
            taken[ar, j] = True
            u += self.G[ar, :, j]
        return picks

    def fw(self, X0: Any, *, theta: Any = None, relax_penalty: float = 2.0, max_iter: int = 1000,
           tol: float | None = None) -> np.ndarray:
        """Frank-Wolfe on the relaxation f_lambda from R starting points per problem; (B, R, k).

        X0 : (B, R, p) feasible points (0 <= x <= 1, sum k). theta : optional (B,) trade-offs
        replacing the problems' own (a continuation path). Each problem's R points run through
        :func:`divopt_rag.solvers.frank_wolfe.fw_rows` (the one FW kernel) on its pool's rows, until
        every gap is <= tol (default a normalized gap of 1e-6) or ``max_iter``. Returns the top-k
        of each final x (ties to the lower index): starting sets for the local search, which
        makes them 1-swap optimal.
        """
        X = np.asarray(X0, dtype=np.float64)
        B, R, k = X.shape[0], X.shape[1], self.k
        th = self.th if theta is None else np.broadcast_to(np.asarray(theta, dtype=np.float64), (B,))
        lin = self.lin if theta is None else linear_term(self.relevance, th[:, None], k)
        order = np.empty((B, R, k), dtype=np.int64)
        for b in range(B):
            res = fw_rows(self.rows[b], X[b], np.broadcast_to(lin[b], (R, self.p)), float(th[b]), k,
                          relax_penalty=relax_penalty, max_iter=max_iter, tol=tol)
            order[b] = np.argsort(-res.x, axis=1, kind="stable")[:, :k]
        return order

    # --- perturbation ----------------------------------------------------------------------
    def _entrants(self, S: np.ndarray, m: int, prob: int = 0) -> np.ndarray:
        """The m best entrants by b_j (the swap score at S), in a stable order."""
        b = swap_terms(self.lin[prob], self.G[prob][:, S].sum(1), self.th[prob])[0]
        b[S] = -np.inf
        return np.argsort(-b, kind="stable")[:m]

    def ils_batched(self, S: Any, f: Any, *, batch: int, strength: int, entrants: int, patience: int,
                    max_rounds: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Iterated local search in rounds, all problems at once: each round perturbs each
        problem's best set ``batch`` ways (``strength`` random members out, random entrants among
        the ``entrants`` best by b_j in), runs the local search on all of them together, and keeps
        a problem's best result if it gains more than tol. A problem stops after ``patience``
        rounds in a row without a gain or ``max_rounds`` rounds.

        S (B, k) 1-swap optimal sets and f (B,) their values -> (sets, values, rounds per
        problem). Each problem draws from its own generator seeded with ``seed``, so its result
        does not depend on the other problems of the batch.
        """
        S = np.array(S, dtype=np.int64, copy=True)
        f = np.array(f, dtype=np.float64, copy=True)
        B, k = S.shape
        m = min(self.p - k, int(entrants))
        strength = max(1, min(int(strength), k, m))
        rounds = np.zeros(B, dtype=np.int64)
        if m < 1 or batch < 1:
            return S, f, rounds
        rngs = [np.random.default_rng(seed) for _ in range(B)]
        idle = np.zeros(B, dtype=np.int64)
        while True:
            act = np.flatnonzero((rounds < max_rounds) & (idle < patience))
            if act.size == 0:
                break
            T = np.repeat(S[act], batch, axis=0)
            for r, b_ in enumerate(act):
                cand = self._entrants(S[b_], m, b_)
                for t in range(batch):
                    row = r * batch + t
                    T[row, rngs[b_].choice(k, size=strength, replace=False)] = rngs[b_].choice(
                        cand, size=strength, replace=False)
            T, fT = self.ls_batch(T, np.repeat(act, batch))
            fT = fT.reshape(act.size, batch)
            i = fT.argmax(1)
            rounds[act] += 1
            for r, b_ in enumerate(act):
                if fT[r, i[r]] > f[b_] + self.tol:
                    S[b_], f[b_], idle[b_] = T[r * batch + i[r]], fT[r, i[r]], 0
                else:
                    idle[b_] += 1
        return S, f, rounds

    # --- tabu search --------------------------------------------------------------------------
    def tabu_batch(self, S: Any, f: Any, prob: Any = None, *, iters: int, tenure_in: int,
                   tenure_out: int) -> tuple[np.ndarray, np.ndarray]:
        """1-swap tabu search from M sets at once (the classic move of tabu search for the
        maximum-diversity problem): every step makes the best swap that is not tabu, even a
        losing one, so the search walks out of the start's basin instead of stopping at its
        1-swap optimum.

        A row that leaves may not re-enter for ``tenure_in`` steps, a row that enters may not
        leave for ``tenure_out`` steps; a tabu swap is allowed when it would beat the best set
        seen (aspiration). Ties go to the first (entrant, position), as in :meth:`ls_batch`;
        nothing is random, and each set follows its single run whatever the batch. S (M, k)
        and f (M,) the starts and their values, prob (M,) their problems. Runs ``iters`` steps
        and returns the best set met by each walk and its f (:meth:`f_many`; the start when no
        step beat it by more than tol).
        """
        S = np.array(S, dtype=np.int64, copy=True)
        if S.ndim != 2 or S.shape[1] != self.k:
            raise ValueError(f"S must have shape (M, {self.k}), got {S.shape}")
        M, p = S.shape[0], self.p
        pm = self._prob(prob, M).copy()
        best, fbest = S.copy(), np.array(f, dtype=np.float64, copy=True).reshape(M)
        cur = fbest.copy()
        ban_in = np.zeros((M, p), dtype=np.int64)  # step until which row j may not enter
        ban_out = np.zeros((M, p), dtype=np.int64)  # step until which row i may not leave
        ar = np.arange(M)
        GT = self._columns(S, pm)  # (M, k, p)
        for it in range(1, int(iters) + 1):
            H, b = self._split_gains(GT, S, pm)
            pick_j, pick_q, gain = self._best_split(H, b)
            # aspiration: the best swap of all is allowed when it beats the best set seen (then it
            # is the best allowed one); else the best swap whose rows are not tabu
            tabu = gain <= fbest - cur + self.tol
            if tabu.any():  # (only those sets' copies are masked)
                Ht, bt = H[tabu], b[tabu]
                Ht[ban_out[ar[tabu, None], S[tabu]] >= it] = -np.inf  # members that may not leave
                bt[ban_in[tabu] >= it] = -np.inf  # rows that may not enter
                pick_j[tabu], pick_q[tabu], gain[tabu] = self._best_split(Ht, bt)
            ok = np.isfinite(gain)
            if not ok.any():
                break
            j, q, m = pick_j[ok], pick_q[ok], ar[ok]
            ban_in[m, S[m, q]] = it + int(tenure_in)
            ban_out[m, j] = it + int(tenure_out)
            S[m, q] = j
            GT[m, q] = self._rows[pm[m] * p + j]
            cur[m] += gain[ok]
            up = m[cur[m] > fbest[m] + self.tol]
            if up.size:  # the running value drifts by rounding: a new best is measured exactly
                fx = self.f_many(S[up], pm[up])
                cur[up] = fx
                better = fx > fbest[up] + self.tol
                best[up[better]], fbest[up[better]] = S[up[better]], fx[better]
        return best, fbest

    # --- 2-swaps -------------------------------------------------------------------------
    def two_swap(self, S: Any, *, entrants: int, max_moves: int, max_out: int | None = None,
                 prob: int = 0) -> tuple[np.ndarray, float]:
        """Best-improvement 2-swaps over the ``entrants`` best entrants (by 1-swap gain), each
        followed by 1-swaps, at most ``max_moves`` of them.

        Removing {S[q1], S[q2]} and adding {j1, j2} changes f by
            D(q1, j1) + D(q2, j2) - 2 (1-theta)(G_j1j2 + G_i1i2 - G_j1i2 - G_j2i1)
        for the 1-swap gains D; all pairs are one (m, m, r, r) array. ``max_out`` (None: all k)
        limits the members considered for removal to the r with the largest a_i (those whose
        removal alone costs least), so the array stays small when k is large.
        """
        S, f = self.ls(S, prob)
        k = len(S)
        m = min(int(entrants), self.p - k)
        if k < 2 or m < 2:
            return S, f
        G, two = self.G[prob], self.two[prob]
        for _ in range(int(max_moves)):
            D = self.gains(S, prob)
            J = np.argsort(-D.max(1), kind="stable")[:m]
            if max_out is None or max_out >= k:
                Q = np.arange(k)
            else:
                a = swap_terms(self.lin[prob], G[:, S].sum(1), self.th[prob], sq_norms=self.diag[prob])[1][S]
                Q = np.sort(np.argsort(-a, kind="stable")[: max(2, int(max_out))])
            r = Q.size
            SQ = S[Q]
            D1 = D[np.ix_(J, Q)]  # m x r
            GJS = G[np.ix_(J, SQ)]
            D2 = (D1[:, None, :, None] + D1[None, :, None, :]
                  - two * (G[np.ix_(J, J)][:, :, None, None] + G[np.ix_(SQ, SQ)][None, None, :, :]
                           - GJS[:, None, None, :] - GJS[None, :, :, None]))
            D2[np.arange(m), np.arange(m)] = -np.inf
            D2[:, :, np.arange(r), np.arange(r)] = -np.inf
            j1, j2, q1, q2 = np.unravel_index(int(np.argmax(D2)), D2.shape)
            if D2[j1, j2, q1, q2] <= self.tol:
                break
            T = S.copy()
            T[Q[q1]], T[Q[q2]] = J[j1], J[j2]
            T, fT = self.ls(T, prob)
            if fT <= f + self.tol:
                break
            S, f = T, fT
        return S, f
