"""``divopt-rag sweep`` on the command line: flags (or a config file they override) to a
:class:`~divopt_rag.experiments.grid.SweepConfig`, then :func:`divopt_rag.experiments.sweep.run_sweep`,
a summary per (method, theta) and, with ``--adaptive-metric``, the per-query Oracle / gated
theta table of :mod:`divopt_rag.experiments.rag.adaptive`.

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
from divopt_rag.experiments.rag.adaptive import adaptive_report
from divopt_rag.experiments.rag.evaluator import make_evaluator
from divopt_rag.experiments.grid import SweepConfig, parse_value
from divopt_rag.experiments.sweep import check_folder, check_parameters, consolidate, error_summary, plan, run_sweep

__all__ = ["add_arguments", "config_from_args", "summarize", "main"]


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
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--n-workers", type=int, default=None, help="workers (default: CPU count; 0 = in this process)")
    parser.add_argument("--address", help="Ray cluster address (with --backend ray), e.g. ray://host:10001; it must be a "
                                          "cluster on a trusted network (anyone who reaches a Ray cluster can run code "
                                          "on it). Default: a local Ray bound to 127.0.0.1")
    parser.add_argument("--chunk-size", type=int, default=None, help="runs per task")
    parser.add_argument("--retry-errors", action="store_true", help="run again the runs that ended in an error")
    parser.add_argument("--new-grid", action="store_true",
                        help="run a configuration other than the one OUT holds; the previous config.json and "
                             "results.parquet are kept beside as config.<id>.json and results.<id>.parquet")
    parser.add_argument("--consolidate-only", action="store_true", help="only rebuild OUT/results.parquet from the parts")
    parser.add_argument("--adaptive-metric", help="also write OUT/adaptive.parquet: per-query Oracle/gated theta by this metric")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


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


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Mean of the main columns per (method, theta) over queries (ok rows only)."""
    if table.empty or "status" not in table:
        return pd.DataFrame()
    ok = table[table["status"] == "ok"]
    cols = [c for c in ("objective", "ilad", "recall", "ndcg", "alpha_ndcg", "s_recall", "eval_score", "seconds") if c in ok]
    keys = [c for c in ("method", "theta") if c in ok]
    return ok.groupby(keys, dropna=False)[cols].mean().reset_index()


def main(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.consolidate_only:
        with harness.output_lock(args.out):
            check_parameters(config)
            previous = check_folder(args.out, config)  # never rebuild another sweep's table in its place
            if previous is None and not (args.out / "config.json").exists():
                raise ValueError(f"{args.out} holds no sweep (no config.json): nothing to consolidate")
            _, specs = plan(config, args.out)
            table = consolidate(args.out, specs, config.sweep_id)
        print(f"{len(table)} of {len(specs)} runs in {args.out / 'results.parquet'}")
        if args.adaptive_metric and len(table):
            _adaptive(table, args)
        return _report_errors(table, len(specs))
    res = run_sweep(
        config, args.out, backend=args.backend, n_workers=args.n_workers, address=args.address,
        chunk_size=args.chunk_size, progress=not args.no_progress, retry_errors=args.retry_errors,
        new_grid=args.new_grid,
    )
    print(
        f"sweep {config.sweep_id}: {res.n_runs} runs ({res.n_skipped} already done, {res.n_executed} run now, "
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
    """Write OUT/adaptive.parquet (per-query Oracle / gated theta) and print the policy table."""
    per_query, policies = adaptive_report(table, metric=args.adaptive_metric)
    harness.write_parquet(per_query, args.out / "adaptive.parquet")
    harness.write_parquet(policies, args.out / "adaptive_policies.parquet")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(policies.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
