"""What one run of a method gives, whatever kind of method it is: :class:`MethodResult`.

divopt runs three kinds of methods through :func:`divopt_rag.experiments.methods.run_method`:
fast **selectors** (a :class:`~divopt_rag.solvers.Selection` of exactly k items), **robust**
models (a record of :data:`divopt_rag.robust.ROBUST_MODELS`: the sparsity penalty sizes the
set) and **extra** methods (``exact``, ``full_scale``, plugins of
:func:`~divopt_rag.experiments.methods.register_method`). Each becomes one
:class:`MethodResult`, and :meth:`MethodResult.row` is the one place that turns it into the
method's columns of a result row:

=====================  ==========================================================================
column                 meaning
=====================  ==========================================================================
``objective``          the CCBQP objective f at the row's theta and k (DESIGN.md), only where it
                       is defined: the method takes theta and k and chose exactly k items; else
                       empty (NaN). A robust set of 1 or 200 items has no CCBQP value at k = 5.
``objective_kind``     which objective the *method* optimizes (:data:`OBJECTIVE_KINDS`):
                       ``"ccbqp"``, ``"robust_sparsity"`` or ``"nominal_sparsity"``.
``model_objective``    that objective's value for the selection (= ``objective`` for CCBQP
                       methods; sum_{i in S} (r_i - sparsity_penalty) for a robust model).
``set_size``           |S|, on every row.
``seconds``,           wall-clock time of the method, its iterations (greedy steps, FW steps,
``iterations``         cutting-plane rounds).
measures               the method's own named columns (:attr:`MethodResult.measures`): an exact
                       solve's ``bound``, ``proven_optimal``, ...; a robust model's
                       :data:`ROBUST_MEASURES`.
``info``               everything else the method reported (scalars), as ONE JSON column: a
                       method's diagnostics never add columns that other methods leave empty.
=====================  ==========================================================================
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

__all__ = [
    "MethodResult",
    "OBJECTIVE_KINDS",
    "ROBUST_MEASURES",
    "KINDS",
    "scalar_items",
    "robust_result",
    "info_json",
]

#: Kinds of method (:func:`divopt_rag.experiments.methods.resolve_method`).
KINDS = ("selector", "robust", "extra")

#: The objective a method optimizes (the ``objective_kind`` column) and its formula.
OBJECTIVE_KINDS = {
    "ccbqp": "f(x) = theta (k-1) c^T x + (1-theta)(k - ||E^T x||^2) on |S| = k",
    "robust_sparsity": "sum_{i in S} (r_i - sparsity_penalty), r_i the worst-case relevance of document i",
    "nominal_sparsity": "sum_{i in S} (s_i - sparsity_penalty), s_i the nominal relevance of document i",
}

#: A robust record's entries that become columns of the row, under these names. The solver's
#: status, bound and gap are the *robust model's* (``model_*``), apart from the ``exact``
#: method's CCBQP ``bound`` / ``exact_status`` columns that :func:`~divopt_rag.experiments.measures.quality.exact_gaps`
#: reads; ``price_of_robustness`` is added (nominal minus worst-case mean relevance of the set).
ROBUST_MEASURES = {
    "status": "model_status",
    "proven_optimal": "model_proven_optimal",
    "bound": "model_bound",
    "gap": "model_gap",
    "solver": "model_solver",
    "nominal_relevance": "nominal_relevance",
    "worst_case_relevance": "worst_case_relevance",
    "attacked_relevance": "attacked_relevance",
    "worst_case_avg_similarity": "worst_case_avg_similarity",
    "nominal_avg_similarity": "nominal_avg_similarity",
    "nominal_objective": "nominal_objective",
}
# record entries that the row already has in another form (indices -> selected, n_selected ->
# set_size, the CCBQP value at a theta the model does not take -> nothing)
_ROBUST_DROP = ("indices", "selected", "selected_ids", "n_selected", "ccbqp_objective", "objective", "seconds",
                "iterations")


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, np.integer, np.floating, np.bool_))


def scalar_items(d: Mapping[str, Any] | None, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The scalar entries of ``d`` (numpy scalars as Python ones), ``skip`` left out; arrays,
    lists and traces are diagnostics of the call, not of the row."""
    return {str(k): _plain(v) for k, v in (d or {}).items() if k not in skip and _is_scalar(v)}


