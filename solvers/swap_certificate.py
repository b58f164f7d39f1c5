"""One-pass certificate of 1-swap optimality over a whole pool (the check behind "fw_ws_ms").

For a k-set S, with u = E v and the swap terms of :func:`divopt_rag.models.ccbqp.swap_terms`, every
swap gain is Delta(i, j) = b_j + a_i + 2 (1-theta) w_ij. Since w_ij <= 1, a row j whose
b_j + max_i a_i + 2 (1-theta) <= tol cannot improve S. One GEMV gives u and the bound; only the
rows the bound keeps are compared with S exactly. Where it keeps most rows (small k, low theta),
one GEMM E E_S^T gives u as its row sums and every comparison at once; once it has found an
improving row, it stops comparing at the next check block and computes only u for the rest
(the certificate has failed; the rest would cost k columns per row, u one). B problems on one
pool share their GEMMs (:func:`swap_certificates`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import linear_term, pair_weight, swap_terms
from divopt_rag.models.kernels import gather_rows, matmul, matvec

__all__ = ["SwapCertificate", "swap_certificates", "sample_estimate", "go_dense", "DENSE_SHARE"]

#: A certificate compares every row in one GEMM once its bound keeps more than this share of the pool.
DENSE_SHARE = 0.25


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
    near : the ``near`` compared rows of highest gain max_i Delta(i, j), by decreasing gain (ties
        in comparison order), improving or not: the rows that come closest to improving S, where
        a swap of several rows or a gain below tol is to be found (empty unless asked for).
    """

    best_gain: float
    entrants: torch.Tensor
    u: torch.Tensor
    compared: int
    near: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))


@dataclass
class _CertState:
    """A certificate under way: the set's rows R, its swap terms, and the gains of the rows
    compared so far, kept on the device (the host reads them once, in :func:`swap_certificates`)."""

    R: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    two: float
    u: torch.Tensor
    compared: int = 0
    rows: list = field(default_factory=list)  # compared rows, in comparison order
    gains: list = field(default_factory=list)  # their gains max_i Delta(i, j)

    def take(self, rows: torch.Tensor, gains: torch.Tensor) -> None:
        self.compared += int(gains.numel())
        self.rows.append(rows)
        self.gains.append(gains)

    def forget(self) -> None:
        self.compared, self.rows, self.gains = 0, [], []

    def summary(self, tol: float) -> torch.Tensor:
        """(best gain, improving rows, finite gains) of the rows compared, as one small tensor."""
        if not self.gains:
            return torch.tensor([-torch.inf, 0, 0], dtype=torch.float64, device=self.u.device)
        g = torch.cat(self.gains)
        self.all_j, self.all_g = torch.cat(self.rows), g
        return torch.stack([g.max().double(), (g > tol).sum().double(), torch.isfinite(g).sum().double()])

    def result(self, read: np.ndarray, max_entrants: int | None, near: int) -> SwapCertificate:
        best, up, finite = float(read[0]), int(read[1]), int(read[2])
        empty = self.u.new_zeros(0, dtype=torch.long)
        if not self.gains:
            return SwapCertificate(best, empty, self.u, self.compared, empty)
        # by decreasing gain, ties in comparison order: the improving rows lead, the finite ones follow
        order = torch.sort(self.all_g, descending=True, stable=True).indices
        j = self.all_j.index_select(0, order[: max(up, min(near, finite))])
        ent = j[: up if max_entrants is None else min(up, int(max_entrants))]
        return SwapCertificate(best, ent, self.u, self.compared, j[: min(near, finite)] if near else empty)


def _bound_keeps(b: torch.Tensor, a: torch.Tensor, two: float, tol: float) -> torch.Tensor:
    """Rows j the certificate's bound cannot exclude: b_j + max_i a_i + 2 (1-theta) > tol (w_ij <= 1)."""
    return b > (tol - two) - a.max()


