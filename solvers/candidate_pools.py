"""Candidate pools of "fw_ws_ms" (:mod:`divopt_rag.solvers.ws_multistart`): the rows its Gram search sees.

Relevance c ranks the rows for the search where it agrees with the swap score
b_j = theta (k-1) c_j - 2 (1-theta) u_j (:func:`divopt_rag.models.ccbqp.swap_terms`) at a reference
set. Before any set is known the reference is "k times the mean row" (the v of the paper's FW
start x0 = (k/n) 1), estimated on a seeded row sample, without a pass over the pool
(:func:`mean_row`, :func:`relevance_misleads`); :func:`first_pools` builds each problem's first
pool from it, and :func:`pool_around` the pool around a set once its certificate has given u.
"""
from __future__ import annotations

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import linear_term, swap_terms
from divopt_rag.models.kernels import gather_rows

__all__ = ["mean_row", "relevance_misleads", "first_pools", "pool_around", "interleave"]

def mean_row(inst: Instance, rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(k x the mean row of a seeded sample of ``rows`` rows of the pool, the sample, its rows of
    E): the v of the paper's FW start x0 = (k/n) 1, without a pass over the pool."""
    gen = torch.Generator().manual_seed(int(seed))
    sample = torch.randperm(inst.n, generator=gen)[: min(inst.n, int(rows))].to(inst.device)
    E_sample = gather_rows(inst.E, sample)
    return inst.k * E_sample.mean(0), sample, E_sample


def _rank_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rank correlation of the rows of x and y (ties broken by position)."""
    rx = np.argsort(np.argsort(x, axis=-1), axis=-1).astype(np.float64)
    ry = np.argsort(np.argsort(y, axis=-1), axis=-1).astype(np.float64)
    rx -= rx.mean(-1, keepdims=True)
    ry -= ry.mean(-1, keepdims=True)
    return (rx * ry).sum(-1) / np.sqrt((rx * rx).sum(-1) * (ry * ry).sum(-1))


def relevance_misleads(inst: Instance, C: torch.Tensor, th: np.ndarray, mean: torch.Tensor,
                       sample: torch.Tensor, E_sample: torch.Tensor, threshold: float) -> np.ndarray:
    """Per problem: does relevance fail to rank the rows by their swap score b_j at the mean row?
    Measured on the row sample (rank correlation < ``threshold``); then phase 1 needs u at the
    mean row."""
    u = (E_sample @ mean).double().cpu().numpy()
    c = C.index_select(1, sample).double().cpu().numpy()
    b = swap_terms(linear_term(c, th[:, None], inst.k), u[None, :], th[:, None])[0]
    return _rank_correlation(b, c) < threshold


def interleave(first: torch.Tensor, lists: list[torch.Tensor], size: int) -> torch.Tensor:
    """``first``, then the lists' entries in turn (1st of each, 2nd of each, ...), without repeats:
    the first ``size`` distinct rows, on the device (a stable sort finds each row's first occurrence)."""
    order = torch.cat([first, torch.stack(lists, 1).reshape(-1)])
    srt = torch.sort(order, stable=True)
    keep = torch.ones_like(order, dtype=torch.bool)
    keep[1:] = srt.values[1:] != srt.values[:-1]
    at = torch.sort(srt.indices[keep]).values[:size]
    return order.index_select(0, at)


def _top_rows(scores: torch.Tensor, size: int) -> torch.Tensor:
    return torch.topk(scores, min(size, scores.numel())).indices


def first_pools(problems: list, guided: np.ndarray, u_mean: torch.Tensor | None, sizes: np.ndarray) -> list:
    """Each problem's first pool of ``sizes[b]`` rows (a tensor of rows of E): its most relevant
    rows, or where relevance misleads (``guided[b]``) its best rows by b_j at the mean row
    (u_mean = E v, v from :func:`mean_row`) interleaved with the most relevant."""
    pools = []
    for pb, g, size in zip(problems, guided, sizes):
        by_c = _top_rows(pb.relevance, int(size))
        if g:
            by_b = _top_rows(swap_terms(linear_term(pb.relevance, pb.theta, pb.k), u_mean, pb.theta)[0], int(size))
            pools.append(interleave(by_c[:0], [by_b, by_c], int(size)))
        else:
            pools.append(by_c)
    return pools


def pool_around(inst: Instance, idx: torch.Tensor, cert, u_mean: torch.Tensor, size: int) -> torch.Tensor:
    """S, its improving entrants and the certificate's ``near`` rows (highest exact gain), then in
    turn the best rows by b_j at S, by b_j at the mean row (k x the mean of a sample: the paper's
    FW start) and by relevance; ``size`` rows in all."""
    lin = linear_term(inst.relevance, inst.theta, inst.k)
    lists = [_top_rows(swap_terms(lin, u, inst.theta)[0], size) for u in (cert.u, u_mean)]
    dev = inst.device
    return interleave(torch.cat([idx, cert.entrants.to(dev), cert.near.to(dev)]),
                      lists + [_top_rows(inst.relevance, size)], size)
