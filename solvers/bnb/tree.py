"""divopt's branch-and-bound for the CCBQP: DNN/QCR bounds at every node, best-bound search.

Search (module :mod:`divopt_rag.models.qcr` for the bounding functions, :mod:`.bound` for the node
relaxation, :mod:`.sdp` for the node SDP, :mod:`.cuts` for the cuts, :mod:`.fixing` for fixings):

* root: the incumbent of ``select(inst, "fw_ms")`` (and a user warm start); iterated safe
  screening of the pool (:func:`.fixing.swap_screening`) fixes items outside every optimal set to 0.
* node = (items fixed to 1, items fixed to 0, the rest free); its problem is again a cardinality
  binary QP (:meth:`CardinalityQP.restrict`). Bound, smallest of (each valid on its own):
    1. the parent's bound;
    2. a cheap QCR function maximized over the box (no SDP): the parent's, restricted to the node;
       at the root f itself (concave). A node whose bound is below the incumbent closes here;
       otherwise reduced-cost fixing with it (at the root it removes most of a large pool) and,
       at the root, its rounded maximizer is offered as an incumbent;
    3. the node's own DNN relaxation by ADMM, warm-started from the parent's iterates, in chunks,
       with McCormick/triangle cuts whose Lagrange multipliers take a subgradient step after each
       chunk (plus newly separated violated cuts); after each chunk both bounds of the current
       multipliers (QCR maximum and eigenvalue bound). The ADMM stops when the node can be closed,
       when a chunk improved the bound by less than ``stall`` times the remaining gap, or at its
       iteration budget.
* reduced-cost fixing with the best function (proof in :mod:`.fixing`); the node is re-solved
  while fixings happen.
* incumbents: the relaxation's x rounded (its m largest) and improved by the 1-swap local search
  (:func:`divopt_rag.solvers.local_search.local_search`) on the whole pool.
* branching on the free item of largest fractional x (both children inherit the node's bound,
  QCR function, ADMM iterates and cuts); best-bound order, deeper first on ties.
* a node closes when its bound <= incumbent + tol, tol = max(mip_gap |incumbent|, abs_gap).
  The reported bound is max(incumbent, largest bound among the open nodes and the nodes closed
  within tol), an upper bound on the optimum whatever the stopping reason. Status "optimal" means
  that bound is within tol of the incumbent; otherwise "time_limit" or "node_limit".

Small dense linear algebra runs on one BLAS thread (threadpoolctl): on the shared machine an
eigendecomposition of a 101 x 101 matrix took 35 ms with the thread pool and 1.8 ms without.

Limits (issue 33). Memory: the search holds dense (p+1) x (p+1) matrices (the node problem, the
lifted operator's Gram matrix and factor, the QCR function, the ADMM iterates);
:func:`memory_estimate` gives its peak for p = n before anything is allocated and
:func:`branch_and_bound` refuses a pool that cannot fit. Time: with a ``time_limit`` (or
``node_limit``) the search first gets a certified bound at O(n d) cost (the concave relaxation's
Frank-Wolfe bound, :func:`divopt_rag.solvers.bounds.concave_bound`), so a stop at any moment
reports a finite bound; every loop checks the deadline (screening rounds, active-set iterations,
ADMM iterations, cut separation blocks), and a dense O(p^3) step (the lifted operator's Cholesky
factor, the concavity shift's eigendecomposition, one ADMM iteration) starts only when its
predicted time (:func:`_eig_seconds`, measured on this machine) fits before the deadline.
"""
from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from divopt_rag.models import Instance, ccbqp_objective, objective_scale
from divopt_rag.models.memory import format_bytes
from divopt_rag.models.mip_sizing import ModelEstimate, largest_fitting, memory_refusal
from divopt_rag.models.qcr import CardinalityQP, LiftOperator, QCRBound, qcr_from_dual
from divopt_rag.models.solve_config import Stopwatch
from divopt_rag.models.solver_limits import ModelTooLarge
from divopt_rag.models.validation import check_indices, check_nonnegative, check_scalar

