"""The lockstep search of "fw_ws_ms" on the candidate pools of many problems at once (step 2 of
:mod:`divopt_rag.solvers.ws_multistart`): starts, their batched local search, then tabu walks,
2-swaps and perturbation rounds where the starts ended in different local optima, as tensor
operations over the pools' Gram matrices (:class:`~divopt_rag.solvers.gram_search.GramSearch`).
It runs where a measurement says it beats the host kernels (large batches on a GPU:
:func:`divopt_rag.solvers.ws_multistart.use_kernels`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from divopt_rag.models.ccbqp import objective_scale

from .frank_wolfe import random_point
from .gram_moves import ils, tabu, two_swap
from .gram_search import GramSearch, SearchSets
from .ws_config import WsMultistartConfig

__all__ = ["Clock", "SearchResult", "lockstep_search"]


class Clock:
    """Wall seconds per stage of a run (``lap`` adds the time since the last lap to a stage)."""


    def __init__(self, device: torch.device) -> None:
        self.secs: dict[str, float] = {}
        self.device = device
        self.t = time.perf_counter()

    def lap(self, stage: str) -> None:
        t = time.perf_counter()
        self.secs[stage] = self.secs.get(stage, 0.0) + t - self.t
        self.t = t


@dataclass
class SearchResult:
    """One Gram search of B problems (:func:`lockstep_search`): per problem its best set (positions in its
    pool), f, the f of every start after local search, the start that won, the stage that last
    improved and the perturbation rounds run."""

    S: torch.Tensor  # (B, k)
    f: np.ndarray  # (B,) float64
    names: list[str]
    f_starts: np.ndarray  # (B, R)
    best: np.ndarray  # (B,)
    phase: np.ndarray  # (B,) str
    rounds: np.ndarray  # (B,)


def _starts(gs: GramSearch, first: torch.Tensor | None, cfg: WsMultistartConfig) -> tuple[list[str], torch.Tensor]:
    """(names, (B, R, k) starting sets): the previous set, top-k, the greedy, Frank-Wolfe from the
    top-k vertex, from x0 = (k/p) 1 and from ``n_random`` seeded random points, and the end of a
    theta-continuation path 1 -> theta (each FW warm-started at the previous set)."""
    B, p, k = gs.B, gs.p, gs.k
    fw = dict(relax_penalty=cfg.relax_penalty, max_iter=cfg.max_iter, tol=cfg.fw_gap * objective_scale(k))
    topk = torch.sort(gs.relevance, dim=1, descending=True, stable=True).indices[:, :k]
    names, starts = ([], []) if first is None else (["previous"], [first])
    names += ["topk", "greedy"]
    starts += [topk, gs.greedy()]
    # Frank-Wolfe from the top-k vertex ("fw_topk"), from the paper's x0 ("uniform"), from seeded
    # random points, and from the top-k vertex at the thetas of a path 1 -> theta ("theta_path"):
    # every point in one lockstep call
    path = np.linspace(1.0, gs.theta, cfg.continuation_steps + 1)[1:-1].T if cfg.continuation_steps > 1 else None
    R = 2 + cfg.n_random + (0 if path is None else path.shape[1])
    X0 = torch.zeros(B, R, p, dtype=gs.dtype, device=gs.device)
    X0[:, 0].scatter_(1, topk, 1.0)
    X0[:, 1] = k / p
    if cfg.n_random:
        X0[:, 2 : 2 + cfg.n_random] = torch.as_tensor(
            np.stack([random_point(p, k, cfg.seed + r) for r in range(cfg.n_random)]), dtype=gs.dtype).to(gs.device)
    theta = None
    if path is not None:
        X0[:, 2 + cfg.n_random :].scatter_(2, topk.unsqueeze(1).expand(B, path.shape[1], k), 1.0)
        theta = np.concatenate([np.repeat(gs.theta[:, None], 2 + cfg.n_random, 1), path], 1)
    V = gs.fw(X0, theta=theta, **fw)
    names += ["fw_topk", "uniform"] + [f"random{r}" for r in range(cfg.n_random)]
    names += [] if path is None else [f"theta_path{t}" for t in range(path.shape[1])]
    starts += list(V.unbind(1))
    return names, torch.stack(starts, 1)


def _walkers(gs: GramSearch, starts: SearchSets, f_all: torch.Tensor, rg: torch.Tensor, best: SearchSets,
             w: int) -> SearchSets:
    """The starts of the tabu walks of the problems ``rg``: each problem's ``w`` best start optima
    (its best set first, ties to the earlier start), w sets per problem."""
    B, R = f_all.shape
    k = gs.k
    if w <= 1:
        return best
    fr = f_all.index_select(0, rg)
    order = torch.sort(fr, dim=1, descending=True, stable=True).indices[:, :w]
    S = starts.S.view(B, R, k).index_select(0, rg).gather(1, order[:, :, None].expand(-1, w, k))
    return SearchSets(S.reshape(-1, k), rg.repeat_interleave(w), fr.gather(1, order).reshape(-1))


def _best_of(sets: SearchSets, w: int, prob: torch.Tensor) -> SearchSets:
    """Each problem's best of its w consecutive sets (the first best on ties)."""
    if w <= 1:
        return sets
    k = sets.S.shape[1]
    f, i = sets.f.view(-1, w).max(1)
    return SearchSets(sets.S.view(-1, w, k).gather(1, i.view(-1, 1, 1).expand(-1, 1, k)).squeeze(1), prob, f)


