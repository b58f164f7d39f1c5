"""Lazy MMR ("mmr_lazy"): the same picks as MMR, computing only the similarities it needs.

MMR (Carbonell & Goldstein 1998, as in LangChain's ``maximal_marginal_relevance``) picks
argmax c first, then repeatedly

    argmax_{i not in S}  s_i(S) = theta c_i - (1-theta) m_i(S),     m_i(S) = max_{j in S} w_ij.

m_i(S) can only grow as S grows, so a score computed for an earlier S is an upper bound on the
current one (floating-point rounding is monotone, so this holds for the computed values too).
The eager "mmr" (divopt_rag.solvers.greedy) reads the whole pool at every step (k GEMVs). Here
every item keeps the score of its last refresh, an upper bound u_i; an item never refreshed has
u_i = theta c_i + (1-theta)(1 + delta) (w_ij >= -1 - delta for unit rows, delta the
rounding slack of the storage dtype). Each step, with B = ``block`` rows at first:

1. take the B + 1 largest bounds and refresh the stale ones among the first B (m_i = max(m_i,
   max over the picks they have not seen of w_ij): one (rows, new picks) x d product);
2. if the best of these B exact scores exceeds the (B+1)-th bound by more than the tie band
   (``TIE_TOL`` (1 + |best|) for float32/half storage, ``TIE_EPS`` (1 + |best|) for float64), no
   other row can reach it, nor tie with it: pick among the B rows as the eager MMR does
   (:func:`divopt_rag.solvers.greedy.decide`: near-ties re-scored in float64, scores equal up to
   rounding to the lowest index, as LangChain's strict ``>`` does);
3. else double B and repeat; once B reaches n/64 (``dense_share``; early steps, where the
   bounds of rows never refreshed are loose), refresh every stale row in one product over E
   (contiguous rows, no gather) and pick as in 2 over the whole pool.

Items whose bound is already below the best exact score are never read again, so after the first
steps a pick typically refreshes a few hundred rows instead of the pool. The picks equal MMR's:
the same rule decides among the same near-tied rows (identical rows included).
"""
from __future__ import annotations

import torch

from divopt_rag.models import Instance
from divopt_rag.models.domains import ROWS_MAX
from divopt_rag.models.kernels import gather_rows, matmul
from divopt_rag.models.parameters import Interval
from divopt_rag.models.validation import unit_norm_tolerance

from .greedy import TIE_EPS, TIE_TOL, decide, exact_relevance, mmr_exact
from .selection import register

__all__ = ["mmr_lazy"]

_FIRST_BLOCK = 64
# set on narrow-cone pool seeds 0 and 1 (n = 1e4 to 1e5, d 384 / 1024, k 10 to 100; the
# benchmarks report seed 7): 1/4 -> 1/64 took 0.6-0.9x the time, 1/128 had 3x outliers
_DENSE_SHARE = 1 / 64


@register("mmr_lazy", params={"block": Interval(int, 1, ROWS_MAX), "dense_share": Interval(float, 0.0, None, closed="neither")})
def mmr_lazy(inst: Instance, *, block: int = _FIRST_BLOCK, dense_share: float = _DENSE_SHARE):
    """MMR with lazily refreshed upper bounds (module docstring); the same picks as "mmr".

    block : rows refreshed in the first round of each step (doubled each further round).
    dense_share : a round of at least this share of the pool refreshes every stale row in one
        product over E instead (> 1: never; <= block / n: every step, i.e. eager MMR's reads).
    info: refreshed (row refreshes in all, against any number of new picks), rounds.
    """
    n, k, th = inst.n, inst.k, inst.theta
    c, E, dev = inst.relevance, inst.E, inst.device
    delta = 4 * unit_norm_tolerance(E.dtype)
    m = torch.full((n,), -float("inf"), dtype=c.dtype, device=dev)  # max_{j in S seen} w_ij
    seen = torch.zeros(n, dtype=torch.long, device=dev)  # picks each row has been compared with
    bound = th * c + (1 - th) * (1 + delta)  # valid for every row before its first refresh
    tie = TIE_EPS if c.dtype == torch.float64 else TIE_TOL  # rows this close to the best are decided exactly
    picks = [decide(c, None, lambda rows: exact_relevance(inst, rows))]

    def choose(rows: torch.Tensor, scores: torch.Tensor) -> int:
        """The row eager MMR picks among ``rows`` (every row that can tie with the best), by their scores."""
        order = torch.argsort(rows)
        rows, scores = rows[order], scores[order]
        return int(rows[decide(scores, None, lambda sub: mmr_exact(inst, rows[sub], picks))])

    bound[picks[0]] = -torch.inf
    seen[picks[0]] = k  # a pick is never refreshed again
    R = gather_rows(E, torch.tensor(picks, device=dev))  # selected rows, in pick order
    refreshed = rounds = 0
    while len(picks) < k:
        t = len(picks)
        size = block
        while True:
            if size >= n * dense_share:  # one product over the whole pool refreshes every stale row
                stale = seen < t
                if bool(stale.any()):  # (earlier rounds may have refreshed all of them)
                    first = int(seen[stale].min())
                    m = torch.where(stale, torch.maximum(m, matmul(E, R[first:].T).amax(1)), m)
                    bound = torch.where(stale, th * c - (1 - th) * m, bound)
                    seen = seen.masked_fill_(stale, t)
                    refreshed += int(stale.sum())
                rounds += 1
                j = decide(bound, None, lambda rows: mmr_exact(inst, rows, picks))  # every row is fresh
                break
            # the size + 1 largest bounds: refresh the first ``size`` (stale ones only); every row
            # outside them is bounded by the last one, ``rest``
            vals, top = torch.topk(bound, min(size + 1, n))
            rest = float(vals[-1]) if top.numel() > size else -float("inf")
            top = top[:size]
            rounds += 1
            stale = top[seen.index_select(0, top) < t]
            if stale.numel():
                first = int(seen.index_select(0, stale).min())
                W = gather_rows(E, stale) @ R[first:].T  # (rows, picks they may not have seen)
                mt = torch.maximum(m.index_select(0, stale), W.amax(1))
                m.index_copy_(0, stale, mt)
                bound.index_copy_(0, stale, th * c.index_select(0, stale) - (1 - th) * mt)
                seen.index_fill_(0, stale, t)
                refreshed += int(stale.numel())
            exact = bound.index_select(0, top)  # the scores at S of the rows in top
            best = float(exact.max())
            if best - tie * (1 + abs(best)) > rest:  # no row outside top can reach it or tie with it
                j = choose(top, exact)
                break
            size *= 2
        picks.append(j)
        bound[j] = -torch.inf
        seen[j] = k
        R = torch.cat([R, gather_rows(E, torch.tensor([j], device=dev))])
    return torch.tensor(picks, device=dev), k, {"refreshed": refreshed, "rounds": rounds}