from ..bounds import concave_bound
from ..local_search import local_search
from ..selection import select
from .bound import RelaxationResult, maximize_concave_qp
from .cuts import CutPool
from .fixing import reduced_cost_fixing, swap_screening
from .options import BnBOptions
from .sdp import dnn_admm

__all__ = ["BnBOutcome", "branch_and_bound", "LOG_COLUMNS", "memory_estimate"]

#: Columns of the node log (one row per processed node).
LOG_COLUMNS = ("node", "depth", "free", "ones", "node_bound", "bound", "incumbent", "open", "seconds",
               "admm_iterations", "fixed", "action")

#: Peak memory of the search in dense (n+1) x (n+1) float64 matrices at a root of p = n free
#: items: the problem and its node copy (2), the lifted operator's Gram matrix and Cholesky factor
#: (8: (2p+2)^2 each), the QCR function and the concavity shift's temporaries (~5), the ADMM
#: iterates and their temporaries (~9). Measured peak-RSS growth: 14.6 of them at n = 3000.
_DENSE_COPIES = 24
#: Bytes independent of n: the cut separation's blocks (2e6 entries x ~4 arrays) and the node log.
_FIXED_BYTES = 96 * 2**20
# the dense O(p^3) steps in eigvalsh units (measured at p = 1000 on one BLAS thread: Cholesky of the
# lifted Gram 1.9, concavity shift 2.0, one ADMM iteration 1.2, one active-set step 0.3)
_LIFT_UNITS, _SHIFT_UNITS, _ADMM_UNITS, _ACTIVE_SET_UNITS = 1.9, 2.0, 1.2, 0.3
_EIG_RATE: tuple[float, float] | None = None


def _eig_seconds(p: int) -> float:
    """Seconds of one eigvalsh of a p x p matrix on one BLAS thread, now: a 250 x 250 one is timed
    (~10 ms; re-measured after 30 s, so the machine's load counts) and scaled by (p / 250)^3,
    which overestimates large p (better BLAS efficiency there): predictions err on the safe side."""
    global _EIG_RATE
    now = time.monotonic()
    if _EIG_RATE is None or now - _EIG_RATE[1] > 30.0:
        A = np.random.default_rng(0).standard_normal((250, 250))
        A = A + A.T
        with threadpool_limits(limits=1):
            t0 = time.perf_counter()
            np.linalg.eigvalsh(A)
            _EIG_RATE = ((time.perf_counter() - t0) / 250.0**3, now)
    return _EIG_RATE[0] * float(p) ** 3


def memory_estimate(n: int, d: int = 0) -> ModelEstimate:
    """Peak memory of :func:`branch_and_bound` on a pool of n items (d: embedding dimension), for
    the worst case that screening removes nothing (random pools: it removes none)."""
    dense = 8 * (n + 1) ** 2
    return ModelEstimate(
        what=f"divopt's branch-and-bound (solver 'bnb') at n = {n}", counts=None,
        bytes=int(_DENSE_COPIES * dense + 16 * n * max(d, 1) + _FIXED_BYTES), cubic=n,
        detail=f"about {_DENSE_COPIES} dense (n+1) x (n+1) float64 matrices of {format_bytes(dense)} at its root")


def check_memory(n: int, d: int, budget: tuple[int, str] | None = None) -> None:
    """Raise :class:`~divopt_rag.models.solver_limits.ModelTooLarge` (one line: the estimate, what is free,
    what to do instead) when :func:`memory_estimate` does not fit; ``budget`` = (bytes, source)
    overrides the measured free memory."""
    est = memory_estimate(n, d)
    why = memory_refusal(est, budget)
    if why is None:
        return
    from divopt_rag.models.mip_sizing import MEMORY_HEADROOM
    from divopt_rag.models.memory import available_memory

    avail = (budget or available_memory())[0]
    fits = largest_fitting(lambda m: memory_estimate(m, d).bytes, MEMORY_HEADROOM * avail)
    raise ModelTooLarge("bnb", why, "screen the pool first (divopt_rag.solvers.screening.safe_screen keeps every "
                        f"optimal set; solve inst.subset(survivors)), or use a pool of at most {fits} items "
                        "(e.g. inst.top_n)")


