"""Multi-start Frank-Wolfe with theta-continuation and local search ("fw_ms"; the default fast method is "fw_ws_ms").

FW stops at the first stationary point of the relaxation; which one depends on the start. The
"fw_ms" selector therefore

divopt's own method (no paper defines it); what it adds to the paper's FW ("fw"): divopt's FW
variant ("fw_ws": top-k start, pairwise rounding, certified working set), local search,
restarts and perturbation. It

1. runs "fw_ls" on the full pool: "fw_ws", then the 1-swap local search, whose last
   pass over the pool also gives u = E v at the result;
2. restricts to a candidate sub-pool P of p = min(n, max(pool_size, 2k)) items (S and at
   least k entrants, so any k <= n runs; ``pool_size`` is a floor): that set S, then
   alternately the best entrants by the swap score b_j = theta (k-1) c_j - 2 (1-theta) u_j and
   the most relevant items (on a small pool, P is the whole pool);
3. on P, runs FW from several starts (uniform k/n, seeded random mixes), the CCBQP greedy, the
   registered greedy baselines (MMR, gMMR by default), a theta-continuation path (theta' = 1 -> theta
   in ``continuation_steps`` steps, each FW warm-started from the previous solution; at
   theta' = 1 top-k is optimal), each followed by local search; then seeded perturbation rounds
   (iterated local search) and best-improvement 2-swaps on the best set;
4. if that beat the fw_ls set, maps it back and runs the local search on the full pool again,
   so the result is a 1-swap optimum over ALL swaps of the pool and never worse than "fw_ls".

Step 3's cost does not grow with n, so on large
pools "fw_ms" costs "fw_ls" plus a constant. Deterministic for a given seed.

**Where it runs.** Steps 1 and 4 (the passes over the full pool) and the FW starts stay on the
pool's device. Step 3's search runs where
:func:`divopt_rag.solvers.ws_multistart.use_kernels` says (one rule for "fw_ms" and the default
method, for a batch of one problem here):

* on a CPU (float32 or float64 rows), always on the host kernels: G = E_P E_P^T in float64 and
  the compiled loops of :mod:`divopt_rag.solvers.kernels` (the greedy and the 1-swap local search
  of :mod:`~divopt_rag.solvers.kernels.moves`; MMR, gMMR, the perturbation rounds and the 2-swaps
  of :mod:`~divopt_rag.solvers.kernels.ms_moves`). Measured on benchmarks/large_k.py's instance
  (n = 2000, d = 64, theta = 0.5, one thread, docs/howto/performance.md): 5x faster than the
  lockstep search at k = 10, 22x at k = 100, and 1.2 s at k = 1000, where the lockstep search ran
  past 60 s. Same starts, same seeded draws, same moves in the same order: the sets differ only
  where float32 rounding in the lockstep search breaks a near-tie the other way (f equal on all
  160 seeded small instances of benchmarks/results/speed/large_k_fwms_tally.md; the tests check
  12 of their own, tests/solvers/test_ms_kernels.py);
* on a GPU, the lockstep tensor search (:class:`~divopt_rag.solvers.gram_search.GramSearch`,
  :mod:`~divopt_rag.solvers.gram_moves`) stays. Unmeasured: no GPU was lent to the session that
  moved the CPU search, so no measurement says the host kernels win there, for one problem or
  for large batches; the rule changes in ``use_kernels`` once one does.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import linear_term, swap_terms
from divopt_rag.models.kernels import gather_rows, matvec
from divopt_rag.models.domains import ITERATIONS_MAX, ROWS_MAX
from divopt_rag.models.parameters import SEED, Interval, Sequence
from divopt_rag.models.validation import check_theta

from .candidate_pools import interleave
from .frank_wolfe import fw_ws
from .greedy import TIE_EPS
from .gram_moves import draws, ils, two_swap as two_swap_search
from .gram_search import GramSearch
from .kernels import moves, ms_moves
from .kernels.checks import check_array, check_pool, check_set
from .kernels.moves import start as set_state
from .local_search import local_search, ls_tolerance
from .selection import METHODS, get_selector, register
from .ws_config import TWO_SWAP_ENTRANTS, TWO_SWAP_MOVES, WsMultistartConfig
from .ws_multistart import use_kernels

#: The search choices "fw_ms" shares with the default method (perturbation entrants, 2-swaps).
_SHARED = WsMultistartConfig()

__all__ = ["fw_ms", "theta_continuation"]

#: 1-swap moves of one local search on the sub-pool at most (the lockstep search's 1000 steps).
LS_MOVES = 1000
#: The greedy starts that the host search computes on the sub-pool's Gram matrix (the same picks
#: as the registered selectors, ties within float64 rounding to the lowest index); any other
#: name in ``greedy_starts`` runs its selector.
_HOST_GREEDY = {"mmr": ms_moves.mmr_greedy, "gmmr": ms_moves.gmmr_greedy}


def _indicator(inst: Instance, idx: torch.Tensor) -> torch.Tensor:
    x = torch.zeros(inst.n, dtype=inst.acc_dtype, device=inst.device)
    x[idx] = 1.0
    return x


def theta_continuation(
    inst: Instance,
    thetas: Any,
    *,
    start: Any = "topk",
    relax_penalty: float = 2.0,
    max_iter: int = 1000,
    polish: bool = True,
) -> list[torch.Tensor]:
    """Solve along a path of theta values, each FW warm-started from the previous solution.

    ``thetas`` is visited in the given order (e.g. decreasing from 1.0, where top-k is optimal);
    returns one k-set per theta. With ``polish`` each solution is improved by local search
    before it seeds the next theta. Useful for sweeps: a path of T thetas costs far less than T
    cold starts, since neighbouring thetas usually share most of their optimal set.
    """
    out = []
    x: Any = start
    for t in thetas:
        sub = inst.replace(theta=check_theta(t))
        idx, _, _ = fw_ws(sub, relax_penalty=relax_penalty, init=x, max_iter=max_iter)
        if polish:
            idx = local_search(sub, idx).indices
        out.append(idx)
        x = _indicator(sub, idx)
    return out


def sub_pool_size(pool_size: int, k: int, n: int) -> int:
    """fw_ms's sub-pool rows: min(n, max(pool_size, 2k)), the set and at least k entrants."""
    return min(n, max(int(pool_size), 2 * int(k)))


