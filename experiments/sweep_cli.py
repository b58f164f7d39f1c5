"""``divopt-rag sweep`` on the command line: flags (or a config file they override) to a
:class:`~divopt_rag.experiments.grid.SweepConfig`, then :func:`divopt_rag.experiments.sweep.run_sweep`,
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

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from divopt_rag.experiments import harness
from divopt_rag.experiments.executor import add_run_arguments, run_options
from divopt_rag.experiments.grid import SweepConfig, parse_value
from divopt_rag.experiments.metrics import CUTOFF_METRICS, at_cutoff, metric_columns
from divopt_rag.experiments.rag.adaptive import adaptive_report
from divopt_rag.experiments.rag.evaluator import make_evaluator
from divopt_rag.experiments.sweep import consolidate, error_summary, run_sweep

__all__ = ["add_arguments", "config_from_args", "summarize", "print_notes", "main"]


def _kv(text: str) -> tuple[str, list[Any]]:
    name, sep, values = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,..., got {text!r}")
    return name.strip(), [parse_value(v) for v in values.split(",")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a grid of methods x parameters x queries; every finished run is written atomically to "
        "OUT/parts, so re-running the same command after a kill resumes where it stopped. "
        "The tidy table is OUT/results.parquet."
    )
    parser.add_argument("--config", type=Path, help="sweep config (.json, .toml, or .yaml); flags below override it")
    parser.add_argument("--out", type=Path, default=Path("results/sweep"), help="output folder (default results/sweep)")
    parser.add_argument("--dataset", help="dataset loader name (default synthetic)")
    parser.add_argument("--dataset-opt", action="append", default=[], metavar="NAME=VALUE",
                        help="dataset option, e.g. n=400 (repeatable)")
    parser.add_argument("--methods", nargs="+", help="methods (fast selectors, robust models, registered extras)")
    parser.add_argument("--theta", nargs="+", type=float, help="theta grid")
    parser.add_argument("--k", nargs="+", type=int, help="k grid")
    parser.add_argument("--pool", nargs="+", type=parse_value, help="pool sizes (top-n by relevance per query; none = all)")
    parser.add_argument("--param", action="append", default=[], type=_kv, metavar="NAME=V1,V2",
                        help="common grid axis for the methods that accept it, e.g. sigma=0.05,0.1 (repeatable)")
    parser.add_argument("--method-param", action="append", default=[], type=_kv, metavar="METHOD.NAME=V1,V2",
                        help="grid axis of one method, e.g. dartboard.sigma=0.1,0.2 (repeatable)")
    parser.add_argument("--queries", type=int, help="use the first N queries")
    parser.add_argument("--seed", type=int, help="base seed (default 0)")
    parser.add_argument("--plugin", action="append", default=[], help="module to import in driver and workers (repeatable)")
    parser.add_argument("--evaluator", help="score each selection: coverage | metric:<name> (openai: via --config)")
    parser.add_argument("--consolidate-only", action="store_true", help="only rebuild OUT/results.parquet from the parts")
    parser.add_argument("--adaptive-metric", help="also write OUT/adaptive.parquet: per-query Oracle/gated theta by this "
                                                  "metric (a ranking metric without cutoff, e.g. s_recall: at each k)")
    add_run_arguments(parser, parallel=True)


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    d: dict[str, Any] = SweepConfig.from_file(args.config).to_dict() if args.config else SweepConfig().to_dict()
    if args.dataset or args.dataset_opt:
        ds = dict(d["dataset"])
        if args.dataset:  # "NAME" or "NAME:ARG"; another dataset than the config's drops its options
            spec = SweepConfig(dataset=args.dataset).dataset
            ds = {**(ds if spec["name"] == ds.get("name") else {}), **spec}
        for kv in args.dataset_opt:
            k, _, v = kv.partition("=")
            if not _:
                raise ValueError(f"--dataset-opt expects NAME=VALUE, got {kv!r}")
            ds[k.strip()] = parse_value(v)
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
        spec = args.evaluator
        name, _, arg = spec.partition(":")
        d["evaluator"] = {"name": name, **({"metric": arg} if arg else {})}
        if name == "openai":
            raise ValueError("the openai evaluator needs base_url and model: give it in --config (evaluator: {...})")
        make_evaluator(d["evaluator"])
    return SweepConfig.from_dict(d)


#: Columns the printed summary averages over queries (those present; ranking metrics at every cutoff).
SUMMARY_COLUMNS = ("objective", "ilad", *CUTOFF_METRICS, "eval_score", "gap", "seconds")


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Mean of the main columns over queries (ok rows only), per method and per every setting
    that varies in the table (:func:`divopt_rag.experiments.harness.varying_settings`: k, theta,
    pool, dataset, method parameters, ...): a mean never mixes two values of a setting. A ranking
    metric keeps its column name (``recall@10``) when the table has one cutoff; over several k it
    is read at each row's own k into one column ``recall@k`` (k is then a grouping key)."""
    if table.empty or "status" not in table:
        return pd.DataFrame()
    ok = table[table["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    cols = []
    for name in SUMMARY_COLUMNS:
        found = [c for c in metric_columns(ok, name) if ok[c].notna().any()]
        if len(found) > 1:  # one column per cutoff: read each row at its own k (k is a key below)
            ok = ok.assign(**{f"{name}@k": at_cutoff(ok, name)})
            found = [f"{name}@k"]
        cols += found
    keys = ["method", *harness.varying_settings(ok)]
    return ok.groupby(keys, dropna=False)[cols].mean().reset_index()


def print_notes(notes: list[str], stream=None) -> None:
    """Print the executor's notes (a changed dataset, skipped data) one per line."""
    for note in notes:
        print(f"note: {note}", file=stream or sys.stdout)


def main(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.consolidate_only:
        res = consolidate(args.out, config)
        print(f"{len(res.table)} rows of {res.n_runs} runs in {res.path}")
        if args.adaptive_metric and len(res.table):
            _adaptive(res.table, args)
        return _report_errors(res.table, res.n_runs)
    res = run_sweep(config, args.out, **run_options(args))
    print_notes(res.notes)
    print(
        f"sweep {res.run_id}: {res.n_runs} runs ({res.n_skipped} already done, {res.n_executed} run now, "
        f"{res.n_errors} errors) -> {res.path}"
    )
    summary = summarize(res.table)
    if not summary.empty:
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.adaptive_metric and not summary.empty:
        _adaptive(res.table, args)
    return _report_errors(res.table, res.n_runs)


def _report_errors(table: pd.DataFrame, n_runs: int) -> int:
    """Print how many runs of the table failed and the most frequent reasons (stderr); 1 if any."""
    n_failed, reasons = error_summary(table)
    if not n_failed:
        return 0
    what = "every run" if n_failed == n_runs else f"{n_failed} of {n_runs} runs"
    print(f"divopt-rag sweep: {what} failed (status 'error'; --retry-errors runs them again). Most frequent reasons:",
          file=sys.stderr)
    for text, count in reasons:
        print(f"  {count} x {text}", file=sys.stderr)
    return 1


def _adaptive(table: pd.DataFrame, args: argparse.Namespace) -> None:
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
    harness.write_parquet(per_query, args.out / "adaptive.parquet")
    harness.write_parquet(policies, args.out / "adaptive_policies.parquet")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(policies.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
