"""``divopt-rag sweep``: a resumable parameter sweep, on a local process pool or on Ray.

A sweep runs every (query, method, parameters) of a :class:`~divopt_rag.experiments.grid.SweepConfig`
and writes ONE tidy row per run. It is a run spec (:class:`SweepSpec`) handed to the one executor
(:mod:`divopt_rag.experiments.executor`), which keeps its parts, resumes it after a kill, locks its
folder, refuses another grid there unless ``new_grid`` and consolidates ``OUT/results.parquet``:

* every run has a key, a hash of the sweep's row settings (``seed``, ``evaluator``, ``plugins``,
  ``metrics``), the dataset's content key, the query, the method and its canonical parameters
  (:func:`divopt_rag.experiments.executor.run_key`), and a seed derived from (base seed, key);
* the dataset comes from :func:`divopt_rag.data.load` with its cache under ``OUT/data/`` (embeddings
  computed once, memory-mapped by the workers, reused by a restart);
* methods are resolved and run by :mod:`divopt_rag.experiments.methods` (selectors, robust
  models, ``exact``, ``full_scale``, :func:`~divopt_rag.experiments.methods.register_method`
  extras); one run becomes one row in :mod:`divopt_rag.experiments.runs`;
* when the grid holds ``exact``, every row of the same instance gets its gap against it
  (:func:`divopt_rag.experiments.harness.exact_gaps`, the post-step).

Every parameter name is checked before any work: a grid or method parameter that no chosen
method takes is an error listing the names they do take (a typo never becomes a silent no-op).
:mod:`divopt_rag.experiments.sweep_cli` is the command line; ``divopt-rag certify`` and
``bench quality``'s small pools are sweeps too (:mod:`divopt_rag.experiments.certify`).
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import itertools
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import pandas as pd

from divopt_rag.data import EmbeddedDataset
from divopt_rag.data import load as load_dataset
from divopt_rag.experiments import executor, harness
from divopt_rag.experiments.backends import import_plugins
from divopt_rag.experiments.executor import Plan, RunResult, RunSpec, Task, error_summary, finished_keys, make_task
from divopt_rag.experiments.grid import INSTANCE_PARAMS, SweepConfig, canonical_params, derive_seed
from divopt_rag.experiments.methods import accepted_parameters, method_accepts, required_parameters, resolve_method
from divopt_rag.experiments.rag.evaluator import make_evaluator
from divopt_rag.experiments.runs import QueryPools, execute_run
from divopt_rag.solvers.selection import declared_type

__all__ = [
    "SweepSpec",
    "SweepResult",
    "MissingParameterWarning",
    "TIMING_COLUMNS",
    "expand_grid",
    "run_sweep",
    "consolidate",
    "finished_keys",
    "check_parameters",
    "check_parameter_values",
    "error_summary",
]

#: Columns that legitimately differ between two runs of the same sweep (wall-clock times).
TIMING_COLUMNS = ("seconds",)
#: What :func:`run_sweep` returns: the executor's result.
SweepResult = RunResult


class MissingParameterWarning(UserWarning):
    """A method of the grid lacks a required parameter: its runs will be error rows."""


def _suggest(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_parameters(config: SweepConfig) -> None:
    """Every parameter name of ``config`` is taken by a chosen method: a common grid parameter
    by at least one of them (it expands only those), a ``methods.<name>`` parameter by that
    method. ValueError listing the valid names otherwise (plugins must be imported first)."""
    accepted = {m: accepted_parameters(m) for m in config.methods}
    if any(a is None for a in accepted.values()):  # a method taking **kwargs takes any name
        known: set[str] | None = None
    else:
        known = set().union(*accepted.values())
    for p in config.grid:
        if p in INSTANCE_PARAMS or known is None or p in known:
            continue
        valid = sorted(set(INSTANCE_PARAMS) | known)
        raise ValueError(f"grid parameter {p!r} is taken by none of the methods {list(config.methods)}{_suggest(p, valid)}; "
                         f"valid names: {valid}")
    for m, own in config.methods.items():
        ok = accepted[m]
        for p in own:
            if p in INSTANCE_PARAMS or ok is None or p in ok:
                continue
            valid = sorted(set(INSTANCE_PARAMS) | ok)
            raise ValueError(f"method {m!r} does not take parameter {p!r} (methods.{m}){_suggest(p, valid)}; "
                             f"its parameters: {valid}")


def _expected_type(method: str, param: str) -> tuple[str, tuple[type, ...], bool] | None:
    """(words, the Python types a value of ``param`` must have, whether None is allowed) from
    ``method``'s signature, read as :func:`~divopt_rag.solvers.selection.declared_type` reads it
    for ``select`` (an int parameter takes any number here: the method's own check says more);
    None when the signature does not say."""
    try:
        p = inspect.signature(resolve_method(method)[1]).parameters.get(param)
    except (TypeError, ValueError):
        return None
    if p is None:
        return None
    kind, none_ok = declared_type(p)
    if kind is bool:
        return "true or false", (bool,), none_ok
    if kind in (int, float):
        return "a number", (int, float), none_ok
    return None


def check_parameter_values(config: SweepConfig) -> None:
    """Every value of the grid has the type its parameter takes, before any work: instance
    parameters (k >= 1, theta in [0, 1], pool >= 1 or None) and the reals and counts every
    method shares (:func:`~divopt_rag.experiments.grid.canonical_params`), and a method
    parameter by the method's signature (a number where its default or annotation is a number,
    ...). ValueError naming the parameter, the method, what it takes and the value (``--param
    sigma=abc`` used to run every task into an error row)."""
    axes = [(p, v, [m for m in config.methods if p in INSTANCE_PARAMS or method_accepts(m, p)], "grid")
            for p, v in config.grid.items()]
    axes += [(p, v, [m], f"methods.{m}") for m, own in config.methods.items() for p, v in own.items()]
    for param, values, methods, where in axes:
        for value in values:
            try:
                canonical_params({param: value})
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where} parameter {param!r}: {exc}") from None
            if param in INSTANCE_PARAMS:
                continue
            for m in methods:
                expected = _expected_type(m, param)
                if expected is None:
                    continue
                words, types, none_ok = expected
                ok = (value is None and none_ok) or (isinstance(value, types) and
                                                     (bool in types or not isinstance(value, bool)))
                if not ok:
                    raise ValueError(f"{where} parameter {param!r} of method {m!r}: expected {words}"
                                     f"{' or none' if none_ok else ''}, got {value!r}")


def expand_grid(config: SweepConfig, queries: Sequence[tuple[int, str]], accepts: Callable[[str, str], bool], *,
                dataset: str = "", data_key: str = "", config_hash: str = "") -> list[Task]:
    """The tasks of ``config`` on ``queries`` ((position in the dataset, query id) pairs),
    query-major (the runs of one query are adjacent), each with its run key and its seed
    :func:`~divopt_rag.experiments.grid.derive_seed` (base seed, key).

    A common grid parameter expands only the methods that accept it (``accepts(method,
    parameter)``); a method's own grid overrides the common one. ValueError naming a method
    parameter that its method does not accept, or a duplicated run.
    """
    common_inst = {p: v for p, v in config.grid.items() if p in INSTANCE_PARAMS}
    common_method = {p: v for p, v in config.grid.items() if p not in INSTANCE_PARAMS}
    per_method: list[tuple[str, list[dict[str, Any]]]] = []
    for method, own in config.methods.items():
        for p in own:
            if p not in INSTANCE_PARAMS and not accepts(method, p):
                raise ValueError(f"method {method!r} does not accept parameter {p!r} (given in methods.{method})")
        axes = dict(common_inst)
        axes.update({p: v for p, v in common_method.items() if accepts(method, p)})
        axes.update(own)  # a method's own grid overrides the common one
        names = sorted(axes)
        combos = [canonical_params(dict(zip(names, vals))) for vals in itertools.product(*(axes[n] for n in names))]
        per_method.append((method, combos))
    tasks: list[Task] = []
    seen: set[str] = set()
    for qi, qid in queries:
        for method, combos in per_method:
            for params in combos:
                t = make_task(len(tasks), config_hash=config_hash, data_key=data_key, query_id=qid, method=method,
                              params=params, dataset=dataset, query_index=int(qi))
                if t.key in seen:
                    raise ValueError(f"duplicated run: method {method!r} with {params} on query {qid!r}")
                seen.add(t.key)
                tasks.append(dataclasses.replace(t, extra={**t.extra, "seed": derive_seed(config.seed, t.key)}))
    return tasks


def _select_queries(data: EmbeddedDataset, queries: Any) -> list[tuple[int, str]]:
    if queries is None:
        return list(enumerate(data.query_ids))
    if isinstance(queries, int):
        return list(enumerate(data.query_ids))[: queries]
    pos = {q: i for i, q in enumerate(data.query_ids)}
    unknown = [q for q in queries if q not in pos]
    if unknown:
        raise ValueError(f"unknown query ids {unknown[:5]} in dataset {data.name!r}")
    return [(pos[q], q) for q in queries]


def _data_folder(data: EmbeddedDataset, out: Path) -> Path:
    """The folder the pool's workers memory-map: the dataset's cache under ``OUT/data``."""
    folder = out / "data" / data.key
    if not (folder / "meta.json").exists():
        data.save(folder)
    return folder


@dataclass
class SweepSpec(RunSpec):
    """The run spec of a sweep: the grid of ``config`` on its dataset (module docstring)."""

    sweep: SweepConfig
    command: ClassVar[str] = "sweep"
    backends: ClassVar[tuple[str, ...]] = ("local", "ray", "inline")
    #: one thread per run on every backend (the pool's and Ray's workers always run one)
    task_threads: ClassVar[int] = 1

    def config(self) -> dict[str, Any]:
        return self.sweep.to_dict()

    def row_config(self) -> dict[str, Any]:
        c = self.sweep
        return {"seed": c.seed, "evaluator": c.evaluator, "plugins": list(c.plugins), "metrics": dict(c.metrics)}

    def check(self) -> None:
        import_plugins(self.sweep.plugins)
        for m in self.sweep.methods:  # names first: a typo is reported as such
            resolve_method(m)
        check_parameters(self.sweep)
        check_parameter_values(self.sweep)
        make_evaluator(self.sweep.evaluator)  # a bad evaluator spec fails here, not in every worker

    def load(self, out: Path, mmap: bool = True) -> EmbeddedDataset:
        """The sweep's dataset, built once and cached under ``out/data``."""
        return load_dataset(self.sweep.dataset, cache_dir=Path(out) / "data", mmap=mmap)

    def plan(self, out: Path) -> Plan:
        data = self.load(out)
        queries = _select_queries(data, self.sweep.queries)
        tasks = expand_grid(self.sweep, queries, method_accepts, dataset=data.name, data_key=data.key,
                            config_hash=self.config_hash)
        if not tasks:
            raise ValueError(f"the sweep has no runs: dataset {data.name!r} gives {data.n_queries} queries "
                             f"(queries={self.sweep.queries!r})")
        self._warn_missing(tasks)
        return Plan(tasks=tasks, data=data, data_dir=_data_folder(data, Path(out)), data_keys={data.name: data.key})

    @staticmethod
    def _warn_missing(tasks: Sequence[Task]) -> None:
        """Say up front which runs cannot work (each still becomes an error row)."""
        checked: set[tuple[str, frozenset]] = set()
        for t in tasks:
            given = frozenset(p for p in t.params if p not in INSTANCE_PARAMS)
            if (t.method, given) in checked:
                continue
            checked.add((t.method, given))
            missing = required_parameters(t.method) - set(given) - {"seed"}
            if missing:
                warnings.warn(
                    f"method {t.method!r} needs parameter(s) {sorted(missing)}: its runs will be error rows; add them "
                    f"to the grid (--param NAME=V1,V2) or to methods.{t.method}", MissingParameterWarning, stacklevel=4,
                )

    def open(self, data: EmbeddedDataset) -> tuple[EmbeddedDataset, Any, QueryPools]:
        import_plugins(self.sweep.plugins)  # in every worker: plugins register methods on import
        return data, make_evaluator(self.sweep.evaluator), QueryPools()

    def execute(self, state: tuple[EmbeddedDataset, Any, QueryPools], task: Task) -> dict[str, Any]:
        data, evaluator, pools = state
        return execute_run(data, task, evaluator, self.sweep.metrics, pools=pools)

    def finish(self, table: pd.DataFrame, out: Path) -> pd.DataFrame:
        return harness.exact_gaps(table)