def _candidate_pool(inst: Instance, idx: torch.Tensor, u: torch.Tensor, pool_size: int) -> torch.Tensor:
    """S, then alternately the best entrants by swap score b_j = theta (k-1) c_j - 2 (1-theta) u_j
    (u = E v at S) and the most relevant items, up to pool_size."""
    b = swap_terms(linear_term(inst.relevance, inst.theta, inst.k), u, inst.theta)[0]
    m = min(inst.n, pool_size)
    by_b = torch.topk(b, m).indices
    by_c = torch.topk(inst.relevance, m).indices
    return interleave(idx.to(inst.device), [by_b, by_c], m)


@register("fw_ms", params={
    "n_random": Interval(int, 0, 1000), "continuation_steps": Interval(int, 0, 1000),
    "greedy_starts": Sequence("selector names", max_items=16), "perturb_rounds": Interval(int, 0, 10_000),
    "perturb_strength": Interval(int, 0, ROWS_MAX), "two_swap": bool, "pool_size": Interval(int, 1, ROWS_MAX),
    "relax_penalty": Interval(float, 0.0, None), "max_iter": Interval(int, 1, ITERATIONS_MAX),
    "tol": [Interval(float, 0.0, None), None], "seed": SEED})
def fw_ms(
    inst: Instance,
    *,
    n_random: int = 4,
    continuation_steps: int = 4,
    greedy_starts: tuple = ("mmr", "gmmr"),
    perturb_rounds: int = 100,
    perturb_strength: int = 4,
    two_swap: bool = True,
    pool_size: int = 300,
    relax_penalty: float = 2.0,
    max_iter: int = 1000,
    tol: float | None = None,
    seed: int = 0,
):
    """FW multi-start + theta-continuation + local search; see the module docstring.

    n_random : seeded random FW starts; continuation_steps : thetas on the path 1 -> theta
    (0 disables); greedy_starts : registered greedy selectors used as extra starts;
    perturb_rounds, perturb_strength : rounds and size (items swapped) of the perturbation
    phase (iterated local search) on the best set; two_swap : finish with best-improvement
    2-swaps over the entrant shortlist; pool_size : the least size of the candidate sub-pool on
    which all of this runs. Rule: the sub-pool has p = min(n, max(pool_size, 2k)) rows (k + a
    margin of at least k entrants beside the set S), so every k <= n runs; when p = n the
    whole pool is searched.
    info: best_start (which start won, "+perturb"/"+2swap" if those improved it), starts
    (objective per start), pool, swaps, one_swap_optimal, search (where the sub-pool search ran:
    "host kernels" or "lockstep", module docstring).
    """
    k, n = inst.k, inst.n
    pool_size = sub_pool_size(pool_size, k, n)
    if isinstance(greedy_starts, str) or not all(isinstance(g, str) for g in _iterable(greedy_starts)):
        raise TypeError(f"greedy_starts must be a sequence of selector names, got {greedy_starts!r}")
    fw_idx, total_iters, fw_info = fw_ws(inst, relax_penalty=relax_penalty, max_iter=max_iter, tol=tol)
    # "fw_ls" on the full pool first, so that fw_ms is never worse than fw_ls
    first = local_search(inst, fw_idx)
    total_iters += first.swaps
    if n > pool_size:
        u = first.u if first.u is not None else matvec(inst.E, gather_rows(inst.E, first.indices).sum(0))
        P = _candidate_pool(inst, first.indices, u, pool_size)
        sub = inst.subset(P.cpu().numpy())
        pos = {int(p): r for r, p in enumerate(P.tolist())}
        start_sub = torch.tensor([pos[int(i)] for i in first.indices], device=inst.device)
    else:
        P, sub, start_sub = None, inst, first.indices
    best_name, best_idx, starts, iters = _search_subpool(
        sub, start_sub, n_random, continuation_steps, greedy_starts, perturb_rounds, perturb_strength, two_swap,
        relax_penalty, max_iter, tol, seed)
    total_iters += iters
    idx = best_idx if P is None else P[best_idx]
    if torch.equal(idx, first.indices):
        final_swaps, optimal = 0, first.one_swap_optimal  # fw_ls's own pass already certified it
    else:
        final = local_search(inst, idx)  # pass(es) over the pool: 1-swap optimal over ALL swaps
        idx, final_swaps, optimal = final.indices, final.swaps, final.one_swap_optimal
    info = {
        "best_start": best_name,
        "starts": starts,
        "pool": n if P is None else int(P.numel()),
        "swaps": final_swaps,
        "one_swap_optimal": optimal,
        "fw_converged": fw_info["converged"],
        "search": "host kernels" if use_kernels(sub, 1) else "lockstep",
    }
    return idx, total_iters + final_swaps, info


