"""Best-improvement 1-swap local search on a binary k-set, plus an iterated (perturbation) phase.

For a k-set S with v = sum_{l in S} e_l and u = E v, swapping i in S out and j not in S in
changes the CCBQP objective by the swap gain of :mod:`divopt_rag.models.ccbqp`
(:func:`~divopt_rag.models.ccbqp.swap_terms`, :func:`~divopt_rag.models.ccbqp.swap_gains`)

    Delta(i, j) = b_j + a_i + 2 (1-theta) w_ij,     w_ij = e_i^T e_j,
    b_j = l_j - 2 (1-theta) u_j,   a_i = -l_i + 2 (1-theta)(u_i - 1),   l = theta (k-1) c,

so all n k swap gains come from u (one GEMV, or the row sums of W) and W = E E_S^T (n x k: the
pool times the k selected rows), never from an n x n matrix. After a swap only the column of W
belonging to the swapped position changes: one GEMV per swap.

When n k is too large to keep W, the search evaluates a shortlist of the m best entrants by b_j
each step (W restricted to m x k) and, when the shortlist has no improving swap, scans the full
pool block by block (E_blk E_S^T) so that the result is still a 1-swap optimum over ALL swaps.
Because w_ij <= 1, Delta(i, j) <= b_j + max_i a_i + 2 (1-theta); the shortlist is provably
complete when the best excluded b_j fails that bound (then the block scan is skipped).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import linear_term, objective, objective_scale, pair_weight, swap_terms
from divopt_rag.models.kernels import gather_rows, matmul, matvec
from divopt_rag.models.domains import ITERATIONS_MAX, ROWS_MAX
from divopt_rag.models.parameters import Interval
from divopt_rag.models.validation import check_indices, check_nonnegative

from .selection import get_selector, register

__all__ = ["LSResult", "local_search", "polish", "ls_tolerance"]

# Keep the n x k matrix W in memory up to this many entries (64 MiB in float32).
_FULL_LIMIT = 1 << 24
_SCAN_BLOCK = 1 << 14


@dataclass
class LSResult:
    """Outcome of a local search: the k-set, its objective and how it was reached.

    one_swap_optimal is True when no swap over the whole pool improves f by more than tol.
    """

    indices: torch.Tensor
    objective: float
    swaps: int
    one_swap_optimal: bool
    start_objective: float
    trace: list[float] = field(default_factory=list)
    mode: str = "whole pool"
    scans: int = 0  # passes over the full pool
    u: torch.Tensor | None = None  # E v at the final set, when the last pass was made there


def _objective64(inst: Instance, idx: torch.Tensor) -> float:
    """f(S) in float64 (O(k d)), unvalidated: used to accept swaps safely."""
    return objective(inst, idx, check=False)


def local_search(
    inst: Instance,
    indices: Any,
    *,
    max_swaps: int | None = None,
    shortlist: int | None = None,
    tol: float | None = None,
) -> LSResult:
    """Best-improvement 1-swap local search from the k-set ``indices``.

    Each step applies the swap (i out, j in) of largest gain Delta(i, j) (formula in the module
    docstring) as long as Delta > tol and the float64 objective really increases, so the
    objective never decreases. Stops at a 1-swap optimum over ALL swaps of the pool (unless
    max_swaps is hit: then one_swap_optimal is False).

    On a large pool the swaps are searched on a working set P = S + m entrants (W_P = E_P E_S^T,
    (k+m) x k, kept up to date at O(m d) per swap: the pool is not read), first the m most
    relevant items; when P has no improving swap, one pass over the pool (E E_S^T, block by
    block) either certifies the 1-swap optimum or rebuilds P around the current set from the
    m best entrants by b_j. Typical cost: one pass over E, whatever the number of swaps.

    max_swaps : cap on swaps (default 10 k + 100).
    shortlist : m, the number of entrants kept in P (default: the whole pool if n <= 2048,
        else max(4 k + 256, min(4096, n / 16))).
    tol : minimum gain of an accepted swap, default 1e-9 k (k-1) (float64 E) or 1e-6 k (k-1).
    """
    n, k, th = inst.n, inst.k, inst.theta
    idx = torch.as_tensor(check_indices(indices, n, "indices", size=k), device=inst.device)
    max_swaps = 10 * k + 100 if max_swaps is None else int(max_swaps)
    if max_swaps < 1:  # as the "*_ls" selectors declare it
        raise ValueError(f"max_swaps must be >= 1, got {max_swaps}")
    tol = ls_tolerance(inst) if tol is None else check_nonnegative(tol, "tol")
    if shortlist is None:
        m = n - k if n <= 2048 else max(4 * k + 256, min(4096, n // 16))
    else:
        m = int(shortlist)
        if m < 1:
            raise ValueError(f"shortlist must be >= 1, got {m}")
    m = min(m, n - k)
    whole = m >= n - k
    mode = "whole pool" if whole else f"shortlist({m})"
    f = _objective64(inst, idx)
    trace = [f]
    if k == n:
        return LSResult(idx, f, 0, True, f, trace, mode)
    E = inst.E
    lin = linear_term(inst.relevance, th, k)
    two = pair_weight(th)
    swaps = scans = 0
    first = True
    prune = True  # GEMV + bound first; switched off for this search once the bound fails
    while True:
        R = gather_rows(E, idx)  # k x d, the selected rows
        if whole:
            P = torch.cat([idx, _complement(idx, n)])
        elif first:
            # no pass over the pool yet: start from the m most relevant entrants (like FW's
            # working set); the pass below certifies or extends the result
            c = inst.relevance.index_fill(0, idx, -torch.inf)
            P = torch.cat([idx, torch.topk(c, m).indices])
        else:
            j_best, u, best, prune = _full_scan(E, R, idx, lin, th, prune)
            scans += 1
            if best <= tol:
                return LSResult(idx, f, swaps, True, trace[0], trace, mode, scans, u)
            b = swap_terms(lin, u, th)[0].index_fill_(0, idx, -torch.inf)
            C = torch.topk(b, m).indices
            if not bool((C == j_best).any()):
                C = torch.cat([C, torch.tensor([j_best], device=C.device)])
            P = torch.cat([idx, C])
        idx, f, swaps, moved, capped = _search_on(inst, P, R, idx, f, swaps, max_swaps, tol, trace, lin, two)
        if capped:
            return LSResult(idx, f, swaps, False, trace[0], trace, mode, scans)
        if whole:
            return LSResult(idx, f, swaps, True, trace[0], trace, mode, scans)
        if not moved and not first:  # the scan's best swap was rounding noise
            return LSResult(idx, f, swaps, True, trace[0], trace, mode, scans, u)
        first = False


def _search_on(inst, P, R, idx, f, swaps, max_swaps, tol, trace, lin, two):
    """Best-improvement swaps with entrants restricted to the rows P (S = P[:k] at the start).

    The best swap is found without forming every gain: with wmax_r >= max_p w_{P_r, S_p} (kept as
    a running maximum, refreshed when it has grown loose), bound_r = b_r + max_p a_p + 2 (1-theta)
    wmax_r is at least every gain of row r (the same float operations on larger operands:
    rounding is monotone, so the bound holds in floating point too). The row of largest bound is
    evaluated first; its best gain is a threshold, and only the rows whose bound reaches it are
    evaluated exactly, in position order, so the argmax (first in row-major order) is that of
    the full (k+m) x k table. u on P is kept in float64 and updated per swap (the float32 W
    entries sum exactly there). Cost per swap: O(m) plus O(k) per row evaluated, not O(m k).
    """
    k = inst.k
    EP = gather_rows(inst.E, P)
    WP = EP @ R.T  # w_{P_r, S_p}; rows 0..k-1 of P are S in position order
    linP = lin.index_select(0, P)
    inS = torch.zeros(P.numel(), dtype=torch.bool, device=P.device)
    inS[:k] = True
    rowS = torch.arange(k, device=P.device)  # row of P that holds S[p]
    uP = WP.sum(1, dtype=torch.float64)  # u on P
    wmax = WP.max(1).values
    loose = max(64, P.numel() // 16)  # rows evaluated past which wmax is recomputed exactly
    moved = False
    while True:
        if swaps >= max_swaps:
            return idx, f, swaps, moved, True
        b, a = swap_terms(linP, uP, inst.theta)
        b.masked_fill_(inS, -torch.inf)  # S's rows are not entrants
        aS = a[rowS]
        bound = (b + aS.max()) + two * wmax  # >= every gain (b_r + a_p) + 2 (1-theta) w_rp of row r
        r0 = int(torch.argmax(bound))
        if float(bound[r0]) <= tol:
            break
        thr = ((b[r0] + aS) + two * WP[r0]).max()
        cand = torch.nonzero(bound >= thr).flatten()  # ascending: every row that can reach the best
        if cand.numel() > loose:
            wmax = WP.max(1).values
            bound = (b + aS.max()) + two * wmax
            cand = torch.nonzero(bound >= thr).flatten()
        D = (b[cand, None] + aS[None, :]) + two * WP.index_select(0, cand)  # Delta = b_j + a_i + 2 (1-theta) w_ij
        flat = int(torch.argmax(D))
        r, p = int(cand[flat // k]), flat % k
        if float(D.view(-1)[flat]) <= tol:
            break
        new_idx = idx.clone()
        new_idx[p] = P[r]
        f_new = _objective64(inst, new_idx)
        if f_new <= f:  # the gain was rounding noise: stop rather than cycle
            break
        inS[rowS[p]] = False
        inS[r] = True
        rowS[p] = r
        idx, f = new_idx, f_new
        trace.append(f)
        swaps += 1
        moved = True
        col = EP @ EP[r]
        uP += col.to(torch.float64) - WP[:, p].to(torch.float64)
        WP[:, p] = col
        wmax = torch.maximum(wmax, col)
    return idx, f, swaps, moved, False


def ls_tolerance(inst: Instance) -> float:
    """Default minimum swap gain: 1e-9 k (k-1) for float64 pools, 1e-6 k (k-1) otherwise."""
    return (1e-9 if inst.acc_dtype == torch.float64 else 1e-6) * objective_scale(inst.k)


def _complement(idx: torch.Tensor, n: int) -> torch.Tensor:
    mask = torch.ones(n, dtype=torch.bool, device=idx.device)
    mask[idx] = False
    return mask.nonzero().flatten()


def _full_scan(E: torch.Tensor, R: torch.Tensor, idx: torch.Tensor, lin: torch.Tensor, theta: float,
               prune: bool = True):
    """One pass over the pool, block by block: u = E v and the best swap over all (i, j).

    u_i for i in S is R v (v = sum of the rows R), so a_i is known before the pass. With
    ``prune`` a GEMV first bounds every gain (w_ij <= 1); when at most n/8 entrants survive the
    bound (typical for theta >= 0.7) only their rows are compared exactly, else the full pass
    follows. The gains are formed in place in the block's W (one n_b x k buffer per block).
    Returns (j_best, u, best gain, whether the bound sufficed).
    """
    n, k = E.shape[0], R.shape[0]
    two = pair_weight(theta)
    block = max(_SCAN_BLOCK, _FULL_LIMIT // max(k, 1))
    a = swap_terms(lin[idx], R @ R.sum(0), theta)[1]  # u_i = e_i^T v for i in S
    if prune:
        # w_ij <= 1 gives Delta(i, j) <= b_j + max_i a_i + 2 (1-theta): one GEMV for u = E v finds
        # every entrant that could improve; only those rows are compared with S exactly
        u = matvec(E, R.sum(0))
        b = swap_terms(lin, u, theta)[0].index_fill_(0, idx, -torch.inf)
        cand = (b > -(float(a.max()) + two)).nonzero().flatten()
        if cand.numel() == 0:
            return -1, u, -float("inf"), True
        if cand.numel() <= n // 8:
            Wc = gather_rows(E, cand) @ R.T
            Wc.mul_(two).add_(a).add_(b[cand].unsqueeze(1))
            flat = int(torch.argmax(Wc))
            return int(cand[flat // k]), u, float(Wc.view(-1)[flat]), True
    u = torch.empty(n, dtype=lin.dtype, device=E.device)
    best, j_best = -float("inf"), -1
    for s in range(0, n, block):
        W = matmul(E[s : s + block], R.T)  # n_b x k
        ub = torch.sum(W, 1, out=u[s : s + block])
        bb = swap_terms(lin[s : s + block], ub, theta)[0]
        W.mul_(two).add_(a).add_(bb.unsqueeze(1))  # Delta(i, j) = b_j + a_i + 2 (1-theta) w_ij
        local = idx[(idx >= s) & (idx < s + W.shape[0])] - s
        W.index_fill_(0, local, -torch.inf)  # j must not be in S
        flat = int(torch.argmax(W))
        val = float(W.view(-1)[flat])
        if val > best:
            best, j_best = val, s + flat // k
    return j_best, u, best, False



def polish(inst: Instance, indices: Any, **ls_params: Any) -> tuple[torch.Tensor, dict]:
    """1-swap local search from any selection; returns (indices, info) for selectors."""
    res = local_search(inst, indices, **ls_params)
    info = {
        "swaps": res.swaps,
        "one_swap_optimal": res.one_swap_optimal,
        "start_objective": res.start_objective,
        "ls_trace": res.trace,
        "ls_mode": res.mode,
        "ls_scans": res.scans,
    }
    return res.indices, info


#: The local search's own parameters, which every "*_ls" selector adds to its base's.
LS_PARAMS = {"max_swaps": [Interval(int, 1, ITERATIONS_MAX), None], "shortlist": [Interval(int, 1, ROWS_MAX), None]}


@register("fw_ls", params=LS_PARAMS, extends="fw_ws")
def fw_ls(inst: Instance, *, max_swaps: int | None = None, shortlist: int | None = None, **fw_params: Any):
    """divopt's Frank-Wolfe ("fw_ws", any of its parameters) then best-improvement 1-swap local
    search. Never worse than "fw_ws"; the result is a 1-swap optimum over the whole pool.
    """
    from .frank_wolfe import fw_ws

    sel, iters, info = fw_ws(inst, **fw_params)
    idx, ls_info = polish(inst, sel, max_swaps=max_swaps, shortlist=shortlist)
    info = {**info, **ls_info, "fw_iterations": iters}
    return idx, iters + ls_info["swaps"], info


def _polished(base: str):
    def selector(inst: Instance, *, max_swaps: int | None = None, shortlist: int | None = None, **params: Any):
        sel, iters, info = get_selector(base)(inst, **params)
        idx, ls_info = polish(inst, sel, max_swaps=max_swaps, shortlist=shortlist)
        return idx, int(iters) + ls_info["swaps"], {**info, **ls_info, "base": base}

    selector.__name__ = f"{base}_ls"
    selector.__doc__ = f'"{base}" followed by best-improvement 1-swap local search (never worse than {base}).'
    return selector


# Greedy baselines polished by the local search; the base selector is looked up at call time, so
# these work as soon as the greedy module is registered.
for _base in ("mmr", "gmmr", "dpp", "topk"):
    register(f"{_base}_ls", params=LS_PARAMS, extends=_base)(_polished(_base))