@dataclass
class BnBOutcome:
    """What the search found and proved.

    indices: the incumbent (sorted); objective: f of it (``ccbqp_objective``); bound: proven upper
    bound on the optimum; status: "optimal", "time_limit" or "node_limit"; nodes: nodes processed;
    log: the node log (DataFrame, :data:`LOG_COLUMNS`); info: root bound, screening, counters.
    """

    indices: np.ndarray
    objective: float
    bound: float
    status: str
    nodes: int
    seconds: float
    log: pd.DataFrame
    info: dict = field(default_factory=dict)


@dataclass
class _Node:
    bound: float
    depth: int
    state: np.ndarray  # int8 per pool item: -1 free, 0 fixed out, 1 fixed in
    qcr: tuple | None = None  # (QCRBound, its free items, its items fixed to 1)
    admm: tuple | None = None  # (ADMMState, its free items)
    x: np.ndarray | None = None  # relaxation point over the pool (warm start)
    cuts: tuple | None = None  # (CutPool, its free items)


class _Search:
    def __init__(self, inst: Instance, *, time_limit: float | None, mip_gap: float, abs_gap: float,
                 node_limit: int | None, options: BnBOptions, callback: Callable[[dict], None] | None,
                 progress: bool, stopwatch: Stopwatch):
        self.inst = inst
        self.k = inst.k
        self.problem = CardinalityQP.from_instance(inst)
        self.stopwatch = stopwatch  # every check of the deadline reads its clock
        self.t0 = stopwatch.started
        self.deadline = math.inf if time_limit is None else self.t0 + time_limit
        self.limited = time_limit is not None or node_limit is not None
        self.mip_gap, self.abs_gap = mip_gap, abs_gap
        self.node_limit = node_limit
        o = options
        self.root_iterations, self.node_iterations, self.chunk, self.stall = (
            o.root_iterations, o.node_iterations, o.chunk, o.stall)
        self.screening, self.fixing, self.use_local_search = o.screening, o.fixing, o.local_search
        self.max_warm = o.max_warm
        self.heuristic = o.heuristic
        self.branching = o.branching
        self.use_cuts = o.cuts
        self.node_sdp = o.node_sdp
        self.cut_step = 0.25  # Polyak step scale (1.0 oscillated on the tuning pools)
        self.cut_batch = 200  # new cuts per separation round
        self.callback = callback
        self.bar = tqdm(desc="bnb", unit="node", disable=not progress, leave=False)
        self.inc_idx: np.ndarray | None = None
        self.inc_val = -math.inf
        self.seen: set[tuple[int, ...]] = set()
        self.closed_within_tol = -math.inf
        self.heap: list = []
        self.counter = itertools.count()
        self.nodes = 0
        self.log: list[dict] = []
        self.admm_total = 0
        self.lifts: dict[tuple[int, int], LiftOperator] = {}
        self.info: dict = {}

    # --- incumbents ---------------------------------------------------------------------
    def offer(self, idx: Any, polish: bool = True) -> None:
        idx = np.sort(np.asarray(idx, dtype=np.int64))
        key = tuple(int(i) for i in idx)
        if key in self.seen:
            return
        self.seen.add(key)
        val = ccbqp_objective(self.inst, idx)
        if polish and self.use_local_search and self.inst.n > self.k:
            ls = local_search(self.inst, idx)
            ls_idx = np.sort(ls.indices.cpu().numpy().astype(np.int64))
            self.seen.add(tuple(int(i) for i in ls_idx))
            ls_val = ccbqp_objective(self.inst, ls_idx)
            if ls_val > val:
                idx, val = ls_idx, ls_val
        if val > self.inc_val:
            self.inc_idx, self.inc_val = idx, val

    @property
    def tol(self) -> float:
        return max(self.mip_gap * abs(self.inc_val), self.abs_gap)

    @property
    def threshold(self) -> float:
        return self.inc_val + self.tol

    def close(self, bound: float) -> None:
        """A node closed by its bound: remember bounds above the incumbent (within tol)."""
        if bound > self.inc_val:
            self.closed_within_tol = max(self.closed_within_tol, bound)

    def global_bound(self, current: float = -math.inf) -> float:
        top = -self.heap[0][0] if self.heap else -math.inf
        return max(self.inc_val, self.closed_within_tol, top, current)

    def lift(self, p: int, m: int) -> LiftOperator:
        key = (p, m)
        if key not in self.lifts:
            if len(self.lifts) > 256:
                self.lifts.clear()
            self.lifts[key] = LiftOperator(p, m)
        return self.lifts[key]

    def push(self, node: _Node) -> None:
        heapq.heappush(self.heap, (-node.bound, -node.depth, next(self.counter), node))

    def record(self, node: _Node, node_bound: float, action: str, admm: int, fixed: int, free: int, ones: int) -> None:
        row = {"node": self.nodes, "depth": node.depth, "free": free, "ones": ones, "node_bound": node_bound,
               "bound": self.global_bound(), "incumbent": self.inc_val, "open": len(self.heap),
               "seconds": self.stopwatch.now() - self.t0, "admm_iterations": admm, "fixed": fixed, "action": action}
        self.log.append(row)
        if self.callback is not None:
            self.callback(row)
        self.bar.update(1)
        if self.nodes % 10 == 0:
            self.bar.set_postfix(bound=f"{row['bound']:.6g}", incumbent=f"{self.inc_val:.6g}", open=len(self.heap))

    # --- one node ------------------------------------------------------------------------
    def _inherited(self, node: _Node, free: np.ndarray, ones: np.ndarray):
        F, qfree, qones = node.qcr
        pos = np.searchsorted(qfree, free)
        new_ones = np.setdiff1d(ones, qones, assume_unique=True)
        return F.restrict(pos, np.searchsorted(qfree, new_ones))

    def perf_deadline(self) -> float | None:
        """The deadline as a ``time.perf_counter()`` reading (what the dense steps check), or None."""
        if math.isinf(self.deadline):
            return None
        return time.perf_counter() + (self.deadline - self.stopwatch.now())

    def _relax(self, F: QCRBound, x0: np.ndarray | None, stop_below: float) -> RelaxationResult:
        return maximize_concave_qp(F.const, F.linear, F.quad, F.m, x0, stop_below=stop_below,
                                   deadline=self.perf_deadline())

    def fits(self, units: float, p: int) -> bool:
        """True when ``units`` eigvalsh of size p (predicted) end before the deadline; otherwise
        ``info["stop_reason"]`` says what did not fit."""
        now = self.stopwatch.now()
        if math.isinf(self.deadline) or p < 150:  # small dense steps: milliseconds
            return now <= self.deadline
        need = units * _eig_seconds(p)
        if now + need <= self.deadline:
            return True
        if now < self.deadline:
            self.info["stop_reason"] = (f"stopped {max(self.deadline - now, 0.0):.3g} s before the deadline: the next "
                                        f"dense step (p = {p}) was predicted to take {need:.3g} s")
        return False

    def requeue(self, node: _Node, bound: float) -> bool:
        """Put an unfinished node back (its bound so far) and report that time ran out."""
        node.bound = bound
        self.push(node)
        return False

    def _fixings(self, state: np.ndarray, free: np.ndarray, m: int, r: RelaxationResult):
        """Reduced-cost fixing from a relaxation result; the new state or None."""
        if not self.fixing:
            return None, 0
        fix0, fix1 = reduced_cost_fixing(r.value, r.x, r.gradient, m, self.threshold)
        n_fix = int(fix0.sum() + fix1.sum())
        if not n_fix:
            return None, 0
        state = state.copy()
        state[free[fix0]] = 0
        state[free[fix1]] = 1
        return state, n_fix

    def process(self, node: _Node) -> bool:
        """Bound, fix, round and branch one node. False when the time ran out (node re-queued)."""
        state = node.state
        admm_used = fixed_total = 0
        root = node.depth == 0 and self.nodes == 1
        while True:
            free = np.flatnonzero(state < 0)
            ones = np.flatnonzero(state == 1)
            m = self.k - ones.size
            if m < 0 or m > free.size:
                self.record(node, -math.inf, "infeasible", admm_used, fixed_total, free.size, ones.size)
                return True
            if m == 0 or m == free.size:
                leaf = ones if m == 0 else np.concatenate([ones, free])
                self.offer(leaf, polish=False)
                self.record(node, ccbqp_objective(self.inst, leaf), "leaf", admm_used, fixed_total, free.size, ones.size)
                return True
            best = node.bound
            x0 = None if node.x is None else node.x[free]
            sub = self.problem.restrict(free, ones)
            # 1. cheap bound: the inherited QCR function (at the root: f itself, concave)
            if node.qcr is not None:
                F = self._inherited(node, free, ones)
            else:
                units = _SHIFT_UNITS + (0.0 if (free.size, m) in self.lifts else _LIFT_UNITS)
                if not self.fits(units + _ACTIVE_SET_UNITS, free.size):
                    return self.requeue(node, best)
                F = qcr_from_dual(sub, np.zeros(2 * free.size + 2), lift=self.lift(free.size, m), kind="plain",
                                  eigen_bound=False)
                x0 = np.isin(free, self.inc_idx).astype(np.float64) if x0 is None else x0
            if not self.fits(_ACTIVE_SET_UNITS, free.size):
                return self.requeue(node, best)
            r = self._relax(F, x0, self.threshold)
            if node.qcr is None:  # root: a rounded incumbent before the SDP (it steers fixings and cuts)
                self.offer(np.concatenate([ones, free[np.argsort(-r.x, kind="stable")[:m]]]))
            best_F, best_r = F, r
            best = min(best, r.bound)
            if best <= self.threshold:
                self.close(best)
                self.record(node, best, "pruned (inherited)", admm_used, fixed_total, free.size, ones.size)
                return True
            new_state, n_fix = self._fixings(state, free, m, r)
            if new_state is not None:
                fixed_total += n_fix
                state = new_state
                node = _Node(best, node.depth, state, (F, free, ones), node.admm, self._full_x(free, ones, r.x), node.cuts)
                continue
            # 2. the node's DNN relaxation, warm-started
            if not self.fits((0.0 if (free.size, m) in self.lifts else _LIFT_UNITS) + _ADMM_UNITS, free.size):
                return self.requeue(node, best)
            lift = self.lift(free.size, m)
            admm_state = None
            if node.admm is not None:
                st, sfree = node.admm
                admm_state = st.restrict(np.searchsorted(sfree, free))
            pool = None
            if self.use_cuts:
                if node.cuts is not None:
                    cp_, cfree = node.cuts
                    pool = cp_.restrict(np.searchsorted(cfree, free))
                else:
                    pool = CutPool(free.size)
            budget = self.root_iterations if root else (self.node_iterations if self.node_sdp else 0)
            done = 0
            while done < budget:
                if not self.fits(_ADMM_UNITS, free.size):
                    return self.requeue(node, best)
                Fd, admm_state = dnn_admm(sub, admm_state, max_iter=min(self.chunk, budget - done), lift=lift,
                                          valid_inequality=None if pool is None else pool.shift(),
                                          deadline=self.perf_deadline())
                done += self.chunk
                r = self._relax(Fd, best_r.x, self.threshold)
                prev = best
                if r.bound < best_r.bound:
                    best_F, best_r = Fd, r
                chunk_bound = min(r.bound, Fd.eigen_bound)
                best = min(best, chunk_bound)
                if best <= self.threshold:
                    break
                if pool is not None:
                    # Lagrangian step on the cut multipliers towards the incumbent, new violated cuts
                    # (the target is capped at 1e-2 k(k-1) below the bound: a poor incumbent must
                    # not blow up the step)
                    target = max(self.inc_val, chunk_bound - 1e-2 * objective_scale(self.k))
                    pool.step(admm_state.W, chunk_bound, target, self.cut_step)
                    pool.separate(admm_state.W, self.cut_batch,
                                  deadline=self.perf_deadline())
                if prev - best < self.stall * (best - self.inc_val) and not (root and done < budget):
                    break
            admm_used += done
            self.admm_total += done
            node.bound = best
            if best <= self.threshold:
                self.close(best)
                self.record(node, best, "pruned", admm_used, fixed_total, free.size, ones.size)
                return True
            # incumbent from the relaxation
            x = best_r.x
            order = np.argsort(-x, kind="stable")[:m]
            self.offer(np.concatenate([ones, free[order]]))
            if best <= self.threshold:
                self.close(best)
                self.record(node, best, "pruned", admm_used, fixed_total, free.size, ones.size)
                return True
            # 3. reduced-cost fixing, then re-solve the node with the tighter state
            new_state, n_fix = self._fixings(state, free, m, best_r)
            if new_state is not None:
                fixed_total += n_fix
                state = new_state
                node = _Node(best, node.depth, state, (best_F, free, ones),
                             None if admm_state is None else (admm_state, free), self._full_x(free, ones, x),
                             None if pool is None else (pool, free))
                root = False
                continue
            # 4. branch
            j = self._branch_position(x, best_F, best_r)
            item = free[j]
            xfull = self._full_x(free, ones, x)
            warm = (admm_state, free) if admm_state is not None and len(self.heap) < self.max_warm else None
            for val in (1, 0):
                child_state = state.copy()
                child_state[item] = val
                self.push(_Node(best, node.depth + 1, child_state, (best_F, free, ones), warm, xfull,
                                None if (pool is None or warm is None) else (pool, free)))
            self.record(node, best, "branched", admm_used, fixed_total, free.size, ones.size)
            return True

    def _branch_position(self, x: np.ndarray, F: QCRBound, r: RelaxationResult) -> int:
        frac = (x > 1e-9) & (x < 1.0 - 1e-9)
        if not frac.any():
            return int(np.argmax(x))
        if self.branching == "most_fractional":
            return int(np.argmin(np.where(frac, np.abs(x - 0.5), np.inf)))
        return int(np.argmax(np.where(frac, x, -1.0)))

    def _full_x(self, free: np.ndarray, ones: np.ndarray, x: np.ndarray) -> np.ndarray:
        out = np.zeros(self.inst.n)
        out[free] = x
        out[ones] = 1.0
        return out

    # --- the search ------------------------------------------------------------------------
    def run(self, warm_start: np.ndarray | None) -> BnBOutcome:
        inst, k, n = self.inst, self.k, self.inst.n
        # always one feasible start (top-k by relevance), so the tolerance is finite
        self.offer(np.argsort(-inst.relevance.detach().double().cpu().numpy(), kind="stable")[:k], polish=False)
        if warm_start is not None:
            self.offer(warm_start, polish=False)
        if self.heuristic is not None and n > k:
            self.offer(select(inst, self.heuristic).indices, polish=False)
        self.info["start_objective"] = self.inc_val
        root_bound = math.inf
        if self.limited and n > k:
            # a certified bound at O(n d) cost first, so that a stop at any time reports one
            root_bound, _ = concave_bound(inst, max_iter=200)
            self.info["start_bound"] = root_bound
        state = np.full(n, -1, dtype=np.int8)
        if self.screening and 0 < k < n:
            # all optimal sets survive; fix the others to 0
            keep = swap_screening(self.problem.linear, self.problem.quad, k, tol=1e-9 * objective_scale(k),
                                  deadline=self.perf_deadline())
            state[:] = 0
            state[keep] = -1
            self.info["screened_out"] = int(n - keep.size)
        self.push(_Node(root_bound, 0, state))
        status = "optimal"
        while self.heap:
            if self.stopwatch.now() > self.deadline:
                status = "time_limit"
                break
            if self.node_limit is not None and self.nodes >= self.node_limit:
                status = "node_limit"
                break
            neg, _, _, node = heapq.heappop(self.heap)
            if -neg <= self.threshold:
                self.close(-neg)
                continue
            self.nodes += 1
            if not self.process(node):
                status = "time_limit"
                break
            if self.nodes == 1:
                self.info["root_bound"] = node.bound if math.isfinite(node.bound) else self.global_bound()
        bound = self.global_bound()
        if status == "optimal" and bound > self.threshold:  # cannot happen; keep the claim honest
            status = "time_limit"
        self.bar.close()
        log = pd.DataFrame(self.log, columns=list(LOG_COLUMNS))
        self.info.update(admm_iterations=self.admm_total, open_nodes=len(self.heap), tolerance=self.tol)
        return BnBOutcome(np.sort(self.inc_idx), float(self.inc_val), float(bound), status, self.nodes,
                          self.stopwatch.now() - self.t0, log, self.info)