#: The stages that leave a local optimum, in their order, with the label of ``info["phase"]``.
_MOVES = (("tabu", "+tabu"), ("two_swap", "+2swap"), ("perturb", "+perturb"))


def lockstep_search(gs: GramSearch, clock: Clock, first: torch.Tensor | None, cfg: WsMultistartConfig) -> SearchResult:
    """Starts and their batched local search, then, on the problems whose starts ended in
    different local optima, tabu walks from their best start optima, 2-swaps and (if asked)
    perturbation rounds from the best set; every problem of ``gs`` at once. ``first`` (B, k):
    optional sets (positions in the pools) searched as the first start."""
    B, k = gs.B, gs.k
    names, X = _starts(gs, first, cfg)
    clock.lap("starts")
    R = X.shape[1]
    res = gs.ls(X.reshape(B * R, k), torch.arange(B, device=gs.device).repeat_interleave(R))
    f_all = res.f.view(B, R)
    f_best, best = f_all.max(1)  # the first best start wins ties
    S = res.S.view(B, R, k).gather(1, best.view(B, 1, 1).expand(B, 1, k)).squeeze(1)
    # where the starts all ended in the same local optimum the moves below found nothing on the
    # development pools (docs/howto/performance.md); where they differ (a rugged pool) they run
    read = torch.cat([f_all, best.double()[:, None], f_best[:, None]], 1).cpu().numpy()  # a host read
    f_starts, best_np, f_np = read[:, :R], read[:, R].astype(np.int64), read[:, R + 1].copy()
    clock.lap("ls")
    rugged = np.flatnonzero(f_starts.max(1) - f_starts.min(1) > gs.tol)
    phase = np.array(["starts"] * B, dtype=object)
    rounds = np.zeros(B, dtype=np.int64)
    if not rugged.size:
        return SearchResult(S, f_np, names, f_starts, best_np, phase, rounds)
    rg = torch.as_tensor(rugged, device=gs.device)
    cur = SearchSets(S.index_select(0, rg), rg, f_best.index_select(0, rg))
    code = torch.zeros(rg.numel(), dtype=torch.long, device=gs.device)  # the last move that gained
    run = None
    for m, (stage, _) in enumerate(_MOVES, start=1):
        if stage == "tabu" and cfg.tabu_iters > 0:
            w = min(cfg.tabu_walks, R)
            walk = tabu(gs, _walkers(gs, res, f_all, rg, cur, w), iters=cfg.tabu_iters,
                        tenure_in=cfg.tabu_tenure_in, tenure_out=cfg.tabu_tenure_out)
            # the best of a walk is 1-swap optimal unless it was its last step
            new = _best_of(gs.ls(walk.S, walk.prob), w, rg)
        elif stage == "two_swap" and cfg.two_swap:
            new = two_swap(gs, cur, entrants=cfg.two_swap_entrants, max_out=cfg.two_swap_out,
                           max_moves=cfg.two_swap_moves)
        elif stage == "perturb" and cfg.perturb_rounds > 0 and cfg.perturb_batch > 0:
            new, run = ils(gs, cur, rounds=cfg.perturb_rounds, copies=cfg.perturb_batch,
                           strength=cfg.perturb_strength, entrants=cfg.perturb_entrants, patience=cfg.patience,
                           seed=cfg.seed)
        else:
            continue
        up = new.f > cur.f + gs.tol
        code = torch.where(up, m, code)
        cur = SearchSets(torch.where(up[:, None], new.S, cur.S), rg, torch.where(up, new.f, cur.f))
        clock.lap(stage)
    S = S.index_copy(0, rg, cur.S)
    tail = [cur.f, code.double()] + ([] if run is None else [run.double()])
    read = torch.stack(tail).cpu().numpy()  # a host read
    f_np[rugged] = read[0]
    labels = np.array(["starts"] + [label for _, label in _MOVES], dtype=object)
    phase[rugged] = labels[read[1].astype(np.int64)]
    if run is not None:
        rounds[rugged] = read[2].astype(np.int64)
    return SearchResult(S, f_np, names, f_starts, best_np, phase, rounds)
