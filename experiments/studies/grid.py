"""Sweep grids: the configuration of a sweep (:class:`SweepConfig`) and canonical parameters.

A sweep is the product  queries x methods x parameter grid; :func:`divopt_rag.experiments.studies.sweep.expand_grid`
turns it into the executor's tasks, each with its run key
(:func:`divopt_rag.experiments.engine.plan.run_key`: a hash of the row settings, the dataset's content
key, the query, the method and the :func:`~divopt_rag.experiments.engine.plan.canonical_params`), and a per-run ``seed`` derived
from the key (:func:`derive_seed`: independent of grid order and of which worker runs it).

Parameters fall in two groups:

* instance parameters ``k``, ``theta`` (relevance-diversity trade-off in [0, 1], 1 = pure
  relevance) and ``pool`` (the top-``pool`` candidates of each query by relevance c = E q;
  ``None`` = the query's whole pool) apply to the methods that read them
  (:func:`instance_axes`): every selector and extra method reads all three; a robust model reads
  ``pool`` only (the sparsity penalty sizes its set and it has no theta; ``k`` also when
  ``max_size="k"`` caps the set at k). An axis that does not apply neither multiplies a method's
  runs nor appears in its rows (the column is empty there); for a method that sizes its own set
  the grid's ``k`` values are the cutoffs its ranking metrics are measured at
  (:func:`metric_cutoffs`);
* method parameters (``sparsity_penalty``, ``rho_vec``, ``rho_div``, ``attack_budget``,
  ``sigma``, ``relax_penalty``, ...) are passed to the method as keyword arguments. In the
  common ``grid`` a method parameter expands only the methods whose signature accepts it
  (``sigma`` multiplies Dartboard runs, not MMR runs); under ``methods: {name: {...}}`` it is
  specific to that method and must be accepted by it.
"""
from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from divopt_rag.data import DataFormatError, parse_spec
from divopt_rag.experiments.engine import store
from divopt_rag.experiments.engine.limits import CONFIG_MAX_BYTES, config_tree_problem, yaml_loader
from divopt_rag.experiments.engine.plan import canonical_params
from divopt_rag.experiments.methods import INSTANCE_PARAMS
from divopt_rag.models.validation import check_scalar

__all__ = [
    "ConfigError",
    "SweepConfig",
    "derive_seed",
    "instance_axes",
    "project_params",
    "metric_cutoffs",
]

