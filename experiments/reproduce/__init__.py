"""``divopt-rag reproduce``: the seed papers' headline results, one recipe each.

A recipe (:class:`~divopt_rag.experiments.reproduce.spec.Recipe`) is a small declarative spec: the
paper and table, what it needs (data files, an LLM, a cross-encoder, a GPU), its datasets,
methods (the published ones, by their plain names), parameter grid and metrics, how one run
(query x method x setting) becomes one tidy row, and the table layout. Running one writes tidy
parquet through the engine (:mod:`divopt_rag.experiments.engine`), resumes from per-run checkpoints, and prints the table
in the paper's layout beside the published numbers that ship with divopt
(:mod:`divopt_rag.experiments.reproduce.published`)::

    from divopt_rag.experiments.reproduce import RECIPES, Options, run_recipe
    res = run_recipe(RECIPES["ccbqp-pareto"], Options(out="results/pareto", analogue="wordnet", limit=5))
    res.rows      # one row per query x method x setting
    res.table     # the paper's table, long form: ours (value) and published (paper) side by side

Recipes: see :data:`RECIPES` or ``divopt-rag reproduce --list``.
"""
from __future__ import annotations

from . import ccbqp, dartboard, dfrag, mio, vrsd
from .published import missing, published
from .runner import ReproduceResult, format_table, paper_table, print_report, run_recipe
from .spec import DataNeed, MissingData, Needs, Options, Recipe, ReproduceError
from divopt_rag.models.names import did_you_mean

__all__ = ["RECIPES", "get_recipe", "run_recipe", "Options", "Recipe", "Needs", "DataNeed", "ReproduceError",
           "MissingData", "ReproduceResult", "published", "missing", "paper_table", "format_table", "print_report"]

#: Every recipe by name, in the order ``--list`` prints them.
RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        ccbqp.PARETO, ccbqp.LATENCY, ccbqp.GENERATION,
        dfrag.TABLE1, dfrag.TABLE3, dfrag.TABLE4,
        dartboard.TABLE2, dartboard.SIGMA,
        vrsd.TABLES,
        mio.ENCODERS, mio.ROBUST, mio.TABLE8,
    )
}


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``; ReproduceError naming the recipes otherwise."""
    if name not in RECIPES:
        raise ReproduceError(f"unknown recipe {name!r}; {did_you_mean(name, RECIPES)}expected one of "
                             f"{', '.join(RECIPES)} (divopt-rag reproduce --list)")
    return RECIPES[name]
