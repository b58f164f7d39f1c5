"""divopt's default fast method "fw_ws_ms": multistart search on a small pool, certified on the whole pool.

"fw_ms" (divopt_rag.solvers.multistart) finds the exact optimum on nearly every small real pool, but
at 10^5 items it reads the pool dozens of times (full-pool FW, local-search scans) and runs a
sub-pool phase whose 2-swaps grow like k^4. "fw_ws_ms" keeps that kind of search but runs it on
a candidate pool P of a few hundred rows through P's Gram matrix, and reads the full pool only to
choose P and to certify the answer. Its knobs, each with its value and why, are the fields of
:class:`~divopt_rag.solvers.ws_config.WsMultistartConfig` (named in ``code`` below):

1. **Pool.** Where relevance ranks the promising rows, P is the ``pool_size`` most relevant rows
   and no pass is needed. Whether it does is measured on a seeded sample of ``guide_sample``
   rows: the rank correlation between c and the swap score b_j = theta (k-1) c_j - 2 (1-theta) u_j
   (:func:`divopt_rag.models.ccbqp.swap_terms`) at the reference set "k times the mean row" (the
   v of the paper's FW start x0 = (k/n) 1; :mod:`divopt_rag.solvers.candidate_pools` builds the
   pools). Below ``guide_correlation`` (low theta on anisotropic embeddings, where the optimum
   takes rows far from the mean direction, which relevance ranks last) one pass gives u at that
   reference for every row and P interleaves its best rows by b_j with the most relevant; such a
   "guided" problem's pools have ``guided_pool_size`` rows, since its good sets spread over more
   rows. A pool of at most ``pool_size`` rows is searched whole.
2. **Search on P** (:class:`divopt_rag.solvers.gram_search.GramSearch`, host float64): starts from
   the top-k rows, the CCBQP greedy, Frank-Wolfe (the FW kernel on P's rows) from the top-k
   vertex, from x0 = (k/p) 1 and from ``n_random`` seeded random points, and a theta-continuation
   path of ``continuation_steps``, all polished by one batched best-improvement 1-swap local
   search; then perturbation rounds on the best set (``perturb_batch`` perturbed sets per round,
   stopped after ``patience`` rounds in a row without a gain), best-improvement 2-swaps over the
   ``two_swap_entrants`` best entrants and the ``two_swap_out`` members of cheapest removal,
   and, where the starts ended in different local optima, a 1-swap tabu search of ``tabu_iters``
   steps from the best set (:meth:`~divopt_rag.solvers.gram_search.GramSearch.tabu_batch`: it
   takes losing swaps too, so it crosses into basins that the perturbations miss).
3. **Certificate (one pass).** :func:`divopt_rag.solvers.swap_certificate.swap_certificates`
   bounds every 1-swap gain over the whole pool from one GEMV and compares only the rows the
   bound keeps (where the bound keeps more than ``DENSE_SHARE`` of a ``dense_sample``-row sample
   and no sample row improves the set, as at small k and low theta, the GEMV is skipped: one
   GEMM E E_S^T gives u as its row sums and every comparison;
   :func:`~divopt_rag.solvers.swap_certificate.go_dense`). If no gain exceeds tol the set is a
   certified 1-swap optimum of the full problem ("fw_ms"'s guarantee) and the method stops.
   Otherwise P missed part of the landscape: a new pool around the set (its improving entrants
   and the ``near_rows`` compared rows of highest exact gain, improving or not, then the best
   rows by b_j at the set, at the mean row and by relevance) is searched with the set as a
   start, and certified again (``max_phases`` phases). Where P came from the mean-row estimate,
   the pool around the set is searched once even when the first certificate holds (u at the set
   is known by then: no extra pass); after the last phase, each failed certificate adds its
   improving entrants (and ``extend_rows`` rows by b_j) to the pool and resumes the local search
   until a certificate holds (every such round strictly increases f; ``max_passes`` caps them).
4. **Polish** (``polish``). The certificate runs in the pool's precision, so on float32 pools its
   tolerance is 1e-6 k (k-1) (:func:`~divopt_rag.solvers.local_search.ls_tolerance`), and a
   1-swap that gains less is invisible to it. The search on P is float64 on the float32-stored
   rows, exact far below that: the final set and the ``near_rows`` rows its certificate found
   closest to improving it get best-improvement 1-swaps at ``polish_gap`` k (k-1) (the whole
   pool when it was searched whole); a set that moves is certified again.

So the answer is always a 1-swap optimum over ALL swaps of the pool; on pools where relevance
guides (e.g. theta >= 0.7 on the narrow cone) it costs one pass plus the search on P.
What it changes from the paper's "fw" (Algorithm 1: x0 = (k/n) 1, <= 200 FW iterations, top-k
of x): FW is one of several starts on a candidate pool, every start is polished by local search,
the answer is certified 1-swap optimal over the whole pool. From "fw_ms": a candidate pool
instead of full-pool FW and full-pool local search, restarts batched, no MMR/gMMR starts,
perturbation with a patience stop, 2-swaps over a bounded member set, a tabu search.

One entry point does the work: :func:`ws_multistart_batch` runs B problems (queries x thetas)
on one pool; the selector (:func:`ws_multistart`, one problem) and :func:`ws_multistart_sweep`
(queries x thetas) call it. The passes become GEMMs (one read of the pool per round for all open
problems; the exact comparisons over the union of the problems' selected rows) and the searches
run as (problems x sets) arrays, a few problems at a time so that their Gram matrices stay in
cache; each problem ends at the set of its single run. ``info["seconds"]`` times every stage.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import ccbqp_objective, linear_term, objective_scale, swap_terms
from divopt_rag.models.kernels import gather_rows, matmul, matvec
from divopt_rag.models.validation import check_theta

from .candidate_pools import first_pools, mean_row, pool_around, relevance_misleads
from .frank_wolfe import random_point
from .gram_search import GramSearch
from .local_search import ls_tolerance, single_thread
from .swap_certificate import go_dense, swap_certificates
from .ws_config import WsMultistartConfig, config_with
from .selection import register

__all__ = ["WsMultistartConfig", "ws_multistart", "ws_multistart_batch", "ws_multistart_sweep", "BatchSelection",
           "CHUNK_BYTES"]

#: Bytes of Gram matrices searched at once in a batch: a few problems at a time, so that their
#: (p, p) matrices stay in cache (docs/howto/performance.md, "Many queries and thetas").
CHUNK_BYTES = 4 << 20


@dataclass
class BatchSelection:
    """One row per problem b of a batch: its k-set, CCBQP value and the run's diagnostics."""

    indices: np.ndarray  # (B, k) int64
    objectives: np.ndarray  # (B,) float64
    thetas: np.ndarray  # (B,)
    info: list = field(default_factory=list)  # per problem: as "fw_ws_ms"'s info
    seconds: dict = field(default_factory=dict)  # per stage, whole batch


