"""Shared pieces of the Pyomo mixed-integer builders (``divopt_rag.models.mip_*``).

Every builder returns a :class:`BuiltModel`, the pair ``(model, info)``:

* ``model``, a :class:`pyomo.environ.ConcreteModel` with ``model.x[i]``, i in ``range(n)``,
  binary, 1 when item i of the pool is selected, and ``model.obj``, always MAXIMIZED;
* ``info``, a frozen :class:`ModelInfo`: what the builder knows about the model (its kind,
  the selection variable, the message to report if the solver proves it infeasible, e.g.
  "no k-set has average pairwise cosine <= rho_div", and builder-specific values).

Builders never call a solver and attach nothing to the model: :func:`divopt_rag.models.runner.solve`
takes the pair (``solve(build_topk(s, k))``, or ``solve(model, info=info)``).

Builders that can be large take ``deadline`` (a ``time.perf_counter()`` value, or None): they
check it as they add terms (:class:`BuildClock`) and raise :class:`BuildTimeout` once it has
passed, so a caller's time limit also bounds building (Pyomo adds terms one by one in Python:
the MILP of n = 300 items has 4.5e5 terms and takes seconds).
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import numpy as np
import pyomo.environ as pe
import torch

from .instance import Instance
from .validation import check_embeddings, check_vector

__all__ = ["ModelInfo", "BuiltModel", "as_scores", "as_gram", "new_selection_model", "add_pair_products", "pairs",
           "BuildTimeout", "BuildClock"]


class BuildTimeout(TimeoutError):
    """Building a model passed its deadline (the caller's time limit); the partial model is dropped."""


class _DropBuildTimeoutLog(logging.Filter):
    # Pyomo logs "Rule failed ..." at ERROR before re-raising an exception from a rule; a
    # deadline is not a failure of the rule, so that one record is dropped.
    def filter(self, record: logging.LogRecord) -> bool:
        return "BuildTimeout" not in record.getMessage()


class BuildClock:
    """The deadline of one build, checked every ``every`` calls of :meth:`tick` (a clock read
    costs ~50 ns, a Pyomo term ~5-20 us) and by :meth:`check`; ``deadline`` None never expires.

    ``now`` is the clock the deadline is read on (default ``time.perf_counter``; tests inject
    one). A step that cannot be interrupted (an eigendecomposition, an SDP solver's setup) is
    refused before it starts when its predicted seconds do not fit (:meth:`expect`), and its
    measured seconds are kept in :attr:`seconds` (:meth:`timed`), from which later steps are
    predicted.

    Use as a context manager around the build (it silences Pyomo's log line for a rule that
    raised :class:`BuildTimeout`)::

        with BuildClock(deadline) as clock:
            m.c = pe.Constraint(index, rule=lambda m, i: (clock.tick(), expr(i))[1])
            m.obj = pe.Objective(expr=quicksum(term(t) for t in clock.items(terms)))
    """

    def __init__(self, deadline: float | None, every: int = 1024, now: Callable[[], float] = time.perf_counter) -> None:
        self.deadline = None if deadline is None else float(deadline)
        self.every = int(every)
        self.now = now
        self.seconds: dict[str, float] = {}
        self._count = 0
        self._filter = _DropBuildTimeoutLog()

    def left(self) -> float:
        """Seconds until the deadline (inf without one; negative once it has passed)."""
        return math.inf if self.deadline is None else self.deadline - self.now()

    def check(self, step: str | None = None) -> None:
        """BuildTimeout once the deadline has passed (naming ``step``, what was about to start)."""
        if self.deadline is not None and self.now() > self.deadline:
            before = f" before {step}" if step else ""
            raise BuildTimeout(f"building the model passed its deadline (the time limit){before}")

    def expect(self, seconds: float, step: str) -> None:
        """BuildTimeout, before ``step`` starts, when its predicted ``seconds`` do not fit in
        what is left (a step that cannot be interrupted must not start late)."""
        left = self.left()
        if seconds > left:
            raise BuildTimeout(f"{step} would take about {seconds:.3g} s and {max(left, 0.0):.3g} s of the time limit "
                               f"were left")

    @contextlib.contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """Measure the block into ``seconds[step]`` (added up when a step repeats)."""
        t0 = self.now()
        try:
            yield
        finally:
            self.seconds[step] = self.seconds.get(step, 0.0) + (self.now() - t0)

    def within(self, seconds: float) -> "BuildClock":
        """A clock on the same time source whose deadline is ``seconds`` from now (a stage's own
        share of the build), never later than this one's."""
        deadline = self.now() + seconds
        return BuildClock(deadline if self.deadline is None else min(deadline, self.deadline), self.every, self.now)

    def tick(self) -> None:
        self._count += 1
        if self._count >= self.every:
            self._count = 0
            self.check()

    def items(self, iterable: Any):
        """The items of ``iterable``, checking the deadline as they are consumed."""
        if self.deadline is None:
            yield from iterable
            return
        for item in iterable:
            self.tick()
            yield item

    def __enter__(self) -> "BuildClock":
        self.check()
        if self.deadline is not None:
            logging.getLogger("pyomo.core").addFilter(self._filter)
        return self

    def __exit__(self, *exc: Any) -> None:
        logging.getLogger("pyomo.core").removeFilter(self._filter)


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """What a builder knows about the model it returns (read by the runner and by callers).

    kind : the model's name, e.g. "ccbqp_miqp", "diversity", "robust_l2".
    n_items : pool size n, the length of the selection variable.
    item_var : name of the binary selection variable, indexed by ``range(n_items)``.
    infeasible_message : what the runner reports when the solver proves the model infeasible
        (None: a generic message).
    details : builder-specific values (e.g. the CCBQP diagonal shift u), read-only.
    """

    kind: str
    n_items: int
    item_var: str = "x"
    infeasible_message: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))