def _member_terms(inst: Instance, idx: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """a_i for the members i of S (rows R = E_S), with u_i = row sums of E_S E_S^T: no pass over E."""
    lin = linear_term(inst.relevance.index_select(0, idx), inst.theta, inst.k)
    return swap_terms(lin, (R @ R.T).sum(1), inst.theta)[1]


def _gains(st: _CertState, E_rows: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """max_i Delta(i, j) for the rows j: (E_rows R^T) 2 (1-theta) + a_i, max over i, + b_j."""
    return (E_rows @ st.R.T).mul_(st.two).add_(st.a).amax(1).add_(st.b.index_select(0, rows))


def _certificate_head(inst: Instance, indices: Any, tol: float, u: torch.Tensor | None, block: int
                      ) -> tuple[_CertState, torch.Tensor]:
    """The bound, then the ``block`` surviving rows of highest bound compared exactly. Returns the
    state and the surviving rows not yet compared (in decreasing bound order)."""
    E, k, th = inst.E, inst.k, inst.theta
    idx = torch.as_tensor(indices, device=inst.device)
    R = gather_rows(E, idx)
    if u is None:
        u = matvec(E, R.sum(0))
    b, a = swap_terms(linear_term(inst.relevance, th, k), u, th)
    st = _CertState(R, a.index_select(0, idx), b.index_fill_(0, idx, -torch.inf), pair_weight(th), u)
    cand = _bound_keeps(st.b, st.a, st.two, tol).nonzero().flatten()  # a host read: the rows the bound keeps
    cand = cand.index_select(0, torch.argsort(st.b.index_select(0, cand), descending=True, stable=True))
    c = cand[:block]
    if c.numel():
        st.take(c, _gains(st, gather_rows(E, c), c))
    return st, cand[block:]


def sample_estimate(problems: list, sets: list, tol: float, rows: Any,
                    E_rows: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per problem, on the sample ``rows``: (the share of them the certificate's bound keeps at its
    set, whether one of them improves the set).

    The bound keeps j when b_j + max_i a_i + 2 (1-theta) > tol (:func:`swap_certificates`); u_j is
    the row sum of E_rows E_S^T and u_i (i in S) that of E_S E_S^T, and the same products give
    every gain Delta(i, j) of a sample row: one small GEMM (|rows| x B k), no pass over the pool,
    and one host read for all problems. ``E_rows``: the sample's rows of E when the caller keeps
    them (saves the gather).
    """
    if not problems:
        return np.zeros(0), np.zeros(0, dtype=bool)
    E, k = problems[0].E, problems[0].k
    rows = torch.as_tensor(rows, device=E.device)
    Rs = [gather_rows(E, torch.as_tensor(idx, device=E.device)) for idx in sets]
    W = (gather_rows(E, rows) if E_rows is None else E_rows) @ torch.cat(Rs).T  # (|rows|, B k)
    out = []
    for p, (inst, idx, R) in enumerate(zip(problems, sets, Rs)):
        th, two = inst.theta, pair_weight(inst.theta)
        idx = torch.as_tensor(idx, device=E.device)
        Wp = W[:, p * k:(p + 1) * k]
        b = swap_terms(linear_term(inst.relevance.index_select(0, rows), th, k), Wp.sum(1), th)[0]
        a = _member_terms(inst, idx, R)
        outside = ~torch.isin(rows, idx)
        share = (_bound_keeps(b, a, two, tol) & outside).double().mean()
        gains = (Wp * two).add_(a).add_(b.unsqueeze(1)).amax(1)
        out.append(torch.stack([share, ((gains > tol) & outside).any().double()]))
    read = torch.stack(out).cpu().numpy()  # one host read
    return read[:, 0], read[:, 1] > 0


def go_dense(problems: list, sets: list, tol: float, rows: torch.Tensor,
             E_rows: torch.Tensor | None = None) -> np.ndarray:
    """Per problem: should its certificate compare every row in one GEMM (``dense`` in
    :func:`swap_certificates`)? Yes where the bound keeps more than ``DENSE_SHARE`` of the sample
    (:func:`sample_estimate`; small k, low theta) and no sample row improves S. A certificate that
    holds then compares nearly every row anyway, and one GEMM E E_S^T, whose row sums are u, is
    cheaper than a GEMV for u followed by that GEMM. An improving sample row means the certificate
    fails, and the GEMV path stops at its first block of improving rows instead (a set far from
    a 1-swap optimum, e.g. the first one searched, costs a GEMV rather than a k-column GEMM).
    """
    share, improves = sample_estimate(problems, sets, tol, rows, E_rows)
    return (share > DENSE_SHARE) & ~improves


def _dense_state(inst: Instance, idx: Any) -> _CertState:
    """A certificate that compares every row from the start: a_i from E_S E_S^T; u and b are filled
    block by block from the rows of the shared GEMM (u_j = sum_i w_ij)."""
    idx = torch.as_tensor(idx, device=inst.device)
    R = gather_rows(inst.E, idx)
    u = torch.empty(inst.n, dtype=R.dtype, device=inst.device)
    return _CertState(R, _member_terms(inst, idx, R), torch.empty_like(u), pair_weight(inst.theta), u)


def _compare_every_row(problems: list, sets: list, states: list, go: list, fused: list, tol: float,
                       check: int, stop_early: bool) -> None:
    """The dense comparison of the problems ``go``: one GEMM per row block over the union of their
    selected rows (a sweep's problems share most of them), in storage order. With ``stop_early``
    the host looks once, after the first ``check`` rows: a problem that has found an improving row
    there stops comparing (its certificate has failed); a fused one (no GEMV, u from the row sums)
    still needs u for the rest of the pool, so its v rides along in the GEMM from there on.
    ``check`` does not depend on the batch, so each problem stops where it stops alone."""
    E, k, n = problems[0].E, problems[0].k, problems[0].E.shape[0]
    lin = {p: linear_term(problems[p].relevance, problems[p].theta, k) for p in go if fused[p]}
    members = {p: torch.as_tensor(sets[p], device=E.device) for p in go if fused[p]}
    active, tail = list(go), []  # comparing; failed fused ones that need only u
    s0 = 0
    for end in ((min(check, n), n) if stop_early else (n,)):
        if s0 >= end or not (active or tail):
            break
        cols, shared = [], False
        if active:
            cat = torch.cat([torch.as_tensor(sets[p], device=E.device) for p in active])
            union, col = torch.unique(cat, return_inverse=True)
            shared = union.numel() < cat.numel()  # else the sets in order: each problem's columns are a view
            cols.append(gather_rows(E, union) if shared else torch.cat([states[p].R for p in active]))
        if tail:
            cols.append(torch.stack([states[p].R.sum(0) for p in tail]))  # their v: u only
        V = torch.cat(cols)  # (|union| + |tail|, d)
        rows = check
        while rows > 256 and rows * V.shape[0] > (1 << 24):  # W block <= 16M entries
            rows //= 2
        for s in range(s0, end, rows):
            # (|V|, rows): each selected row's products with the block, one contiguous row (a
            # problem's k rows are then k contiguous copies, not k strided columns of a wide block)
            W = matmul(E[s : min(s + rows, end)], V.T).T.contiguous()
            e = s + W.shape[1]
            r = torch.arange(s, e, device=W.device)
            for i, p in enumerate(active):
                st = states[p]
                Wp = W.index_select(0, col[i * k : (i + 1) * k]) if shared else W[i * k : (i + 1) * k]
                if fused[p]:  # u and b of this block from its products with S
                    st.u[s:e] = Wp.sum(0)
                    st.b[s:e] = swap_terms(lin[p][s:e], st.u[s:e], problems[p].theta)[0]
                    mine = members[p]
                    st.b[s:e].masked_fill_(_in_block(mine, s, e), -torch.inf)
                # max_i (a_i + 2 (1-theta) w_ij) + b_j: adding b_j after the max gives the same
                # value (rounding is monotone) at a k-th of the cost
                st.take(r, (Wp * st.two).add_(st.a.unsqueeze(1)).amax(0).add_(st.b[s:e]))
            for t, p in enumerate(tail):
                states[p].u[s:e] = W[V.shape[0] - len(tail) + t]
        s0 = end
        if stop_early and end == min(check, n) and active:  # the one host look (made whatever n, so that
            # the number of host reads does not depend on it): which comparisons have found an improving row
            found = torch.stack([torch.cat(states[p].gains).max() for p in active]).cpu().numpy() > tol
            tail += [p for p, fd in zip(active, found) if fd and fused[p]]
            active = [p for p, fd in zip(active, found) if not fd]


def _in_block(members: torch.Tensor, s: int, e: int) -> torch.Tensor:
    """(e - s,) mask of the block rows s..e-1 that are members (no host read)."""
    inside = ((members >= s) & (members < e)).to(torch.int32)
    mask = torch.zeros(e - s, dtype=torch.int32, device=members.device)
    return mask.scatter_reduce_(0, (members - s).clamp(0, e - s - 1), inside, "amax").bool()


def swap_certificates(
    problems: list, sets: list, tol: float, *, max_entrants: int | None = None, U: Any = None,
    block: int = 4096, dense: Any = None, stop_early: bool = True, near: int = 0,
) -> list[SwapCertificate]:
    """Certify (or refute) 1-swap optimality of each problem's k-set over the whole pool: B problems
    on one pool (the same E; relevance, theta and set per problem).

    Per problem one GEMV gives u = E v; with w_ij <= 1 every gain obeys
    Delta(i, j) <= b_j + max_i a_i + 2 (1-theta) (:func:`~divopt_rag.models.ccbqp.swap_terms`), so
    only the entrants passing that bound are compared with S exactly (their rows times the k
    selected rows), the ``block`` of highest bound first; the comparison stops there when that
    block holds an improving swap (the certificate has failed, and the best entrants are those of
    highest bound), else every kept row is compared. When more than n/4 rows survive the first
    block (small k, where the bound is loose), every row is compared in storage order instead:
    the problems whose comparison goes dense share one GEMM ``E[s:e] R_U^T`` per row block, R_U
    the union of their selected rows (the pool is read once, not once per problem); with
    ``stop_early`` a dense comparison that has found an improving row in its first ``4 block``
    rows stops there (one host look). Entrants are returned by decreasing gain, at most
    ``max_entrants``. O(n d) for the GEMV plus O(m k d) for the m rows compared; device and dtype
    follow the problems. The host reads a fixed number of small results per call, whatever n:
    the rows the bound keeps, whether the first block improves, the dense look, the summaries.

    ``U``: E v_b per problem, as an (n, B) tensor or a list of (n,) tensors / None (e.g. from one
    GEMM); a missing one costs a GEMV. ``dense`` (B,) bools: problems compared with every row
    from the start, without the GEMV and the bound (their U entry is not read; u is the row sums
    of the block products; :func:`go_dense` decides). Each certificate is the one its problem
    gets alone (up to the summation order of u). ``near``: keep the ``near`` compared rows of
    highest gain, improving or not (:attr:`SwapCertificate.near`; rows the bound excluded are
    not among them).
    """
    block = int(block)
    if isinstance(near, bool) or not isinstance(near, (int, np.integer)) or near < 0:
        raise ValueError(f"near must be an int >= 0, got {near!r}")
    near = int(near)
    fused = [False] * len(problems) if dense is None else [bool(x) for x in dense]
    if len(fused) != len(problems):
        raise ValueError(f"dense must have one entry per problem ({len(problems)}), got {len(fused)}")
    states, rest = [], []
    for p, (inst, idx) in enumerate(zip(problems, sets)):
        if fused[p]:
            states.append(_dense_state(inst, idx))
            rest.append(None)
            continue
        u = None if U is None else (U[:, p] if isinstance(U, torch.Tensor) else U[p])
        st, left = _certificate_head(inst, idx, tol, u, block)
        states.append(st)
        rest.append(left)
    heads = [p for p in range(len(problems)) if not fused[p]]
    go = [p for p in range(len(problems)) if fused[p]]
    if heads:  # one host look: did the first block improve, and how many rows are left
        look = torch.stack([torch.stack([(torch.cat(states[p].gains).max() if states[p].gains
                                          else states[p].u.new_tensor(-torch.inf)).double(),
                                         torch.tensor(float(rest[p].numel()), dtype=torch.float64,
                                                      device=states[p].u.device)]) for p in heads]).cpu().numpy()
        for p, (first_best, left) in zip(heads, look):
            n = problems[p].n
            if first_best > tol or left == 0:
                continue
            if left > DENSE_SHARE * n:  # the shared GEMM compares every row again: forget the head's rows
                states[p].forget()
                go.append(p)
                continue
            st, E = states[p], problems[p].E
            for s in range(0, int(left), 4 * block):  # every kept row, no host look
                c = rest[p][s : s + 4 * block]
                st.take(c, _gains(st, gather_rows(E, c), c))
    if go:
        go.sort()
        _compare_every_row(problems, sets, states, go, fused, tol, 4 * block, stop_early)
    read = torch.stack([st.summary(tol) for st in states]).cpu().numpy()  # one host read for every problem
    return [st.result(r, max_entrants, near) for st, r in zip(states, read)]
