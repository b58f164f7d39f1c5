"""``divopt-rag sweep``: a resumable parameter sweep, on a local process pool or on Ray.

A sweep runs every (query, method, parameters) of a :class:`~divopt_rag.experiments.studies.grid.SweepConfig`
and writes ONE tidy row per run. It is a run spec (:class:`SweepSpec`) handed to the one executor
(:mod:`divopt_rag.experiments.engine.executor`), which keeps its parts, resumes it after a kill, locks its
folder, refuses another grid there unless ``new_grid`` and consolidates ``OUT/results.parquet``:

* every run has a key, a hash of the sweep's row settings (``seed``, ``evaluator``, ``plugins``,
  ``metrics``), the dataset's content key, the query, the method and its canonical parameters
  (:func:`divopt_rag.experiments.engine.plan.run_key`), and a seed derived from (base seed, key);
* the dataset comes from :func:`divopt_rag.data.load` with its cache under ``OUT/data/`` (embeddings
  computed once, memory-mapped by the workers, reused by a restart);
* methods are resolved and run by :mod:`divopt_rag.experiments.methods` (selectors, robust
  models, ``exact``, ``full_scale``, :func:`~divopt_rag.experiments.methods.register_method`
  extras); one run becomes one row in :mod:`divopt_rag.experiments.studies.runs`;
* when the grid holds ``exact``, every row of the same instance gets its gap against it
  (:func:`divopt_rag.experiments.measures.quality.exact_gaps`, the post-step).

Every parameter is checked before any work against the methods' declarations (the one
validator, :meth:`~divopt_rag.models.parameters.Declaration.validate`): a grid or method
parameter that no chosen method takes is an error listing the names they do take (a typo never
becomes a silent no-op), a value out of its declared type or range is the validator's one-line
message, and a required parameter no axis gives (``rho_div`` of a robust model) is an error too.
:mod:`divopt_rag.experiments.studies.sweep_command` is the command line; ``divopt-rag certify`` and
``bench quality``'s small pools are sweeps too (:mod:`divopt_rag.experiments.studies.certify`).
"""
from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import pandas as pd

from divopt_rag.data import EmbeddedDataset, load as load_dataset
from divopt_rag.data.names import checked_name
from divopt_rag.experiments.engine import executor
from divopt_rag.experiments.engine.backends import import_plugins
from divopt_rag.experiments.engine.limits import UsageError, check_dataset_memory
from divopt_rag.experiments.engine.options import RunOptions
from divopt_rag.experiments.engine.plan import Plan, RunResult, RunSpec, Task, make_task, run_key, canonical_params
from divopt_rag.experiments.measures import quality
from divopt_rag.experiments.methods import (INSTANCE_PARAMS, accepted_parameters, method_accepts, method_parameters,
                                            resolve_method)
from divopt_rag.experiments.rag.evaluator import make_evaluator
from divopt_rag.experiments.studies import runs
from divopt_rag.experiments.studies.grid import SweepConfig, derive_seed, metric_cutoffs, project_params
from divopt_rag.experiments.studies.runs import QueryPools, execute_run
from divopt_rag.models.domains import ROWS_MAX, RUNS_MAX, THETA_RANGE
from divopt_rag.models.parameters import Declaration, Interval, Param
from divopt_rag.robust.records import TEN_SECOND_POOL, TEN_SECOND_POOL_SOURCE

__all__ = [
    "SweepSpec",
    "SweepResult",
    "PoolSizeWarning",
    "TIMING_COLUMNS",
    "expand_grid",
    "axes_summary",
    "run_sweep",
    "consolidate",
    "check_parameters",
    "check_parameter_values",
    "check_pool_sizes",
    "check_k_within_pool",
]

#: A field hashed into the run key of a task whose method sizes its own set (not a parameter):
#: the cutoffs its ranking metrics are measured at, so that another k grid measures it again.
CUTOFFS_KEY = "@cutoffs"
#: Columns that legitimately differ between two runs of the same sweep (wall-clock times).
TIMING_COLUMNS = ("seconds",)
#: What :func:`run_sweep` returns: the executor's result.
SweepResult = RunResult


class PoolSizeWarning(UserWarning):
    """A robust model will solve pools larger than those it proved optimal within 10 s
    (:data:`divopt_rag.robust.records.TEN_SECOND_POOL`): expect time limits."""


