"""``divopt-rag reproduce <recipe>`` and ``divopt-rag reproduce --list``.

Bad input (unknown recipe or option, data not on this machine, no LLM configured, no
cross-encoder where one is required) raises :class:`~divopt_rag.experiments.reproduce.ReproduceError`,
:class:`~divopt_rag.experiments.reproduce.MissingData` or
:class:`~divopt_rag.experiments.rag.llm.LLMNotConfigured` with one line; :func:`main` prints it and
returns 2. Exit code 1 when some run of this invocation ended in an error row.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from divopt_rag.experiments.grid import parse_value
from divopt_rag.experiments.rag.llm import LLMNotConfigured

from . import RECIPES, get_recipe
from .runner import print_report, run_recipe
from .spec import MissingData, Options, ReproduceError

__all__ = ["add_arguments", "options_from_args", "main"]


def _kv(text: str) -> tuple[str, list[Any]]:
    name, sep, values = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,..., got {text!r}")
    return name.strip(), [parse_value(v) for v in values.split(",")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Reproduce a seed paper's headline table: runs the paper's protocol with the published methods, "
        "writes one tidy parquet row per query x method x setting (resumable: re-run the same command after a "
        "kill) and prints the table beside the published numbers. --list shows every recipe and what it needs."
    )
    parser.add_argument("recipe", nargs="?", help="recipe name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the recipes: paper, table, what each needs")
    parser.add_argument("--out", type=Path, help="output folder (default results/reproduce/<recipe>)")
    parser.add_argument("--data-dir", type=Path, default=Path("datasets"),
                        help="where the datasets are, in divopt_rag.data.download.fetch's layout (default datasets/)")
    parser.add_argument("--limit", type=int, help="first N queries of each dataset (a quick run)")
    parser.add_argument("--analogue", choices=("wordnet", "synthetic"),
                        help="run on an offline analogue instead of the paper's data (labelled as such)")
    parser.add_argument("--retrieval-only", action="store_true",
                        help="skip every LLM step (answer columns and LLM-chosen rows)")
    parser.add_argument("--model", help="embedding model: a local sentence-transformers directory "
                        "(default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--encoder", action="append", default=[], metavar="PATH",
                        help="embedding model to compare (recipes over several encoders; repeatable)")
    parser.add_argument("--cross-encoder", metavar="PATH", help="a local sentence-transformers CrossEncoder directory")
    parser.add_argument("--corpus", type=Path, help="external passage corpus (e.g. DPR psgs_w100.tsv) for the QA pools")
    parser.add_argument("--set", action="append", default=[], type=_kv, dest="overrides", metavar="NAME=V1,V2",
                        help="replace a grid axis or recipe parameter, e.g. k=25 or theta=0.3,0.7 (repeatable)")
    parser.add_argument("--cache-dir", type=Path, help="embedding cache (default ~/.cache/divopt/embeddings)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--new-grid", action="store_true",
                        help="run another configuration in an output folder that holds one; its config.json and "
                             "results.parquet are kept beside as config.<id>.json and results.<id>.parquet")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def options_from_args(args: argparse.Namespace) -> Options:
    cross = None
    if args.cross_encoder:
        from divopt_rag.data import load_cross_encoder

        if not Path(args.cross_encoder).is_dir():
            raise ReproduceError(f"--cross-encoder must be a local model directory, got {args.cross_encoder!r}")
        try:
            cross = load_cross_encoder(args.cross_encoder)
        except (ValueError, OSError) as exc:
            raise ReproduceError(f"--cross-encoder: {exc}") from None
    for path in [args.model, *args.encoder]:
        if path is not None and not Path(path).is_dir():
            raise ReproduceError(f"--model / --encoder must be a local model directory, got {path!r}")
    if args.corpus is not None and not args.corpus.is_file():
        raise ReproduceError(f"--corpus: file not found: {args.corpus}")
    return Options(
        out=args.out or Path("results/reproduce") / args.recipe,
        data_dir=args.data_dir, limit=args.limit, analogue=args.analogue, retrieval_only=args.retrieval_only,
        model=args.model, encoders=tuple(args.encoder), cross_encoder=cross, corpus=args.corpus,
        overrides=dict(args.overrides), cache_dir=args.cache_dir, seed=args.seed, progress=not args.no_progress,
        new_grid=args.new_grid,
    )


def main(args: argparse.Namespace) -> int:
    if args.list:
        for recipe in RECIPES.values():
            print(recipe.list_line())
        return 0
    if not args.recipe:
        print("divopt-rag reproduce: name a recipe (divopt-rag reproduce --list shows them)", file=sys.stderr)
        return 2
    try:
        recipe = get_recipe(args.recipe)
        result = run_recipe(recipe, options_from_args(args))
    except (ReproduceError, MissingData, LLMNotConfigured) as exc:
        print(f"divopt-rag reproduce {args.recipe}: {exc}", file=sys.stderr)
        return 2
    print_report(recipe, result)
    return 1 if result.n_errors else 0