def _iterable(value: Any) -> Any:
    try:
        return list(value)
    except TypeError:
        return [None]  # not iterable: refused by the caller's check


def _fw_starts(sub, n_random, continuation_steps, relax_penalty, max_iter, tol, seed):
    """The FW starts on the sub-pool (uniform, ``n_random`` seeded random points, the end of the
    theta path): [(name, k-set)], and the FW iterations they took."""
    out, total_iters = [], 0
    inits: list[tuple[str, Any, int | None]] = [("uniform", "uniform", None)] if n_random >= 0 else []
    inits += [(f"random{r}", "random", seed + r) for r in range(n_random)]
    for name, init, s in inits:
        idx, it, _ = fw_ws(sub, relax_penalty=relax_penalty, init=init, seed=s, max_iter=max_iter, tol=tol)
        total_iters += it
        out.append((name, idx))
    if continuation_steps > 0 and sub.theta < 1.0:
        path = np.linspace(1.0, sub.theta, continuation_steps + 1)[1:]
        path_sets = theta_continuation(sub, path, relax_penalty=relax_penalty, max_iter=max_iter, polish=False)
        out.append(("continuation", path_sets[-1]))
    return out, total_iters


def _search_subpool(sub, *args):
    """All starts, the perturbation phase and 2-swaps on the (small) sub-pool; returns the best.
    Where it runs: :func:`divopt_rag.solvers.ws_multistart.use_kernels` (one problem), the rule
    the default method follows too: on a CPU the host kernels (:func:`_search_subpool_host`),
    elsewhere the lockstep tensor search on the pool's device (:func:`_search_subpool_lockstep`)."""
    if use_kernels(sub, 1):
        return _search_subpool_host(sub, *args)
    return _search_subpool_lockstep(sub, *args)