class _Clock:
    def __init__(self) -> None:
        self.secs: dict[str, float] = {}
        self.t = time.perf_counter()

    def lap(self, stage: str) -> None:
        t = time.perf_counter()
        self.secs[stage] = self.secs.get(stage, 0.0) + t - self.t
        self.t = t


def _search(gs: GramSearch, clock: _Clock, first: np.ndarray | None, cfg: WsMultistartConfig):
    """Starts, batched local search, perturbation, 2-swaps and tabu search on every problem of ``gs``;
    ``first`` (B, k): optional sets (positions in the pools) searched as the first start."""
    B, p, k = gs.B, gs.p, gs.k
    fw = dict(relax_penalty=cfg.relax_penalty, max_iter=cfg.max_iter, tol=cfg.fw_gap * objective_scale(k))
    names, starts = ([], []) if first is None else (["previous"], [first])
    names += ["topk", "greedy"]
    starts += [np.argsort(-gs.relevance, axis=1, kind="stable")[:, :k], gs.greedy()]
    X0 = np.zeros((B, 2 + cfg.n_random, p))
    np.put_along_axis(X0[:, 0], starts[names.index("topk")], 1.0, 1)  # FW from the top-k vertex ("fw_topk")
    X0[:, 1] = k / p  # from the paper's x0 ("uniform")
    for r in range(cfg.n_random):
        X0[:, 2 + r] = random_point(p, k, cfg.seed + r)
    V = gs.fw(X0, **fw)
    names += ["fw_topk", "uniform"] + [f"random{r}" for r in range(cfg.n_random)]
    starts += [V[:, r] for r in range(V.shape[1])]
    if cfg.continuation_steps > 0:  # theta' = 1 -> theta, each FW warm-started at the previous set
        path = np.linspace(1.0, gs.th, cfg.continuation_steps + 1)[1:]  # (steps, B)
        S = starts[names.index("topk")]
        for th_t in path:
            x = np.zeros((B, 1, p))
            np.put_along_axis(x[:, 0], S, 1.0, 1)
            S = gs.fw(x, theta=th_t, **fw)[:, 0]
        names.append("continuation")
        starts.append(S)
    clock.lap("starts")
    R = len(starts)
    S_all, f_all = gs.ls_batch(np.stack(starts, 1).reshape(B * R, k), np.repeat(np.arange(B), R))
    S_all, f_all = S_all.reshape(B, R, k), f_all.reshape(B, R)
    best = f_all.argmax(1)  # the first best start wins ties
    S, f = S_all[np.arange(B), best].copy(), f_all[np.arange(B), best].copy()
    phase = np.array(["starts"] * B, dtype=object)
    clock.lap("ls")
    rounds = np.zeros(B, dtype=np.int64)
    if cfg.perturb_rounds > 0 and cfg.perturb_batch > 0:
        S2, f2, rounds = gs.ils_batched(S, f, batch=cfg.perturb_batch, strength=cfg.perturb_strength,
                                        entrants=cfg.perturb_entrants, patience=cfg.patience,
                                        max_rounds=cfg.perturb_rounds, seed=cfg.seed)
        up = f2 > f + gs.tol
        S[up], f[up], phase[up] = S2[up], f2[up], "+perturb"
    clock.lap("perturb")
    if cfg.two_swap:
        for b in range(B):
            S2, f2 = gs.two_swap(S[b], entrants=cfg.two_swap_entrants, max_moves=cfg.two_swap_moves,
                                 max_out=cfg.two_swap_out, prob=b)
            if f2 > f[b] + gs.tol:
                S[b], f[b], phase[b] = S2, f2, "+2swap"
    clock.lap("two_swap")
    # where the starts ended in different local optima (a rugged pool), walk on from the best set
    # through losing swaps to other basins; where they all agree, the walk is skipped
    rugged = np.flatnonzero(f_all.max(1) - f_all.min(1) > gs.tol)
    if cfg.tabu_iters > 0 and rugged.size:
        S2, f2 = gs.tabu_batch(S[rugged], f[rugged], rugged, iters=cfg.tabu_iters, tenure_in=cfg.tabu_tenure_in,
                               tenure_out=cfg.tabu_tenure_out)
        gained = f2 > f[rugged] + gs.tol
        if gained.any():
            up = rugged[gained]
            S[up], f[up] = gs.ls_batch(S2[gained], up)  # the best of a walk is 1-swap optimal unless it was its last step
            phase[up] = "+tabu"
    clock.lap("tabu")
    return S, f, names, f_all, best, phase, rounds