def info_json(info: Mapping[str, Any]) -> str:
    """``info`` as the JSON text of the ``info`` column (sorted keys; NaN and inf as null)."""
    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return json.dumps({k: clean(v) for k, v in info.items()}, sort_keys=True)


@dataclass(frozen=True)
class MethodResult:
    """One run of one method (module docstring).

    method, kind : the method's name and kind (:data:`KINDS`).
    indices : the selected rows of the instance, in the method's order (pick order for greedy
        selectors; decreasing relevance for methods that return a set; a robust model's set by
        decreasing worst-case relevance), int64.
    seconds, iterations : the method's wall-clock time and iteration count.
    objective : the CCBQP objective f where defined (see the module docstring), else NaN.
    objective_kind, model_objective : the objective the method optimizes and its value.
    measures : the method's own named scalar columns.
    info : the method's other scalar diagnostics (one JSON column).
    """

    method: str
    kind: str
    indices: np.ndarray
    seconds: float
    iterations: int = 0
    objective: float = math.nan
    objective_kind: str = "ccbqp"
    model_objective: float = math.nan
    measures: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.objective_kind not in OBJECTIVE_KINDS:
            raise ValueError(f"objective_kind must be one of {sorted(OBJECTIVE_KINDS)}, got {self.objective_kind!r}")
        object.__setattr__(self, "indices", np.asarray(self.indices, dtype=np.int64).reshape(-1))
        clash = set(self.measures) & set(self.row_columns())
        if clash:
            raise ValueError(f"measures {sorted(clash)} would overwrite the row's own columns")

    @property
    def set_size(self) -> int:
        """|S|: how many items the method selected."""
        return int(self.indices.size)

    @staticmethod
    def row_columns() -> tuple[str, ...]:
        """The columns :meth:`row` always writes (the measures and ``info`` come after them)."""
        return ("objective", "objective_kind", "model_objective", "set_size", "seconds", "iterations")

    def row(self) -> dict[str, Any]:
        """The method's columns of a result row (module docstring), ``info`` as JSON text."""
        return {"objective": float(self.objective), "objective_kind": self.objective_kind,
                "model_objective": float(self.model_objective), "set_size": self.set_size,
                "seconds": float(self.seconds), "iterations": int(self.iterations),
                **{k: _plain(v) for k, v in self.measures.items()}, "info": info_json(self.info)}


def robust_result(method: str, record: Mapping[str, Any], indices: np.ndarray, seconds: float) -> MethodResult:
    """The :class:`MethodResult` of a robust model's record (:mod:`divopt_rag.robust.records`).

    Its objective is the model's worst-case value (``model_objective``, kind
    ``"robust_sparsity"``, or ``"nominal_sparsity"`` for the nominal model); the CCBQP
    ``objective`` is NaN (the model takes neither theta nor k). Measures: :data:`ROBUST_MEASURES`
    and ``price_of_robustness`` = nominal_relevance - worst_case_relevance (means over the set:
    how much relevance the set is guaranteed to lose in the worst case; 0 at rho_vec = 0).
    """
    measures = {new: _plain(record[old]) for old, new in ROBUST_MEASURES.items() if old in record}
    nom, wc = measures.get("nominal_relevance"), measures.get("worst_case_relevance")
    if nom is not None and wc is not None:
        measures["price_of_robustness"] = float(nom) - float(wc)
    skip = (*_ROBUST_DROP, *ROBUST_MEASURES)
    objective = record.get("objective")
    kind = "nominal_sparsity" if record.get("uncertainty") == "none" else "robust_sparsity"
    return MethodResult(method=method, kind="robust", indices=indices, seconds=float(record.get("seconds", seconds)),
                        iterations=int(record.get("iterations", 0) or 0), objective=math.nan, objective_kind=kind,
                        model_objective=math.nan if objective is None else float(objective), measures=measures,
                        info=scalar_items(record, skip))
