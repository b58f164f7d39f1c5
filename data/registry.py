"""One entry point for every dataset: ``load(spec) -> EmbeddedDataset``.

A spec names a registered dataset and its options, as a mapping or as a command-line string::

    load({"name": "synthetic", "n": 400, "d": 32, "n_queries": 8})
    load("wordnet:30")                      # "NAME:ARG" fills the dataset's main option (n_words)
    load("beir:datasets/scifact", split="dev", embed_cache="~/.cache/divopt/embeddings")

Built in (:data:`DATASETS`): ``synthetic`` (:func:`~divopt_rag.data.synthetic.synthetic_pools`),
``toy``, ``wordnet`` (ARG: n_words), ``wordnet_glosses``, ``npz`` (ARG: path), and the corpus
loaders whose ARG is their path: ``beir``, ``rgb``, ``mini_wikipedia`` (alias
``mini-wikipedia``), ``asqa``, ``qampari``, ``longbench``, ``arc_da``, ``openbookqa``, ``sciq``.

A loader returns an :class:`~divopt_rag.data.EmbeddedDataset`, or a text
:class:`~divopt_rag.data.Dataset` that ``load`` embeds with :func:`~divopt_rag.data.embed_dataset`,
taking three options of its own: ``model`` (None: the offline all-MiniLM-L6-v2),
``embed_cache`` (the embedding cache folder) and ``with_titles`` (prefix passage titles;
the default is set per dataset). Then E and Q are made unit rows (:func:`unit_rows`).

Adding a dataset: decorate its loader, ``@register_dataset("name", arg="path")``, in a module
that ``divopt/data/__init__.py`` imports (the registration runs on import).

The dataset key is ``<name>-<hash of the spec>`` (:func:`stable_hash`): the same spec gives the
same key. With ``cache_dir`` the embedded dataset is kept under ``<cache_dir>/<key>/`` as ``.npy``
files and later loads memory-map them (a sweep's workers share one copy of E).
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .dataset import Dataset
from .embed import embed_dataset
from .embedded import EmbeddedDataset, unit_rows
from .loaders import load_beir, load_mini_wikipedia, load_npz, load_rgb
from .longbench import load_longbench
from .qa import load_asqa, load_qampari
from .science_qa import load_arc_da, load_openbookqa, load_sciq
from .synthetic import synthetic_pools, toy_dataset
from .wordnet import load_wordnet, load_wordnet_glosses

__all__ = ["DATASETS", "DatasetEntry", "register_dataset", "load", "parse_spec", "stable_hash"]

_EMBED_OPTIONS = ("model", "embed_cache", "with_titles")


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hex sha256 of the canonical JSON of ``obj`` (sorted keys; other values written as
    ``str``): equal inputs, equal hash. The one hash behind dataset keys, run keys and run ids."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@dataclass(frozen=True)
class DatasetEntry:
    """A registered loader: ``loader(**options)``; ``arg`` the option a "NAME:ARG" spec fills
    (converted with ``arg_type``); ``with_titles`` the default for text datasets."""

    loader: Callable[..., Dataset | EmbeddedDataset]
    arg: str | None = None
    arg_type: Callable[[str], Any] = str
    with_titles: bool = False


DATASETS: dict[str, DatasetEntry] = {}
_ALIASES: dict[str, str] = {}


def register_dataset(name: str, *, arg: str | None = None, arg_type: Callable[[str], Any] = str,
                     with_titles: bool = False, aliases: tuple[str, ...] = ()) -> Callable:
    """Decorator registering ``loader(**options) -> EmbeddedDataset | Dataset`` under ``name``."""

    def deco(loader: Callable[..., Dataset | EmbeddedDataset]) -> Callable[..., Dataset | EmbeddedDataset]:
        DATASETS[name] = DatasetEntry(loader, arg, arg_type, with_titles)
        for a in aliases:
            _ALIASES[a] = name
        return loader

    return deco


def _usage() -> str:
    return ", ".join(f"{n}:{e.arg.upper()}" if e.arg else n for n, e in sorted(DATASETS.items()))


def parse_spec(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    """A spec as a mapping with the registered ``name`` first: ``"NAME"``, ``"NAME:ARG"`` or a
    mapping with a ``name`` key. ValueError for an unknown name."""
    if isinstance(spec, str):
        name, sep, value = spec.partition(":")
        out: dict[str, Any] = {"name": _ALIASES.get(name, name)}
        entry = DATASETS.get(out["name"])
        if sep:
            if entry is None or entry.arg is None:
                raise ValueError(f"unknown dataset {spec!r}; expected one of {_usage()}")
            try:
                out[entry.arg] = entry.arg_type(value)
            except ValueError:
                raise ValueError(f"dataset {spec!r}: {entry.arg} must be {entry.arg_type.__name__}, got {value!r}") from None
    elif isinstance(spec, Mapping) and "name" in spec:
        out = {**spec, "name": _ALIASES.get(spec["name"], spec["name"])}
    else:
        raise ValueError(f"a dataset spec is a name, 'NAME:ARG' or a mapping with a 'name', got {spec!r}")
    if out["name"] not in DATASETS:
        raise ValueError(f"unknown dataset {out['name']!r}; expected one of {_usage()} (or register_dataset)")
    return out


def load(spec: str | Mapping[str, Any], *, cache_dir: str | os.PathLike | None = None, mmap: bool = True,
         **options: Any) -> EmbeddedDataset:
    """Build (or reuse from ``cache_dir``) the dataset of ``spec`` (options given here are added
    to the spec's); rows of E and Q unit-normalized. See the module docstring."""
    options = {**parse_spec(spec), **options}
    name = options.pop("name")
    key = f"{name}-{stable_hash({'name': name, **options}, 10)}"
    folder = None if cache_dir is None else Path(cache_dir) / key
    if folder is not None and (folder / "meta.json").exists():
        return EmbeddedDataset.load(folder, mmap=mmap)
    data = _build(name, options)
    data.key = key
    data.E = unit_rows(data.E, f"dataset {name!r} embeddings E")
    data.Q = unit_rows(data.Q, f"dataset {name!r} queries Q")
    if folder is None:
        return data
    folder.parent.mkdir(parents=True, exist_ok=True)
    data.save(folder)
    return EmbeddedDataset.load(folder, mmap=mmap)


def _build(name: str, options: dict[str, Any]) -> EmbeddedDataset:
    entry = DATASETS[name]
    embedding = {k: options.pop(k) for k in _EMBED_OPTIONS if k in options}
    try:
        params = inspect.signature(entry.loader).parameters.values()
    except (TypeError, ValueError):
        params = []
    params = list(params)
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
    try:
        out = entry.loader(**options)
    except TypeError as exc:
        raise TypeError(f"dataset {name!r}: {exc}") from exc
    source = f" ({options['path']})" if "path" in options else ""
    n_items, n_queries = ((len(out.passage_ids), len(out.query_ids)) if isinstance(out, Dataset)
                          else (len(getattr(out, "doc_ids", ())), len(getattr(out, "query_ids", ()))))
    if n_items == 0 or n_queries == 0:  # an empty input is an error, never an empty table
        raise ValueError(f"dataset {name!r}{source} holds {n_items} passages and {n_queries} queries: nothing to run on")
    if isinstance(out, Dataset):
        E, Q = embed_dataset(out, embedding.get("model"), embedding.get("embed_cache"),
                             with_titles=embedding.get("with_titles", entry.with_titles))
        return EmbeddedDataset.from_dataset(out, E, Q)
    if embedding:
        raise ValueError(f"dataset {name!r} is embedded already: options {sorted(embedding)} do not apply")
    if not isinstance(out, EmbeddedDataset):
        raise TypeError(f"dataset {name!r}: the loader must return an EmbeddedDataset or a Dataset, got {type(out).__name__}")
    return out


def _mini_wikipedia(path: str, answer_qrels: bool = True) -> Dataset:
    """rag-mini-wikipedia with qrels from answer strings by default (it ships none)."""
    return load_mini_wikipedia(path, answer_qrels=answer_qrels)


register_dataset("synthetic")(synthetic_pools)
register_dataset("npz", arg="path")(load_npz)
register_dataset("toy")(toy_dataset)
register_dataset("wordnet", arg="n_words", arg_type=int)(load_wordnet)
register_dataset("wordnet_glosses")(load_wordnet_glosses)
register_dataset("beir", arg="path", with_titles=True)(load_beir)
register_dataset("rgb", arg="path")(load_rgb)
register_dataset("mini_wikipedia", arg="path", aliases=("mini-wikipedia", "miniwiki"))(_mini_wikipedia)
register_dataset("asqa", arg="path")(load_asqa)
register_dataset("qampari", arg="path")(load_qampari)
register_dataset("longbench", arg="path")(load_longbench)
register_dataset("arc_da", arg="path")(load_arc_da)
register_dataset("openbookqa", arg="path")(load_openbookqa)
register_dataset("sciq", arg="path")(load_sciq)