def _extend_and_search(inst: Instance, P: np.ndarray, idx: torch.Tensor, cert, tol: float, extra_rows: int):
    """A failed certificate: the improving entrants and the ``extra_rows`` best rows by b_j at the
    current set join P; best-improvement 1-swaps on the larger P. Returns (P, idx)."""
    n, k, th = inst.n, inst.k, inst.theta
    in_P = np.zeros(n, dtype=bool)
    in_P[P] = True
    b = swap_terms(linear_term(inst.relevance, th, k), cert.u, th)[0]
    b = b.masked_fill_(torch.as_tensor(in_P, device=b.device), -torch.inf)
    extra = torch.topk(b, min(extra_rows, int((~in_P).sum()))).indices.cpu().numpy()
    new = np.concatenate([cert.entrants.cpu().numpy(), extra])
    new = new[~in_P[new]]
    P = np.concatenate([P, new[np.sort(np.unique(new, return_index=True)[1])]])
    pos = np.full(n, -1, dtype=np.int64)
    pos[P] = np.arange(P.size)
    rows = torch.as_tensor(P, device=inst.device)
    gs = GramSearch.from_instance(inst, tol, rows)
    S, _ = gs.ls(pos[idx.cpu().numpy()])
    return P, torch.as_tensor(P[S], device=inst.device)


