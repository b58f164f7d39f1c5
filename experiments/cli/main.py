"""The ``divopt-rag`` command line: one entry point, one module per command.

Each command's flags are defined in :mod:`divopt_rag.experiments.cli.arguments` (argparse and the
standard library only) and its work in its own module, ``main(args) -> int``, imported only
after its flags were parsed and checked: ``divopt-rag COMMAND --help`` and a bad flag cost
no import of torch, pandas, Pyomo, Ray or matplotlib.

Every bad input is refused before any work starts, as ONE line on stderr and exit code 2:

1. a flag's value (:mod:`divopt_rag.experiments.cli.arguments`' types: "--k: expected an integer
   >= 1, got '0'"), an unknown flag or command (argparse's message, in one line);
2. a check across flags (``--k`` larger than ``--n``, a run too large for this machine's
   memory: :data:`divopt_rag.experiments.cli.arguments.COMMAND_FLAGS`) and the output paths (``--out``,
   ``--log-dir``, ``--cache-dir``: a folder, writable; :func:`divopt_rag.experiments.cli.flag_checks.check_output_path`);
3. what needs the command's modules (a method or solver name, a device, a dataset, a model):
   the command checks it first, before it writes anything; a run the executor refuses leaves
   no file behind (:func:`divopt_rag.experiments.engine.executor.run`).

Errors become exit codes here, in one place, for every command:

* bad input (:class:`ValueError`, :class:`TypeError`, :class:`OSError` such as a missing or
  unwritable file, :class:`ImportError` of an optional dependency; config and data errors are
  ValueErrors that name the file and line): ``divopt-rag COMMAND: message`` and exit code 2,
  as argparse does for a bad flag; an output folder in use by another run
  (:class:`divopt_rag.experiments.engine.store.OutputLocked`) is bad input too (the message names
  the holder);
* anything else is a bug: one line naming the exception and exit code 1;
* Ctrl-C: "interrupted", exit code 130.

``--debug`` (anywhere on the command line, or ``DIVOPT_DEBUG=1``) lets the exception through
with its traceback. Warnings print as ``divopt-rag: warning: ...``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from divopt_rag.experiments.cli import arguments, flag_checks, flag_types
from divopt_rag.experiments.cli.library_flags import LIBRARY_COMMANDS

# command path -> (module, one-line help, output arguments: dest -> "dir" | "file"); the flags
# and the checks across flags are arguments.COMMAND_FLAGS[path]
COMMANDS: dict[tuple[str, ...], tuple[str, str, dict[str, str]]] = {
    ("demo",): ("divopt_rag.experiments.studies.demo", "compare every selector on a synthetic redundant corpus", {"out": "dir"}),
    ("bench", "latency"): ("divopt_rag.experiments.studies.bench_latency", "latency of every selector vs GEMV", {"out": "dir"}),
    ("bench", "exact"): ("divopt_rag.experiments.studies.bench_exact", "time to prove CCBQP optimality per solver",
                         {"out": "dir", "log_dir": "dir", "cache_dir": "dir"}),
    ("bench", "quality"): ("divopt_rag.experiments.studies.bench_quality", "hit rate / gap / time of fast methods vs exact optima",
                           {"out": "dir", "cache_dir": "dir"}),
    ("certify",): ("divopt_rag.experiments.studies.certify", "certify fast selectors against exact optima",
                   {"out": "dir", "cache_dir": "dir"}),
    ("sweep",): ("divopt_rag.experiments.studies.sweep_command", "resumable parameter sweep (local pool or Ray)", {"out": "dir"}),
    ("plot",): ("divopt_rag.experiments.plots.figures", "plots from parquet results", {"out": "dir"}),
    ("reproduce",): ("divopt_rag.experiments.reproduce.cli", "reproduce a seed paper's headline table (--list)",
                     {"out": "dir", "cache_dir": "dir"}),
    **LIBRARY_COMMANDS,
}

#: Exit codes: success, failed runs / a bug, bad input (argparse's own code), Ctrl-C.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: Exceptions that mean "bad input" (exit code 2) rather than a bug.
USER_ERRORS = (ValueError, TypeError, OSError, ImportError)

_DEBUG_FLAG = "--debug"
_VERSION_FLAGS = ("--version", "-V")


def version() -> str:
    """The installed distribution's version (``divopt-rag X.Y.Z``), or the source tree's."""
    from importlib import metadata

    try:
        return f"divopt-rag {metadata.version('divopt-rag')}"
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return f"divopt-rag {tomllib.loads(pyproject.read_text())['project']['version']} (not installed)"


def _overview() -> argparse.ArgumentParser:
    """A parser that only lists the commands (used for --help and unknown commands)."""
    parser = flag_types.Parser(prog="divopt-rag", description="divopt-rag: diversity-aware retrieval workbench")
    parser.add_argument(_DEBUG_FLAG, action="store_true", help="show the traceback of an error (or DIVOPT_DEBUG=1)")
    parser.add_argument(*_VERSION_FLAGS, action="store_true", help="print the version and exit")
    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {}
    for path, (_, help_, _) in COMMANDS.items():
        if len(path) == 1:
            top.add_parser(path[0], help=help_)
        else:
            if path[0] not in groups:
                g = top.add_parser(path[0], help=f"{path[0]} commands: " + ", ".join(p[1] for p in COMMANDS if p[0] == path[0]))
                groups[path[0]] = g.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
            groups[path[0]].add_parser(path[1], help=help_)
    return parser


def build_parser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser of command ``path`` (e.g. ``("bench", "latency")``): its flags and ``--debug``;
    imports nothing but argparse-level code."""
    parser = flag_types.Parser(prog="divopt-rag " + " ".join(path), description=COMMANDS[path][1])
    arguments.COMMAND_FLAGS[path][0](parser)
    parser.add_argument(_DEBUG_FLAG, action="store_true", help="show the traceback of an error (or DIVOPT_DEBUG=1)")
    parser.epilog = epilog(parser)
    return parser


