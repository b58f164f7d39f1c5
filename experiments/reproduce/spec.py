"""What a recipe is: a small declarative spec of one paper's headline result.

A :class:`Recipe` names the paper and the table or figure it reproduces, what it needs
(:class:`Needs`: data files, an LLM, a cross-encoder, a GPU), the datasets it runs on, the
methods and their parameter grids, the metric columns of a tidy row, how one run (one query x
method x setting) becomes one row, and how the tidy rows become the paper's table. The runner
(:mod:`divopt_rag.experiments.reproduce.runner`) does the rest: checkpoints, resume, progress, the
side-by-side print with the published numbers.

Bad input raises :class:`ReproduceError` (a ValueError) or :class:`MissingData` (a
FileNotFoundError) with one line that says what is missing and where to get it; the command
line maps both to exit code 2.
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from divopt_rag.experiments.engine.plan import canonical_params
from divopt_rag.models.parameters import Declaration, Param

__all__ = [
    "ReproduceError",
    "MissingData",
    "DataNeed",
    "Needs",
    "Options",
    "Run",
    "Recipe",
    "expand_settings",
    "setting_label",
]


class ReproduceError(ValueError):
    """Bad input to a recipe (unknown recipe, option or value, missing cross-encoder, ...)."""


class MissingData(FileNotFoundError):
    """A recipe's data file is not on this machine; the message says where to get it."""


@dataclass(frozen=True)
class DataNeed:
    """One data file a recipe reads: ``marker`` found under ``<data dir>/<folder>`` (any depth).

    ``fetch`` is the name :func:`divopt_rag.data.download.fetch` takes (it unpacks under
    ``<data dir>/<folder>``); ``url`` the public source; ``optional`` files only add to a run.
    """

    label: str
    folder: str
    marker: str
    fetch: str | None = None
    url: str | None = None
    optional: bool = False

    def find(self, data_dir: str | os.PathLike) -> Path | None:
        root = Path(data_dir) / self.folder
        if root.is_file() and root.name == self.marker:
            return root
        if not root.is_dir():
            return None
        direct = root / self.marker
        if direct.is_file():
            return direct
        return next(iter(sorted(root.rglob(self.marker))), None)

    def how_to_get(self, data_dir: str | os.PathLike) -> str:
        where = f"{Path(data_dir) / self.folder}"
        if self.fetch:
            how = f"divopt_rag.data.download.fetch({self.fetch!r}, {str(data_dir)!r})"
            if self.url:
                how += f" (from {self.url})"
        else:
            how = f"download {self.url}" if self.url else "place it by hand"
        return f"{self.label}: no {self.marker} under {where}; get it with {how}, or point --data-dir elsewhere"

    def locate(self, data_dir: str | os.PathLike) -> Path:
        found = self.find(data_dir)
        if found is None:
            raise MissingData(self.how_to_get(data_dir))
        return found


@dataclass(frozen=True)
class Needs:
    """What a recipe cannot run without (or runs better with).

    data : the files of the paper's datasets. llm : "" (none), "required" (every row is an LLM
    answer), or "partly" (some rows or columns are; ``--retrieval-only`` runs the rest).
    cross_encoder : "" | "optional" (some rows) | "required". gpu : "" or a note.
    """

    data: tuple[DataNeed, ...] = ()
    llm: str = ""
    cross_encoder: str = ""
    gpu: str = ""

    def describe(self) -> str:
        parts = ["data: " + (", ".join(d.label for d in self.data if not d.optional) or "none (synthetic)")]
        parts.append({"": "LLM: no", "required": "LLM: yes", "partly": "LLM: for answer columns"}[self.llm])
        parts.append({"": "cross-encoder: no", "optional": "cross-encoder: optional rows",
                      "required": "cross-encoder: yes"}[self.cross_encoder])
        parts.append(f"GPU: {self.gpu or 'no'}")
        return "; ".join(parts)