def branch_and_bound(
    inst: Instance,
    *,
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    abs_gap: float | None = None,
    node_limit: int | None = None,
    warm_start: Any = None,
    options: BnBOptions | None = None,
    callback: Callable[[dict], None] | None = None,
    progress: bool = False,
    stopwatch: Stopwatch | None = None,
    memory_limit: float | None = None,
) -> BnBOutcome:
    """Solve the CCBQP of ``inst`` exactly (module docstring for the method).

    time_limit : seconds (None: no limit); on expiry the incumbent, the proven bound and status
        "time_limit". node_limit likewise ("node_limit").
    mip_gap, abs_gap : a node closes when its bound <= incumbent + max(mip_gap |incumbent|,
        abs_gap); abs_gap defaults to 1e-8 k (k-1) (the normalized-gap scale).
    warm_start : indices of a k-set to start from (the ``options.heuristic`` incumbent is computed too).
    options : how the search runs, a :class:`~divopt_rag.solvers.bnb.options.BnBOptions` (ADMM
        budgets, screening, fixing, local search, cuts, node SDPs, the incumbent heuristic).
    callback : called with each node-log row (dict); progress : show a tqdm bar.
    stopwatch : when the time budget began and on which clock
        (:class:`~divopt_rag.models.solve_config.Stopwatch`; default: this call, on
        ``time.perf_counter``), so a caller's own work counts against ``time_limit`` and ``seconds``.
    memory_limit : bytes the search may plan to use (default: the machine's free memory); a pool
        whose :func:`memory_estimate` exceeds it raises :class:`~divopt_rag.models.solver_limits.ModelTooLarge`
        before anything is allocated.
    """
    stopwatch = Stopwatch() if stopwatch is None else stopwatch
    if not isinstance(inst, Instance):
        raise TypeError(f"inst must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    if options is None:
        options = BnBOptions()
    elif not isinstance(options, BnBOptions):
        raise TypeError(f"options must be a BnBOptions, got {type(options).__name__}")
    if time_limit is not None:
        time_limit = check_nonnegative(time_limit, "time_limit")
    mip_gap = check_nonnegative(mip_gap, "mip_gap")
    abs_gap = 1e-8 * objective_scale(inst.k) if abs_gap is None else check_nonnegative(abs_gap, "abs_gap")
    node_limit = check_scalar(node_limit, "node_limit", int, min_val=1, allow_none=True)
    budget = None if memory_limit is None else (
        int(check_scalar(memory_limit, "memory_limit", (int, float), min_val=0)), "memory_limit")
    check_memory(inst.n, inst.d, budget)
    warm = None
    if warm_start is not None:
        if hasattr(warm_start, "indices"):
            warm_start = warm_start.indices
        warm = check_indices(np.asarray(list(warm_start) if isinstance(warm_start, (set, frozenset)) else warm_start,
                                        dtype=np.int64), inst.n, "warm_start", size=inst.k)
    search = _Search(inst, time_limit=time_limit, mip_gap=mip_gap, abs_gap=abs_gap, node_limit=node_limit,
                     options=options, callback=callback, progress=progress, stopwatch=stopwatch)
    with threadpool_limits(limits=1):
        return search.run(warm)