def run_sweep(
    config: SweepConfig,
    out_dir: str | Path,
    *,
    backend: str = "local",
    n_workers: int | None = None,
    address: str | None = None,
    chunk_size: int | None = None,
    progress: bool = True,
    retry_errors: bool = False,
    new_grid: bool = False,
) -> RunResult:
    """Run (or resume) a sweep into ``out_dir`` and return the consolidated table
    (:func:`divopt_rag.experiments.executor.run` of a :class:`SweepSpec`).

    backend : "local" (a process pool of ``n_workers`` spawned processes; ``n_workers=0`` runs
        in this process) or "ray" (``address`` of an existing cluster, else a local
        ``ray.init(num_cpus=n_workers)`` bound to 127.0.0.1; an already initialized Ray is
        used as it is).
    chunk_size : runs per task (default: about 4 tasks per worker, at most 16 runs).
    retry_errors : run again the runs whose part is an error row.
    new_grid : accept a configuration different from the one ``out_dir`` holds, keeping the
        previous files beside; otherwise that is a ValueError.

    Raises :class:`~divopt_rag.experiments.harness.OutputLocked` when another run holds the folder.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {backend!r}; expected 'local' or 'ray'")
    return executor.run(SweepSpec(config), out_dir, backend=backend, n_workers=n_workers, address=address,
                        chunk_size=chunk_size, progress=progress, retry_errors=retry_errors, new_grid=new_grid)


def consolidate(out_dir: str | Path, config: SweepConfig) -> RunResult:
    """Rebuild ``OUT/results.parquet`` from the parts of the sweep ``config`` holds, running
    nothing (:func:`divopt_rag.experiments.executor.consolidate_only`)."""
    return executor.consolidate_only(SweepSpec(config), out_dir)