@dataclass
class Options:
    """Everything a user chooses for one recipe run (the command line's flags).

    data_dir : where the datasets are (``divopt_rag.data.download.fetch`` layout). out : output folder.
    limit : first N queries of each dataset (a quick run; rows keep their keys, so a later full
    run reuses them). analogue : run on an offline analogue ("wordnet", "synthetic") instead of
    the paper's data, labelled as such. retrieval_only : skip every LLM step. model : embedding
    model (None: the offline all-MiniLM-L6-v2; a local directory or a callable). encoders :
    several embedding models (recipes comparing encoders). cross_encoder : a callable scoring
    (left, right) pairs (``divopt_rag.data.load_cross_encoder(path)``). llm : an
    :class:`~divopt_rag.experiments.rag.llm.OpenAIChat` (None: from the environment when needed).
    overrides : grid axes replaced, e.g. ``{"k": [25]}``. cache_dir : embedding cache.
    new_grid : run another configuration in an output folder that holds one, keeping its files
    beside (:func:`divopt_rag.experiments.engine.folder.check_folder`).
    """

    out: Path = Path("results/reproduce")
    data_dir: Path = Path("datasets")
    limit: int | None = None
    analogue: str | None = None
    retrieval_only: bool = False
    model: Any = None
    encoders: Sequence[Any] = ()
    cross_encoder: Any = None
    llm: Any = None
    overrides: Mapping[str, list] = field(default_factory=dict)
    cache_dir: Path | None = None
    seed: int = 0
    progress: bool = True
    corpus: Path | None = None
    new_grid: bool = False

    def __post_init__(self) -> None:
        self.out, self.data_dir = Path(self.out), Path(self.data_dir)
        if self.limit is not None and (isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1):
            raise ReproduceError(f"limit must be an integer >= 1 (queries per dataset), got {self.limit!r}")
        if self.cache_dir is None:
            self.cache_dir = Path(os.path.expanduser("~/.cache/divopt/embeddings"))

    def model_id(self, model: Any = None) -> str:
        """A stable name of an embedding model for run keys (None: the default MiniLM)."""
        m = self.model if model is None else model
        if m is None:
            return "all-MiniLM-L6-v2"
        if isinstance(m, (str, os.PathLike)):
            return os.path.abspath(m) if os.path.isdir(m) else str(m)
        return str(getattr(m, "model_id", None) or type(m).__qualname__)


@dataclass(frozen=True)
class Run:
    """One run as a recipe's ``execute`` sees it: a method with one setting on one query of one
    dataset; ``key`` is its executor run key (:func:`divopt_rag.experiments.engine.plan.run_key`:
    the recipe's row-changing options, the content the query reads, query, method, setting), so
    its checkpoint is found again."""

    index: int
    dataset: str
    dataset_key: str
    query_index: int
    query_id: str
    method: str
    setting: tuple[tuple[str, Any], ...]
    key: str

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.setting)


def setting_label(setting: Mapping[str, Any] | Sequence[tuple[str, Any]], keys: Sequence[str] | None = None) -> str:
    """``"k=25,theta=0.5"``: the canonical text of a setting (the published tables' key): the
    parameters ``keys`` (default all) it has, sorted by name, values as ``%g``."""
    items = dict(setting)
    names = sorted(items) if keys is None else sorted(k for k in keys if k in items)
    return ",".join(f"{k}={_fmt(items[k])}" for k in names)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def expand_settings(methods: Mapping[str, Mapping[str, Sequence[Any]]], grid: Mapping[str, Sequence[Any]],
                    overrides: Mapping[str, Sequence[Any]] | None = None,
                    params: Sequence[str] = ()) -> list[tuple[str, dict[str, Any]]]:
    """(method, setting) pairs: for each method the product of the common ``grid`` axes and its
    own axes (its own win); an override replaces an axis wherever the axis exists. Override
    names that are neither an axis nor one of the recipe-level ``params`` raise
    :class:`ReproduceError`."""
    overrides = {k: v for k, v in dict(overrides or {}).items() if k not in set(params)}
    known = set(grid) | {p for g in methods.values() for p in g}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ReproduceError(f"--set {unknown[0]}: not an axis or parameter of this recipe; axes: {sorted(known)}, "
                             f"parameters: {sorted(params)}")
    out = []
    for method, own in methods.items():
        axes = {**dict(grid), **dict(own)}
        axes = {p: list(overrides.get(p, v)) for p, v in axes.items()}
        names = sorted(axes)
        for values in itertools.product(*(axes[n] for n in names)):
            try:
                setting = canonical_params(dict(zip(names, values)))
                _check_method_values(method, setting)
            except (TypeError, ValueError) as exc:
                raise ReproduceError(f"method {method!r}: {exc}") from None
            out.append((method, setting))
    return out


