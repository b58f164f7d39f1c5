"""Swap search on a small pool through its Gram matrix, many sets at once.

For a pool of p rows (p a few hundred: the candidate sub-pool of "fw_ms" / "fw_ws_ms", or a
whole small pool) the Gram matrix G = E E^T (p x p, float64) turns every swap gain into a few
array operations. With u = G[:, S].sum(1) the 1-swap gains are those of
:func:`divopt.models.ccbqp.swap_terms` with the true squared norms G_ii:

    Delta(i, j) = f(S - i + j) - f(S) = b_j + a_i + 2 (1-theta) G_ij,      i in S, j not in S.

:meth:`GramSearch.ls_batch` runs best-improvement 1-swap local search on B sets in lockstep:
the gains of all B sets are one (p, B, k) array per step (B restarts cost one array pass, not B
Python loops), and each set follows exactly the swaps of its own single run. On top of it:
perturbation (iterated local search) in the sequential form of "fw_ms" (:meth:`ils`) and in a
batched form with a patience stop (:meth:`ils_batched`), best-improvement 2-swaps over a
shortlist (:meth:`two_swap`), and the greedy on f itself (:meth:`greedy`).

The arrays are float64 numpy on the CPU: p is a few hundred, so one host copy of the p rows
(made once) is cheaper than device kernels whose launch cost exceeds their work.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from divopt.models.ccbqp import gram_objective, linear_term, swap_terms

__all__ = ["GramSearch"]


class GramSearch:
    """Swap search on p rows (unit or not) through their Gram matrix.

    rows : (p, d) tensor or array of the pool's rows; relevance : (p,) their relevance c;
    theta, k : the instance's trade-off and size; tol : minimum accepted gain.
    """

    def __init__(self, rows: Any, relevance: Any, theta: float, k: int, tol: float):
        R = torch.as_tensor(rows).to(torch.float64).cpu()
        self.G = (R @ R.T).numpy()  # torch's BLAS: one thread inside single_thread(), not numpy's pool
        self.diag = np.diag(self.G).copy()
        self.th, self.k, self.tol = float(theta), int(k), float(tol)
        self.two = 2.0 * (1.0 - self.th)
        c = torch.as_tensor(relevance).to(torch.float64).cpu().numpy()
        self.lin = linear_term(c, self.th, self.k)
        self.p = self.G.shape[0]

    @classmethod
    def from_instance(cls, inst: Any, tol: float) -> "GramSearch":
        return cls(inst.E, inst.relevance, inst.theta, inst.k, tol)

    # --- objective and gains --------------------------------------------------------------
    def f(self, S: Any) -> float:
        """f(S) from G (float64), :func:`divopt.models.ccbqp.gram_objective`."""
        return gram_objective(self.lin, self.G, np.asarray(S, dtype=np.int64), self.th)

    def gains(self, S: np.ndarray) -> np.ndarray:
        """(p, k) matrix of Delta(S[q] out, j in); rows j in S are -inf."""
        GS = self.G[:, S]
        b, a = swap_terms(self.lin, GS.sum(1), self.th, self.diag)
        D = b[:, None] + a[S][None, :] + self.two * GS
        D[S, :] = -np.inf
        return D

    # --- 1-swap local search ----------------------------------------------------------------
    def ls(self, S: Any, max_swaps: int = 1000) -> tuple[np.ndarray, float]:
        """Best-improvement 1-swaps from one set until no gain exceeds tol; (set, f)."""
        Sb, fb = self.ls_batch(np.asarray(S, dtype=np.int64)[None, :], max_swaps)
        return Sb[0], float(fb[0])

    def ls_batch(self, S: Any, max_swaps: int = 1000) -> tuple[np.ndarray, np.ndarray]:
        """Best-improvement 1-swap local search on B sets at once: S (B, k) -> (sets, f values).

        Each step forms the gains of every still-moving set as one (p, B', k) array (u and the
        swap terms recomputed from G, so rounding never accumulates) and applies each set's best
        swap (ties: the first in (entrant, position) order, as a single run would). A set stops
        when its best gain is <= tol or after ``max_swaps`` swaps.
        """
        S = np.array(S, dtype=np.int64, copy=True)
        if S.ndim != 2 or S.shape[1] != self.k:
            raise ValueError(f"S must have shape (B, {self.k}), got {S.shape}")
        active = np.arange(S.shape[0])
        for _ in range(int(max_swaps)):
            if active.size == 0:
                break
            SA = S[active]  # (A, k)
            GS = self.G[:, SA]  # (p, A, k)
            u = GS.sum(2)  # (p, A)
            b = self.lin[:, None] - (1.0 - self.th) * (2 * u + (self.diag[:, None] - 1.0))
            cols = np.arange(active.size)[:, None]
            a = -self.lin[SA] + (1.0 - self.th) * (2 * u[SA, cols] - (self.diag[SA] + 1.0))  # (A, k)
            D = b[:, :, None] + a[None, :, :] + self.two * GS
            D[SA, cols, :] = -np.inf
            flat = D.transpose(1, 0, 2).reshape(active.size, -1)
            best = flat.argmax(1)
            gain = flat[np.arange(active.size), best]
            move = gain > self.tol
            if not move.any():
                break
            j, q = np.divmod(best[move], self.k)
            S[active[move], q] = j
            active = active[move]
        return S, np.array([self.f(s) for s in S])

    # --- perturbation ----------------------------------------------------------------------
    def _entrants(self, S: np.ndarray, m: int) -> np.ndarray:
        """The m best entrants by b_j (the swap score at S), in a stable order."""
        b = swap_terms(self.lin, self.G[:, S].sum(1), self.th)[0]
        b[S] = -np.inf
        return np.argsort(-b, kind="stable")[:m]

    def ils(self, S: Any, rounds: int, strength: int, seed: int) -> tuple[np.ndarray, float]:
        """Sequential iterated local search (the form "fw_ms" uses): each round swaps
        ``strength`` random members of the best set for random entrants among the 3k + 20 best
        by b_j, runs the local search, and keeps the result if it is better by more than tol."""
        rng = np.random.default_rng(seed)
        best, fbest = self.ls(S)
        k = len(best)
        m = min(self.p - k, 3 * k + 20)
        strength = max(1, min(strength, k, m))
        if m < 1:
            return best, fbest
        for _ in range(int(rounds)):
            cand = self._entrants(best, m)
            T = best.copy()
            T[rng.choice(k, size=strength, replace=False)] = rng.choice(cand, size=strength, replace=False)
            T, fT = self.ls(T)
            if fT > fbest + self.tol:
                best, fbest = T, fT
        return best, fbest

    def ils_batched(
        self, S: Any, *, batch: int, strength: int, patience: int, max_rounds: int, seed: int
    ) -> tuple[np.ndarray, float, int]:
        """Iterated local search in batches: each round perturbs the best set ``batch`` ways
        (``strength`` random members out, random entrants among the 3k + 20 best by b_j in), runs
        the local search on all of them at once, and keeps the best if it gains more than tol.
        Stops after ``patience`` rounds in a row without a gain or ``max_rounds`` rounds.
        Returns (set, f, rounds run); deterministic for a given seed."""
        rng = np.random.default_rng(seed)
        best, fbest = self.ls(S)
        k = len(best)
        m = min(self.p - k, 3 * k + 20)
        strength = max(1, min(strength, k, m))
        if m < 1 or batch < 1:
            return best, fbest, 0
        idle = rounds = 0
        while rounds < max_rounds and idle < patience:
            rounds += 1
            cand = self._entrants(best, m)
            T = np.repeat(best[None, :], batch, axis=0)
            for t in range(batch):
                T[t, rng.choice(k, size=strength, replace=False)] = rng.choice(cand, size=strength, replace=False)
            T, fT = self.ls_batch(T)
            i = int(np.argmax(fT))
            if fT[i] > fbest + self.tol:
                best, fbest, idle = T[i], float(fT[i]), 0
            else:
                idle += 1
        return best, fbest, rounds

    # --- 2-swaps -------------------------------------------------------------------------
    def two_swap(
        self, S: Any, candidates: int = 48, max_moves: int = 50, max_out: int | None = None
    ) -> tuple[np.ndarray, float]:
        """Best-improvement 2-swaps over the ``candidates`` best entrants, each followed by 1-swaps.

        Removing {S[q1], S[q2]} and adding {j1, j2} changes f by
            D(q1, j1) + D(q2, j2) - 2 (1-theta)(G_j1j2 + G_i1i2 - G_j1i2 - G_j2i1)
        for the 1-swap gains D; all pairs are one (m, m, r, r) array. ``max_out`` (None: all k)
        limits the members considered for removal to the r with the largest a_i (those whose
        removal alone costs least), so the array stays small when k is large.
        """
        S, f = self.ls(S)
        k = len(S)
        m = min(int(candidates), self.p - k)
        if k < 2 or m < 2:
            return S, f
        two = self.two
        for _ in range(int(max_moves)):
            D = self.gains(S)
            J = np.argsort(-D.max(1), kind="stable")[:m]
            if max_out is None or max_out >= k:
                Q = np.arange(k)
            else:
                u = self.G[:, S].sum(1)
                a = swap_terms(self.lin, u, self.th, self.diag)[1][S]
                Q = np.sort(np.argsort(-a, kind="stable")[: max(2, int(max_out))])
            r = Q.size
            SQ = S[Q]
            D1 = D[np.ix_(J, Q)]  # m x r
            GJS = self.G[np.ix_(J, SQ)]
            D2 = (D1[:, None, :, None] + D1[None, :, None, :]
                  - two * (self.G[np.ix_(J, J)][:, :, None, None] + self.G[np.ix_(SQ, SQ)][None, None, :, :]
                           - GJS[:, None, None, :] - GJS[None, :, :, None]))
            D2[np.arange(m), np.arange(m)] = -np.inf
            D2[:, :, np.arange(r), np.arange(r)] = -np.inf
            j1, j2, q1, q2 = np.unravel_index(int(np.argmax(D2)), D2.shape)
            if D2[j1, j2, q1, q2] <= self.tol:
                break
            T = S.copy()
            T[Q[q1]], T[Q[q2]] = J[j1], J[j2]
            T, fT = self.ls(T)
            if fT <= f + self.tol:
                break
            S, f = T, fT
        return S, f

    # --- constructions -----------------------------------------------------------------------
    def greedy(self) -> np.ndarray:
        """Greedy on f itself: add the item of largest marginal gain l_j - (1-theta)(2 u_j + G_jj - 1)
        (u = G[:, S].sum(1), the b_j of :func:`swap_terms`); ties to the lowest index."""
        u = np.zeros(self.p)
        taken = np.zeros(self.p, dtype=bool)
        picks = []
        for _ in range(self.k):
            score = swap_terms(self.lin, u, self.th, self.diag)[0]
            score[taken] = -np.inf
            j = int(np.argmax(score))
            picks.append(j)
            taken[j] = True
            u += self.G[:, j]
        return np.array(picks, dtype=np.int64)