def instance_axes(method: str, params: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The instance parameters (of :data:`INSTANCE_PARAMS`) that ``method`` reads with ``params``.

    Selectors and extra methods (``exact``, ``full_scale``, plugins) read all three: theta and k
    define the CCBQP they solve. A robust model of :data:`divopt_rag.robust.ROBUST_MODELS` reads
    ``pool`` (the candidates it chooses from) and, only when ``max_size="k"`` caps its set at the
    instance's k, ``k``: its objective has no theta and its sparsity penalty sizes the set.
    """
    # divopt_rag.robust loads Pyomo: imported when a grid is expanded, not with this module
    from divopt_rag.robust import ROBUST_MODELS

    if method not in ROBUST_MODELS:
        return INSTANCE_PARAMS
    return ("k", "pool") if (params or {}).get("max_size") == "k" else ("pool",)


def project_params(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without the instance parameters ``method`` does not read (:func:`instance_axes`)."""
    axes = instance_axes(method, params)
    return {p: v for p, v in params.items() if p not in INSTANCE_PARAMS or p in axes}


def metric_cutoffs(config: "SweepConfig", method: str) -> list[int]:
    """The cutoffs at which the ranking metrics (recall@c, ...) of ``method``'s rows are measured
    when it sizes its own set (its rows have no k): the sweep's k values for that method, sorted."""
    values = config.methods.get(method, {}).get("k", config.grid.get("k", []))
    return sorted({int(canonical_params({"k": v})["k"]) for v in values})


def derive_seed(base_seed: int, key: str) -> int:
    """The seed of one run: a hash of (base seed, run key), in [0, 2**31)."""
    return int(hashlib.sha256(f"{int(base_seed)}:{key}".encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def _as_list(name: str, values: Any) -> list[Any]:
    if isinstance(values, (list, tuple)):
        vals = list(values)
    else:
        vals = [values]
    if not vals:
        raise ValueError(f"grid parameter {name} has an empty list of values")
    return vals


class ConfigError(DataFormatError):
    """A config file that does not parse or holds a bad value: the message names the file (and
    the line when the parser knows it), like every malformed input file of divopt."""


class _DuplicateKey(Exception):
    """A JSON object gives one key twice (``json`` keeps the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _parse_config(path: Path, text: str) -> Any:
    """JSON, TOML or YAML text -> Python objects; :class:`ConfigError` with file and line."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=_unique_keys)
        except _DuplicateKey as exc:
            raise ConfigError(path, None, None, f"invalid JSON: duplicate key {exc.args[0]!r}: each key once") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(path, exc.lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            # 3.11 puts the position in the message: "... (at line 3, column 5)"
            m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
            msg = re.sub(r"\s*\(at line .*\)$", "", str(exc))
            raise ConfigError(path, int(m[1]) if m else None, None,
                              f"invalid TOML: {msg}" + (f" (column {m[2]})" if m else "")) from None
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("YAML sweep configs need PyYAML (pip install pyyaml); or use JSON/TOML") from exc
        try:
            return yaml.load(text, Loader=yaml_loader())  # safe_load, refusing aliases (alias bombs)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or str(exc)
            context = getattr(exc, "context", None)
            raise ConfigError(path, None if mark is None else mark.line + 1, None,
                              f"invalid YAML: {problem}" + (f" ({context})" if context else "")
                              + ("" if mark is None else f" (column {mark.column + 1})")) from None
    raise ConfigError(path, None, None, "a sweep config must be .json, .toml, .yaml or .yml")


def _dataset_spec(spec: str) -> dict[str, Any]:
    """A dataset given as a string, "NAME" or "NAME:ARG" (``beir:PATH``), as a loader mapping.
    A name no loader has registered yet (a plugin's, imported when the sweep is planned) stays
    whole, and :func:`divopt_rag.data.load` names it then."""
    try:
        return parse_spec(spec)
    except ValueError:
        return {"name": spec}


@dataclass
class SweepConfig:
    """What a sweep runs (everything that determines its rows; not where or how fast).

    dataset : loader spec, e.g. ``{"name": "synthetic", "n": 400, "d": 32, "n_queries": 8}``.
    methods : method name -> its own parameter grid (``{}`` for none).
    grid : parameter -> list of values, shared by every method (see the module docstring).
    queries : number of queries to use (the first ones), or an explicit list of query ids;
        None = all.
    seed : base seed; each run's seed is :func:`derive_seed` (seed, run key).
    plugins : modules imported in the driver and in every worker before runs (to register
        extra selectors or robust models).
    evaluator : optional evaluator spec (see :mod:`divopt_rag.experiments.rag.evaluator`) whose score of
        each selection is stored in the ``eval_score`` column.
    metrics : options of the metrics of every row (:func:`divopt_rag.experiments.measures.metrics.selection_metrics`):
        ``sigma`` (also compute the Dartboard score with this spread), ``alpha`` (of alpha-nDCG).
    """

    dataset: dict[str, Any] = field(default_factory=lambda: {"name": "synthetic"})
    methods: dict[str, dict[str, list[Any]]] = field(default_factory=lambda: {"fw": {}})
    grid: dict[str, list[Any]] = field(default_factory=lambda: {"k": [10], "theta": [0.5]})
    queries: int | list[str] | None = None
    seed: int = 0
    plugins: list[str] = field(default_factory=list)
    evaluator: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    _KEYS = ("dataset", "methods", "grid", "queries", "seed", "plugins", "evaluator", "metrics")
    #: Metric options :attr:`metrics` may set.
    METRIC_OPTIONS = ("sigma", "alpha")

    def __post_init__(self) -> None:
        if isinstance(self.dataset, str):
            self.dataset = _dataset_spec(self.dataset)
        if not isinstance(self.dataset, Mapping) or "name" not in self.dataset:
            raise ValueError(f"dataset must be a mapping with a 'name', got {self.dataset!r}")
        self.dataset = dict(self.dataset)
        if isinstance(self.methods, (list, tuple)):
            self.methods = {m: {} for m in self.methods}
        if not isinstance(self.methods, Mapping) or not self.methods:
            raise ValueError(f"methods must be a non-empty list or mapping of method names, got {self.methods!r}")
        self.methods = {str(m): {p: _as_list(f"{m}.{p}", v) for p, v in (g or {}).items()} for m, g in self.methods.items()}
        self.grid = {str(p): _as_list(p, v) for p, v in (self.grid or {}).items()}
        for p in ("k", "theta"):
            if p not in self.grid and not all(p in g for g in self.methods.values()):
                raise ValueError(f"grid must give {p} (for every method), got grid keys {sorted(self.grid)}")
        if isinstance(self.queries, bool) or (isinstance(self.queries, int) and self.queries < 1) or not (
                self.queries is None or isinstance(self.queries, (int, list, tuple))):
            raise ValueError(f"queries must be a positive count or a list of query ids, got {self.queries!r}")
        if isinstance(self.queries, (list, tuple)):
            self.queries = [str(q) for q in self.queries]
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        self.plugins = [str(p) for p in (self.plugins or [])]
        if self.evaluator is not None and (not isinstance(self.evaluator, Mapping) or "name" not in self.evaluator):
            raise ValueError(f"evaluator must be a mapping with a 'name', got {self.evaluator!r}")
        self.metrics = {str(k): v for k, v in (self.metrics or {}).items() if v is not None}
        unknown = sorted(set(self.metrics) - set(self.METRIC_OPTIONS))
        if unknown:
            raise ValueError(f"unknown metric option(s) {unknown}; expected some of {list(self.METRIC_OPTIONS)}")
        for name, v in self.metrics.items():
            self.metrics[name] = check_scalar(v, f"metrics.{name}", float, min_val=0)

    # --- (de)serialization -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._KEYS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SweepConfig":
        unknown = set(d) - set(cls._KEYS) - {"sweep"}
        if unknown:
            raise ValueError(f"unknown sweep config keys {sorted(unknown)}; expected some of {list(cls._KEYS)}")
        return cls(**{k: d[k] for k in cls._KEYS if k in d})

    @classmethod
    def from_file(cls, path: str | Path) -> "SweepConfig":
        """Read a JSON, TOML (``[sweep]`` table or top level) or YAML (if PyYAML is installed) file.

        A file that does not parse, or holds a bad key or value, raises :class:`ConfigError`
        naming the file (and the line, for parse errors)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"sweep config file not found: {path}")
        if not path.is_file():  # a FIFO would block the read: only regular files are read
            raise ConfigError(path, None, None, "not a regular file")
        if path.stat().st_size > CONFIG_MAX_BYTES:  # bounded before it is read
            raise ConfigError(path, None, None, f"is larger than {CONFIG_MAX_BYTES // 2**20} MiB (a sweep config is "
                                                f"a few lines)")
        try:
            text = path.read_text()
        except UnicodeDecodeError as exc:
            raise ConfigError(path, None, None, f"not a text file ({exc.reason})") from None
        try:
            d = _parse_config(path, text)
        except RecursionError:  # the parser's own recursion: a config nested thousands deep
            raise ConfigError(path, None, None, "is nested too deep to parse") from None
        problem = config_tree_problem(d)  # nesting and size, before any use of the values
        if problem:
            raise ConfigError(path, None, None, problem)
        if isinstance(d, Mapping) and isinstance(d.get("sweep"), Mapping):
            d = d["sweep"]
        if not isinstance(d, Mapping):
            raise ConfigError(path, None, None, f"must hold a mapping at the top level, got {type(d).__name__}")
        try:
            return cls.from_dict(d)
        except (ValueError, TypeError) as exc:
            raise ConfigError(path, None, None, str(exc)) from None

    @property
    def run_id(self) -> str:
        """The run id (:func:`divopt_rag.experiments.engine.store.run_id`) of everything that determines
        the rows (the ``run_id`` column)."""
        return store.run_id(self.to_dict())
