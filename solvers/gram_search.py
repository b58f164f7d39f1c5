"""Swap search on small pools through their Gram matrices: many problems and many sets in lockstep, on the pool's device.

For a pool of p rows (p a few hundred: the candidate pool of "fw_ws_ms" / "fw_ms", or a whole
small pool) the Gram matrix G = E E^T (p x p) turns every swap gain into a few tensor
operations. With u = G[:, S].sum(1) the 1-swap gains are those of
:func:`divopt_rag.models.ccbqp.swap_terms` with the true squared norms G_ii:

    Delta(i, j) = f(S - i + j) - f(S) = b_j + a_i + 2 (1-theta) G_ij,      i in S, j not in S,

b = b0 - 2 (1-theta) u and a = a0 + 2 (1-theta) u, b0 / a0 their values at u = 0. A
:class:`GramSearch` holds B problems of the same size (p rows, k picks; B = 1 for one
instance, B = queries x thetas for a sweep), each with its own T = 2 (1-theta) G, relevance and
theta, on the device of the rows given. Every search step works on N sets at once (a
(N, k, p) tensor), each tagged with its problem, so a problem searched alone or inside a batch
follows the same swaps and ends at the same sets.

Steps run in lockstep without reading anything back: a set that cannot improve makes the
null swap (its member out and back in), so a step costs the same kernels whatever happens.
The host looks only at a few checkpoints per call (:data:`CHECKPOINTS`): which sets still
moved, so that those that stopped leave the batch. Each provided search is in
:mod:`divopt_rag.solvers.gram_moves` (perturbation, 2-swaps, tabu) or here:

* :meth:`GramSearch.ls`      best-improvement 1-swap local search;
* :meth:`GramSearch.greedy`  the greedy on f itself;
* :meth:`GramSearch.fw`      Frank-Wolfe on the relaxation from many starting points: the FW step of
  :func:`divopt_rag.solvers.fw_kernel.fw_rows` (which runs M points on ONE pool), with E v
  taken through T, so that the points of B problems on B different pools step together;
* :meth:`GramSearch.f_many`  f of many sets, summed in float64.

Sums that decide between sets (f) are float64; the gains are in the pool's accumulation dtype
(float32 for float32/float16 storage, float64 for float64 pools), whose rounding (about 1e-7 of
a gain) lies far below the search tolerance 1e-6 k (k-1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from divopt_rag.models.ccbqp import linear_term
from divopt_rag.models.kernels import accumulation_dtype, gather_rows

__all__ = ["GramSearch", "SearchSets", "CHECKPOINTS", "steps_schedule"]

#: Host checkpoints of one call of :meth:`GramSearch.ls` / :meth:`GramSearch.fw` at most: the
#: steps run in chunks that double in length, and only between chunks does the host read which
#: sets still move (a fixed bound on host syncs, whatever the pool size and the moves).
CHECKPOINTS = 8


def steps_schedule(first: int, cap: int, checkpoints: int = CHECKPOINTS) -> list[int]:
    """Chunk lengths: ``first`` steps, then doubling, at most ``checkpoints`` chunks, ``cap`` steps in all."""
    first, cap = max(1, int(first)), int(cap)
    out, total, size = [], 0, first
    while total < cap and len(out) < checkpoints:
        size = min(size, cap - total) if len(out) < checkpoints - 1 else cap - total
        out.append(size)
        total += size
        size *= 2
    return out


@dataclass
class SearchSets:
    """N k-sets under search: positions in their problems' pools, the problem of each, f of each."""

    S: torch.Tensor  # (N, k) int64
    prob: torch.Tensor  # (N,) int64
    f: torch.Tensor  # (N,) float64


