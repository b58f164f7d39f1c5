"""Best-improvement 1-swap local search on a binary k-set, plus an iterated (perturbation) phase.

For a k-set S with v = sum_{l in S} e_l and u = E v, swapping i in S out and j not in S in
changes the CCBQP objective f = theta (k-1) c^T x + (1-theta)(k - ||E^T x||^2) by

    Delta(i, j) = theta (k-1)(c_j - c_i) - 2 (1-theta)(u_j - u_i + 1 - w_ij),   w_ij = e_i^T e_j

(||v - e_i + e_j||^2 = ||v||^2 + 2 - 2 w_ij + 2 u_j - 2 u_i). Splitting it as
Delta(i, j) = b_j + a_i + 2 (1-theta) w_ij with

    b_j = theta (k-1) c_j - 2 (1-theta) u_j               (the FW gradient at S, minus 2(1-theta)lambda x)
    a_i = -theta (k-1) c_i + 2 (1-theta)(u_i - 1)

all n k swap gains come from u (one GEMV, or the row sums of W) and W = E E_S^T (n x k: the
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

import numpy as np
import torch

from divopt.models import Instance, objective_scale
from divopt.models.kernels import gather_rows, matmul, matvec
from divopt.models.validation import check_indices, check_nonnegative

from .selection import get_selector, register

__all__ = ["LSResult", "local_search", "swap_gains", "iterated_local_search", "polish"]

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
    mode: str = "full"


def _objective64(inst: Instance, idx: torch.Tensor) -> float:
    """f(S) in float64 from the k selected rows (O(k d)); used to accept swaps safely."""
    rows = gather_rows(inst.E, idx).double()
    v = rows.sum(0)
    th = inst.theta
    return th * (inst.k - 1) * float(inst.relevance.index_select(0, idx).double().sum()) + (1.0 - th) * (
        idx.numel() - float(v @ v)
    )


def swap_gains(inst: Instance, indices: Any) -> torch.Tensor:
    """Delta(i, j) for every i in S (columns, in the order of ``indices``) and every j (rows).

    Returns an (n, k) float64 tensor; rows j in S are -inf. O(n k d) time, O(n k) memory: meant
    for tests and small pools. Delta(i, j) = f(S - i + j) - f(S).
    """
    idx = torch.as_tensor(check_indices(indices, inst.n, "indices", size=inst.k), device=inst.device)
    R = gather_rows(inst.E, idx)
    W = matmul(inst.E, R.T).double()
    u = W.sum(1)
    th, k = inst.theta, inst.k
    c = inst.relevance.double()
    b = th * (k - 1) * c - 2 * (1 - th) * u
    a = -th * (k - 1) * c[idx] + 2 * (1 - th) * (u[idx] - 1)
    D = b[:, None] + a[None, :] + 2 * (1 - th) * W
    D[idx] = -torch.inf
    return D


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

    On a large pool the swaps are searched on a working set P = S + the m best entrants by b_j
    (W_P = E_P E_S^T, (k+m) x k, kept up to date at O(m d) per swap: the pool is not read);
    when P has no improving swap, one pass over the pool (E E_S^T, block by block) either
    certifies the 1-swap optimum or rebuilds P around the current set. Typical cost: one or
    two passes over E, whatever the number of swaps.

    max_swaps : cap on swaps (default 10 k + 100).
    shortlist : m, the number of entrants kept in P (default: the whole pool if n <= 2048,
        else 4 k + 256).
    tol : minimum gain of an accepted swap, default 1e-9 k (k-1) (float64 E) or 1e-6 k (k-1).
    """
    n, k, th = inst.n, inst.k, inst.theta
    idx = torch.as_tensor(check_indices(indices, n, "indices", size=k), device=inst.device)
    max_swaps = 10 * k + 100 if max_swaps is None else int(max_swaps)
    if max_swaps < 0:
        raise ValueError(f"max_swaps must be >= 0, got {max_swaps}")
    if tol is None:
        tol = (1e-9 if inst.acc_dtype == torch.float64 else 1e-6) * objective_scale(k)
    tol = check_nonnegative(tol, "tol")
    if shortlist is None:
        m = n - k if n <= 2048 else 4 * k + 256
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
    lin = (th * (k - 1)) * inst.relevance
    two = 2.0 * (1.0 - th)
    swaps = 0
    while True:
        R = gather_rows(E, idx)  # k x d, the selected rows
        if whole:
            P = torch.cat([idx, _complement(idx, n)])
        else:
            j_best, u, best = _full_scan(E, R, idx, lin, two)
            if best <= tol:
                return LSResult(idx, f, swaps, True, trace[0], trace, mode)
            b = (lin - two * u).index_fill_(0, idx, -torch.inf)
            C = torch.topk(b, m).indices
            if not bool((C == j_best).any()):
                C = torch.cat([C, torch.tensor([j_best], device=C.device)])
            P = torch.cat([idx, C])
        EP = gather_rows(E, P)
        WP = EP @ R.T  # w_{P_r, S_p}; rows 0..k-1 of P are S in position order
        linP = lin.index_select(0, P)
        inS = torch.zeros(P.numel(), dtype=torch.bool, device=P.device)
        inS[:k] = True
        rowS = torch.arange(k, device=P.device)  # row of P that holds S[p]
        moved = False
        while True:
            if swaps >= max_swaps:
                return LSResult(idx, f, swaps, False, trace[0], trace, mode)
            uP = WP.sum(1)  # exact u on P (recomputed, so rounding never accumulates)
            a = -linP[rowS] + two * (uP[rowS] - 1.0)
            D = (linP - two * uP)[:, None] + a[None, :] + two * WP
            D[inS] = -torch.inf
            flat = int(torch.argmax(D))
            r, p = divmod(flat, k)
            if float(D[r, p]) <= tol:
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
            WP[:, p] = EP @ EP[r]
        if whole or not moved:  # P was the whole pool, or the scan's best swap was noise
            return LSResult(idx, f, swaps, True, trace[0], trace, mode)


