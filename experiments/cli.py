"""The ``divopt`` command line: one entry point, one module per command.

Each command module defines ``add_arguments(parser)`` and ``main(args) -> int``; modules are
imported only when their command runs, so ``divopt --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# command path -> (module, one-line help)
COMMANDS: dict[tuple[str, ...], tuple[str, str]] = {
    ("demo",): ("divopt.experiments.demo", "compare every selector on a synthetic redundant corpus"),
    ("bench", "latency"): ("divopt.experiments.bench_latency", "latency of every selector vs GEMV"),
    ("bench", "exact"): ("divopt.experiments.bench_exact", "time to prove CCBQP optimality per solver"),
    ("bench", "quality"): ("divopt.experiments.bench_quality", "hit rate / gap / time of fast methods vs exact optima"),
    ("certify",): ("divopt.experiments.certify", "certify fast selectors against exact optima"),
    ("sweep",): ("divopt.experiments.sweep", "resumable parameter sweep (local pool or Ray)"),
    ("plot",): ("divopt.experiments.plots", "plots from parquet results"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="divopt", description="divopt: diversity-aware retrieval workbench")
    top = parser.add_subparsers(dest="command", required=True)
    groups: dict[str, argparse._SubParsersAction] = {}
    for path, (module, help_) in COMMANDS.items():
        if len(path) == 1:
            sub = top.add_parser(path[0], help=help_)
        else:
            if path[0] not in groups:
                g = top.add_parser(path[0], help=f"{path[0]} commands")
                groups[path[0]] = g.add_subparsers(dest="subcommand", required=True)
            sub = groups[path[0]].add_parser(path[1], help=help_)
        sub.set_defaults(_module=module)
        try:
            importlib.import_module(module).add_arguments(sub)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            sub.set_defaults(_missing=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "_missing", False):
        print(f"divopt: command {args._module} is not available in this build", file=sys.stderr)
        return 2
    return int(importlib.import_module(args._module).main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
