"""Multi-start Frank-Wolfe with theta-continuation and local search ("fw_ms", the default fast method).

FW stops at the first stationary point of the relaxation; which one depends on the start. The
"fw_ms" selector therefore

1. runs FW (top-k start) + 1-swap local search on the full pool (cost: plain FW plus a few GEMVs);
2. restricts to a candidate sub-pool P of at most ``pool_size`` items: the incumbent S, the
   best entrants by the swap score b_j = theta (k-1) c_j - 2 (1-theta) e_j^T v_S and the most
   relevant items (on a small pool, P is the whole pool);
3. on P, runs FW from several starts (top-k of relevance, uniform k/n, seeded random mixes, the
   CCBQP greedy), a theta-continuation path (theta' = 1 -> theta in ``continuation_steps`` steps,
   each FW warm-started from the previous solution; at theta' = 1 top-k is optimal), each
   followed by local search, then a few seeded perturbation rounds on the best set;
4. maps the best set back and runs the local search on the full pool once more, so the result is
   a 1-swap optimum over ALL swaps of the pool and never worse than "fw_ls".

Steps 3's cost does not grow with n, so on large pools "fw_ms" costs about plain FW plus a few
passes over E. Deterministic for a given seed.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from divopt.models import Instance
from divopt.models.kernels import gather_rows, matvec
from divopt.models.validation import check_theta

from .frank_wolfe import frank_wolfe
from .local_search import iterated_local_search, local_search
from .selection import register

__all__ = ["multistart", "ccbqp_greedy", "theta_continuation"]


def ccbqp_greedy(inst: Instance) -> torch.Tensor:
    """Greedy on f itself: add the item of largest marginal gain theta (k-1) c_j - 2 (1-theta) e_j^T v_S.

    (Adding j to S changes |S| - ||v||^2 by 1 - (1 + 2 e_j^T v_S).) O(k n d): one GEMV per pick.
    """
    k, th = inst.k, inst.theta
    lin = (th * (k - 1)) * inst.relevance
    u = torch.zeros_like(lin)
    taken = torch.zeros(inst.n, dtype=torch.bool, device=inst.device)
    picks = []
    for _ in range(k):
        score = (lin - 2 * (1 - th) * u).masked_fill(taken, -torch.inf)
        j = int(torch.argmax(score))
        picks.append(j)
        taken[j] = True
        u = u + matvec(inst.E, gather_rows(inst.E, torch.tensor([j], device=inst.device))[0])
    return torch.tensor(picks, device=inst.device)


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
        idx, _, _ = frank_wolfe(sub, relax_penalty=relax_penalty, init=x, max_iter=max_iter)
        if polish:
            idx = local_search(sub, idx).indices
        out.append(idx)
        x = _indicator(sub, idx)
    return out


def _candidate_pool(inst: Instance, idx: torch.Tensor, pool_size: int) -> torch.Tensor:
    """S, then alternately the best entrants by swap score b_j and by relevance, up to pool_size."""
    k, th = inst.k, inst.theta
    u = matvec(inst.E, gather_rows(inst.E, idx).sum(0))
    b = (th * (k - 1)) * inst.relevance - 2 * (1 - th) * u
    m = min(inst.n, pool_size)
    by_b = torch.topk(b, m).indices.cpu().numpy()
    by_c = torch.topk(inst.relevance, m).indices.cpu().numpy()
    order = np.concatenate([idx.cpu().numpy(), np.stack([by_b, by_c], 1).ravel()])
    _, first = np.unique(order, return_index=True)
    return torch.as_tensor(order[np.sort(first)][:m], device=inst.device)


@register("fw_ms")
def multistart(
    inst: Instance,
    *,
    n_random: int = 2,
    continuation_steps: int = 4,
    perturb_rounds: int = 8,
    pool_size: int = 300,
    relax_penalty: float = 2.0,
    max_iter: int = 1000,
    tol: float | None = None,
    seed: int = 0,
):
    """FW multi-start + theta-continuation + local search; see the module docstring.

    n_random : seeded random FW starts; continuation_steps : thetas on the path 1 -> theta
    (0 disables); perturb_rounds : perturbation rounds of the final iterated local search;
    pool_size : size of the candidate sub-pool on which the starts run (whole pool if n <= it).
    info: best_start (which start won), starts (objective per start), pool, swaps, one_swap_optimal.
    """
    k, n = inst.k, inst.n
    if pool_size < k:
        raise ValueError(f"pool_size must be >= k = {k}, got {pool_size}")
    fw_idx, fw_iters, fw_info = frank_wolfe(inst, relax_penalty=relax_penalty, max_iter=max_iter, tol=tol)
    first = local_search(inst, fw_idx)
    total_iters = fw_iters + first.swaps
    if n > pool_size:
        P = _candidate_pool(inst, first.indices, pool_size)
        sub = inst.subset(P.cpu().numpy())
        pos = {int(p): r for r, p in enumerate(P.tolist())}
        incumbent = torch.tensor([pos[int(i)] for i in first.indices], device=inst.device)
    else:
        P, sub, incumbent = None, inst, first.indices
    starts: dict[str, tuple[float, torch.Tensor]] = {"fw_ls": (first.objective, incumbent)}

    def consider(name: str, idx: torch.Tensor) -> None:
        res = local_search(sub, idx)
        starts[name] = (res.objective, res.indices)

    inits: list[tuple[str, Any, int | None]] = [("uniform", "uniform", None)]
    inits += [(f"random{r}", "random", seed + r) for r in range(n_random)]
    for name, init, s in inits:
        idx, it, _ = frank_wolfe(sub, relax_penalty=relax_penalty, init=init, seed=s, max_iter=max_iter, tol=tol)
        total_iters += it
        consider(name, idx)
    consider("greedy", ccbqp_greedy(sub))
    if continuation_steps > 0 and inst.theta < 1.0:
        path = np.linspace(1.0, inst.theta, continuation_steps + 1)[1:]
        consider("continuation", theta_continuation(sub, path, relax_penalty=relax_penalty, max_iter=max_iter)[-1])
    # first strictly best start wins ties, so the choice is deterministic
    best_name = max(starts, key=lambda s: starts[s][0])
    best_idx = starts[best_name][1]
    if perturb_rounds > 0:
        ils = iterated_local_search(sub, best_idx, rounds=perturb_rounds, seed=seed)
        if ils.objective > starts[best_name][0]:
            best_name, best_idx = f"{best_name}+perturb", ils.indices
    idx = best_idx if P is None else P[best_idx]
    final = local_search(inst, idx)  # full-pool check: 1-swap optimal over all swaps
    info = {
        "best_start": best_name,
        "starts": {s: v for s, (v, _) in starts.items()},
        "pool": n if P is None else int(P.numel()),
        "swaps": final.swaps,
        "one_swap_optimal": final.one_swap_optimal,
        "fw_converged": fw_info["converged"],
    }
    return final.indices, total_iters + final.swaps, info