def epilog(parser: argparse.ArgumentParser) -> str:
    """The closing lines of a command's --help: how its own list flags take several values (with
    one of them as the example, so a command whose --k takes one value never shows "--k 5 10"),
    and how bad input is refused."""
    lists = [max(a.option_strings, key=len) for a in parser._actions
             if isinstance(a, flag_types.ListAction) and a.option_strings]
    refused = "Bad input is refused before any work, in one line, with exit code 2."
    if not lists:
        return refused
    flag = next((f for f in ("--k", "--theta") if f in lists), lists[0])
    a, b = ("5", "10") if flag == "--k" else ("0.5", "0.9") if flag == "--theta" else ("A", "B")
    names = ", ".join(lists)
    return (f"Flags that take several values ({names}) take them as separate words or comma-separated: "
            f"{flag} {a} {b}, {flag} {a},{b} and {flag} {a} {flag} {b} are the same. {refused}")


def error_line(exc: BaseException) -> str:
    """The one-line message of an exception: OSErrors as "reason: file", other messages with
    their line breaks folded into "; "."""
    if isinstance(exc, OSError) and exc.strerror:
        files = [f for f in (exc.filename, exc.filename2) if f is not None]
        text = exc.strerror + (": " + " -> ".join(str(f) for f in files) if files else "")
    else:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, KeyError):  # str(KeyError) is the bare repr of the key
            text = f"KeyError: {text}"
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _close_progress_bars() -> None:
    """Close the tqdm bars an error interrupted, so that its line starts on a line of its own."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return
    for bar in list(getattr(tqdm, "_instances", ())):
        try:
            bar.close()
        except Exception:  # noqa: BLE001  (a bar that cannot close must not hide the error)
            pass


def silence_progress_bars() -> None:
    """``--no-progress``: no bar at all in this process and the workers it starts, divopt's or a
    library's (transformers' "Loading weights", huggingface_hub's downloads, any tqdm bar).

    tqdm (>= 4.66) reads ``TQDM_DISABLE`` as the default of ``disable``, and huggingface_hub and
    transformers read ``HF_HUB_DISABLE_PROGRESS_BARS``; the command owns its process, so it sets
    them before it imports the command's modules (a library call would leave them alone).
    """
    os.environ["TQDM_DISABLE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    # one line per warning, without the source line a user cannot act on
    print(f"divopt-rag: warning: {error_line(message if isinstance(message, Warning) else Warning(message))}",
          file=sys.stderr if file is None else file)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """The parsed flags, or argparse's exit code (0 after --help, 2 for a bad flag: one line)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _DEBUG_FLAG in argv or os.environ.get("DIVOPT_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != _DEBUG_FLAG]
    if argv[:1] and argv[0] in _VERSION_FLAGS:
        print(version())
        return EXIT_OK
    path = next((p for p in sorted(COMMANDS, key=len, reverse=True) if tuple(argv[: len(p)]) == p), None)
    if path is None:
        code = _parse(_overview(), argv)  # prints the overview or a usage error
        return EXIT_USAGE if isinstance(code, argparse.Namespace) else code
    module_name, _, outputs = COMMANDS[path]
    prog = "divopt-rag " + " ".join(path)
    args = _parse(build_parser(path), argv[len(path):])
    if not isinstance(args, argparse.Namespace):
        return args
    if getattr(args, "no_progress", False):
        silence_progress_bars()
    with warnings.catch_warnings():
        if not debug:
            warnings.showwarning = _show_warning
        try:
            check = arguments.COMMAND_FLAGS[path][1]
            if check is not None:
                check(args)  # across flags (k <= n, memory), before anything is imported or written
            for dest, kind in outputs.items():
                if getattr(args, dest, None) is not None:
                    flag_checks.check_output_path(getattr(args, dest), kind, "--" + dest.replace("_", "-"))
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name != module_name:
                    raise
                print(f"{prog}: command not available in this build ({module_name})", file=sys.stderr)
                return EXIT_USAGE
            return int(module.main(args) or 0)
        except KeyboardInterrupt:
            if debug:
                raise
            _close_progress_bars()
            print(f"{prog}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception as exc:  # noqa: BLE001  (the one place errors become exit codes)
            if debug:
                raise
            _close_progress_bars()
            if isinstance(exc, USER_ERRORS):
                print(f"{prog}: {error_line(exc)}", file=sys.stderr)
                return EXIT_USAGE
            print(f"{prog}: internal error: {type(exc).__name__}: {error_line(exc)} "
                  f"(run again with --debug for the traceback, and please report it)", file=sys.stderr)
            return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
