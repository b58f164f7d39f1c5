"""Flags of ``divopt-rag lib build|list|fetch|verify|score|leaderboard|release`` (issue 50): the
instance library. argparse and the standard library only; the work is in
:mod:`divopt_rag.experiments.studies.library_cli`."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable

from divopt_rag.experiments.cli.flag_types import (COUNT, METHOD, OUTPUT, Choice, ExistingPath, OutputPath, Real, Text,
                                                   add_list)
from divopt_rag.experiments.engine.limits import UsageError

__all__ = ["LIBRARY_COMMANDS", "LIBRARY_FLAGS", "DEFAULT_LIBRARY"]

#: The library's default folder: DIVOPT_RAG_LIBRARY, else the user's cache folder.
DEFAULT_LIBRARY = Path(os.environ.get("DIVOPT_RAG_LIBRARY") or Path("~/.cache/divopt-rag/library").expanduser())
_MODULE = "divopt_rag.experiments.studies.library_cli"
LIBRARY = ExistingPath("dir", "an existing library folder (with manifest.json and instances/)")
STATUS = Choice(("all", "optimal", "open"))
NAMED_FILE = Text("NAME=FILE (a name for the leaderboard, a CSV or JSON submission)", bad=("nofile", "=x"),
                  pattern=r"^[A-Za-z0-9_.()+-]+=.+$")
SOURCE = Text("a .tar.gz release: a local path or a file:// URL", bad=("",), pattern=r"^\S.*$")


def _library(p: argparse.ArgumentParser, existing: bool = True) -> None:
    p.add_argument("--library", type=LIBRARY if existing else OutputPath("a library folder to write"),
                   default=DEFAULT_LIBRARY,  # a Path: argparse leaves it alone; the command checks it exists
                   help="the library folder (default: DIVOPT_RAG_LIBRARY or ~/.cache/divopt-rag/library)")


def build(p: argparse.ArgumentParser) -> None:
    _library(p, existing=False)
    p.add_argument("--cache", type=OutputPath("a folder for the corpus embeddings"), default=None,
                   help="embedding cache (default: LIBRARY/../library-cache)")
    add_list(p, "--corpora", item=Choice(("wordnet", "gcide", "rgb", "cone")), default=["wordnet", "gcide", "rgb", "cone"],
             help="corpora to build")
    p.add_argument("--rgb", type=ExistingPath("file", "RGB's en_fact.json (JSON lines)"), default=None,
                   help="RGB en_fact.json (default: the git mirror of github.com/chen700564/RGB)")
    p.add_argument("--solve", action="store_true", help="run the proving campaign (resumable) after building")
    p.add_argument("--solutions", type=ExistingPath("file", "a solutions file (JSON lines, library_solutions)"),
                   default=None, help="proven values to attach where the content hashes match (default: the file "
                                      "committed with divopt-rag, experiments/studies/library_data/solutions.jsonl)")
    p.add_argument("--no-solutions", action="store_true", help="attach no proven values (solve everything anew)")


def list_(p: argparse.ArgumentParser) -> None:
    _library(p)
    p.add_argument("--status", type=STATUS, default="all", help="all | optimal | open")
    p.add_argument("--family", type=Text("a family name (wordnet, gcide, rgb, cone)", bad=("",)), default=None,
                   help="only this family (default: every family)")


def fetch(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", type=SOURCE, help="the release archive (.tar.gz): a path or file:// URL")
    _library(p, existing=False)
    p.add_argument("--force", action="store_true", help="replace an existing library folder")


def verify(p: argparse.ArgumentParser) -> None:
    _library(p)


def score(p: argparse.ArgumentParser) -> None:
    _library(p)
    p.add_argument("--submission", type=ExistingPath("file", "a CSV or JSON submission"), required=True,
                   help="CSV 'instance_id,indices[,seconds]' or JSON [{instance_id, indices}]")
    p.add_argument("--out", type=OUTPUT, default=Path("results/lib-score"), help="output folder (scores.csv, summary.json)")


def leaderboard(p: argparse.ArgumentParser) -> None:
    _library(p)
    add_list(p, "--methods", item=METHOD, default=None, help="registered methods (default: every self-contained one)")
    p.add_argument("--submission", type=NAMED_FILE, action="append", default=[],
                   help="an outside baseline NAME=FILE, scored as lib score does; repeat the flag for several "
                        "(default: none)")
    p.add_argument("--max-n", type=COUNT, default=10_000, help="only instances with n <= this")
    p.add_argument("--min-n", type=COUNT, default=1, help="only instances with n >= this")
    p.add_argument("--score-only", action="store_true",
                   help="run no method: score the submissions already in --results")
    p.add_argument("--budget", type=Real(0.0, min_open=True), default=None,
                   help="seconds each method may run in this call; it stops after the instance that passes it "
                        "(default: no limit)")
    p.add_argument("--out", type=OutputPath("a file to write"), default=Path("docs/leaderboard.md"),
                   help="output folder and file name of the page to write")
    p.add_argument("--results", type=OUTPUT, default=Path("results/lib-leaderboard"),
                   help="per-method scores (resumable: a method already scored is read back)")


def release(p: argparse.ArgumentParser) -> None:
    _library(p)
    p.add_argument("--out", type=OUTPUT, default=Path("dist"), help="output folder of the archive")
    p.add_argument("--max-mb", type=Real(0.0, min_open=True), default=100.0,
                   help="refuse to write an archive larger than this many MB")


def check_leaderboard(args: argparse.Namespace) -> None:
    names = [s.split("=", 1)[0] for s in args.submission]
    if len(set(names)) != len(names):
        raise UsageError("--submission", "distinct names", ", ".join(names))
    for s in args.submission:
        f = Path(s.split("=", 1)[1]).expanduser()
        if not f.is_file():
            raise UsageError("--submission", "NAME=FILE with an existing file", repr(s))


def check_fetch(args: argparse.Namespace) -> None:
    src = args.source[len("file://"):] if args.source.startswith("file://") else args.source
    if "://" in src:
        raise UsageError("SOURCE", "a local path or a file:// URL (no network)", repr(args.source))
    if not Path(src).expanduser().is_file():
        raise UsageError("SOURCE", "an existing .tar.gz file", repr(args.source))
    lib = Path(args.library).expanduser()
    if lib.exists() and any(lib.iterdir()) and not args.force:
        raise UsageError("--library", "an empty or new folder (or --force)", str(lib))


_HELP = {
    "build": "build the certified instance library (and --solve: prove it, resumable)",
    "list": "list the library's instances with status, f, bound and gap",
    "fetch": "unpack a released library archive (local path or file:// URL)",
    "verify": "recompute every hash and every stored f of a library",
    "score": "score anyone's CSV/JSON solutions against the library",
    "leaderboard": "every registered method and outside submissions on the library -> a docs page",
    "release": "build the versioned library archive (tar.gz with manifest, CHANGELOG, licences)",
}
_OUTPUTS = {"build": {"library": "dir", "cache": "dir"}, "fetch": {"library": "dir"}, "score": {"out": "dir"},
            "leaderboard": {"out": "file", "results": "dir"}, "release": {"out": "dir"}}
def _named(name: str, add: Callable[[argparse.ArgumentParser], None]) -> Callable[[argparse.ArgumentParser], None]:
    """``add`` that also records which lib command the parser is (``args.lib_command``)."""
    def flags(p: argparse.ArgumentParser) -> None:
        add(p)
        p.set_defaults(lib_command=name)
    flags.__name__ = f"lib_{name}"
    return flags


def _check_library(args: argparse.Namespace) -> None:
    """The default --library (a Path argparse does not check) must exist too."""
    lib = Path(args.library).expanduser()
    if not (lib / "instances").is_dir():
        raise UsageError("--library", "an existing library folder (with manifest.json and instances/; "
                         "divopt-rag lib fetch or lib build makes one)", repr(str(lib)))


def _and_library(check: Callable | None) -> Callable:
    def both(args: argparse.Namespace) -> None:
        _check_library(args)
        if check is not None:
            check(args)
    return both


_CHECKS = {"fetch": check_fetch, "leaderboard": _and_library(check_leaderboard), "list": _and_library(None),
           "verify": _and_library(None), "score": _and_library(None), "release": _and_library(None)}
LIBRARY_FLAGS: dict[tuple[str, ...], tuple[Callable, Callable | None]] = {
    ("lib", name): (_named(name, add), _CHECKS.get(name))
    for name, add in (("build", build), ("list", list_), ("fetch", fetch), ("verify", verify), ("score", score),
                      ("leaderboard", leaderboard), ("release", release))
}
LIBRARY_COMMANDS: dict[tuple[str, ...], tuple[str, str, dict[str, str]]] = {
    ("lib", name): (_MODULE, _HELP[name], _OUTPUTS.get(name, {})) for name in _HELP
}
