"""``divopt-rag reproduce <recipe>`` and ``divopt-rag reproduce --list``.

Bad input (unknown recipe or option, data not on this machine, no LLM configured, no
cross-encoder where one is required) raises :class:`~divopt_rag.experiments.reproduce.ReproduceError`,
:class:`~divopt_rag.experiments.reproduce.MissingData` or
:class:`~divopt_rag.experiments.rag.llm.LLMNotConfigured` with one line; :func:`main` prints it and
returns 2. Exit code 1 when some run of this invocation ended in an error row.
"""
from __future__ import annotations

import sys
from pathlib import Path

from divopt_rag.experiments.rag.llm import LLMNotConfigured

from . import RECIPES, get_recipe
from .runner import print_report, run_recipe
from .spec import MissingData, Options, ReproduceError

__all__ = ["options_from_args", "main"]




def options_from_args(args) -> Options:
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
    if args.corpus is not None and not Path(args.corpus).is_file():
        raise ReproduceError(f"--corpus: file not found: {args.corpus}")
    return Options(
        out=args.out or Path("results/reproduce") / args.recipe,
        data_dir=args.data_dir, limit=args.limit, analogue=args.analogue, retrieval_only=args.retrieval_only,
        model=args.model, encoders=tuple(args.encoder), cross_encoder=cross,
        corpus=None if args.corpus is None else Path(args.corpus),
        overrides=dict(args.overrides), cache_dir=args.cache_dir, seed=args.seed, progress=not args.no_progress,
        new_grid=args.new_grid,
    )


def main(args) -> int:
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
    print(f"wrote {result.out / 'results.parquet'}, table.parquet and table.csv in {result.out}")
    return 1 if result.n_errors else 0
