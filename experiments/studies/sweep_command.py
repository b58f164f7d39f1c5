"""``divopt-rag sweep`` on the command line: flags (or a config file they override) to a
:class:`~divopt_rag.experiments.studies.grid.SweepConfig`, then :func:`divopt_rag.experiments.studies.sweep.run_sweep`,
a summary (means over queries per method and every setting that varies in the grid:
:func:`summarize`) and, with ``--adaptive-metric``, the per-query Oracle / gated theta table of
:mod:`divopt_rag.experiments.rag.adaptive`.

Exit codes: 0 when every run of the grid succeeded; 1 when some runs failed (the end of the
output counts them and prints the most frequent reasons; every reason is in the ``error``
column of the table); 2 for bad input (one line on stderr, mapped by
:mod:`divopt_rag.experiments.cli`), e.g. a parameter no method takes, an empty dataset, a config
file that does not parse (its name and line), or a folder that holds another sweep or is in
use by one.
"""
from __future__ import annotations

import sys
from typing import Any, Mapping

import pandas as pd

from divopt_rag.experiments.cli import flag_checks
from divopt_rag.experiments.cli.arguments import run_options
from divopt_rag.experiments.engine import limits, store
from divopt_rag.experiments.engine.backends import import_plugins
from divopt_rag.experiments.engine.consolidate import report_errors
from divopt_rag.experiments.measures import quality, tables
from divopt_rag.experiments.measures.tables import CUTOFF_METRICS, at_cutoff, metric_columns
from divopt_rag.experiments.rag.adaptive import adaptive_report
from divopt_rag.experiments.rag.evaluator import make_evaluator
from divopt_rag.experiments.studies.grid import SweepConfig
from divopt_rag.experiments.studies.sweep import (axes_summary, check_k_within_pool, check_parameter_values,
                                                  check_parameters, consolidate, run_sweep)

__all__ = ["config_from_args", "summarize", "print_notes", "main"]




def config_from_args(args) -> SweepConfig:
    d: dict[str, Any] = SweepConfig.from_file(args.config).to_dict() if args.config else SweepConfig().to_dict()
    if args.dataset or args.dataset_opt:
        ds = dict(d["dataset"])
        if args.dataset:  # "NAME" or "NAME:ARG"; another dataset than the config's drops its options
            spec = SweepConfig(dataset=args.dataset).dataset
            ds = {**(ds if spec["name"] == ds.get("name") else {}), **spec}
        for name, value in args.dataset_opt:
            ds[name] = value
        d["dataset"] = ds
    grid = dict(d["grid"])
    for name in ("theta", "k", "pool"):
        if getattr(args, name) is not None:
            grid[name] = list(getattr(args, name))
    for name, values in args.param:
        grid[name] = values
    d["grid"] = grid
    if args.methods:
        old = d["methods"] if isinstance(d["methods"], Mapping) else {}
        d["methods"] = {m: dict(old.get(m, {})) for m in args.methods}
    for name, values in args.method_param:
        method, dot, pname = name.partition(".")
        if not dot or method not in d["methods"]:
            raise ValueError(f"--method-param {name!r}: expected METHOD.NAME with METHOD among {list(d['methods'])}")
        d["methods"][method][pname] = values
    if args.queries is not None:
        d["queries"] = args.queries
    if args.seed is not None:
        d["seed"] = args.seed
    if args.plugin:
        d["plugins"] = list(dict.fromkeys([*d.get("plugins", []), *args.plugin]))
    if args.evaluator:
        with limits.naming("--evaluator"):
            name, _, arg = args.evaluator.partition(":")
            d["evaluator"] = {"name": name, **({"metric": arg} if arg else {})}
            if name == "openai":
                raise ValueError("the openai evaluator needs base_url and model: give it in --config (evaluator: {...})")
            make_evaluator(d["evaluator"])
    return SweepConfig.from_dict(d)