def _complement(idx: torch.Tensor, n: int) -> torch.Tensor:
    mask = torch.ones(n, dtype=torch.bool, device=idx.device)
    mask[idx] = False
    return mask.nonzero().flatten()


def _full_scan(E: torch.Tensor, R: torch.Tensor, idx: torch.Tensor, lin: torch.Tensor, two: float):
    """One pass over the pool, block by block: u = E v and the best swap over all (i, j).

    u_i for i in S is R v (v = sum of the rows R), so a_i is known before the pass.
    """
    n, k = E.shape[0], R.shape[0]
    block = max(_SCAN_BLOCK, _FULL_LIMIT // max(k, 1))
    inS = torch.zeros(n, dtype=torch.bool, device=E.device)
    inS[idx] = True
    uS = R @ R.sum(0)
    a = -lin[idx] + two * (uS - 1.0)
    u = torch.empty(n, dtype=lin.dtype, device=E.device)
    best, j_best = -float("inf"), -1
    for s in range(0, n, block):
        Wb = matmul(E[s : s + block], R.T)
        ub = Wb.sum(1)
        u[s : s + block] = ub
        Db = (lin[s : s + block] - two * ub)[:, None] + a[None, :] + two * Wb
        Db[inS[s : s + block]] = -torch.inf
        flat = int(torch.argmax(Db))
        val = float(Db.flatten()[flat])
        if val > best:
            best, j_best = val, s + flat // k
    return j_best, u, best


def iterated_local_search(
    inst: Instance,
    indices: Any,
    *,
    rounds: int = 10,
    strength: int = 2,
    candidates: int | None = None,
    seed: int = 0,
    **ls_params: Any,
) -> LSResult:
    """Local search, then ``rounds`` perturbation rounds: swap ``strength`` random members of the
    best set for random items among the ``candidates`` best entrants (by b_j), re-run the local
    search, keep the result if it is strictly better. Deterministic for a given seed.
    """
    rng = np.random.default_rng(seed)
    best = local_search(inst, indices, **ls_params)
    k, n = inst.k, inst.n
    if n == k:
        return best
    m = min(n - k, 3 * k + 20 if candidates is None else int(candidates))
    strength = max(1, min(int(strength), k, m))
    total_swaps = best.swaps
    start = best.start_objective
    for _ in range(int(rounds)):
        idx = best.indices.clone()
        R = gather_rows(inst.E, idx)
        u = matvec(inst.E, R.sum(0))
        b = (inst.theta * (k - 1)) * inst.relevance - 2 * (1 - inst.theta) * u
        b[idx] = -torch.inf
        cand = torch.topk(b, m).indices.cpu().numpy()
        out_pos = rng.choice(k, size=strength, replace=False)
        new = rng.choice(cand, size=strength, replace=False)
        idx[torch.as_tensor(out_pos, device=idx.device)] = torch.as_tensor(new, device=idx.device)
        res = local_search(inst, idx, **ls_params)
        total_swaps += res.swaps
        if res.objective > best.objective:
            best = res
    best.swaps = total_swaps
    best.start_objective = start
    return best


def polish(inst: Instance, indices: Any, **ls_params: Any) -> tuple[torch.Tensor, dict]:
    """1-swap local search from any selection; returns (indices, info) for selectors."""
    res = local_search(inst, indices, **ls_params)
    info = {
        "swaps": res.swaps,
        "one_swap_optimal": res.one_swap_optimal,
        "start_objective": res.start_objective,
        "ls_trace": res.trace,
        "ls_mode": res.mode,
    }
    return res.indices, info


@register("fw_ls")
def fw_ls(
    inst: Instance,
    *,
    relax_penalty: float = 2.0,
    init: Any = "topk",
    max_iter: int = 1000,
    tol: float | None = None,
    seed: int | None = None,
    max_swaps: int | None = None,
    shortlist: int | None = None,
):
    """Frank-Wolfe ("fw") followed by best-improvement 1-swap local search (never worse than fw)."""
    from .frank_wolfe import frank_wolfe

    sel, iters, info = frank_wolfe(inst, relax_penalty=relax_penalty, init=init, max_iter=max_iter, tol=tol, seed=seed)
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
    register(f"{_base}_ls")(_polished(_base))