def _warn_pool_sizes(tasks: Sequence[Task], data: EmbeddedDataset) -> None:
    """Say up front, once per robust model, when its candidate pool exceeds the size it proved
    optimal within 10 s in the recorded benchmark, and how to restrict it."""
    sizes: dict[int | None, int] = {}
    largest: dict[str, int] = {}
    for t in tasks:
        if t.method not in TEN_SECOND_POOL:
            continue
        pool = t.params.get("pool")
        if pool not in sizes:
            sizes[pool] = runs.query_instance(data, int(t.extra["query_index"]), pool)[0].n
        n = sizes[pool] if t.params.get("candidates") is None else min(sizes[pool], int(t.params["candidates"]))
        largest[t.method] = max(largest.get(t.method, 0), n)
    for method, n in largest.items():
        proven = TEN_SECOND_POOL[method]
        if n > proven:
            warnings.warn(
                f"{method} will solve pools of {n} candidates; it proved optimality within 10 s on pools of up to "
                f"{proven} ({TEN_SECOND_POOL_SOURCE}): expect solves to stop at their time limit with incumbent, bound "
                f"and gap; --param candidates={proven} keeps the {proven} most relevant", PoolSizeWarning, stacklevel=4)


def _suggest(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _retired(method: str, name: str) -> str:
    """What a former parameter of a built-in method became (its declaration's ``retired``), or ""."""
    from divopt_rag.solvers.selection import METHOD_PARAMS

    decl = METHOD_PARAMS.get(method)
    why = getattr(decl, "retired", {}).get(name) if decl is not None else None
    return f" (no longer a parameter: {why})" if why else ""


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
            raise ValueError(f"method {m!r} does not take parameter {p!r} (methods.{m})"
                             f"{_retired(m, p) or _suggest(p, valid)}; "
                             f"its parameters: {valid}")


def _axes(config: SweepConfig) -> list[tuple[str, list[Any], list[str]]]:
    """(parameter, values, the methods that take it) for every axis of ``config``: a common grid
    axis goes to every method that accepts it, a ``methods.<name>`` axis to that method."""
    axes = [(p, list(v), [m for m in config.methods if p in INSTANCE_PARAMS or method_accepts(m, p)])
            for p, v in config.grid.items()]
    return axes + [(p, list(v), [m]) for m, own in config.methods.items() for p, v in own.items()]


def check_parameter_values(config: SweepConfig) -> None:
    """Every value of the grid, before any work: instance parameters (k >= 1, theta in [0, 1],
    pool >= 1 or None) by :func:`~divopt_rag.experiments.engine.plan.canonical_params`, every method
    parameter by its method's declaration (:func:`~divopt_rag.experiments.methods.method_parameters`,
    the validator ``select`` uses, with its message), and every required parameter of a method
    given by some axis. ValueError otherwise (``--param sigma=abc``, ``tabu_tenure_in=2.5`` or a
    robust model without ``rho_div`` used to run every task into an error row)."""
    for param, values, methods in _axes(config):
        for value in values:
            canonical = canonical_params({param: value})[param]
            if param in INSTANCE_PARAMS:
                _INSTANCE.check_value(param, canonical)  # k and pool within the machine's integers
                continue
            for m in methods:
                method_parameters(m).check_value(param, value)
    for m, own in config.methods.items():
        method_parameters(m).check_required(set(own) | {p for p in config.grid if method_accepts(m, p)})


def check_k_within_pool(config: SweepConfig) -> None:
    """Every method's largest k fits its smallest ``pool`` (ValueError naming both: ``--pool 2
    --k 3`` started every run into an error)."""
    for m, own in config.methods.items():
        ks, pools = own.get("k", config.grid.get("k", [])), own.get("pool", config.grid.get("pool", [None]))
        small = [p for p in pools if p is not None]
        if ks and small and max(ks) > min(small):  # some run would select k rows among fewer
            raise ValueError(f"k = {max(ks):g} is larger than pool = {min(small):g} (method {m!r}): a selection of k "
                             f"rows needs a pool of at least k candidates; give each pool its k in methods.{m}")


#: The parameters of the instance every method runs on, and their ranges (what canonical_params
#: leaves open above: k = 1e30 was an internal OverflowError after config.json was written).
_INSTANCE = Declaration("sweep", {"k": Param.of(Interval(int, 1, ROWS_MAX)),
                                  "theta": Param.of(Interval(float, *THETA_RANGE)),
                                  "pool": Param.of([Interval(int, 1, ROWS_MAX), None])})


def check_pool_sizes(tasks: Sequence[Task], data: EmbeddedDataset) -> None:
    """Every task's k fits its query's candidates (the dataset's pool of the query, or all its
    rows, cut to the task's ``pool``), checked once the dataset is loaded and before any run:
    ValueError naming the first that does not (``--k 101`` on 100-row pools started every run
    into an error). Tasks of methods that take no k (the robust models size their own sets) are
    not checked."""
    sizes = ([int(p.size) for p in data.pools] if data.pools is not None else None)
    for t in tasks:
        qi = int(t.extra["query_index"])
        n = sizes[qi] if sizes is not None else int(data.E.shape[0])
        pool, k = t.params.get("pool"), t.params.get("k")
        avail = n if pool is None else min(int(pool), n)
        if k is not None and int(k) > avail:
            raise ValueError(f"k = {t.params['k']} is larger than the {avail} candidates of query {t.query_id!r} "
                             f"(dataset {data.name!r}: {n} rows{'' if pool is None else f', pool = {pool}'})")


def grid_runs(config: SweepConfig, accepts: Callable[[str, str], bool]) -> int:
    """Runs per query of ``config``'s grid, counted from its axes' lengths without expanding it
    (an upper bound of what :func:`expand_grid` makes: the runs an unread parameter would only
    repeat are counted too)."""
    common_inst = {p: v for p, v in config.grid.items() if p in INSTANCE_PARAMS}
    common_method = {p: v for p, v in config.grid.items() if p not in INSTANCE_PARAMS}
    total = 0
    for method, own in config.methods.items():
        axes = dict(common_inst)
        axes.update({p: v for p, v in common_method.items() if accepts(method, p)})
        axes.update(own)
        total += math.prod(len(v) for v in axes.values())
    return total


def check_grid_size(config: SweepConfig, accepts: Callable[[str, str], bool], n_queries: int | None = None) -> None:
    """Refuse, before it is expanded, a grid of more than :data:`~divopt_rag.models.domains.RUNS_MAX`
    runs (``n_queries`` queries times :func:`grid_runs`; by default the queries the config names,
    1 when it takes all: the dataset's count is checked again once it is loaded), naming the count
    and the bound (a grid of 3e7 runs was still planning after 45 s at 786 MiB)."""
    if n_queries is None:
        q = config.queries
        n_queries = q if isinstance(q, int) else 1 if q is None else len(q)
    per_query = grid_runs(config, accepts)
    runs = per_query * max(1, int(n_queries))
    if runs > RUNS_MAX:
        raise UsageError("grid", f"at most {RUNS_MAX:,} runs (RUNS_MAX) in one sweep",
                         f"{runs:,} runs ({per_query:,} per query x {max(1, int(n_queries)):,} queries)",
                         "split the grid into several sweeps or give fewer values")


def expand_grid(config: SweepConfig, queries: Sequence[tuple[int, str]], accepts: Callable[[str, str], bool], *,
                dataset: str = "", data_key: str = "", config_hash: str = "") -> list[Task]:
    """The tasks of ``config`` on ``queries`` ((position in the dataset, query id) pairs),
    query-major (the runs of one query are adjacent), each with its run key and its seed
    :func:`~divopt_rag.experiments.studies.grid.derive_seed` (base seed, key).

    A common grid parameter expands only the methods that accept it (``accepts(method,
    parameter)``); a method's own grid overrides the common one. An instance parameter the
    method does not read (:func:`~divopt_rag.experiments.studies.grid.instance_axes`: theta and k for a
    robust model) is left out of its runs, so it neither multiplies them nor appears in their
    rows; the key of such a run also hashes its metric cutoffs
    (:func:`~divopt_rag.experiments.studies.grid.metric_cutoffs`). ValueError naming a method parameter
    that its method does not accept, or a duplicated run.
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
        # an instance parameter the method does not read (theta, k of a robust model) is dropped
        # from its runs: the product over it would only repeat the same run
        combos = list({json.dumps(c, sort_keys=True): c for c in (
            canonical_params(project_params(method, dict(zip(names, vals))))
            for vals in itertools.product(*(axes[n] for n in names)))}.values())
        per_method.append((method, combos))
    tasks: list[Task] = []
    seen: set[str] = set()
    for qi, qid in queries:
        for method, combos in per_method:
            for params in combos:
                t = make_task(len(tasks), config_hash=config_hash, data_key=data_key, query_id=qid, method=method,
                              params=params, dataset=dataset, query_index=int(qi))
                if "k" not in params:  # its ranking metrics are measured at the grid's k values: in its key
                    cut = ",".join(map(str, metric_cutoffs(config, method)))
                    t = dataclasses.replace(t, key=run_key(config_hash, data_key, str(qid), method,
                                                           {**params, CUTOFFS_KEY: cut}))
                if t.key in seen:
                    raise ValueError(f"duplicated run: method {method!r} with {params} on query {qid!r}")
                seen.add(t.key)
                tasks.append(dataclasses.replace(t, extra={**t.extra, "seed": derive_seed(config.seed, t.key)}))
    return tasks


def axes_summary(config: SweepConfig, accepts: Callable[[str, str], bool] | None = None) -> str:
    """One line saying which grid axes apply to which method and how many runs each has per
    query, e.g. ``axes (runs per query): mmr: k, theta (2); robust_l2: rho_vec, rho_div,
    sparsity_penalty (3); k is only the ranking metrics' cutoff of robust_l2 (it sizes its own set)``."""
    check_grid_size(config, accepts or method_accepts)  # before it is expanded
    tasks = expand_grid(config, [(0, "")], accepts or method_accepts)
    parts, self_sized = [], []
    for method in config.methods:
        mine = [t for t in tasks if t.method == method]
        names = list(dict.fromkeys(p for t in mine for p in t.params))
        parts.append(f"{method}: {', '.join(names) or 'no parameter'} ({len(mine)})")
        if "k" not in names and "k" in {**config.grid, **config.methods[method]}:
            self_sized.append(method)
    line = "axes (runs per query): " + "; ".join(parts)
    if self_sized:
        line += (f"; k is only the ranking metrics' cutoff of {', '.join(self_sized)} "
                 f"({'they size their' if len(self_sized) > 1 else 'it sizes its'} own set)")
    return line


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
    folder = out / "data" / checked_name(data.key, "dataset key", f"dataset {data.name!r}", hexadecimal=True)
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
        check_grid_size(self.sweep, method_accepts)  # counted before anything is expanded
        check_parameters(self.sweep)
        check_parameter_values(self.sweep)
        check_k_within_pool(self.sweep)
        make_evaluator(self.sweep.evaluator)  # a bad evaluator spec fails here, not in every worker
        check_dataset_memory(self.sweep.dataset, "dataset")  # before anything is generated or read

    def load(self, out: Path, mmap: bool = True) -> EmbeddedDataset:
        """The sweep's dataset, built once and cached under ``out/data``."""
        return load_dataset(self.sweep.dataset, cache_dir=Path(out) / "data", mmap=mmap)

    def plan(self, out: Path) -> Plan:
        data = self.load(out)
        queries = _select_queries(data, self.sweep.queries)
        check_grid_size(self.sweep, method_accepts, len(queries))
        tasks = expand_grid(self.sweep, queries, method_accepts, dataset=data.name, data_key=data.key,
                            config_hash=self.config_hash)
        check_pool_sizes(tasks, data)
        if not tasks:
            raise ValueError(f"the sweep has no runs: dataset {data.name!r} gives {data.n_queries} queries "
                             f"(queries={self.sweep.queries!r})")
        _warn_pool_sizes(tasks, data)
        return Plan(tasks=tasks, data=data, data_dir=_data_folder(data, Path(out)), data_keys={data.name: data.key})

    def open(self, data: EmbeddedDataset) -> tuple[EmbeddedDataset, Any, QueryPools]:
        import_plugins(self.sweep.plugins)  # in every worker: plugins register methods on import
        return data, make_evaluator(self.sweep.evaluator), QueryPools()

    def execute(self, state: tuple[EmbeddedDataset, Any, QueryPools], task: Task) -> dict[str, Any]:
        data, evaluator, pools = state
        cutoffs = None if "k" in task.params else metric_cutoffs(self.sweep, task.method)
        return execute_run(data, task, evaluator, self.sweep.metrics, cutoffs=cutoffs, pools=pools)

    def finish(self, table: pd.DataFrame, out: Path) -> pd.DataFrame:
        return quality.exact_gaps(table)


def run_sweep(config: SweepConfig, out_dir: str | Path, options: RunOptions | None = None, **fields: Any) -> RunResult:
    """Run (or resume) a sweep into ``out_dir`` and return the consolidated table
    (:func:`divopt_rag.experiments.engine.executor.run` of a :class:`SweepSpec`).

    options : the run's :class:`~divopt_rag.experiments.engine.options.RunOptions` (``fields``: the
        same as keywords, replacing those of ``options``), of which:
    backend : "local" (the default: a process pool of ``n_workers`` spawned processes;
        ``n_workers`` None or 0, the default, runs in this process) or "ray" (``address`` of an
        existing cluster, else a local ``ray.init(num_cpus=n_workers)`` bound to 127.0.0.1, None:
        this machine's CPU count; an already initialized Ray is used as it is).
    chunk_size : runs per task (default: about 4 tasks per worker, at most 16 runs).
    retry_errors : run again the runs whose part is an error row.
    new_grid : accept a configuration different from the one ``out_dir`` holds, keeping the
        previous files beside; otherwise that is a ValueError.

    Raises :class:`~divopt_rag.experiments.engine.store.OutputLocked` when another run holds the folder.
    """
    opts = dataclasses.replace(options or RunOptions(), **fields)
    backend = "local" if opts.backend is None else opts.backend
    if backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {backend!r}; expected 'local' or 'ray'")
    return executor.run(SweepSpec(config), out_dir, dataclasses.replace(opts, backend=backend))


def consolidate(out_dir: str | Path, config: SweepConfig) -> RunResult:
    """Rebuild ``OUT/results.parquet`` from the parts of the sweep ``config`` holds, running
    nothing (:func:`divopt_rag.experiments.engine.executor.consolidate_only`)."""
    return executor.consolidate_only(SweepSpec(config), out_dir)