#: Columns the printed summary averages over queries (those present; ranking metrics at every cutoff).
SUMMARY_COLUMNS = ("objective", "ilad", *CUTOFF_METRICS, "eval_score", "gap", "seconds")
#: Added when some method sizes its own set (a robust model): its set and its own objective.
SET_SUMMARY_COLUMNS = ("set_size", "set_recall", "model_objective", "price_of_robustness")


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Mean of the main columns over queries (ok rows only), per method and per every setting
    that varies in the table (:func:`divopt_rag.experiments.measures.tables.varying_settings`: k, theta,
    pool, dataset, method parameters, ...): a mean never mixes two values of a setting. A ranking
    metric keeps its column name (``recall@10``) when the table has one cutoff; over several k it
    is read at each row's own k into one column ``recall@k`` (k is then a grouping key)."""
    if table.empty or "status" not in table:
        return pd.DataFrame()
    ok = table[table["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    cols = []
    self_sized = "objective_kind" in ok and (ok["objective_kind"] != "ccbqp").any()
    for name in SUMMARY_COLUMNS + (SET_SUMMARY_COLUMNS if self_sized else ()):
        found = [c for c in metric_columns(ok, name) if ok[c].notna().any()]
        if len(found) > 1:  # one column per cutoff: read each row at its own k (k is a key below)
            ok = ok.assign(**{f"{name}@k": at_cutoff(ok, name)})
            found = [f"{name}@k"]
        cols += found
    keys = ["method", *tables.varying_settings(ok)]
    return ok.groupby(keys, dropna=False)[cols].mean().reset_index()


def print_notes(notes: list[str], stream=None) -> None:
    """Print the executor's notes (a changed dataset, skipped data) one per line."""
    for note in notes:
        print(f"note: {note}", file=stream or sys.stdout)


#: Per-row metrics a policy of ``--adaptive-metric`` can be judged by (ranking metrics with or
#: without their cutoff).
ROW_METRICS = ("objective", "relevance_sum", "ilad", "ils", "vrsd", "dartboard", "eval_score", *CUTOFF_METRICS)


def check_adaptive_metric(name: str | None) -> None:
    """``--adaptive-metric`` names a metric the sweep's rows have (before the sweep runs)."""
    if name is None:
        return
    base, at, cutoff = name.partition("@")
    if base not in ROW_METRICS or (at and (base not in CUTOFF_METRICS or not cutoff.isdigit() or int(cutoff) < 1)):
        raise limits.UsageError("--adaptive-metric", f"one of {list(ROW_METRICS)} (ranking metrics also as "
                                                        f"NAME@K)", repr(name))


def check_config(config: SweepConfig, args) -> None:
    """What the sweep names exists, before any work: plugins, methods, parameters and their
    values, the evaluator and the dataset (its name, options and files). An error names the flag
    that set the value, or the config file when no flag did."""

    def where(flags: str, key: str, given: bool) -> str:
        return flags if given or not args.config else f"{args.config} ({key})"

    with limits.naming(where("--plugin", "plugins", bool(args.plugin))):
        import_plugins(config.plugins)
    flag_checks.check_methods(config.methods, where("--methods", "methods", bool(args.methods)))
    with limits.naming(where("--param/--method-param", "grid", bool(args.param or args.method_param))):
        check_parameters(config)
        check_parameter_values(config)
    with limits.naming(where("--k/--pool", "grid", args.k is not None or args.pool is not None)):
        check_k_within_pool(config)
    with limits.naming(where("--evaluator", "evaluator", bool(args.evaluator))):
        make_evaluator(config.evaluator)
    flag_checks.check_dataset(config.dataset, where("--dataset/--dataset-opt", "dataset",
                                                    bool(args.dataset or args.dataset_opt)))


def main(args) -> int:
    check_adaptive_metric(args.adaptive_metric)
    config = config_from_args(args)
    check_config(config, args)
    if args.consolidate_only:
        res = consolidate(args.out, config)
        print(f"{len(res.table)} rows of {res.n_runs} runs in {res.path}")
        if args.adaptive_metric and len(res.table):
            _adaptive(res.table, args)
        _wrote(res.path, args)
        return report_errors("divopt-rag sweep", res.table, res.n_runs)
    print(axes_summary(config))
    res = run_sweep(config, args.out, run_options(args))
    print_notes(res.notes)
    print(
        f"sweep {res.run_id}: {res.n_runs} runs ({res.n_skipped} already done, {res.n_executed} run now, "
        f"{res.n_errors} errors) -> {res.path}"
    )
    summary = summarize(res.table)
    if not summary.empty:
        print(quality.format_table(summary))
    if args.adaptive_metric and not summary.empty:
        _adaptive(res.table, args)
    _wrote(res.path, args)
    return report_errors("divopt-rag sweep", res.table, res.n_runs)


def _wrote(path, args) -> None:
    """The last line of a run: the files it wrote (issue 49: where the output went)."""
    extra = [args.out / name for name in ("adaptive.parquet", "adaptive_policies.parquet")
             if args.adaptive_metric and (args.out / name).exists()]
    print(f"wrote {', '.join(str(p) for p in (path, *extra))}")


def _adaptive(table: pd.DataFrame, args) -> None:
    """Write OUT/adaptive.parquet (per-query Oracle / gated theta) and print the policy table.
    A ranking metric named without its cutoff (``s_recall``) is read at each row's k, one report
    per k (a policy never mixes two cutoffs)."""
    metric = args.adaptive_metric
    if metric in CUTOFF_METRICS and "k" in table:
        parts = [adaptive_report(table[table["k"] == k], metric=f"{metric}@{int(k)}")
                 for k in sorted(table["k"].dropna().unique())]
        per_query = pd.concat([p for p, _ in parts], ignore_index=True)
        policies = pd.concat([p for _, p in parts], ignore_index=True)
    else:
        per_query, policies = adaptive_report(table, metric=metric)
    store.write_parquet(per_query, args.out / "adaptive.parquet")
    store.write_parquet(policies, args.out / "adaptive_policies.parquet")
    print(quality.format_table(policies))
