"""What a run is, before anything runs: its tasks, their keys and the spec that makes them.

A command hands :func:`divopt_rag.experiments.engine.executor.run` a :class:`RunSpec`; the spec's
:meth:`~RunSpec.plan` lists the run's :class:`Task` objects (a method with its parameters on one
query of one dataset), each with its :func:`run_key`::

    key = sha256(row config hash, data key, query_id, method, canonical params)[:20]

The data key is the content fingerprint of the dataset the task reads, so a changed corpus,
embedding model or query set gives new keys; parameters are canonical
(:func:`canonical_params`: 1 and 1.0 are one theta).
"""
from __future__ import annotations

import abc
import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import pandas as pd

from divopt_rag.data import stable_hash
from divopt_rag.experiments.engine import store
from divopt_rag.models.validation import check_scalar, check_theta

__all__ = ["Task", "Plan", "RunSpec", "RunResult", "run_key", "make_task", "canonical_params", "KEY_LENGTH"]

#: Hex digits of a run key.
KEY_LENGTH = 20

# Parameters whose values are reals: 1 and 1.0 must hash to the same run.
_FLOAT_PARAMS = {"theta", "sparsity_penalty", "rho_vec", "rho_div", "sigma", "relax_penalty", "tol", "alpha"}
_INT_PARAMS = {"k", "pool", "attack_budget", "max_iter"}


def _canonical_value(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if name in _FLOAT_PARAMS and isinstance(value, (int, float)):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"parameter {name} must be finite, got {value!r}")
        return v
    if name in _INT_PARAMS and isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"parameter {name} must be an integer, got {value!r}")
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if hasattr(value, "item"):  # numpy scalar
        return _canonical_value(name, value.item())
    raise TypeError(f"parameter {name} must be a number, string, bool or None, got {type(value).__name__}")


def canonical_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters with canonical types (reals as float, counts as int), sorted by name."""
    out = {str(k): _canonical_value(str(k), v) for k, v in params.items()}
    if "theta" in out and out["theta"] is not None:
        out["theta"] = check_theta(out["theta"])
    if "k" in out:
        out["k"] = check_scalar(out["k"], "parameter k", int, min_val=1)
    if "pool" in out:
        out["pool"] = check_scalar(out["pool"], "parameter pool", int, min_val=1,
                                   allow_none=True)
    return dict(sorted(out.items()))


def run_key(config_hash: str, data_key: str, query_id: str, method: str, params: Mapping[str, Any]) -> str:
    """The key of one task: sha256 of (row config hash, data content key, query id, method,
    canonical params), 20 hex digits. The same task always has the same key (its part is found
    again); any change to what it reads or how it runs gives another key."""
    return stable_hash({"config": str(config_hash), "data": str(data_key), "query_id": str(query_id),
                        "method": str(method), "params": canonical_params(params)}, KEY_LENGTH)


@dataclass(frozen=True)
class Task:
    """One unit of work of a run: a method with its parameters on one query of one dataset.

    ``extra`` holds the spec's own columns of the task's rows (``query_index``, ``seed``, ...);
    :meth:`columns` are the identity columns every row of the task carries.
    """

    index: int
    key: str
    dataset: str
    data_key: str
    query_id: str
    method: str
    params: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """Identity columns of this task's rows, in schema order."""
        return {"run_key": self.key, "run_index": self.index, "dataset": self.dataset, "data_key": self.data_key,
                "query_id": self.query_id, "method": self.method,
                "params": json.dumps(dict(self.params), sort_keys=True), **self.params, **self.extra}

    def label(self) -> str:
        """A short text for progress bars: query, method and parameters."""
        params = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())
        return f"{self.query_id} {self.method} {params}".strip()


def make_task(index: int, *, config_hash: str, data_key: str, query_id: Any, method: str,
              params: Mapping[str, Any], dataset: str = "", **extra: Any) -> Task:
    """A :class:`Task` with canonical parameters and its :func:`run_key`."""
    params = canonical_params(params)
    return Task(index=int(index), key=run_key(config_hash, data_key, str(query_id), method, params),
                dataset=str(dataset), data_key=str(data_key), query_id=str(query_id), method=str(method),
                params=params, extra=dict(extra))


@dataclass
class Plan:
    """What :meth:`RunSpec.plan` returns: the tasks in order, the dataset the workers share
    (``data``, an :class:`~divopt_rag.data.EmbeddedDataset`, and ``data_dir``, the folder the
    local pool's workers memory-map; None when the spec builds its own data), the content key of
    every dataset read (``data_keys``: label -> key, recorded in ``config.json``) and notes to
    print (datasets skipped, ...)."""

    tasks: list[Task]
    data: Any = None
    data_dir: Path | None = None
    data_keys: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class RunSpec(abc.ABC):
    """What one command runs (module docstring). Subclasses are small, picklable objects (the
    local pool and Ray send them to workers) with a class attribute ``command``."""

    command: ClassVar[str] = ""
    #: Backends this spec can run on; the first is its default.
    backends: ClassVar[tuple[str, ...]] = ("inline",)
    #: Exceptions that stop the run (bad input found while running) instead of becoming error rows.
    fatal: ClassVar[tuple[type[BaseException], ...]] = ()
    #: Run error parts again on every run (not only with ``retry_errors``).
    always_retry_errors: ClassVar[bool] = False

    def config(self) -> dict[str, Any]:
        """Everything that determines the run (JSON-able): its hash is the run id, and
        ``config.json`` records it. Default, for a dataclass spec: its fields, except those
        marked ``field(metadata={"config": False})`` (where files go, not what runs)."""
        if not dataclasses.is_dataclass(self):
            raise NotImplementedError(f"{type(self).__name__} must define config()")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("config", True)}

    def row_config(self) -> dict[str, Any]:
        """The settings that change a task's rows beyond its dataset content, query, method and
        parameters (a base seed, an evaluator, solver settings): hashed into every run key."""
        return {}

    def check(self) -> None:
        """Validate the configuration before any work (cheap; ValueError naming the problem)."""

    @abc.abstractmethod
    def plan(self, out: Path) -> Plan:
        """Load (or reuse from ``out/data``) what the run reads and list its tasks."""

    def open(self, data: Any) -> Any:
        """The state one worker runs tasks with (built once per worker from the plan's data)."""
        return data

    @abc.abstractmethod
    def execute(self, state: Any, task: Task) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        """The measurement columns of the task's row(s) (the identity columns are added)."""

    def finish(self, table: pd.DataFrame, out: Path) -> pd.DataFrame:
        """Post-steps over the consolidated table (may write further files into ``out``)."""
        return table

    @property
    def run_id(self) -> str:
        return store.run_id(self.config())

    @property
    def config_hash(self) -> str:
        return stable_hash(self.row_config(), KEY_LENGTH)


@dataclass
class RunResult:
    """The consolidated ``table`` (as ``results.parquet`` holds it) and what this invocation did."""

    table: pd.DataFrame
    path: Path
    run_id: str
    n_runs: int
    n_skipped: int
    n_executed: int
    n_errors: int
    tasks: list[Task] = field(repr=False, default_factory=list)
    notes: list[str] = field(default_factory=list)