def _check_method_values(method: str, setting: Mapping[str, Any]) -> None:
    """The values a registered method takes, checked against its declaration before any run
    (:func:`~divopt_rag.experiments.methods.validate`, the validator ``select`` and ``sweep``
    use; ``--set sigma=abc`` used to run every row into an error). The recipes' own rows
    (``random``, ``oracle``, ...) are the recipe's."""
    from divopt_rag.experiments.methods import INSTANCE_PARAMS, method_accepts, resolve_method, validate

    try:
        resolve_method(method)
    except ValueError:
        return
    own = {p: v for p, v in setting.items() if p not in INSTANCE_PARAMS and method_accepts(method, p)}
    validate(method, own, complete=False)


@dataclass
class Recipe:
    """One headline result of one paper (module docstring).

    datasets(options) -> list of :class:`~divopt_rag.experiments.reproduce.data.Prepared` builders;
    execute(prepared, run, env) -> the metric columns of the run's row; table(rows) -> the
    paper's table in long form (columns ``table, dataset, setting, method, metric, value``);
    ``layout``: (row keys, column keys) of the printed pivot. ``paper_key``: the paper's
    name in the published numbers (``published/*.csv``), ``published_tables`` the tables
    compared with. ``llm_methods``: methods whose
    every row needs an LLM (skipped with ``--retrieval-only``); ``config``: options that change
    the rows (in every run key and the run id). ``params``: recipe-level options ``--set`` may
    change besides the grid axes (pool shape, chunk size, ...), with their defaults
    (:meth:`param`). ``plot(rows, out, options) -> paths``: an optional figure in the paper's
    form (written next to the tables).
    """

    name: str
    paper_key: str
    paper: str
    source: str
    target: str
    summary: str
    needs: Needs
    methods: Mapping[str, Mapping[str, Sequence[Any]]]
    grid: Mapping[str, Sequence[Any]]
    metrics: tuple[str, ...]
    datasets: Callable[[Options], list]
    execute: Callable[..., dict[str, Any]]
    table: Callable[[Any], Any]
    layout: tuple[tuple[str, ...], tuple[str, ...]] = (("method",), ("dataset", "setting", "metric"))
    analogues: tuple[str, ...] = ()
    llm_methods: tuple[str, ...] = ()
    ce_methods: tuple[str, ...] = ()
    published_tables: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    plot: Callable[..., list] | None = None
    notes: str = ""
    config: Callable[[Options], dict[str, Any]] = field(default=lambda opts: {})
    #: Bytes a run needs at its peak, from the options (``--set`` sizes): a size this machine
    #: cannot hold is refused before any work (:func:`~divopt_rag.experiments.runner.check_needs`).
    memory: Callable[[Options], float] | None = None

    def param(self, options: Options, name: str) -> Any:
        """A recipe-level option: ``--set NAME=V`` (one value; several for a tuple-valued
        parameter) or its default. An option declared as a
        :class:`~divopt_rag.models.parameters.Param` (type, range, default) is checked by the one
        validator, and received converted."""
        if name not in self.params:
            raise KeyError(f"recipe {self.name!r} has no parameter {name!r}")
        default = self.params[name]
        declared = default if isinstance(default, Param) else None
        default = declared.default if declared is not None else default
        if name in options.overrides:
            vals = list(options.overrides[name])
            if isinstance(default, tuple):  # a list-valued parameter (e.g. LongBench tasks)
                return tuple(vals)
            if len(vals) != 1:
                raise ReproduceError(f"--set {name}: takes one value for recipe {self.name!r}, got {vals}")
            if declared is None:
                return vals[0]
            try:
                return Declaration(self.name, {name: declared}).check_value(name, vals[0])
            except ValueError as exc:
                raise ReproduceError(f"--set {name}: {exc}") from None
        return default

    def list_line(self) -> str:
        ana = f"; offline analogue: {', '.join(self.analogues)}" if self.analogues else ""
        return f"{self.name:<18} {self.paper}, {self.target}: {self.summary} [{self.needs.describe()}{ana}]"
