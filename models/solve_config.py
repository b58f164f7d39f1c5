"""The options of one exact solve (:class:`SolveConfig`) and the clock its time limit runs on
(:class:`Stopwatch`).

A solve takes its settings in one object, as Pyomo's ``SolverConfig`` holds a solver's
(``pyomo.contrib.solver.common.config``): :func:`divopt_rag.models.runner.solve` reads nothing else.
Time is read from one place too: a :class:`Stopwatch` says when the budget began and on which
clock; every time-limited step reads that clock (``time.perf_counter`` unless a test injects a
fake one, so that a time-limit test asserts on the clock, not on the machine's load).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .domains import THREADS_MAX
from .validation import check_nonnegative, check_scalar

__all__ = ["SolveConfig", "Stopwatch", "Clock", "DEFAULT_TIME_LIMIT"]

#: Seconds: the time limit of the exact solves run by robust records, certificates and the
#: experiments unless they are given one (:func:`~divopt_rag.models.runner.solve` itself has no
#: limit by default).
DEFAULT_TIME_LIMIT = 60.0

#: A clock: a callable returning seconds on a monotonic scale (``time.perf_counter``).
Clock = Callable[[], float]


@dataclass(frozen=True)
class SolveConfig:
    """The options of one solve, validated once (the part of Pyomo's ``SolverConfig`` divopt uses).

    time_limit : wall-clock seconds for the whole solve call (None: no limit), counted on the
        call's :class:`Stopwatch`: measuring and translating the model count, and the solver's own
        limit is what is left (0 when nothing is). On expiry the Result has status "time_limit",
        the incumbent, the best bound and the gap; when the call still overran (a translation
        longer than the limit cannot be interrupted), ``message`` says how long it took and where
        the time went.
    mip_gap : relative gap at which the solver may stop (status "gap_limit" if above
        :data:`~divopt_rag.models.solve_results.OPTIMALITY_GAP`).
    threads : solver threads, an int in [1, :data:`~divopt_rag.models.domains.THREADS_MAX`] (this
        machine's CPUs; None: the solver's default).
    log_path : file receiving the solver log.
    options : raw solver options, passed through.
    """

    time_limit: float | None = None
    mip_gap: float | None = None
    threads: int | None = None
    log_path: str | Path | None = None
    options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.time_limit is not None:
            object.__setattr__(self, "time_limit", check_nonnegative(self.time_limit, "time_limit"))
        if self.mip_gap is not None:
            object.__setattr__(self, "mip_gap", check_nonnegative(self.mip_gap, "mip_gap"))
        if self.threads is not None:
            threads = check_scalar(self.threads, "threads", int)
            if not 1 <= threads <= THREADS_MAX:
                raise ValueError(f"threads must be an integer in [1, {THREADS_MAX}] (1 to this machine's CPUs, "
                                 f"divopt_rag.models.domains.THREADS_MAX), got {threads}")
            object.__setattr__(self, "threads", threads)

    def updated(self, **settings: Any) -> "SolveConfig":
        """A copy with the settings that are not None replaced."""
        given = {k: v for k, v in settings.items() if v is not None}
        return dataclasses.replace(self, **given) if given else self


@dataclass(frozen=True)
class Stopwatch:
    """When a call's time budget began (``started``), read on ``clock``.

    clock : seconds on a monotonic scale, ``time.perf_counter`` by default; tests pass a fake.
    started : the clock's reading when the budget began (default: when the stopwatch is made), so
        that a caller's own work before the solve (building the model) counts against the limit.
    """

    clock: Clock = time.perf_counter
    started: float = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.started is None:
            object.__setattr__(self, "started", float(self.clock()))

    def now(self) -> float:
        return float(self.clock())

    def elapsed(self) -> float:
        """Seconds since ``started``."""
        return self.now() - self.started

    def left(self, time_limit: float | None) -> float | None:
        """Seconds of ``time_limit`` not yet spent (negative once it has passed); None without a limit."""
        return None if time_limit is None else float(time_limit) - self.elapsed()

    def perf_counter_deadline(self, time_limit: float | None) -> float | None:
        """The end of ``time_limit`` as a ``time.perf_counter()`` reading, for the steps that take
        one (the model builders' ``deadline``, divopt's branch-and-bound): now plus what is left."""
        left = self.left(time_limit)
        return None if left is None else time.perf_counter() + left

    def perf_counter_started(self) -> float:
        """``started`` as a ``time.perf_counter()`` reading (now minus the time elapsed)."""
        return time.perf_counter() - self.elapsed()
