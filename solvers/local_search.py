"""Best-improvement 1-swap local search on a binary k-set, plus an iterated (perturbation) phase.

For a k-set S with v = sum_{l in S} e_l and u = E v, swapping i in S out and j not in S in
changes the CCBQP objective by the swap gain of :mod:`divopt.models.ccbqp`
(:func:`~divopt.models.ccbqp.swap_terms`, :func:`~divopt.models.ccbqp.swap_gains`)

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

import inspect

import contextlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from divopt.models import Instance
from divopt.models.ccbqp import linear_term, objective, objective_scale, swap_terms
from divopt.models.kernels import gather_rows, matmul, matvec
from divopt.models.validation import check_indices, check_nonnegative

from .selection import get_selector, register

__all__ = [
    "LSResult", "SwapCertificate", "local_search", "iterated_local_search", "polish", "ls_tolerance", "two_swap_search",
    "swap_certificate", "swap_certificates", "dense_share", "DENSE_SHARE",
]

# A certificate compares every row in one GEMM once its bound keeps more than this share of the pool.
DENSE_SHARE = 0.25
# Keep the n x k matrix W in memory up to this many entries (64 MiB in float32).
_FULL_LIMIT = 1 << 24
_SCAN_BLOCK = 1 << 14


@contextlib.contextmanager
def single_thread():
    """Run small tensor work on one intra-op thread.

    Work on a few hundred rows gains nothing from threads, and on a loaded machine waking the
    thread pool for each small op costs milliseconds (measured 10-20x slower end to end).
    """
    prev = torch.get_num_threads()
    if prev > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if prev > 1:
            torch.set_num_threads(prev)


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
    if max_swaps < 0:
        raise ValueError(f"max_swaps must be >= 0, got {max_swaps}")
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
    two = 2.0 * (1.0 - th)
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
        with single_thread():
            idx, f, swaps, moved, capped = _search_on(inst, P, R, idx, f, swaps, max_swaps, tol, trace, lin, two)
        if capped:
            return LSResult(idx, f, swaps, False, trace[0], trace, mode, scans)
        if whole:
            return LSResult(idx, f, swaps, True, trace[0], trace, mode, scans)
        if not moved and not first:  # the scan's best swap was rounding noise
            return LSResult(idx, f, swaps, True, trace[0], trace, mode, scans, u)
        first = False


def _search_on(inst, P, R, idx, f, swaps, max_swaps, tol, trace, lin, two):
    """Best-improvement swaps with entrants restricted to the rows P (S = P[:k] at the start)."""
    k = inst.k
    EP = gather_rows(inst.E, P)
    WP = EP @ R.T  # w_{P_r, S_p}; rows 0..k-1 of P are S in position order
    linP = lin.index_select(0, P)
    inS = torch.zeros(P.numel(), dtype=torch.bool, device=P.device)
    inS[:k] = True
    rowS = torch.arange(k, device=P.device)  # row of P that holds S[p]
    moved = False
    while True:
        if swaps >= max_swaps:
            return idx, f, swaps, moved, True
        uP = WP.sum(1)  # exact u on P (recomputed, so rounding never accumulates)
        b, a = swap_terms(linP, uP, inst.theta)
        D = b[:, None] + a[rowS][None, :] + two * WP
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
    two = 2.0 * (1.0 - theta)
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


@dataclass
class SwapCertificate:
    """One pass over the pool at a k-set S: the best 1-swap gain and the entrants that improve.

    best_gain : the largest Delta(i, j) over i in S and the entrants compared (-inf when the bound
        excludes every j). When it is <= tol, every entrant was compared or excluded by the bound,
        so S is 1-swap optimal over the whole pool; otherwise it is the best gain found before the
        comparison stopped (``compared`` rows, in decreasing order of their bound).
    entrants : the compared j with max_i Delta(i, j) > tol, by decreasing gain (at most ``max_entrants``).
    u : E v at S (v the sum of the selected rows), for every item.
    compared : entrants compared with S exactly; the others were excluded by the bound or not reached.
    """

    best_gain: float
    entrants: torch.Tensor
    u: torch.Tensor
    compared: int


@dataclass
class _CertState:
    """A certificate under way: the set's rows R, its swap terms, what the bound kept."""

    R: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    two: float
    u: torch.Tensor
    best: float = -float("inf")
    compared: int = 0
    found_j: list = field(default_factory=list)
    found_g: list = field(default_factory=list)

    def take(self, rows: torch.Tensor, gains: torch.Tensor, tol: float) -> bool:
        """Record the gains of ``rows``; True when one improves (> tol)."""
        self.compared += int(gains.numel())
        self.best = max(self.best, float(gains.max()))
        up = (gains > tol).nonzero().flatten()
        if up.numel():
            self.found_j.append(rows.index_select(0, up))
            self.found_g.append(gains.index_select(0, up))
        return bool(up.numel())

    def result(self, max_entrants: int | None) -> SwapCertificate:
        if not self.found_j:
            return SwapCertificate(self.best, self.u.new_zeros(0, dtype=torch.long), self.u, self.compared)
        js, gs = torch.cat(self.found_j), torch.cat(self.found_g)
        order = torch.argsort(gs, descending=True, stable=True)
        if max_entrants is not None:
            order = order[: int(max_entrants)]
        return SwapCertificate(self.best, js.index_select(0, order), self.u, self.compared)


