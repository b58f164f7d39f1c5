"""The moves that leave a 1-swap optimum, on a :class:`~divopt_rag.solvers.gram_search.GramSearch`: perturbation, 2-swaps, tabu.

Each works on many sets of many problems at once, in lockstep on the pool's device, and each
set follows the moves it follows alone (the random draws of a perturbation depend on the seed,
the round and the copy, never on the other problems of the batch):

* :func:`perturb`   ``copies`` perturbed copies of each set: ``strength`` random members out,
  random entrants among the ``entrants`` best by b_j in (iterated local search);
* :func:`two_swap_step` each set's best 2-swap over its best entrants and cheapest members;
* :func:`tabu`      1-swap tabu search (losing swaps allowed, recent moves barred).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .gram_search import GramSearch, SearchSets, steps_schedule

__all__ = ["perturb", "draws", "entrant_order", "two_swap_step", "two_swap", "tabu", "ils"]


def draws(seed: int, rounds: int, copies: int, k: int, m: int, strength: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The random choices of ``rounds`` perturbation rounds, drawn at once on the host from
    ``seed`` (so every device draws the same) and sent in one copy: (members out (rounds, copies,
    strength) positions in 0..k-1, entrants (rounds, copies, strength) ranks in 0..m-1), each row
    without repeats."""
    gen = torch.Generator().manual_seed(int(seed))
    out = torch.rand(rounds, copies, k, generator=gen).argsort(2)[:, :, :strength]
    into = torch.rand(rounds, copies, m, generator=gen).argsort(2)[:, :, :strength]
    both = torch.cat([out, into], 2).to(device)
    return both[:, :, :strength], both[:, :, strength:]


def entrant_order(gs: GramSearch, S: torch.Tensor, prob: torch.Tensor, m: int) -> torch.Tensor:
    """(N, m): each set's m best entrants by b_j = b0_j - 2 (1-theta) u_j (members last), in a
    stable order (ties to the lower row)."""
    N = S.shape[0]
    U = gs.member_rows(S, prob).sum(1)
    b = (gs.b0.index_select(0, prob) - U).scatter_(1, S, -torch.inf)
    return torch.sort(b, dim=1, descending=True, stable=True).indices[:, :m]


