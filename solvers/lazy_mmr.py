"""Lazy MMR ("mmr_lazy"): the same picks as MMR, computing only the similarities it needs.

MMR (Carbonell & Goldstein 1998, as in LangChain's ``maximal_marginal_relevance``) picks
argmax c first, then repeatedly

    argmax_{i not in S}  s_i(S) = theta c_i - (1-theta) m_i(S),     m_i(S) = max_{j in S} w_ij.

m_i(S) can only grow as S grows, so a score computed for an earlier S is an upper bound on the
current one (floating-point rounding is monotone, so this holds for the computed values too).
The eager "mmr" (divopt.solvers.greedy) reads the whole pool at every step (k GEMVs). Here
every item keeps the score of its last refresh, an upper bound u_i; an item never refreshed has
u_i = theta c_i + (1-theta)(1 + delta) (w_ij >= -1 - delta for unit rows, delta the
rounding slack of the storage dtype). Each step:

1. j = argmax u (ties to the lowest index, as ``argmax`` and LangChain's strict ``>`` do);
2. if j is fresh (refreshed against the whole current S), its score is exact and no other item
   can beat it: pick j;
3. else refresh the B items of largest u (m_i = max(m_i, max over the picks they have not
   seen of w_ij): one (B, new picks) x d product), double B, and repeat.

Items whose bound is already below the best exact score are never read again, so after the first
steps a pick typically refreshes a few hundred rows instead of the pool. The picks equal MMR's
(up to the last-bit rounding of dot products computed in a different order).
"""
from __future__ import annotations

import torch

from divopt.models import Instance
from divopt.models.kernels import gather_rows
from divopt.models.validation import unit_norm_tolerance

from .selection import register

__all__ = ["mmr_lazy"]

_FIRST_BLOCK = 64


@register("mmr_lazy")
def mmr_lazy(inst: Instance, *, block: int = _FIRST_BLOCK):
    """MMR with lazily refreshed upper bounds (module docstring); the same picks as "mmr".

    block : rows refreshed in the first round of each step (doubled each further round).
    info: refreshed (row refreshes in all, against any number of new picks), rounds.
    """
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be an int >= 1, got {block!r}")
    n, k, th = inst.n, inst.k, inst.theta
    c, E, dev = inst.relevance, inst.E, inst.device
    delta = 4 * unit_norm_tolerance(E.dtype)
    m = torch.full((n,), -float("inf"), dtype=c.dtype, device=dev)  # max_{j in S seen} w_ij
    seen = torch.zeros(n, dtype=torch.long, device=dev)  # picks each row has been compared with
    bound = th * c + (1 - th) * (1 + delta)  # valid for every row before its first refresh
    picks = [int(torch.argmax(c))]
    bound[picks[0]] = -torch.inf
    seen[picks[0]] = k  # a pick is never refreshed again
    R = gather_rows(E, torch.tensor(picks, device=dev))  # selected rows, in pick order
    refreshed = rounds = 0
    while len(picks) < k:
        t = len(picks)
        size = block
        while True:
            j = int(torch.argmax(bound))
            rounds += 1
            if int(seen[j]) == t:
                break
            top = torch.topk(bound, min(size, n)).indices
            top = top[seen.index_select(0, top) < t]  # stale rows only
            if top.numel() == 0:  # j tied with fresh rows that topk returned instead
                top = torch.tensor([j], device=dev)
            first = int(seen.index_select(0, top).min())
            W = gather_rows(E, top) @ R[first:].T  # (rows, picks they may not have seen)
            mt = torch.maximum(m.index_select(0, top), W.amax(1))
            m.index_copy_(0, top, mt)
            bound.index_copy_(0, top, th * c.index_select(0, top) - (1 - th) * mt)
            seen.index_fill_(0, top, t)
            refreshed += int(top.numel())
            size *= 2
        picks.append(j)
        bound[j] = -torch.inf
        seen[j] = k
        R = torch.cat([R, gather_rows(E, torch.tensor([j], device=dev))])
    return torch.tensor(picks, device=dev), k, {"refreshed": refreshed, "rounds": rounds}
