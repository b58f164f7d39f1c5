"""The built-in datasets as a spec names them: ``(name, ARG option or None, aliases)``, the table
:mod:`divopt_rag.data.registry` registers its loaders under (it checks, on import, that every
registration agrees with this table) and that ``divopt-rag --help`` lists. Standard library only
and imports nothing, so the command line reads it for ``--help`` without loading the data package
(:func:`divopt_rag.experiments.cli.flag_types.builtin_dataset_usage`); errors of an unknown name
list the registry through the same :func:`usage`, so help and errors name datasets alike."""
from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["BUILTIN_DATASETS", "usage"]

#: name -> (the option "NAME:ARG" fills, or None; aliases), as registry.py registers them.
BUILTIN_DATASETS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "synthetic": (None, ()),
    "npz": ("path", ()),
    "toy": (None, ()),
    "wordnet": ("n_words", ()),
    "wordnet_glosses": (None, ()),
    "beir": ("path", ()),
    "ir_datasets": ("dataset_id", ("ir-datasets",)),
    "rgb": ("path", ()),
    "mini_wikipedia": ("path", ("mini-wikipedia", "miniwiki")),
    "asqa": ("path", ()),
    "qampari": ("path", ()),
    "longbench": ("path", ()),
    "arc_da": ("path", ()),
    "openbookqa": ("path", ()),
    "sciq": ("path", ()),
}


def usage(entries: Iterable[tuple[str, str | None, Sequence[str]]]) -> str:
    """``"arc_da:PATH, ..., mini_wikipedia:PATH (or mini-wikipedia, miniwiki), ..., toy"``: every
    dataset as a spec writes it, sorted by name, with its aliases."""
    def one(name: str, arg: str | None, aliases: Sequence[str]) -> str:
        text = f"{name}:{arg.upper()}" if arg else name
        return f"{text} (or {', '.join(sorted(aliases))})" if aliases else text

    return ", ".join(one(*e) for e in sorted(entries, key=lambda e: e[0]))
