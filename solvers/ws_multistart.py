"""divopt's default fast method "fw_ws_ms": multistart search on a small pool, certified on the whole pool.

"fw_ms" (divopt_rag.solvers.multistart) finds the exact optimum on nearly every small real pool, but
at 10^5 items it reads the pool dozens of times (full-pool FW, local-search scans) and runs a
sub-pool phase whose 2-swaps grow like k^4. "fw_ws_ms" keeps that kind of search but runs it on
a candidate pool P of a few hundred rows through P's Gram matrix, and reads the full pool only to
choose P and to certify the answer. Its twelve knobs are the fields of
:class:`~divopt_rag.solvers.ws_config.WsMultistartConfig`; they and the values derived from them
(named in ``code`` below), each with its rule and why, are those of
:class:`~divopt_rag.solvers.ws_config.WsSettings`:

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
2. **Search on P** (:class:`divopt_rag.solvers.gram_search.GramSearch`: lockstep tensor work on
   the pool's device, T = 2 (1-theta) E_P E_P^T in the accumulation dtype, f summed in float64):
   starts from the top-k rows, the CCBQP greedy and Frank-Wolfe (``max_iter`` steps of the FW
   iteration on P) from the top-k vertex, from x0 = (k/p) 1, from ``n_random`` seeded random
   points and from the top-k vertex at the thetas of a path 1 -> theta
   (``continuation_steps``), all FW points in one lockstep call; every start is polished by one
   batched best-improvement 1-swap local search. Where the starts all end in the same local
   optimum the search stops there. Where they differ (a rugged problem), ``tabu_walks`` 1-swap
   tabu walks of ``tabu_iters`` steps run in lockstep from the problem's best start optima
   (:func:`divopt_rag.solvers.gram_moves.tabu`: they take losing swaps too, so they cross into
   other basins), then best-improvement 2-swaps over the ``two_swap_entrants`` best entrants and
   the ``two_swap_out`` members of cheapest removal, then, if ``perturb_rounds`` > 0,
   perturbation rounds (``perturb_batch`` perturbed sets per round, stopped after ``patience``
   rounds in a row without a gain). No step reads the device; the host looks at a fixed number
   of checkpoints per call (which sets still move, which problems are rugged), whatever n.
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
   1-swap that gains less is invisible to it (and to the float32 search). The final set and the
   ``near_rows`` rows its certificate found closest to improving it (the whole pool when it was
   searched whole) get best-improvement 1-swaps in float64 at ``polish_gap`` k (k-1); a set that
   moves is certified again.

So the answer is always a 1-swap optimum over ALL swaps of the pool; on pools where relevance
guides (e.g. theta >= 0.7 on the narrow cone) it costs one pass plus the search on P.
What it changes from the paper's "fw" (Algorithm 1: x0 = (k/n) 1, <= 200 FW iterations, top-k
of x): FW is one of several starts on a candidate pool, every start is polished by local search,
the answer is certified 1-swap optimal over the whole pool. From "fw_ms": a candidate pool
instead of full-pool FW and full-pool local search, restarts batched, no MMR/gMMR starts, tabu
walks from the start optima instead of perturbation rounds, 2-swaps over a bounded member set.

**Where it runs.** On a CPU (:func:`use_kernels`) every problem runs the same steps on the host,
one at a time, in the compiled kernels of :mod:`divopt_rag.solvers.kernels`, staged by
:mod:`divopt_rag.solvers.pool_search` (pool -> starts -> search -> certify -> polish over one
state; same pools, certificates and polish, so the same guarantee). Its starts are top-k, the
greedy and ``n_random`` seeded random sets (the FW knobs ``max_iter``, ``fw_gap``,
``relax_penalty`` and ``continuation_steps`` serve the lockstep search only) and its tabu walks
take 3000 / k steps within [100, 300] unless ``tabu_iters`` is given (tuned on the development
RAG calls: docs/howto/performance.md). On a GPU the lockstep tensor search below runs.

One entry point does the work: :func:`ws_multistart_batch` runs B problems (queries x thetas)
on one pool; the selector (:func:`fw_ws_ms`, one problem) and :func:`ws_multistart_sweep`
(queries x thetas) call it. The passes become GEMMs (one read of the pool per round for all open
problems; the exact comparisons over the union of the problems' selected rows) and the searches
run as (problems x sets) tensors, every problem of a pool size at once on a GPU and a few at a
time on a CPU (so that their Gram matrices stay in cache); each problem ends at the set of its
single run. ``info["seconds"]`` times every stage (host clock: on a GPU a stage's kernels may
still run in the next one's time).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import ccbqp_objective, linear_term, objective_scale, set_value, swap_terms
from divopt_rag.models.kernels import gather_rows, matmul, matvec
from divopt_rag.models.validation import check_theta

from .candidate_pools import first_pools, mean_row, pool_around, relevance_misleads
from .gram_search import GramSearch
from .local_search import ls_tolerance
from .lockstep_search import Clock, SearchResult, lockstep_search
from .pool_search import pool_search
from .swap_certificate import SwapCertificate, go_dense, swap_certificates
from .ws_config import WsMultistartConfig, config_with
from .selection import register

__all__ = ["fw_ws_ms", "ws_multistart_batch", "ws_multistart_sweep", "BatchSelection", "CHUNK_BYTES", "use_kernels"]

#: Bytes of Gram matrices searched at once in a batch on a CPU (on a GPU every problem of a pool
#: size is one chunk): enough problems per chunk to share each step's kernels, few enough that
#: their matrices stay near the cache (docs/howto/performance.md, "Why the default's knobs ...").
CHUNK_BYTES = 16 << 20


def use_kernels(inst: Instance, batch: int) -> bool:
    """Where the candidate pool's search runs on the host kernels (:mod:`divopt_rag.solvers.pool_search`)
    rather than as lockstep tensor work (:class:`~divopt_rag.solvers.gram_search.GramSearch`).

    The rule: on a CPU always (float32 or float64 rows), whatever the batch: one problem at a time
    in compiled loops beats the lockstep search's many small tensor operations at every size
    measured (benchmarks/results/speed: the RAG call, k = 10 on 1000 rows). On a GPU the lockstep
    search stays: the host kernels there are unmeasured (no GPU in the session that built them),
    so no measurement says they win, for small batches or large."""
    return inst.device.type == "cpu" and inst.E.dtype in (torch.float32, torch.float64) and batch >= 1


def _kernel_batch(inst: Instance, C: torch.Tensor, th: np.ndarray, cfg: WsMultistartConfig) -> BatchSelection:
    """:func:`ws_multistart_batch` on the host kernels: each problem by :func:`pool_search`."""
    E = inst.E.contiguous().numpy()
    Cn = C.double().numpy()
    tol = ls_tolerance(inst)
    k, B = inst.k, th.size
    out = np.empty((B, k), dtype=np.int64)
    info, seconds = [], {}
    for b in range(B):
        st = pool_search(E, Cn[b], k, float(th[b]), tol, cfg, finite_checked=True)  # the Instance checked E
        idx = st.rows
        # a set: reported by decreasing relevance, ties to the lower index
        idx = np.sort(idx)
        out[b] = idx[np.argsort(-Cn[b][idx], kind="stable")]
        for key, v in st.seconds.items():
            seconds[key] = seconds.get(key, 0.0) + v
        info.append({
            "best_start": st.names[st.best_start],
            "starts": dict(zip(st.names, (float(v) for v in st.f_starts))),
            "phase": st.phase,
            "passes": st.passes,
            "pool": int(st.P.size),
            "guided": st.guided,
            "one_swap_optimal": bool(st.whole or st.optimal),
            "compared": None if st.cert is None or st.whole else int(st.cert.compared),
            "perturb_rounds": st.rounds,
        })
    idx = torch.from_numpy(out)
    v = inst.E.index_select(0, idx.reshape(-1)).reshape(B, k, -1).double().sum(1)
    th_t = torch.as_tensor(th, dtype=torch.float64)
    objs = set_value(th_t * (k - 1) * C.double().gather(1, idx).sum(1), torch.linalg.vecdot(v, v), th_t, k)
    return BatchSelection(out, objs.numpy(), th, info, seconds)


@dataclass
class BatchSelection:
    """One row per problem b of a batch: its k-set, CCBQP value and the run's diagnostics."""

    indices: np.ndarray  # (B, k) int64
    objectives: np.ndarray  # (B,) float64
    thetas: np.ndarray  # (B,)
    info: list = field(default_factory=list)  # per problem: as "fw_ws_ms"'s info
    seconds: dict = field(default_factory=dict)  # per stage, whole batch