def perturb(gs: GramSearch, S: torch.Tensor, prob: torch.Tensor, out: torch.Tensor, into: torch.Tensor,
            m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Perturbed copies of each set S[n]: copy c swaps the members at positions out[c] (copies,
    strength) for the entrants of ranks into[c] among S[n]'s m best by b_j. Returns (N copies, k)
    sets and their problems (copy c of set n at row n copies + c)."""
    N, k = S.shape
    copies, strength = out.shape
    cand = entrant_order(gs, S, prob, m)  # (N, m)
    new = cand.unsqueeze(1).expand(N, copies, m).gather(2, into.unsqueeze(0).expand(N, copies, strength))
    T = S.unsqueeze(1).repeat(1, copies, 1)
    T.scatter_(2, out.unsqueeze(0).expand(N, copies, strength), new)
    return T.reshape(N * copies, k), prob.repeat_interleave(copies)


def two_swap_step(gs: GramSearch, S: torch.Tensor, prob: torch.Tensor, entrants: int, max_out: int | None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each set's best 2-swap: remove {S[q1], S[q2]}, add {j1, j2}, over the m = ``entrants``
    best entrants (by their best 1-swap gain) and the r = ``max_out`` members of largest a_i
    (those whose removal alone costs least; None: all k). Its gain is

        D(q1, j1) + D(q2, j2) - 2 (1-theta)(G_j1j2 + G_i1i2 - G_j1i2 - G_j2i1)

    for the 1-swap gains D; all pairs are one (m, m, r, r) tensor per set. Returns (the sets
    after their best 2-swap, its gain); a set whose best 2-swap gains <= tol is returned as is.
    """
    N, k = S.shape
    base, a0, b0 = gs._walk(prob)
    H = gs.Tf.index_select(0, (S + base).view(-1)).view(N, k, gs.p)  # T rows of the members
    U = H.sum(1)
    TSS = H.gather(2, S.unsqueeze(1).expand(N, k, k))  # (N, k, k)
    b = (b0 - U).scatter_(1, S, -torch.inf)
    a = (a0 + U).gather(1, S)  # (N, k)
    m = min(int(entrants), gs.p - k)
    r = k if max_out is None or max_out >= k else max(2, int(max_out))
    D = H + a.unsqueeze(2) + b.unsqueeze(1)  # (N, k, p) 1-swap gains
    J = torch.sort(D.amax(1), dim=1, descending=True, stable=True).indices[:, :m]  # (N, m)
    Q = torch.sort(torch.sort(a, dim=1, descending=True, stable=True).indices[:, :r], dim=1).values  # (N, r)
    D1 = D.gather(1, Q.unsqueeze(2).expand(N, r, gs.p)).gather(2, J.unsqueeze(1).expand(N, r, m))  # (N, r, m)
    TJ = gs.Tf.index_select(0, (J + base).view(-1)).view(N, m, gs.p)
    TJJ = TJ.gather(2, J.unsqueeze(1).expand(N, m, m))  # (N, m, m)
    SQ = S.gather(1, Q)
    TJQ = TJ.gather(2, SQ.unsqueeze(1).expand(N, m, r))  # (N, m, r): T[j, i_q]
    TQQ = TSS.gather(1, Q.unsqueeze(2).expand(N, r, k)).gather(2, Q.unsqueeze(1).expand(N, r, r))
    D1t = D1.transpose(1, 2)  # (N, m, r): [j, q]
    D2 = (D1t[:, :, None, :, None] + D1t[:, None, :, None, :]
          - (TJJ[:, :, :, None, None] + TQQ[:, None, None, :, :]
             - TJQ[:, :, None, None, :] - TJQ[:, None, :, :, None]))  # (N, j1, j2, q1, q2)
    eye_m = torch.eye(m, dtype=torch.bool, device=gs.device)[None, :, :, None, None]
    eye_r = torch.eye(r, dtype=torch.bool, device=gs.device)[None, None, None, :, :]
    D2.masked_fill_(eye_m | eye_r, -torch.inf)
    gain, flat = D2.reshape(N, -1).max(1)
    j1, rest = flat // (m * r * r), flat % (m * r * r)
    j2, rest = rest // (r * r), rest % (r * r)
    q1, q2 = rest // r, rest % r
    ok = gain > gs.tol
    T = S.clone()
    pos1, pos2 = Q.gather(1, q1[:, None]), Q.gather(1, q2[:, None])
    T.scatter_(1, pos1, torch.where(ok[:, None], J.gather(1, j1[:, None]), T.gather(1, pos1)))
    T.scatter_(1, pos2, torch.where(ok[:, None], J.gather(1, j2[:, None]), T.gather(1, pos2)))
    return T, gain


def tabu(gs: GramSearch, start: SearchSets, *, iters: int, tenure_in: int, tenure_out: int) -> SearchSets:
    """1-swap tabu search from N sets at once (the classic move of tabu search for the
    maximum-diversity problem): every step makes the best swap that is not tabu, even a losing
    one, so the search walks out of the start's basin instead of stopping at its 1-swap optimum.

    A row that leaves may not re-enter for ``tenure_in`` steps, a row that enters may not leave
    for ``tenure_out`` steps; a tabu swap is allowed when it would beat the best set seen
    (aspiration). Ties go to the first (entrant, position), as in :meth:`GramSearch.ls`; nothing
    is random. ``iters`` steps in lockstep, no host checkpoint; returns the best set met by each
    walk and its f (the start when no step beat it by more than tol). f of the current set is
    summed exactly (float64) from the members' rows every step, so no running sum drifts."""
    S = start.S.clone()
    prob = start.prob
    N, k, p = S.shape[0], gs.k, gs.p
    best, fbest = S.clone(), start.f.clone()
    ban_in = torch.zeros(N, p, dtype=torch.long, device=gs.device)  # step until which row j may not enter
    ban_out = torch.zeros(N, p, dtype=torch.long, device=gs.device)  # step until which row i may not leave
    base, a0, b0 = gs._walk(prob)
    lin, one_k = gs.lin64.index_select(0, prob), (1 - gs.th.index_select(0, prob)) * k
    for it in range(1, int(iters) + 2):
        H = gs.Tf.index_select(0, (S + base).view(-1)).view(N, k, p)
        cur = lin.gather(1, S).sum(1) + one_k - H.gather(2, S.unsqueeze(1).expand(N, k, k)).double().sum((1, 2)) / 2
        if it > 1:  # the set reached by the last step
            up = cur > fbest + gs.tol
            best = torch.where(up[:, None], S, best)
            fbest = torch.where(up, cur, fbest)
        if it > iters:
            break
        U = H.sum(1)
        b = (b0 - U).scatter_(1, S, -torch.inf)
        H += (a0 + U).gather(1, S).unsqueeze(2)
        top = H.amax(1).add_(b)
        # aspiration: the best swap of all is allowed when it beats the best set seen (then it
        # is the best allowed one); else the best swap whose rows are not tabu
        gain, j = top.max(1)
        free = gain.double() > fbest - cur + gs.tol
        stay = ban_out.gather(1, S) >= it  # (N, k) members that may not leave
        topt = H.masked_fill(stay.unsqueeze(2), -torch.inf).amax(1).add_(b.masked_fill_(ban_in >= it, -torch.inf))
        gt, jt = topt.max(1)
        j, gain = torch.where(free, j, jt), torch.where(free, gain, gt)
        # the leaving member: the first best for j among the members allowed to leave (all of them
        # when the swap is free: a free swap's gain beats every tabu-masked value)
        Hj = H.gather(2, j.view(N, 1, 1).expand(N, k, 1)).squeeze(2)
        q = Hj.masked_fill_(~free[:, None] & stay, -torch.inf).argmax(1)
        ok = torch.isfinite(gain)[:, None]  # else every swap is tabu: the walk waits
        q = q[:, None]
        i = S.gather(1, q)
        j = torch.where(ok, j[:, None], i)
        ok = ok.long()
        ban_in.scatter_reduce_(1, i, ok * (it + int(tenure_in)), "amax")
        ban_out.scatter_reduce_(1, j, ok * (it + int(tenure_out)), "amax")
        S.scatter_(1, q, j)
    return SearchSets(best, prob, fbest)


def ils(gs: GramSearch, sets: SearchSets, *, rounds: int, copies: int, strength: int, entrants: int, patience: int,
        seed: int, steps: Any = None) -> tuple[SearchSets, torch.Tensor]:
    """Iterated local search in rounds, every set at once: each round perturbs each set
    ``copies`` ways (:func:`perturb`), runs the local search on all copies together (``steps``:
    its chunk lengths, default strength + 2 doubling) and keeps a set's best copy if it gains
    more than tol. A set stops after ``patience`` rounds in a row without a gain or ``rounds``
    rounds; the host looks once per round (which sets go on). sets: 1-swap optimal sets and
    their f -> (sets, rounds run per set)."""
    S, f, prob = sets.S.clone(), sets.f.clone(), sets.prob
    N, k = S.shape
    m = min(gs.p - k, int(entrants))
    strength = max(1, min(int(strength), k, m))
    run = torch.zeros(N, dtype=torch.long, device=gs.device)
    if m < 1 or copies < 1 or rounds < 1:
        return SearchSets(S, prob, f), run
    out, into = draws(seed, rounds, copies, k, m, strength, gs.device)
    steps = steps if steps is not None else steps_schedule(strength + 2, 1000)
    idle = torch.zeros(N, dtype=torch.long, device=gs.device)
    active = torch.arange(N, device=gs.device)
    for r in range(int(rounds)):
        T, tp = perturb(gs, S.index_select(0, active), prob.index_select(0, active), out[r], into[r], m)
        res = gs.ls(T, tp, steps=steps)
        fT, i = res.f.view(-1, copies).max(1)
        win = fT > f.index_select(0, active) + gs.tol
        rows = res.S.view(-1, copies, k).gather(1, i.view(-1, 1, 1).expand(-1, 1, k)).squeeze(1)
        S.index_copy_(0, active, torch.where(win[:, None], rows, S.index_select(0, active)))
        f.index_copy_(0, active, torch.where(win, fT, f.index_select(0, active)))
        idle.index_copy_(0, active, torch.where(win, 0, idle.index_select(0, active) + 1))
        run.index_add_(0, active, torch.ones_like(active))
        if r == rounds - 1:
            break
        go = (idle.index_select(0, active) < patience).nonzero().squeeze(1)  # a host checkpoint
        if go.numel() == 0:
            break
        active = active.index_select(0, go)
    return SearchSets(S, prob, f), run


def two_swap(gs: GramSearch, sets: SearchSets, *, entrants: int, max_out: int | None, max_moves: int
             ) -> SearchSets:
    """Best-improvement 2-swaps (:func:`two_swap_step`), each followed by the 1-swap local search,
    kept while they raise f by more than tol, at most ``max_moves`` of them; every set at once,
    one host checkpoint per move (which sets go on)."""
    S, f, prob = sets.S.clone(), sets.f.clone(), sets.prob
    active = torch.arange(S.shape[0], device=gs.device)
    if gs.k < 2 or gs.p - gs.k < 2:
        return SearchSets(S, prob, f)
    for move in range(int(max_moves)):
        T, _ = two_swap_step(gs, S.index_select(0, active), prob.index_select(0, active), entrants, max_out)
        res = gs.ls(T, prob.index_select(0, active))
        win = res.f > f.index_select(0, active) + gs.tol
        S.index_copy_(0, active, torch.where(win[:, None], res.S, S.index_select(0, active)))
        f.index_copy_(0, active, torch.where(win, res.f, f.index_select(0, active)))
        go = win.nonzero().squeeze(1)  # a host checkpoint
        if go.numel() == 0:
            break
        active = active.index_select(0, go)
    return SearchSets(S, prob, f)
