"""Sweep grids: the configuration of a sweep and its expansion into deterministic run specs.

A sweep is the product  queries x methods x parameter grid.  Each element is a :class:`RunSpec`
whose ``key`` is a hash of (dataset, query, method, parameters), so the same run always gets
the same key: a restarted sweep recognises finished runs by their part files and skips them,
and the per-run ``seed`` is derived from the key (independent of grid order or of which
worker runs it).

Parameters fall in two groups:

* instance parameters ``k``, ``theta`` (relevance-diversity trade-off in [0, 1], 1 = pure
  relevance) and ``pool`` (the top-``pool`` candidates of each query by relevance c = E q;
  ``None`` = the query's whole pool) apply to every method;
* method parameters (``sparsity_penalty``, ``rho_vec``, ``rho_div``, ``attack_budget``,
  ``sigma``, ``relax_penalty``, ...) are passed to the method as keyword arguments. In the
  common ``grid`` a method parameter expands only the methods whose signature accepts it
  (``sigma`` multiplies Dartboard runs, not MMR runs); under ``methods: {name: {...}}`` it is
  specific to that method and must be accepted by it.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from divopt_rag.data import DataFormatError, parse_spec, stable_hash
from divopt_rag.experiments import harness
from divopt_rag.models.validation import check_scalar, check_theta

__all__ = [
    "ConfigError",
    "INSTANCE_PARAMS",
    "RunSpec",
    "SweepConfig",
    "canonical_params",
    "derive_seed",
    "expand_grid",
    "parse_value",
    "run_key",
]

INSTANCE_PARAMS = ("k", "theta", "pool")
# Parameters whose values are reals: 1 and 1.0 must hash to the same run.
_FLOAT_PARAMS = {"theta", "sparsity_penalty", "rho_vec", "rho_div", "sigma", "relax_penalty", "tol", "alpha"}
_INT_PARAMS = {"k", "pool", "attack_budget", "max_iter"}


def parse_value(text: str) -> Any:
    """A CLI value: ``none`` -> None, ``true``/``false`` -> bool, then int, float, else the string."""
    t = text.strip()
    low = t.lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


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


def run_key(dataset: str, query_id: str, method: str, params: Mapping[str, Any]) -> str:
    """Deterministic key of one run: sha256 of (dataset, query_id, method, canonical params)."""
    return stable_hash(
        {"dataset": dataset, "query": str(query_id), "method": method, "params": canonical_params(params)}, 20
    )


def derive_seed(base_seed: int, key: str) -> int:
    """The seed of one run: a hash of (base seed, run key), in [0, 2**31)."""
    return int(hashlib.sha256(f"{int(base_seed)}:{key}".encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: a method with parameters on one query of one dataset."""

    index: int  # position in the expanded grid (the consolidated table's order)
    dataset: str
    query_index: int
    query_id: str
    method: str
    params: tuple[tuple[str, Any], ...]
    seed: int
    key: str

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def instance_params(self) -> dict[str, Any]:
        return {k: v for k, v in self.params if k in INSTANCE_PARAMS}

    @property
    def method_params(self) -> dict[str, Any]:
        return {k: v for k, v in self.params if k not in INSTANCE_PARAMS}


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


def _parse_config(path: Path, text: str) -> Any:
    """JSON, TOML or YAML text -> Python objects; :class:`ConfigError` with file and line."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            return json.loads(text)
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
            return yaml.safe_load(text)
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
    """

    dataset: dict[str, Any] = field(default_factory=lambda: {"name": "synthetic"})
    methods: dict[str, dict[str, list[Any]]] = field(default_factory=lambda: {"fw": {}})
    grid: dict[str, list[Any]] = field(default_factory=lambda: {"k": [10], "theta": [0.5]})
    queries: int | list[str] | None = None
    seed: int = 0
    plugins: list[str] = field(default_factory=list)
    evaluator: dict[str, Any] | None = None

    _KEYS = ("dataset", "methods", "grid", "queries", "seed", "plugins", "evaluator")

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
        if isinstance(self.queries, bool) or (isinstance(self.queries, int) and self.queries < 1):
            raise ValueError(f"queries must be a positive count or a list of query ids, got {self.queries!r}")
        if isinstance(self.queries, (list, tuple)):
            self.queries = [str(q) for q in self.queries]
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        self.plugins = [str(p) for p in (self.plugins or [])]
        if self.evaluator is not None and (not isinstance(self.evaluator, Mapping) or "name" not in self.evaluator):
            raise ValueError(f"evaluator must be a mapping with a 'name', got {self.evaluator!r}")

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
        if not path.is_file():
            raise FileNotFoundError(f"sweep config file not found: {path}")
        try:
            text = path.read_text()
        except UnicodeDecodeError as exc:
            raise ConfigError(path, None, None, f"not a text file ({exc.reason})") from None
        d = _parse_config(path, text)
        if isinstance(d, Mapping) and isinstance(d.get("sweep"), Mapping):
            d = d["sweep"]
        if not isinstance(d, Mapping):
            raise ConfigError(path, None, None, f"must hold a mapping at the top level, got {type(d).__name__}")
        try:
            return cls.from_dict(d)
        except (ValueError, TypeError) as exc:
            raise ConfigError(path, None, None, str(exc)) from None

    @property
    def sweep_id(self) -> str:
        """The run id (:func:`divopt_rag.experiments.harness.run_id`) of everything that determines
        the rows (the ``sweep_id`` column)."""
        return harness.run_id(self.to_dict())


def expand_grid(
    config: SweepConfig,
    dataset_key: str,
    queries: Sequence[tuple[int, str]],
    accepts: Callable[[str, str], bool],
) -> list[RunSpec]:
    """All runs of ``config`` on ``queries`` ((position in the dataset, query id) pairs), query-major (runs of one query are adjacent).

    ``accepts(method, parameter)`` says whether a method takes a keyword parameter; unknown
    methods must already have been rejected by the caller. Raises ValueError naming a method
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
    specs: list[RunSpec] = []
    seen: set[str] = set()
    for qi, qid in queries:
        for method, combos in per_method:
            for params in combos:
                key = run_key(dataset_key, qid, method, params)
                if key in seen:
                    raise ValueError(f"duplicated run: method {method!r} with {params} on query {qid!r}")
                seen.add(key)
                specs.append(
                    RunSpec(
                        index=len(specs),
                        dataset=dataset_key,
                        query_index=int(qi),
                        query_id=str(qid),
                        method=method,
                        params=tuple(params.items()),
                        seed=derive_seed(config.seed, key),
                        key=key,
                    )
                )
    return specs


def chunked(items: Sequence[Any], size: int) -> Iterable[list[Any]]:
    """Consecutive chunks of at most ``size`` items."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    for i in range(0, len(items), size):
        yield list(items[i : i + size])