class BuiltModel(NamedTuple):
    """A builder's result: the Pyomo model (data only) and its :class:`ModelInfo`."""

    model: pe.ConcreteModel
    info: ModelInfo


def as_scores(scores: Any, name: str = "scores", n: int | None = None) -> np.ndarray:
    """A finite float64 vector (validated; the error names ``name``)."""
    if isinstance(scores, Instance):
        return scores.relevance.detach().double().cpu().numpy()
    length = n if n is not None else int(np.asarray(scores.cpu() if isinstance(scores, torch.Tensor) else scores).size)
    what = " (the pool size n)" if n is not None else ""
    return check_vector(scores, name, length, what).detach().double().cpu().numpy()


def as_gram(embeddings: Any, n: int | None = None, name: str = "embeddings") -> np.ndarray:
    """The float64 cosine (Gram) matrix W = E E^T of unit-norm rows, or an Instance's pool.

    Builders are exact models, so W is formed in float64 whatever the storage dtype of E.
    """
    if isinstance(embeddings, Instance):
        E = embeddings.E
    else:
        E = check_embeddings(embeddings, name)
    E64 = E.detach().double().cpu().numpy()
    if n is not None and E64.shape[0] != n:
        raise ValueError(f"{name} must have {n} rows (the pool size n), got {E64.shape[0]}")
    return E64 @ E64.T


def pairs(n: int) -> list[tuple[int, int]]:
    """All unordered pairs (i, j), i < j, in lexicographic order."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def new_selection_model(n: int, name: str) -> pe.ConcreteModel:
    """A ConcreteModel with the binary selection vector ``x`` indexed by ``range(n)``."""
    m = pe.ConcreteModel(name=name)
    m.x = pe.Var(range(n), domain=pe.Binary)
    return m


def add_pair_products(m: pe.ConcreteModel, n: int, *, mccormick: str = "full", rlt_k: int | None = None,
                      clock: BuildClock | None = None) -> None:
    """Add y_ij = x_i x_j for i < j, linearized (McCormick), optionally tightened (RLT).

    McCormick envelope of the product of two binaries, exact on binary x:
        y_ij <= x_i,   y_ij <= x_j,   y_ij >= x_i + x_j - 1,   y_ij >= 0.
    ``mccormick="upper"`` keeps only the two upper inequalities (enough when every y has a
    nonnegative objective coefficient, or together with the RLT equalities below).
    RLT (reformulation-linearization) with a fixed cardinality sum(x) = k: multiplying the
    equality by x_i and using x_i^2 = x_i gives
        sum_{j != i} y_ij = (k - 1) x_i        for every i,
    valid for every binary solution; with y >= 0 it already forces y_ij = x_i x_j on binary x
    (x_i = 0 zeroes row i; x_i = 1 needs k-1 units from the k-1 selected partners), and it
    tightens the LP relaxation considerably.
    ``clock`` : the build's :class:`BuildClock` (checked per pair; None: no deadline).
    """
    if mccormick not in ("full", "upper"):
        raise ValueError(f"unknown mccormick {mccormick!r}; expected one of ['full', 'upper']")
    clock = clock or BuildClock(None)
    P = pairs(n)
    m.P = pe.Set(dimen=2, ordered=True)
    for start in range(0, len(P), 4096):  # in chunks, so the clock is checked while it fills
        clock.check()
        m.P.update(P[start : start + 4096])
    # dense=False: each y_ij is created where a row first uses it, inside the rules below that
    # check the clock (creating all n(n-1)/2 at once is one long Pyomo call); same model
    m.y = pe.Var(m.P, bounds=(0.0, 1.0), dense=False)
    tick = clock.tick
    m.y_le_xi = pe.Constraint(m.P, rule=lambda m, i, j: (tick(), m.y[i, j] <= m.x[i])[1])
    m.y_le_xj = pe.Constraint(m.P, rule=lambda m, i, j: (tick(), m.y[i, j] <= m.x[j])[1])
    if mccormick == "full":
        m.y_ge = pe.Constraint(m.P, rule=lambda m, i, j: (tick(), m.y[i, j] >= m.x[i] + m.x[j] - 1)[1])
    if rlt_k is not None:
        partners: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for i, j in P:
            partners[i].append((i, j))
            partners[j].append((i, j))
        m.rlt = pe.Constraint(
            range(n),
            rule=lambda m, i: sum(m.y[p] for p in clock.items(partners[i])) == (rlt_k - 1) * m.x[i],
        )
