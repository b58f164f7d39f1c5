"""The ``divopt`` command line: one entry point, one module per command.

Each command module defines ``add_arguments(parser)`` and ``main(args) -> int``. Only the
module of the command being run is imported, so ``divopt --help`` stays fast.
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
    ("sweep",): ("divopt.experiments.sweep_cli", "resumable parameter sweep (local pool or Ray)"),
    ("plot",): ("divopt.experiments.plots", "plots from parquet results"),
}


def _overview() -> argparse.ArgumentParser:
    """A parser that only lists the commands (used for --help and unknown commands)."""
    parser = argparse.ArgumentParser(prog="divopt", description="divopt: diversity-aware retrieval workbench")
    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {}
    for path, (_, help_) in COMMANDS.items():
        if len(path) == 1:
            top.add_parser(path[0], help=help_)
        else:
            if path[0] not in groups:
                g = top.add_parser(path[0], help=f"{path[0]} commands: " + ", ".join(p[1] for p in COMMANDS if p[0] == path[0]))
                groups[path[0]] = g.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
            groups[path[0]].add_parser(path[1], help=help_)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    path = next((p for p in sorted(COMMANDS, key=len, reverse=True) if tuple(argv[: len(p)]) == p), None)
    if path is None:
        _overview().parse_args(argv)  # prints help or a usage error and exits
        return 2
    module_name, help_ = COMMANDS[path]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        print(f"divopt: command '{' '.join(path)}' is not available in this build ({module_name})", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="divopt " + " ".join(path), description=help_)
    module.add_arguments(parser)
    return int(module.main(parser.parse_args(argv[len(path):])) or 0)


if __name__ == "__main__":
    sys.exit(main())