class GramSearch:
    """Swap search on B problems of p rows each, through T = 2 (1-theta) G per problem.

    rows : (p, d) or (B, p, d) tensor/array of the pools' rows; relevance : (p,) or (B, p);
    theta : a float or (B,) trade-offs; k : picks per problem; tol : minimum accepted gain.
    dtype : the search's dtype (default the rows' accumulation dtype: float64 for float64 rows,
    else float32). Everything lives on the rows' device.
    """

    def __init__(self, rows: Any, relevance: Any, theta: Any, k: int, tol: float, dtype: torch.dtype | None = None):
        R = torch.as_tensor(rows)
        if R.ndim == 2:
            R = R.unsqueeze(0)
        acc = accumulation_dtype(R.dtype) if dtype is None else dtype
        R = R.to(acc)
        self.device, self.dtype = R.device, acc
        self.B, self.p, self.k, self.tol = int(R.shape[0]), int(R.shape[1]), int(k), float(tol)
        th = np.broadcast_to(np.asarray(theta, dtype=np.float64), (self.B,)).copy()
        self.theta = th  # host float64
        self.th = torch.as_tensor(th, device=self.device)  # float64 on the device (f)
        two = self.th.to(acc).mul(-2).add_(2)  # 2 (1-theta)
        self.two = two
        self.rows = R  # (B, p, d): f of a set is summed from its rows in float64
        G = torch.bmm(R, R.transpose(1, 2))
        sq = G.diagonal(dim1=1, dim2=2).clone()
        self.T = G.mul_(two[:, None, None])  # T = 2 (1-theta) G, in place
        self.Tf = self.T.view(self.B * self.p, self.p)  # row b p + i: T[b, i, :]
        c = torch.as_tensor(relevance, device=self.device).reshape(self.B, self.p)
        self.relevance = c.to(acc)
        self.lin64 = linear_term(c.double(), self.th[:, None], self.k)  # f's linear part, float64
        lin = self.lin64.to(acc)
        one = (two / 2)[:, None]
        self.b0 = lin - one * (sq - 1)  # b_j at u = 0 (swap_terms with the true squared norms)
        self.a0 = -lin - one * (sq + 1)

    @classmethod
    def from_instance(cls, inst: Any, tol: float, rows: torch.Tensor | None = None,
                      dtype: torch.dtype | None = None) -> "GramSearch":
        """The instance's problem on all its rows, or on the pool ``rows`` (indices into inst.E)."""
        if rows is None:
            return cls(inst.E, inst.relevance, inst.theta, inst.k, tol, dtype)
        rows = torch.as_tensor(rows, device=inst.device)
        return cls(gather_rows(inst.E, rows), inst.relevance.index_select(0, rows), inst.theta, inst.k, tol, dtype)

    # --- helpers ----------------------------------------------------------------------------
    def prob_of(self, prob: Any, m: int) -> torch.Tensor:
        """(m,) problem of each set: ``prob`` as a tensor, or problem 0 when B = 1."""
        if prob is None:
            if self.B != 1:
                raise ValueError(f"prob (the problem of each set) is required with B = {self.B} problems")
            return torch.zeros(m, dtype=torch.long, device=self.device)
        return torch.as_tensor(prob, dtype=torch.long, device=self.device).expand(m).contiguous()

    def sets(self, S: Any) -> torch.Tensor:
        S = torch.as_tensor(np.asarray(S) if not isinstance(S, torch.Tensor) else S, device=self.device)
        S = S.to(torch.long).reshape(-1, self.k).clone()
        return S

    def member_rows(self, S: torch.Tensor, prob: torch.Tensor) -> torch.Tensor:
        """(N, k, p): T[prob[n], S[n, q], :], the rows of the members (a copy)."""
        N = S.shape[0]
        return self.Tf.index_select(0, (S + (prob * self.p)[:, None]).view(-1)).view(N, self.k, self.p)

    # --- objective ---------------------------------------------------------------------------
    def f_many(self, S: Any, prob: Any = None) -> torch.Tensor:
        """f of each set S[n] (N, k) under problem prob[n], as a float64 tensor, exact: its rows'
        Gram matrix E_S E_S^T formed in float64, so sets whose f differ by less than the search's
        rounding are still told apart: f = sum_S l + (1-theta)(k - sum_{i, j in S} w_ij)."""
        S = self.sets(S)
        prob = self.prob_of(prob, S.shape[0])
        N, k = S.shape
        R = self.rows.view(self.B * self.p, -1).index_select(0, (S + (prob * self.p)[:, None]).view(-1))
        R = R.view(N, k, -1).double()
        v = R.sum(1)  # sum_{i, j in S} w_ij = ||sum_S e_i||^2
        th = self.th.index_select(0, prob)
        lin = self.lin64.index_select(0, prob).gather(1, S).sum(1)
        return lin + (1 - th) * (k - torch.linalg.vecdot(v, v))

    def f(self, S: Any, prob: int = 0) -> float:
        """f(S) of problem ``prob`` (float64)."""
        return float(self.f_many(self.sets(S), torch.tensor([int(prob)], device=self.device))[0])

    # --- 1-swap local search -----------------------------------------------------------------
    def _walk(self, prob: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(row offsets, a0, b0) of each set's problem."""
        return (prob * self.p)[:, None], self.a0.index_select(0, prob), self.b0.index_select(0, prob)

    def _best_swap(self, S: torch.Tensor, base: torch.Tensor, a0: torch.Tensor, b0: torch.Tensor,
                   out_mask: torch.Tensor | None = None, in_mask: torch.Tensor | None = None):
        """Each set's best swap: (entrant j, position q, gain, H, b) with H[n, q, j] + b[n, j] the
        gain of S[n, q] out and j in (u recomputed from the members' rows, so rounding never
        accumulates). Ties go to the first (entrant, position). ``out_mask`` (N, k) / ``in_mask``
        (N, p): members that may not leave / rows that may not enter (tabu)."""
        N, k = S.shape
        H = self.Tf.index_select(0, (S + base).view(-1)).view(N, k, self.p)
        U = H.sum(1)  # 2 (1-theta) u
        b = (b0 - U).scatter_(1, S, -torch.inf)
        H += (a0 + U).gather(1, S).unsqueeze(2)
        if out_mask is not None:
            H.masked_fill_(out_mask.unsqueeze(2), -torch.inf)
        if in_mask is not None:
            b.masked_fill_(in_mask, -torch.inf)
        gain, j = H.amax(1).add_(b).max(1)
        q = H.gather(2, j.view(N, 1, 1).expand(N, k, 1)).squeeze(2).argmax(1)
        return j, q, gain

    def _ls_steps(self, S: torch.Tensor, base, a0, b0, steps: int) -> torch.Tensor:
        """``steps`` lockstep best-improvement swaps on S (in place); whether each set moved in the last."""
        moved = torch.zeros(S.shape[0], dtype=torch.bool, device=self.device)
        for _ in range(int(steps)):
            j, q, gain = self._best_swap(S, base, a0, b0)
            moved = gain > self.tol
            q = q.unsqueeze(1)
            S.scatter_(1, q, torch.where(moved, j, S.gather(1, q).squeeze(1)).unsqueeze(1))
        return moved

    def ls(self, S: Any, prob: Any = None, *, steps: Any = None) -> SearchSets:
        """Best-improvement 1-swap local search on N sets at once: S (N, k), prob (N,) their
        problems (default: problem 0 when B = 1). Each step applies each set's best swap (ties:
        the first in (entrant, position) order, as a single run would) when it gains more than
        tol. ``steps``: the chunk lengths (:func:`steps_schedule`; default k + 2 steps, doubling,
        at most 1000 in all); between chunks the sets that did not move in the last step leave
        (they are 1-swap optimal). Returns the sets and their f (:meth:`f_many`)."""
        S = self.sets(S)
        prob = self.prob_of(prob, S.shape[0])
        chunks = steps_schedule(max(4, self.k // 4), 1000) if steps is None else list(steps)
        active = None
        for c, size in enumerate(chunks):
            rows = S if active is None else S.index_select(0, active)
            pr = prob if active is None else prob.index_select(0, active)
            moved = self._ls_steps(rows, *self._walk(pr), size)
            if active is not None:
                S.index_copy_(0, active, rows)
            if c == len(chunks) - 1:
                break
            still = moved.nonzero().squeeze(1)  # a host checkpoint
            if still.numel() == 0:
                break
            active = still if active is None else active.index_select(0, still)
        return SearchSets(S, prob, self.f_many(S, prob))

    # --- constructions -----------------------------------------------------------------------
    def greedy(self, prob: Any = None, noise: torch.Tensor | None = None) -> torch.Tensor:
        """(N, k): the greedy on f for the problems ``prob`` (default every problem once): add
        the row of largest marginal gain b_j = l_j - (1-theta)(2 u_j + G_jj - 1); ties to the
        lowest index. ``noise`` (N, k, p): added to the scores of step t (a randomized greedy)."""
        prob = torch.arange(self.B, device=self.device) if prob is None else self.prob_of(prob, len(prob))
        N = prob.numel()
        base, _, b0 = self._walk(prob)
        U = torch.zeros(N, self.p, dtype=self.dtype, device=self.device)
        S = torch.zeros(N, self.k, dtype=torch.long, device=self.device)
        for t in range(self.k):
            score = (b0 - U).scatter_(1, S[:, :t], -torch.inf)
            if noise is not None:
                score += noise[:, t]
            j = score.argmax(1)
            S[:, t] = j
            U += self.Tf.index_select(0, base.squeeze(1) + j)
        return S

    def fw(self, X0: Any, *, theta: Any = None, relax_penalty: float = 2.0, max_iter: int = 100,
           tol: float | None = None) -> torch.Tensor:
        """Frank-Wolfe on the relaxation f_lambda from R starting points per problem; (B, R, k).

        X0 : (B, R, p) feasible points (0 <= x <= 1, sum k). theta : optional (B,) or (B, R)
        trade-offs replacing the problems' own (per problem or per point; T is rescaled by their
        2 (1-theta)).
        The step of :func:`~divopt_rag.solvers.fw_kernel.fw_rows` (DESIGN.md): gradient
        l + 2 (1-theta)(lambda x - G x), vertex s = its top-k, gap, curvature
        2 (1-theta)(lambda ||d||^2 - d^T G d), exact line search; a point whose gap is <= tol
        (default a normalized gap of 1e-6) stops moving. All B R points step in lockstep,
        ``max_iter`` steps in chunks of 16, 32, ... (:func:`steps_schedule`), between which the
        host looks which points stopped (they leave). Returns the top-k of each final x (ties to the lower index):
        starting sets for the local search."""
        k, p, B = self.k, self.p, self.B
        X = torch.as_tensor(X0, device=self.device).to(self.dtype)
        R = X.shape[1]
        tol = 1e-6 * k * (k - 1) if tol is None else float(tol)
        lam = float(relax_penalty)
        prob = torch.arange(B, device=self.device).repeat_interleave(R)
        if theta is None:
            th, ratio = self.th.to(self.dtype).index_select(0, prob), None
        else:  # T = 2 (1-theta) G rescaled to 2 (1-theta') G (0 where theta = 1: every theta' is 1 too)
            th = torch.as_tensor(np.broadcast_to(np.asarray(theta, dtype=np.float64).reshape(B, -1), (B, R)).copy(),
                                 device=self.device).to(self.dtype).reshape(-1)
            two_b = self.two.index_select(0, prob)
            ratio = torch.where(two_b > 0, (2 - 2 * th) / two_b.clamp_min(1e-30), 0.0)
        lin = self.relevance.index_select(0, prob) * (th[:, None] * (k - 1))  # (N, p)
        two_lam = (2 - 2 * th) * lam  # (N,)
        x = X.reshape(B * R, p).clone()
        Tx = torch.bmm(X.reshape(B, R, p), self.T).reshape(B * R, p)  # 2 (1-theta) G x
        if ratio is not None:
            Tx.mul_(ratio[:, None])
        base = (prob * p)[:, None]
        ones = torch.ones(B * R, k, dtype=self.dtype, device=self.device)
        active = None
        chunks = steps_schedule(16, max_iter)
        for c, size in enumerate(chunks):
            part = (lambda t: t) if active is None else (lambda t: t.index_select(0, active))
            xs, Txs, lin_a, tl, base_a, ones_a = part(x), part(Tx), part(lin), part(two_lam), part(base), part(ones)
            r_a = None if ratio is None else part(ratio)[:, None]
            live = torch.ones(xs.shape[0], dtype=torch.bool, device=self.device)
            for _ in range(size):
                g = torch.addcmul(lin_a, tl[:, None], xs).sub_(Txs)  # the gradient
                s = torch.topk(g, k, dim=1).indices  # its top-k vertex
                d = torch.scatter_add(-xs, 1, s, ones_a)
                Td = self.Tf.index_select(0, (s + base_a).view(-1)).view(-1, k, p).sum(1)
                if r_a is not None:
                    Td.mul_(r_a)
                Td -= Txs
                gap = torch.linalg.vecdot(g, d)
                C = tl * torch.linalg.vecdot(d, d) - torch.linalg.vecdot(d, Td)  # curvature
                live = gap > tol
                gamma = torch.where(C < 0, -gap / C, 1.0).clamp_(max=1.0).mul_(live)[:, None]  # exact line search
                xs.addcmul_(gamma, d)
                Txs.addcmul_(gamma, Td)
            if active is not None:
                x.index_copy_(0, active, xs)
                Tx.index_copy_(0, active, Txs)
            if c == len(chunks) - 1:
                break
            still = live.nonzero().squeeze(1)  # a host checkpoint
            if still.numel() == 0:
                break
            active = still if active is None else active.index_select(0, still)
        order = torch.sort(x, dim=1, descending=True, stable=True).indices[:, :k]
        return order.reshape(B, R, k)