def _search_subpool_host(sub, start_sub, n_random, continuation_steps, greedy_starts, perturb_rounds,
                         perturb_strength, two_swap, relax_penalty, max_iter, tol, seed):
    """:func:`_search_subpool_lockstep`'s steps in the compiled kernels of
    :mod:`divopt_rag.solvers.kernels` over G = E_P E_P^T in float64 (:mod:`.kernels.moves`: the
    greedy and the 1-swap local search; :mod:`.kernels.ms_moves`: MMR, gMMR, the perturbation
    rounds with the same seeded draws, 2-swaps over every member). The FW starts stay FW on the
    sub-pool's rows."""
    k, p, th = sub.k, sub.n, sub.theta
    E = sub.E.detach().to("cpu", torch.float64)
    G = torch.mm(E, E.T).numpy()
    c = check_array("c", np.ascontiguousarray(sub.relevance.detach().to("cpu", torch.float64).numpy()), np.float64, 1)
    G, lin, one = check_pool(G, np.ascontiguousarray(linear_term(c, th, k)), th, finite=False)  # rows checked
    ltol = ls_tolerance(sub)
    starts: dict[str, tuple[float, np.ndarray]] = {}

    def f_of(S: np.ndarray) -> float:
        return float(moves.set_f(G, lin, one, S))

    def consider(name: str, idx: Any) -> None:
        S = check_set(np.array(torch.as_tensor(idx).cpu().numpy(), dtype=np.int64).reshape(-1), p, k)
        u, inS = set_state(G, S)
        moves.local_search(G, lin, one, S, u, inS, ltol, LS_MOVES)
        starts[name] = (f_of(S), S)

    consider("fw_ls", start_sub)
    S = np.empty(k, dtype=np.int64)
    moves.greedy(G, lin, one, S, np.empty(p), np.empty(p, dtype=np.bool_))
    consider("greedy", S)
    for name in greedy_starts:
        if name in _HOST_GREEDY:
            S = np.empty(k, dtype=np.int64)
            _HOST_GREEDY[name](G, c, float(th), TIE_EPS, S)
            consider(name, S)
        elif name in METHODS:
            consider(name, get_selector(name)(sub)[0])
    fw, total_iters = _fw_starts(sub, n_random, continuation_steps, relax_penalty, max_iter, tol, seed)
    for name, idx in fw:
        consider(name, idx)
    best_name = max(starts, key=lambda s: starts[s][0])  # the first best start wins ties
    best_obj, best = starts[best_name]
    m = min(p - k, _SHARED.for_k(k).perturb_entrants)
    if perturb_rounds > 0 and m >= 1:
        strength = max(1, min(int(perturb_strength), k, m))
        out, into = draws(seed, perturb_rounds, 1, k, m, strength, "cpu")
        out_pos, into_rank = ms_moves.check_draws(np.ascontiguousarray(out[:, 0].numpy(), dtype=np.int64),
                                                  np.ascontiguousarray(into[:, 0].numpy(), dtype=np.int64), k, m)
        S = best.copy()
        u, inS = set_state(G, S)
        ms_moves.perturb_rounds(G, lin, one, S, u, inS, out_pos, into_rank, ltol, LS_MOVES)
        if f_of(S) > best_obj + ltol:
            best_name, best_obj, best = f"{best_name}+perturb", f_of(S), S
    if two_swap and k >= 2 and p - k >= 2:
        S = best.copy()
        u, inS = set_state(G, S)
        ms_moves.two_swaps(G, lin, one, S, u, inS, TWO_SWAP_ENTRANTS, k, ltol, TWO_SWAP_MOVES,
                           LS_MOVES)
        if f_of(S) > best_obj + ltol:
            best_name, best_obj, best = f"{best_name}+2swap", f_of(S), S
    idx = torch.as_tensor(best, device=sub.device)
    return best_name, idx, {s: v for s, (v, _) in starts.items()}, total_iters


def _search_subpool_lockstep(sub, start_sub, n_random, continuation_steps, greedy_starts, perturb_rounds,
                             perturb_strength, two_swap, relax_penalty, max_iter, tol, seed):
    """All starts, the perturbation phase and 2-swaps on the sub-pool, as lockstep tensor work
    (:class:`~divopt_rag.solvers.gram_search.GramSearch`) on the pool's device."""
    gs = GramSearch.from_instance(sub, ls_tolerance(sub))
    total_iters = 0
    starts: dict[str, tuple[float, Any]] = {}

    def consider(name: str, idx: Any) -> None:
        res = gs.ls(torch.as_tensor(idx).reshape(1, -1))
        starts[name] = (float(res.f[0]), res)

    consider("fw_ls", start_sub)
    consider("greedy", gs.greedy()[0])
    for name in greedy_starts:  # the greedy baselines, when registered, are cheap and diverse starts
        if name in METHODS:
            consider(name, get_selector(name)(sub)[0])
    fw, iters = _fw_starts(sub, n_random, continuation_steps, relax_penalty, max_iter, tol, seed)
    total_iters += iters
    for name, idx in fw:
        consider(name, idx)
    # the first best start wins ties (dicts keep insertion order), so the choice is deterministic
    best_name = max(starts, key=lambda s: starts[s][0])
    best_obj, best = starts[best_name]
    if perturb_rounds > 0:  # one perturbation per round, every round (no patience stop)
        res, _ = ils(gs, best, rounds=perturb_rounds, copies=1, strength=perturb_strength,
                     entrants=_SHARED.for_k(sub.k).perturb_entrants, patience=perturb_rounds, seed=seed)
        if float(res.f[0]) > best_obj + gs.tol:
            best_name, best_obj, best = f"{best_name}+perturb", float(res.f[0]), res
    if two_swap:
        res = two_swap_search(gs, best, entrants=TWO_SWAP_ENTRANTS, max_out=None,
                              max_moves=TWO_SWAP_MOVES)
        if float(res.f[0]) > best_obj + gs.tol:
            best_name, best_obj, best = f"{best_name}+2swap", float(res.f[0]), res
    best_idx = best.S[0]
    idx = torch.as_tensor(best_idx, device=sub.device)
    return best_name, idx, {s: v for s, (v, _) in starts.items()}, total_iters
