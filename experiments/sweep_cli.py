"""``divopt sweep`` on the command line: flags (or a config file they override) to a
:class:`~divopt.experiments.grid.SweepConfig`, then :func:`divopt.experiments.sweep.run_sweep`,
a summary per (method, theta) and, with ``--adaptive-metric``, the per-query Oracle / gated
theta table of :mod:`divopt.experiments.adaptive`. Bad input: one line on stderr, exit code 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from divopt.experiments import harness
from divopt.experiments.adaptive import adaptive_report
from divopt.experiments.evaluator import make_evaluator
from divopt.experiments.grid import SweepConfig, parse_value
from divopt.experiments.sweep import consolidate, plan, run_sweep

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
    parser.add_argument("--address", help="Ray cluster address (with --backend ray); default: a local ray.init")
    parser.add_argument("--chunk-size", type=int, default=None, help="runs per task")
    parser.add_argument("--retry-errors", action="store_true", help="run again the runs that ended in an error")
    parser.add_argument("--consolidate-only", action="store_true", help="only rebuild OUT/results.parquet from the parts")
    parser.add_argument("--adaptive-metric", help="also write OUT/adaptive.parquet: per-query Oracle/gated theta by this metric")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    d: dict[str, Any] = SweepConfig.from_file(args.config).to_dict() if args.config else SweepConfig().to_dict()
    if args.dataset or args.dataset_opt:
        ds = dict(d["dataset"]) if not args.dataset or args.dataset == d["dataset"].get("name") else {}
        ds["name"] = args.dataset or d["dataset"]["name"]
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
    try:
        config = config_from_args(args)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"divopt sweep: {exc}", file=sys.stderr)
        return 2
    if args.consolidate_only:
        try:
            _, specs = plan(config, args.out)
        except (ValueError, TypeError) as exc:
            print(f"divopt sweep: {exc}", file=sys.stderr)
            return 2
        table = consolidate(args.out, specs, config.sweep_id)
        print(f"{len(table)} of {len(specs)} runs in {args.out / 'results.parquet'}")
        if args.adaptive_metric and len(table):
            _adaptive(table, args)
        return 0
    try:
        res = run_sweep(
            config, args.out, backend=args.backend, n_workers=args.n_workers, address=args.address,
            chunk_size=args.chunk_size, progress=not args.no_progress, retry_errors=args.retry_errors,
        )
    except (ValueError, TypeError) as exc:
        print(f"divopt sweep: {exc}", file=sys.stderr)
        return 2
    print(
        f"sweep {config.sweep_id}: {res.n_runs} runs ({res.n_skipped} already done, {res.n_executed} run now, "
        f"{res.n_errors} errors) -> {res.path}"
    )
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summarize(res.table).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.adaptive_metric:
        _adaptive(res.table, args)
    return 1 if res.n_errors else 0


def _adaptive(table: pd.DataFrame, args: argparse.Namespace) -> None:
    """Write OUT/adaptive.parquet (per-query Oracle / gated theta) and print the policy table."""
    per_query, policies = adaptive_report(table, metric=args.adaptive_metric)
    harness.write_parquet(per_query, args.out / "adaptive.parquet")
    harness.write_parquet(policies, args.out / "adaptive_policies.parquet")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(policies.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