def _bound_keeps(b: torch.Tensor, a: torch.Tensor, two: float, tol: float) -> torch.Tensor:
    """Rows j the certificate's bound cannot exclude: b_j + max_i a_i + 2 (1-theta) > tol (w_ij <= 1)."""
    return b > tol - (float(a.max()) + two)


def _member_terms(inst: Instance, idx: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """a_i for the members i of S (rows R = E_S), with u_i = row sums of E_S E_S^T: no pass over E."""
    lin = linear_term(inst.relevance.index_select(0, idx), inst.theta, inst.k)
    return swap_terms(lin, (R @ R.T).sum(1), inst.theta)[1]


def _certificate_head(inst: Instance, indices: Any, tol: float, u: torch.Tensor | None, block: int):
    """The bound, then the surviving rows in decreasing bound order, ``block`` at a time, until a
    block holds an improving swap. Returns (state, dense): ``dense`` when, after the first block,
    more than n/4 rows still survive (small k, where max_i a_i + 2 (1-theta) is loose): the rest
    is then cheaper as one GEMM over contiguous row blocks of E than as gathers."""
    E, k, th = inst.E, inst.k, inst.theta
    idx = torch.as_tensor(indices, device=inst.device)
    R = gather_rows(E, idx)
    if u is None:
        u = matvec(E, R.sum(0))
    b, a = swap_terms(linear_term(inst.relevance, th, k), u, th)
    st = _CertState(R, a.index_select(0, idx), b.index_fill_(0, idx, -torch.inf), 2.0 * (1.0 - th), u)
    cand = _bound_keeps(st.b, st.a, st.two, tol).nonzero().flatten()
    cand = cand.index_select(0, torch.argsort(st.b.index_select(0, cand), descending=True, stable=True))
    for s in range(0, cand.numel(), block):
        if s > 0 and cand.numel() - s > DENSE_SHARE * E.shape[0]:
            return st, True
        c = cand[s : s + block]
        gains = (gather_rows(E, c) @ R.T).mul_(st.two).add_(st.a).add_(st.b.index_select(0, c).unsqueeze(1)).amax(1)
        if st.take(c, gains, tol):
            break
    return st, False


def dense_share(problems: list, sets: list, tol: float, rows: torch.Tensor,
                E_rows: torch.Tensor | None = None) -> np.ndarray:
    """Per problem: the share of the sample ``rows`` that the certificate's bound keeps at its set.

    The bound of :func:`swap_certificate` keeps j when b_j + max_i a_i + 2 (1-theta) > tol; on the
    sample, u_j is the row sum of E_rows E_S^T and u_i (i in S) that of E_S E_S^T, so the estimate
    costs one small GEMM (|rows| x B k), no pass over the pool. Above ``DENSE_SHARE`` (small k, low
    theta) the certificate compares nearly every row anyway, and one GEMM E E_S^T, whose row sums
    are u, is cheaper than a GEMV for u followed by that GEMM (``dense`` in
    :func:`swap_certificates`).
    ``E_rows``: the sample's rows of E when the caller keeps them (saves the gather).
    """
    if not problems:
        return np.zeros(0)
    E, k = problems[0].E, problems[0].k
    rows = torch.as_tensor(rows, device=E.device)
    Rs = [gather_rows(E, torch.as_tensor(idx, device=E.device)) for idx in sets]
    W = (gather_rows(E, rows) if E_rows is None else E_rows) @ torch.cat(Rs).T  # (|rows|, B k)
    out = np.empty(len(problems))
    for p, (inst, idx, R) in enumerate(zip(problems, sets, Rs)):
        th = inst.theta
        idx = torch.as_tensor(idx, device=E.device)
        b = swap_terms(linear_term(inst.relevance.index_select(0, rows), th, k), W[:, p * k:(p + 1) * k].sum(1), th)[0]
        keep = _bound_keeps(b, _member_terms(inst, idx, R), 2.0 * (1.0 - th), tol) & ~torch.isin(rows, idx)
        out[p] = float(keep.double().mean())
    return out


def _dense_state(inst: Instance, idx: Any) -> _CertState:
    """A certificate that compares every row from the start: a_i from E_S E_S^T; u and b are filled
    block by block from the rows of the shared GEMM (u_j = sum_i w_ij)."""
    idx = torch.as_tensor(idx, device=inst.device)
    R = gather_rows(inst.E, idx)
    u = torch.empty(inst.n, dtype=R.dtype, device=inst.device)
    return _CertState(R, _member_terms(inst, idx, R), torch.empty_like(u), 2.0 * (1.0 - inst.theta), u)


def swap_certificates(
    problems: list, sets: list, tol: float, *, max_entrants: int | None = None, U: Any = None,
    block: int = 4096, dense: Any = None,
) -> list[SwapCertificate]:
    """:func:`swap_certificate` for B problems on one pool (the same E; relevance, theta and set per
    problem). ``U``: E v_b per problem, as an (n, B) tensor or a list of (n,) tensors / None (e.g.
    from one GEMM); a missing one costs a GEMV. The problems whose comparison goes dense share it:
    one GEMM ``E[s:e] [R_1 ... R_B']^T`` per row block serves all of them (the pool is read once,
    not once per problem). ``dense`` (B,) bools: problems compared with every row from the start,
    without the GEMV and the bound (their U entry is not read; u is the row sums of the block
    products, see :func:`dense_share`). Each certificate is the one :func:`swap_certificate` gives
    for its problem alone (up to the summation order of u).
    """
    block = int(block)
    fused = [False] * len(problems) if dense is None else [bool(x) for x in dense]
    if len(fused) != len(problems):
        raise ValueError(f"dense must have one entry per problem ({len(problems)}), got {len(fused)}")
    states, go = [], []
    for p, (inst, idx) in enumerate(zip(problems, sets)):
        if fused[p]:
            states.append(_dense_state(inst, idx))
            go.append(p)
            continue
        u = None if U is None else (U[:, p] if isinstance(U, torch.Tensor) else U[p])
        st, go_dense = _certificate_head(inst, idx, tol, u, block)
        states.append(st)
        if go_dense:  # the shared GEMM compares every row again: forget the head's rows
            st.found_j, st.found_g, st.compared = [], [], 0
            go.append(p)
    if go:
        E, k = problems[0].E, problems[0].k
        Rcat = torch.cat([states[p].R for p in go])  # (B' k, d)
        lin = {p: linear_term(problems[p].relevance, problems[p].theta, k) for p in go if fused[p]}
        members = {p: torch.as_tensor(sets[p], device=E.device) for p in go if fused[p]}
        rows = max(256, min(4 * block, (1 << 24) // Rcat.shape[0]))  # W block <= 16M entries
        for s in range(0, E.shape[0], rows):
            W = matmul(E[s : s + rows], Rcat.T)
            e = s + W.shape[0]
            r = torch.arange(s, e, device=W.device)
            for col, p in enumerate(go):
                st, Wp = states[p], W[:, col * k : (col + 1) * k]
                if fused[p]:  # u and b of this block from its products with S
                    st.u[s:e] = Wp.sum(1)
                    st.b[s:e] = swap_terms(lin[p][s:e], st.u[s:e], problems[p].theta)[0]
                    mine = members[p]
                    st.b[s:e].index_fill_(0, mine[(mine >= s) & (mine < e)] - s, -torch.inf)
                gains = (Wp * st.two).add_(st.a).add_(st.b[s:e].unsqueeze(1)).amax(1)
                st.take(r, gains, tol)
    return [st.result(max_entrants) for st in states]


def swap_certificate(
    inst: Instance, indices: torch.Tensor, tol: float, *, max_entrants: int | None = None,
    u: torch.Tensor | None = None, block: int = 4096,
) -> SwapCertificate:
    """Certify (or refute) 1-swap optimality of the k-set ``indices`` over the whole pool.

    One GEMV gives u = E v; with w_ij <= 1 every gain obeys Delta(i, j) <= b_j + max_i a_i + 2 (1-theta)
    (:func:`~divopt.models.ccbqp.swap_terms`), so only the entrants passing that bound are compared
    with S exactly (their rows times the k selected rows), ``block`` rows at a time in decreasing
    order of the bound; the comparison stops after the first block that holds an improving swap
    (the certificate has failed, and the best entrants are those of highest bound). When more than
    n/4 rows survive the first block (small k, where the bound is loose), the rest is one GEMM
    over contiguous blocks of E (every row, no gather) and the entrants are all improving rows.
    Entrants are returned by decreasing gain. O(n d) for the GEMV plus O(m k d) for the m rows
    compared; device and dtype follow the instance. ``u`` (= E v at S) may be passed when already
    computed, e.g. by one GEMM for a batch of problems (see :func:`swap_certificates`).
    """
    return swap_certificates([inst], [indices], tol, max_entrants=max_entrants,
                             U=None if u is None else [torch.as_tensor(u).reshape(-1)], block=block)[0]


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
        b = swap_terms(linear_term(inst.relevance, inst.theta, k), u, inst.theta)[0]
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


def two_swap_search(
    inst: Instance,
    indices: Any,
    *,
    candidates: int = 48,
    max_moves: int = 50,
    tol: float | None = None,
) -> LSResult:
    """1-swap local search, then best-improvement 2-swaps among the ``candidates`` best entrants.

    Removing I = {i1, i2} and adding J = {j1, j2} changes f by
        Delta1(i1, j1) + Delta1(i2, j2) - 2 (1-theta)(w_j1j2 + w_i1i2 - w_j1i2 - w_j2i1)
    (expand ||v - e_i1 - e_i2 + e_j1 + e_j2||^2), evaluated for all pairs at once as an
    (m, m, k, k) tensor from W = E_J E_S^T, E_J E_J^T and E_S E_S^T (no n x n matrix). After
    each improving 2-swap the 1-swap search runs again. The result is 1-swap optimal over the
    whole pool and 2-swap optimal over the entrants shortlist (b_j order, recomputed per move).
    """
    res = local_search(inst, indices, tol=tol)
    tol = ls_tolerance(inst) if tol is None else tol
    k, n, th = inst.k, inst.n, inst.theta
    m = min(int(candidates), n - k)
    if k < 2 or m < 2:
        return res
    two = 2.0 * (1.0 - th)
    lin = linear_term(inst.relevance, th, k)
    start, swaps, trace = res.start_objective, res.swaps, list(res.trace)
    idx, f = res.indices, res.objective
    for _ in range(int(max_moves)):
        R = gather_rows(inst.E, idx)
        u = matvec(inst.E, R.sum(0))
        b, a_all = swap_terms(lin, u, th)
        b = b.index_fill(0, idx, -torch.inf)
        J = torch.topk(b, m).indices
        EJ = gather_rows(inst.E, J)
        W = EJ @ R.T  # m x k
        a = a_all[idx]
        D1 = b[J][:, None] + a[None, :] + two * W  # m x k single-swap gains
        WJJ, WSS = EJ @ EJ.T, R @ R.T
        D2 = (D1[:, None, :, None] + D1[None, :, None, :]
              - two * (WJJ[:, :, None, None] + WSS[None, None, :, :] - W[:, None, None, :] - W[None, :, :, None]))
        eye_m = torch.eye(m, dtype=torch.bool, device=D2.device)
        eye_k = torch.eye(k, dtype=torch.bool, device=D2.device)
        D2[eye_m] = -torch.inf
        D2[:, :, eye_k] = -torch.inf
        flat = int(torch.argmax(D2))
        j1, j2, p1, p2 = np.unravel_index(flat, D2.shape)
        if float(D2[j1, j2, p1, p2]) <= tol:
            break
        new_idx = idx.clone()
        new_idx[p1], new_idx[p2] = J[j1], J[j2]
        if _objective64(inst, new_idx) <= f:
            break
        nxt = local_search(inst, new_idx, tol=tol)
        idx, f = nxt.indices, nxt.objective
        swaps += 2 + nxt.swaps
        trace.extend(nxt.trace)
    return LSResult(idx, f, swaps, True, start, trace, res.mode)


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


@register("fw_ls")
def fw_ls(inst: Instance, *, max_swaps: int | None = None, shortlist: int | None = None, **fw_params: Any):
    """divopt's Frank-Wolfe ("fw_ws", any of its parameters) then best-improvement 1-swap local
    search. Never worse than "fw_ws"; the result is a 1-swap optimum over the whole pool.
    """
    from .frank_wolfe import frank_wolfe

    sel, iters, info = frank_wolfe(inst, **fw_params)
    idx, ls_info = polish(inst, sel, max_swaps=max_swaps, shortlist=shortlist)
    info = {**info, **ls_info, "fw_iterations": iters}
    return idx, iters + ls_info["swaps"], info


def _with_ls_params(base_fn) -> inspect.Signature:
    """Signature of ``base_fn`` plus the keyword-only local-search parameters."""
    sig = inspect.signature(base_fn)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    names = {p.name for p in params}
    for name in ("max_swaps", "shortlist"):
        if name not in names:
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation="int | None"))
    return sig.replace(parameters=params)


fw_ls.__signature__ = _with_ls_params(get_selector("fw_ws"))


def _polished(base: str):
    def selector(inst: Instance, *, max_swaps: int | None = None, shortlist: int | None = None, **params: Any):
        sel, iters, info = get_selector(base)(inst, **params)
        idx, ls_info = polish(inst, sel, max_swaps=max_swaps, shortlist=shortlist)
        return idx, int(iters) + ls_info["swaps"], {**info, **ls_info, "base": base}

    selector.__name__ = f"{base}_ls"
    # advertise the base selector's parameters (introspection, e.g. the sweep's grid projection,
    # must not think **params accepts everything)
    selector.__signature__ = _with_ls_params(get_selector(base))
    selector.__doc__ = f'"{base}" followed by best-improvement 1-swap local search (never worse than {base}).'
    return selector


# Greedy baselines polished by the local search; the base selector is looked up at call time, so
# these work as soon as the greedy module is registered.
for _base in ("mmr", "gmmr", "dpp", "topk"):
    register(f"{_base}_ls")(_polished(_base))