class _Run:
    """State of one batch: per problem its current set, pool, passes and diagnostics."""

    def __init__(self, inst, problems, C, th, tol, clock, cfg: WsMultistartConfig):
        self.inst, self.problems, self.C, self.th, self.tol, self.clock = inst, problems, C, th, tol, clock
        self.cfg = cfg
        B = th.size
        self.idx: list = [None] * B
        self.pools: list = [None] * B
        self.cert: list = [None] * B
        self.passes = np.zeros(B, dtype=np.int64)
        self.optimal = np.zeros(B, dtype=bool)
        self.phase = np.array(["starts"] * B, dtype=object)
        self.rounds = np.zeros(B, dtype=np.int64)
        self.names: list[str] = []
        self.f_all = np.zeros((B, 0))
        self.best = np.zeros(B, dtype=np.int64)
        self.f = np.full(B, -np.inf)
        self.changed = np.zeros(B, dtype=bool)
        self.sample: tuple = ()  # (rows, their embeddings) on which a certificate's bound is estimated

    def search_pools(self, probs: np.ndarray, pools: list, first: np.ndarray | None, phase: str | None = None) -> None:
        """:meth:`search` of problems ``probs`` on pools of different sizes: one call per size."""
        sizes = np.array([len(P) for P in pools])
        for size in np.unique(sizes):
            at = np.flatnonzero(sizes == size)
            self.search(probs[at], np.stack([pools[i] for i in at]), None if first is None else first[at], phase)

    def search(self, probs: np.ndarray, P: np.ndarray, first: np.ndarray | None, phase: str | None = None) -> None:
        """Gram search of problems ``probs`` on pools P (len(probs), p); keeps a result only if it
        improves the problem's current set."""
        inst, k = self.inst, self.inst.k
        # problems are searched in chunks whose Gram matrices stay in cache (CHUNK_BYTES): one
        # (B, p, p) array for a whole sweep made every search step memory-bound
        step = max(1, CHUNK_BYTES // (8 * P.shape[1] ** 2))
        parts = []
        for c in range(0, len(probs), step):
            pr, Pc = probs[c : c + step], P[c : c + step]
            with single_thread():
                rows = torch.as_tensor(Pc, device=inst.device)
                gs = GramSearch(gather_rows(inst.E, rows.reshape(-1)).reshape(len(pr), Pc.shape[1], -1),
                                self.C[torch.as_tensor(pr, device=inst.device)].gather(1, rows), self.th[pr], k,
                                self.tol)
                self.clock.lap("gram")
                parts.append(_search(gs, self.clock, None if first is None else first[c : c + step], self.cfg))
        S, f, f_all, best, phase_, rounds = (np.concatenate([pt[i] for pt in parts]) for i in (0, 1, 3, 4, 5, 6))
        if phase is None:  # the first search: its starts are the run's diagnostics
            if not self.names:
                self.names, self.f_all = parts[0][2], np.zeros((self.th.size, f_all.shape[1]))
            self.f_all[probs], self.best[probs] = f_all, best
        self.changed[probs] = False
        for r, b in enumerate(probs):
            self.rounds[b] += rounds[r]
            if self.idx[b] is None or f[r] > self.f[b] + self.tol:
                self.changed[b] = True
                self.idx[b] = torch.as_tensor(P[r][S[r]], device=inst.device)
                self.pools[b], self.f[b] = P[r], f[r]
                self.phase[b] = phase_[r] if phase is None else phase

    def polish(self, whole: bool) -> None:
        """Sub-tolerance polish: best-improvement 1-swaps at the float64 tolerance ``polish_gap``
        k (k-1) from each final set over the set and its certificate's ``near`` rows (the whole pool
        when it was searched whole), where the certificate's best gain is within tol of 0; a set
        that moves is certified again."""
        k = self.inst.k
        fine = self.cfg.polish_gap * objective_scale(k)
        if fine >= self.tol:  # float64 pools: the search already ran at this tolerance
            return
        moved = []
        for b in range(self.th.size):
            S = self.idx[b].cpu().numpy()
            if whole:
                rest = np.setdiff1d(self.pools[b], S)
            elif self.optimal[b] and self.cert[b].best_gain > -self.tol and self.cert[b].near.numel():
                # (a best gain below -tol, beyond the float32 error, leaves no gaining swap with a near row)
                rest = self.cert[b].near.cpu().numpy()
                rest = rest[~np.isin(rest, S)]
            else:
                continue
            rows = torch.as_tensor(np.concatenate([S, rest]), device=self.inst.device)
            with single_thread():
                gs = GramSearch.from_instance(self.problems[b], fine, rows)
                f0 = gs.f(np.arange(k))
                S2, f2 = gs.ls(np.arange(k))
            if f2 > f0 + fine:
                self.idx[b] = rows.index_select(0, torch.as_tensor(S2, device=rows.device))
                self.f[b] += f2 - f0
                self.phase[b] = "+polish"
                moved.append(b)
        self.clock.lap("polish")
        if moved and not whole:
            self.certify(np.array(moved))

    def certify(self, probs: np.ndarray, extend: bool = True, extra: torch.Tensor | None = None):
        """Certificate passes (one GEMM per round for all open problems) until each problem's set is
        1-swap optimal over the whole pool; a failed certificate extends that problem's pool and
        resumes its local search (``extend``; else the round ends the call). ``extra`` (d,): one
        more vector whose E-product rides along in the first pass; returns it (or None)."""
        inst = self.inst
        open_, u_extra = list(probs), None
        while open_:
            # sets whose bound keeps > 1/4 of a row sample, none of which improves them, skip the
            # GEMV: one GEMM E E_S^T gives u (its row sums) and every exact comparison
            dense = go_dense([self.problems[b] for b in open_], [self.idx[b] for b in open_], self.tol,
                             *self.sample)
            Vs = [gather_rows(inst.E, self.idx[b]).sum(0) for b, de in zip(open_, dense) if not de]
            Vs += [] if extra is None or u_extra is not None else [extra]
            U = matmul(inst.E, torch.stack(Vs).T) if Vs else None  # u_b = E v_b: one pass for all
            if extra is not None and u_extra is None:
                u_extra = U[:, -1]
            cols = iter(range(len(Vs)))
            still = []
            certs = swap_certificates([self.problems[b] for b in open_], [self.idx[b] for b in open_], self.tol,
                                      max_entrants=self.cfg.certificate_entrants,
                                      U=[None if de else U[:, next(cols)] for de in dense], dense=dense,
                                      near=self.cfg.near_rows)
            for col, b in enumerate(open_):
                cert = certs[col]
                self.passes[b] += 1
                self.cert[b] = cert
                self.optimal[b] = cert.best_gain <= self.tol
                if extend and not self.optimal[b] and self.passes[b] < self.cfg.max_passes:
                    with single_thread():
                        self.pools[b], self.idx[b] = _extend_and_search(self.problems[b], self.pools[b], self.idx[b],
                                                                        cert, self.tol, self.cfg.extend_rows)
                    self.f[b] = ccbqp_objective(self.problems[b], self.idx[b].cpu().numpy())
                    self.phase[b] = "+pool"
                    still.append(b)
            open_ = still
        self.clock.lap("certify")
        return u_extra


def ws_multistart_batch(inst: Instance, relevance: Any, thetas: Any, config: WsMultistartConfig | None = None,
                        **params: Any) -> BatchSelection:
    """"fw_ws_ms" on B problems at once: problem b is (relevance[b], thetas[b]) on inst.E, k = inst.k.

    relevance : (B, n) (e.g. ``Q @ E.T`` for B queries); thetas : (B,). The knobs: ``config``
    (default :class:`WsMultistartConfig()`) with any of its fields replaced by ``params``. Every
    pass over the pool serves all open problems (one GEMM) and the searches run as (problems x
    sets) arrays (in chunks of ``CHUNK_BYTES`` of Gram matrices), so each problem ends where its
    single run ends (up to the summation order of the pool products): the single run
    (:func:`ws_multistart`) is this with B = 1. Returns a :class:`BatchSelection`.
    """
    n, k = inst.n, inst.k
    cfg = config_with(config, params).for_k(k)
    p, pg = cfg.pool_size, cfg.guided_pool_size
    C = torch.as_tensor(relevance)
    if C.ndim != 2 or C.shape[1] != n:
        raise ValueError(f"relevance must have shape (B, {n}) (B problems x pool size n), got {tuple(C.shape)}")
    th = np.asarray([check_theta(float(t), "thetas") for t in np.asarray(thetas, dtype=np.float64).reshape(-1)])
    if th.shape != (C.shape[0],):
        raise ValueError(f"thetas must have shape ({C.shape[0]},) (one per relevance row), got {th.shape}")
    problems = [inst.replace(relevance=C[b], theta=float(th[b])) for b in range(th.size)]
    C = torch.stack([pb.relevance for pb in problems])
    B = th.size
    tol = ls_tolerance(inst)
    clock = _Clock()
    whole = n <= p
    run = _Run(inst, problems, C, th, tol, clock, cfg)
    u_mean = None
    guided = np.zeros(B, dtype=bool)  # problems whose first pool came from the mean-row estimate
    if not whole:
        # phase 1 pool: the p most relevant rows where relevance ranks the promising rows (checked
        # on a row sample: rank correlation of b_j at the mean row with c), else one pass for
        # u at the mean row and its best rows by b_j interleaved with the most relevant, in a pool
        # of guided_pool_size rows
        mean, sample, E_sample = mean_row(inst, cfg.guide_sample, cfg.seed)
        run.sample = (sample[:cfg.dense_sample], E_sample[:cfg.dense_sample])
        guided = relevance_misleads(inst, C, th, mean, sample, E_sample, cfg.guide_correlation)
        if guided.any():
            u_mean = matvec(inst.E, mean)
            run.passes[guided] += 1
    sizes = np.where(guided, min(pg, n), p)  # rows of each problem's pools
    P = list(np.tile(np.arange(n), (B, 1))) if whole else first_pools(problems, guided, u_mean, sizes)
    clock.lap("shortlist")
    run.search_pools(np.arange(B), P, None)
    if not whole:
        todo = np.arange(B)
        for rnd in range(cfg.max_phases - 1):
            # one pass: the certificate of every set (u at the mean row rides along if not yet
            # known); where it fails, the pool missed part of the landscape: search again on a
            # pool around the set, with the set as a start. Where the first pool came from the
            # mean-row estimate (guided), the set's own u gives a better pool even when the
            # certificate holds: it is searched once too (no extra pass: the certificate has u)
            u = run.certify(todo, extend=False, extra=mean if u_mean is None else None)
            u_mean = u if u_mean is None else u_mean
            again = [b for b in todo if not run.optimal[b] or (rnd == 0 and guided[b])]
            P2 = [pool_around(problems[b], run.idx[b], run.cert[b], u_mean, sizes[b]) for b in again]
            clock.lap("shortlist")
            if not again:
                todo = np.array([], dtype=np.int64)
                break
            todo = np.array(again)
            run.search_pools(todo, P2, first=np.tile(np.arange(k), (todo.size, 1)), phase="+repool")
            todo = todo[run.changed[todo] | ~run.optimal[todo]]
        if todo.size:  # the last round: certificate passes, extending the pool until one holds
            run.certify(todo)
    if cfg.polish:
        run.polish(whole)
    out = np.stack([t.cpu().numpy() for t in run.idx])
    for b in range(B):  # a set: reported by decreasing relevance, ties to the lower index
        c = problems[b].relevance.index_select(0, run.idx[b]).double().cpu().numpy()
        out[b] = out[b][np.lexsort((out[b], -c))]
    objs = np.array([ccbqp_objective(problems[b], out[b]) for b in range(B)])
    info = [{
        "best_start": run.names[int(run.best[b])],
        "starts": dict(zip(run.names, (float(v) for v in run.f_all[b]))),
        "phase": str(run.phase[b]),
        "passes": int(run.passes[b]),
        "pool": int(run.pools[b].size),
        "guided": bool(guided[b]),
        "one_swap_optimal": bool(whole or run.optimal[b]),
        "compared": None if run.cert[b] is None else int(run.cert[b].compared),
        "perturb_rounds": int(run.rounds[b]),
    } for b in range(B)]
    return BatchSelection(out, objs, th, info, dict(run.clock.secs))


@register("fw_ws_ms", params=WsMultistartConfig)  # each knob declared in WsMultistartConfig._parameter_constraints
def ws_multistart(inst: Instance, **params: Any):
    """Multistart search on a candidate pool, certified 1-swap optimal on the whole pool (module
    docstring): :func:`ws_multistart_batch` with one problem. The parameters are the knobs of
    :class:`WsMultistartConfig`, each documented there with its value and why.

    info: best_start, starts (f per start after local search), phase (which phase last improved:
    "starts", "+perturb", "+2swap", "+tabu", "+repool", "+pool", "+polish"), passes (reads of the
    pool), pool (final |P|), guided (P came from the mean-row estimate: step 1), one_swap_optimal,
    compared (rows the last certificate compared exactly; None when the pool was searched whole),
    perturb_rounds (run), seconds (per stage: shortlist, gram, starts, ls, perturb, two_swap,
    tabu, certify, polish).
    """
    res = ws_multistart_batch(inst, inst.relevance[None, :], [inst.theta], **params)
    info = {**res.info[0], "seconds": res.seconds}
    return torch.as_tensor(res.indices[0], device=inst.device), info["passes"], info


def ws_multistart_sweep(inst: Instance, queries: Any, thetas: Any, config: WsMultistartConfig | None = None,
                        **params: Any) -> tuple[BatchSelection, np.ndarray]:
    """"fw_ws_ms" for every (query, theta) pair: Q queries x T thetas -> B = Q T problems.

    queries : (Q, d) unit-norm query vectors (relevance E q, one GEMM) or a (Q, n) relevance
    matrix; ``config`` / ``params``: the knobs, as in :func:`ws_multistart_batch`. Returns
    (result, query index per problem); problem b is query b // T at thetas[b % T].
    """
    Qt = queries if isinstance(queries, torch.Tensor) else torch.as_tensor(np.asarray(queries))
    if Qt.ndim != 2:
        raise ValueError(f"queries must be 2-D ((Q, d) vectors or (Q, n) relevance), got shape {tuple(Qt.shape)}")
    if Qt.shape[1] == inst.d and Qt.shape[1] != inst.n:
        rel = matmul(inst.E, Qt.to(device=inst.device, dtype=inst.acc_dtype).contiguous().T).T
    elif Qt.shape[1] == inst.n:
        rel = Qt
    else:
        raise ValueError(f"queries must have {inst.d} (d) or {inst.n} (n) columns, got {Qt.shape[1]}")
    th = np.asarray(thetas, dtype=np.float64).reshape(-1)
    Q, T = rel.shape[0], th.size
    res = ws_multistart_batch(inst, rel.repeat_interleave(T, dim=0), np.tile(th, Q), config, **params)
    return res, np.repeat(np.arange(Q), T)