def _extend_and_search(inst: Instance, P: torch.Tensor, idx: torch.Tensor, cert: SwapCertificate, tol: float,
                       extra_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A failed certificate: the improving entrants and the ``extra_rows`` best rows by b_j at the
    current set join P; best-improvement 1-swaps on the larger P. Returns (P, idx)."""
    n, k, th = inst.n, inst.k, inst.theta
    in_P = torch.zeros(n, dtype=torch.bool, device=inst.device)
    in_P[P] = True
    b = swap_terms(linear_term(inst.relevance, th, k), cert.u, th)[0].masked_fill(in_P, -torch.inf)
    extra = torch.topk(b, min(extra_rows, n - P.numel())).indices
    new = torch.cat([cert.entrants.to(inst.device), extra])
    new = new[~in_P[new]]
    uniq, first = _first_occurrences(new)
    P = torch.cat([P, uniq])
    pos = torch.full((n,), -1, dtype=torch.long, device=inst.device)
    pos[P] = torch.arange(P.numel(), device=inst.device)
    gs = GramSearch.from_instance(inst, tol, P)
    S = gs.ls(pos[idx].unsqueeze(0)).S[0]
    return P, P.index_select(0, S)


def _first_occurrences(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct entries of x in order of first occurrence, and their positions in x."""
    if x.numel() == 0:
        return x, x
    order = torch.sort(x, stable=True)
    keep = torch.ones_like(x, dtype=torch.bool)
    keep[1:] = order.values[1:] != order.values[:-1]
    at = torch.sort(order.indices[keep]).values
    return x.index_select(0, at), at


@dataclass
class _Problem:
    """One problem of a batch: its instance and the state of its run."""

    inst: Instance
    guided: bool = False  # its first pool came from the mean-row estimate
    idx: torch.Tensor | None = None  # the current set (rows of E)
    pool: torch.Tensor | None = None  # the pool it was found on (rows of E)
    f: float = -float("inf")
    cert: SwapCertificate | None = None
    passes: int = 0  # reads of the pool
    optimal: bool = False  # the last certificate held
    phase: str = "starts"
    rounds: int = 0
    f_starts: np.ndarray | None = None
    best_start: int = 0
    changed: bool = False


class _Run:
    """A batch: its problems (:class:`_Problem`), the shared pool and the stage clock."""

    def __init__(self, inst: Instance, problems: list[_Problem], C: torch.Tensor, tol: float, clock: Clock,
                 cfg: WsMultistartConfig):
        self.inst, self.problems, self.C, self.tol, self.clock, self.cfg = inst, problems, C, tol, clock, cfg
        self.th = np.array([pb.inst.theta for pb in problems])
        self.names: list[str] = []
        self.sample: tuple = ()  # (rows, their embeddings) on which a certificate's bound is estimated

    def search_pools(self, probs: np.ndarray, pools: list, first: list | None, phase: str | None = None) -> None:
        """:meth:`search` of problems ``probs`` on pools of different sizes: one call per size."""
        sizes = np.array([len(P) for P in pools])
        for size in np.unique(sizes):
            at = np.flatnonzero(sizes == size)
            self.search(probs[at], torch.stack([pools[i] for i in at]),
                        None if first is None else torch.stack([first[i] for i in at]), phase)

    def search(self, probs: np.ndarray, P: torch.Tensor, first: torch.Tensor | None, phase: str | None = None) -> None:
        """Gram search of problems ``probs`` on pools P (len(probs), p); keeps a result only if it
        improves the problem's current set."""
        inst, k = self.inst, self.inst.k
        # on a CPU, problems are searched in chunks of CHUNK_BYTES of Gram matrices; on a GPU all
        # at once (each step's kernels then serve every problem)
        step = len(probs) if inst.device.type != "cpu" else max(1, CHUNK_BYTES // (4 * P.shape[1] ** 2))
        for c in range(0, len(probs), step):
            pr, Pc = probs[c : c + step], P[c : c + step]
            rows = Pc.reshape(-1)
            pr_t = torch.as_tensor(pr, device=inst.device)
            gs = GramSearch(gather_rows(inst.E, rows).reshape(len(pr), Pc.shape[1], -1),
                            self.C.index_select(0, pr_t).gather(1, Pc), self.th[pr], k, self.tol)
            self.clock.lap("gram")
            out = lockstep_search(gs, self.clock, None if first is None else first[c : c + step], self.cfg)
            self._keep(pr, Pc, out, phase)

    def _keep(self, pr: np.ndarray, Pc: torch.Tensor, out: SearchResult, phase: str | None) -> None:
        idx = Pc.gather(1, out.S)  # rows of E
        if phase is None and not self.names:  # the first search: its starts are the run's diagnostics
            self.names = out.names
        for r, b in enumerate(pr):
            pb = self.problems[b]
            if phase is None:
                pb.f_starts, pb.best_start = out.f_starts[r], int(out.best[r])
            pb.rounds += int(out.rounds[r])
            pb.changed = pb.idx is None or out.f[r] > pb.f + self.tol
            if pb.changed:
                pb.idx, pb.pool, pb.f = idx[r], Pc[r], float(out.f[r])
                pb.phase = out.phase[r] if phase is None else phase

    def polish(self, whole: bool) -> None:
        """Sub-tolerance polish: best-improvement 1-swaps at the float64 tolerance ``polish_gap``
        k (k-1) from each final set over the set and its certificate's ``near`` rows (the whole pool
        when it was searched whole), where the certificate's best gain is within tol of 0; a set
        that moves is certified again."""
        k = self.inst.k
        fine = self.cfg.polish_gap * objective_scale(k)
        if fine >= self.tol:  # float64 pools: the search already ran at this tolerance
            return
        todo = []  # (problem, rows: its set first, then the rows it may trade with)
        for b, pb in enumerate(self.problems):
            S = pb.idx
            if whole:
                rest = pb.pool[~torch.isin(pb.pool, S)]
            elif pb.optimal and pb.cert.best_gain > -self.tol and pb.cert.near.numel():
                # (a best gain below -tol, beyond the float32 error, leaves no gaining swap with a near row)
                rest = pb.cert.near.to(S.device)
                rest = rest[~torch.isin(rest, S)]
            else:
                continue
            todo.append((b, torch.cat([S, rest])))
        moved = []
        sizes = np.array([rows.numel() for _, rows in todo])
        for size in np.unique(sizes):  # one float64 search for every problem of a size
            group = [todo[i] for i in np.flatnonzero(sizes == size)]
            rows = torch.stack([r for _, r in group])
            pr = torch.as_tensor([b for b, _ in group], device=rows.device)
            gs = GramSearch(gather_rows(self.inst.E, rows.reshape(-1)).reshape(len(group), int(size), -1),
                            self.C.index_select(0, pr).gather(1, rows), self.th[[b for b, _ in group]], k, fine,
                            dtype=torch.float64)
            start = torch.arange(k, device=rows.device).expand(len(group), k)
            prob = torch.arange(len(group), device=rows.device)
            res = gs.ls(start, prob)
            gain = (res.f - gs.f_many(start, prob)).cpu().numpy()  # one host read per size
            for r, (b, rws) in enumerate(group):
                if gain[r] > fine:
                    pb = self.problems[b]
                    pb.idx = rws.index_select(0, res.S[r])
                    pb.f += float(gain[r])
                    pb.phase = "+polish"
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
            pbs = [self.problems[b] for b in open_]
            # sets whose bound keeps > 1/4 of a row sample, none of which improves them, skip the
            # GEMV: one GEMM E E_S^T gives u (its row sums) and every exact comparison
            dense = go_dense([pb.inst for pb in pbs], [pb.idx for pb in pbs], self.tol, *self.sample)
            Vs = [gather_rows(inst.E, pb.idx).sum(0) for pb, de in zip(pbs, dense) if not de]
            Vs += [] if extra is None or u_extra is not None else [extra]
            U = matmul(inst.E, torch.stack(Vs).T) if Vs else None  # u_b = E v_b: one pass for all
            if extra is not None and u_extra is None:
                u_extra = U[:, -1]
            cols = iter(range(len(Vs)))
            still = []
            certs = swap_certificates([pb.inst for pb in pbs], [pb.idx for pb in pbs], self.tol,
                                      max_entrants=self.cfg.certificate_entrants,
                                      U=[None if de else U[:, next(cols)] for de in dense], dense=dense,
                                      near=self.cfg.near_rows)
            for b, pb, cert in zip(open_, pbs, certs):
                pb.passes += 1
                pb.cert = cert
                pb.optimal = cert.best_gain <= self.tol
                if extend and not pb.optimal and pb.passes < self.cfg.max_passes:
                    pb.pool, pb.idx = _extend_and_search(pb.inst, pb.pool, pb.idx, cert, self.tol,
                                                         self.cfg.extend_rows)
                    pb.f = ccbqp_objective(pb.inst, pb.idx.cpu().numpy())
                    pb.phase = "+pool"
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
    (:func:`fw_ws_ms`) is this with B = 1. Returns a :class:`BatchSelection`.
    """
    n, k = inst.n, inst.k
    given = config_with(config, params)
    cfg = given.for_k(k)
    p, pg = cfg.pool_size, cfg.guided_pool_size
    C = torch.as_tensor(relevance)
    if C.ndim != 2 or C.shape[1] != n:
        raise ValueError(f"relevance must have shape (B, {n}) (B problems x pool size n), got {tuple(C.shape)}")
    th = np.asarray([check_theta(float(t), "thetas") for t in np.asarray(thetas, dtype=np.float64).reshape(-1)])
    if th.shape != (C.shape[0],):
        raise ValueError(f"thetas must have shape ({C.shape[0]},) (one per relevance row), got {th.shape}")
    C = C.to(device=inst.device, dtype=inst.acc_dtype)
    if use_kernels(inst, th.size):  # the host's settings (its tabu rule: WsMultistartConfig.tabu_iters)
        return _kernel_batch(inst, C, th, given.for_k(k, host=True))
    problems = [_Problem(inst._derived(relevance=C[b], theta=float(th[b]))) for b in range(th.size)]
    B = th.size
    tol = ls_tolerance(inst)
    clock = Clock(inst.device)
    whole = n <= p
    run = _Run(inst, problems, C, tol, clock, cfg)
    insts = [pb.inst for pb in problems]
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
    for pb, g in zip(problems, guided):
        pb.guided, pb.passes = bool(g), int(g)
    sizes = np.where(guided, min(pg, n), p)  # rows of each problem's pools
    if whole:
        P = [torch.arange(n, device=inst.device)] * B
    else:
        P = first_pools(insts, guided, u_mean, sizes)
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
            again = [b for b in todo if not problems[b].optimal or (rnd == 0 and guided[b])]
            P2 = [pool_around(insts[b], problems[b].idx, problems[b].cert, u_mean, int(sizes[b])) for b in again]
            clock.lap("shortlist")
            if not again:
                todo = np.array([], dtype=np.int64)
                break
            todo = np.array(again)
            first = [torch.arange(k, device=inst.device)] * todo.size
            run.search_pools(todo, P2, first=first, phase="+repool")
            todo = np.array([b for b in todo if problems[b].changed or not problems[b].optimal], dtype=np.int64)
        if todo.size:  # the last round: certificate passes, extending the pool until one holds
            run.certify(todo)
    if cfg.polish:
        run.polish(whole)
    idx = torch.stack([pb.idx for pb in problems])
    # a set: reported by decreasing relevance, ties to the lower index
    idx = idx.gather(1, torch.sort(idx, dim=1, stable=True).indices)
    idx = idx.gather(1, torch.sort(C.gather(1, idx).double(), dim=1, descending=True, stable=True).indices)
    out = idx.cpu().numpy()
    # f of every set in one pass (ccbqp_objective's sums, all problems at once): one host read
    v = gather_rows(inst.E, idx.reshape(-1)).reshape(B, k, -1).double().sum(1)
    th_t = torch.as_tensor(th, device=inst.device)
    objs = set_value(th_t * (k - 1) * C.gather(1, idx).double().sum(1), torch.linalg.vecdot(v, v), th_t, k)
    objs = objs.cpu().numpy()
    info = [{
        "best_start": run.names[pb.best_start],
        "starts": dict(zip(run.names, (float(v) for v in pb.f_starts))),
        "phase": pb.phase,
        "passes": pb.passes,
        "pool": int(pb.pool.numel()),
        "guided": pb.guided,
        "one_swap_optimal": bool(whole or pb.optimal),
        "compared": None if pb.cert is None else int(pb.cert.compared),
        "perturb_rounds": pb.rounds,
    } for pb in problems]
    return BatchSelection(out, objs, th, info, dict(clock.secs))


@register("fw_ws_ms", params=WsMultistartConfig)  # each knob declared in WsMultistartConfig._parameter_constraints
def fw_ws_ms(inst: Instance, **params: Any):
    """Multistart search on a candidate pool, certified 1-swap optimal on the whole pool (module
    docstring): :func:`ws_multistart_batch` with one problem. The parameters are the knobs of
    :class:`WsMultistartConfig`, each documented there with its value and why.

    info: best_start, starts (f per start after local search), phase (which phase last improved:
    "starts", "+tabu", "+2swap", "+perturb", "+repool", "+pool", "+polish"), passes (reads of the
    pool), pool (final |P|), guided (P came from the mean-row estimate: step 1), one_swap_optimal,
    compared (rows the last certificate compared exactly; None when the pool was searched whole),
    perturb_rounds (run), seconds (per stage, host clock: shortlist, gram, starts, ls, tabu,
    two_swap, perturb, certify, polish).
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
