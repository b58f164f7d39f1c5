"""What an exact solve reports: its :class:`SolveStatus`, the :class:`Result`, its gap and message.

The status is an enum, as Pyomo's ``TerminationCondition`` is
(``pyomo.contrib.solver.common.results``), but a string enum (:class:`enum.StrEnum`): each member
equals, prints and serializes as the string the tables have always stored (``"optimal"``,
``"time_limit"``, ...), so ``r.status == "optimal"``, a parquet column of statuses and a JSON
record read as before, while code can name ``SolveStatus.TIME_LIMIT`` and a typo is an error.

Honesty rules (the exact optima certify every fast method), kept by every engine that builds a
Result (the model runner, divopt's branch-and-bound, enumeration):

* ``OPTIMAL`` only when the solver terminated on its optimality criterion AND the relative gap
  is at most :data:`OPTIMALITY_GAP` (or the absolute gap at most :data:`ABS_GAP_TOL`); a looser
  user ``mip_gap`` gives ``GAP_LIMIT``;
* a time limit gives ``TIME_LIMIT`` with the incumbent, the best proven bound and the gap;
* gap = |bound - objective| / max(|objective|, 1e-10), ``inf`` when either is unknown.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SolveStatus", "Result", "relative_gap", "status_message", "compose_message", "OPTIMALITY_GAP",
           "ABS_GAP_TOL"]

#: Relative gap at or below which a converged solve is reported "optimal" (Gurobi's and
#: HiGHS's default MIP gap; SCIP's default is 0).
OPTIMALITY_GAP = 1e-4
#: Absolute gap at or below which a converged solve is "optimal" whatever the relative gap
#: (objectives near 0).
ABS_GAP_TOL = 1e-6


class SolveStatus(enum.StrEnum):
    """How an exact solve ended (compare with Pyomo's ``TerminationCondition``).

    A member is a ``str``: ``SolveStatus.OPTIMAL == "optimal"``, ``str()`` and ``format()`` give the
    value, ``json.dumps`` and parquet write it as that string. ``SolveStatus("time_limit")`` parses
    a stored value (ValueError naming the allowed ones otherwise).
    """

    #: proven optimal within :data:`OPTIMALITY_GAP` (or :data:`ABS_GAP_TOL`)
    OPTIMAL = "optimal"
    #: stopped at a user ``mip_gap`` looser than :data:`OPTIMALITY_GAP`; optimality not proven
    GAP_LIMIT = "gap_limit"
    #: the time limit: incumbent, bound and gap reported, never "optimal"
    TIME_LIMIT = "time_limit"
    NODE_LIMIT = "node_limit"
    ITERATION_LIMIT = "iteration_limit"
    OBJECTIVE_LIMIT = "objective_limit"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"
    INTERRUPTED = "interrupted"
    EMPTY_MODEL = "empty_model"
    ERROR = "error"
    UNKNOWN = "unknown"

    @classmethod
    def _missing_(cls, value: object) -> "SolveStatus":
        raise ValueError(f"status must be one of {[m.value for m in cls]}, got {value!r}")

    @property
    def limit_reached(self) -> bool:
        """True when a limit stopped the solve with an incumbent possibly below the optimum."""
        return self in (SolveStatus.GAP_LIMIT, SolveStatus.TIME_LIMIT, SolveStatus.NODE_LIMIT,
                        SolveStatus.ITERATION_LIMIT, SolveStatus.OBJECTIVE_LIMIT)


@dataclass
class Result:
    """What an exact solve found and what it proved.

    indices : int64 array of the selected items (x_i > 0.5), sorted; empty without a solution.
    objective : incumbent objective value (float) or None when no feasible point was found.
    bound : best proven bound on the optimum (an upper bound: models maximize) or None.
    gap : |bound - objective| / max(|objective|, 1e-10); ``inf`` when unknown.
    status : a :class:`SolveStatus` (a string given here is parsed into one): "optimal" (proven
        within :data:`OPTIMALITY_GAP`), "gap_limit", "time_limit", "infeasible", ...
    seconds : wall-clock seconds of the solve call (model measurement and translation included);
        ``info["translation_seconds"]`` and ``info["solver_seconds"]`` split it.
    solver : the solver actually used ("gurobi", "scip", "highs", "bnb", "brute", "rule").
    log_path : path of the solver log, when one was requested.
    message : human-readable explanation (infeasibility, fallback, ...).
    info : extras (termination condition, formulation, node count, model size, ...).
    """

    indices: np.ndarray
    objective: float | None
    bound: float | None
    gap: float
    status: SolveStatus
    seconds: float
    solver: str
    log_path: str | None = None
    message: str = ""
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = SolveStatus(self.status)

    @property
    def proven_optimal(self) -> bool:
        """True only when the solver proved optimality (within OPTIMALITY_GAP)."""
        return self.status is SolveStatus.OPTIMAL

    def __len__(self) -> int:
        return int(self.indices.size)


def relative_gap(objective: float | None, bound: float | None) -> float:
    """|bound - objective| / max(|objective|, 1e-10); inf when either is unknown or infinite."""
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return math.inf
    return abs(bound - objective) / max(abs(objective), 1e-10)


def status_message(status: SolveStatus | str, objective: float | None, bound: float | None, gap: float, *,
                   time_limit: float | None = None, mip_gap: float | None = None) -> str:
    """The sentence a Result's message starts with, written from its fields (so the two agree)."""
    status = SolveStatus(status)
    if status is SolveStatus.TIME_LIMIT:
        head = f"time limit {time_limit:g} s reached" if time_limit is not None else "time limit reached"
        if objective is None:
            return head + " without a feasible solution" + (f" (bound {bound})" if bound is not None else "")
        return f"{head}: incumbent {objective}, bound {bound}, gap {gap:.3g}"
    if status is SolveStatus.GAP_LIMIT:
        return f"stopped at relative gap {gap:.3g} (mip_gap={mip_gap}); optimality not proven"
    if status in (SolveStatus.NODE_LIMIT, SolveStatus.ITERATION_LIMIT):
        return f"{status.replace('_', ' ')} reached: incumbent {objective}, bound {bound}, gap {gap:.3g}"
    return ""


def compose_message(r: Result, *, time_limit: float | None = None, mip_gap: float | None = None) -> str:
    """``r.message`` rebuilt from its current fields: :func:`status_message` followed by the notes
    that do not depend on them (``r.info["notes"]``: infeasibility, overrun, fallback, ...)."""
    parts = [status_message(r.status, r.objective, r.bound, r.gap, time_limit=time_limit, mip_gap=mip_gap)]
    parts += list(r.info.get("notes", ()))
    return "; ".join(p for p in parts if p)
