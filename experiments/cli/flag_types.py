"""The value types of every ``divopt-rag`` flag and its errors in one line: argparse and the
standard library only (building a parser imports nothing heavy, so ``--help`` is fast and a bad
flag is refused before the command's module is imported).

* **One list syntax.** Every flag that takes several values takes them as separate words, as
  comma-separated words, or both: ``--k 5 10``, ``--k 5,10`` and ``--k 5 --k 10`` are one list
  (:class:`ListAction`). Flags of the form ``NAME=V1,V2`` (``--param``, ``--set``, ...) are
  repeated for several names.
* **Typed values** (:class:`Integer`, :class:`Real`, :class:`Name`, :class:`Choice`,
  :class:`ExistingPath`, :class:`KeyValues`, :class:`Text`): each converts one word or refuses
  it with "expected X, got 'Y'"; each knows a few words it refuses (``bad``), from which the
  tests build their table of bad input for every flag of every command.
* **One line per error.** :class:`Parser` prints argparse's errors as ONE line,
  ``divopt-rag CMD: --flag: expected ..., got '...' (see divopt-rag CMD --help)``, exit code 2;
  :class:`~divopt_rag.experiments.engine.limits.UsageError` is the same line for a check across
  flags (``--k`` larger than ``--n``).

The commands' flags are :mod:`divopt_rag.experiments.cli.arguments`; the checks that need more
than one flag, the file system or the registries are :mod:`divopt_rag.experiments.cli.flag_checks`;
the domains the types take (theta's range, the upper end of a count, the exact engines) are
:mod:`divopt_rag.models.domains`.
"""
from __future__ import annotations

import argparse
import copy
import decimal
import math
import os
import re
import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

from divopt_rag.models.domains import (CORPUS_MAX, COUNT_MAX, EXACT_N_MAX, EXACT_SOLVERS, REPEATS_MAX, SEED_MAX,
                                      THETA_RANGE, THREADS_MAX)

__all__ = [
    "Parser",
    "ValueType",
    "Integer",
    "Real",
    "Name",
    "Choice",
    "Text",
    "ExistingPath",
    "OutputPath",
    "KeyValues",
    "parse_value",
    "ListOf",
    "ListAction",
    "add_list",
    "EPILOG",
    "COUNT",
    "CPUS",
    "THREADS",
    "SOLVER_THREADS",
    "WORKERS_MAX",
    "OUTPUT",
    "SEED",
    "THETA",
    "WORKERS",
    "SECONDS",
    "METHOD",
    "MODULE",
    "DATASET",
    "DATASET_NAMES",
    "MODEL",
    "KEY_VALUES",
    "EXACT_SOLVER",
]


# =============================================================================================
# Errors in one line
# =============================================================================================
_ARGUMENT_PREFIX = re.compile(r"^argument ([^:]+): ")


def shown_default(value: object) -> str:
    """A default as ``--help`` shows it: lists space-separated as they are typed, None as "none"."""
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value) or "none"
    return str(value)


#: In a flag's help, replaced by every registered dataset (``divopt_rag.data.registry.dataset_usage``)
#: when ``--help`` is formatted, so that help and errors name datasets alike and a parser built
#: to parse imports no data module.
DATASET_NAMES = "{registered datasets}"


def builtin_dataset_usage() -> str:
    """The built-in datasets as ``--help`` lists them: :mod:`divopt_rag.data.dataset_names`, read
    from its file without running ``divopt_rag/data/__init__.py`` (which loads numpy), so that
    ``--help`` stays fast; the registry checks that table against its registrations on import and
    its errors format the same list with the same function."""
    import importlib.util

    spec = importlib.util.find_spec("divopt_rag.data")  # imports the namespace divopt_rag, not data
    folder = next(iter(spec.submodule_search_locations or ())) if spec else None
    if folder is None:
        return "see divopt_rag.data.DATASETS"
    file_spec = importlib.util.spec_from_file_location("_divopt_dataset_names", os.path.join(folder, "dataset_names.py"))
    module = importlib.util.module_from_spec(file_spec)
    file_spec.loader.exec_module(module)
    return module.usage((n, arg, aliases) for n, (arg, aliases) in module.BUILTIN_DATASETS.items())


class DefaultsFormatter(argparse.HelpFormatter):
    """Every flag's help ends with its default, unless its text already says it (issue 49): a
    required flag, a positional or an on/off switch shows none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if DATASET_NAMES in text:  # the registry's table, as its errors list it
            text = text.replace(DATASET_NAMES, builtin_dataset_usage())
        if ("default" in text.lower() or not action.option_strings or action.required
                or action.default is argparse.SUPPRESS or action.nargs == 0):
            return text
        shown = shown_default(action.default).replace("%", "%%")
        if isinstance(action.default, Path) and not action.default.is_absolute():
            shown += ", in the current folder"
        return f"{text} (default: {shown})" if text else f"default: {shown}"

    def _format_action(self, action: argparse.Action) -> str:
        # argparse prints no help line for a flag without help text: give it one, its default
        if action.help is None and action.option_strings and not action.required and action.nargs != 0:
            action = copy.copy(action)
            action.help = ""
            action.help = self._get_help_string(action)
        return super()._format_action(action)

    def _split_lines(self, text: str, width: int) -> list[str]:
        # argparse's wrap breaks at hyphens ("mini-" / "wikipedia", "--corpus-" / "size"): not here
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are ONE line on stderr (argparse prints the whole usage
    block): ``PROG: --flag: message (see PROG --help)``, exit code 2; its ``--help`` shows every
    flag's default (:class:`DefaultsFormatter`)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse says "argument --k/-k: ..."; name the flag as the user typed it
        message = _ARGUMENT_PREFIX.sub(lambda m: m.group(1).split("/")[0] + ": ", message)
        message = " ".join(message.split())
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


# =============================================================================================
# Value types
# =============================================================================================
class ValueType:
    """An argparse ``type``: converts one word or raises ArgumentTypeError "expected X, got 'Y'".

    ``expected``: what it takes, in words ("an integer >= 1"); ``plural``: the same for a list
    ("integers >= 1"); ``bad``: words it refuses, for the tests' table of bad input. Types whose
    check needs the command's modules (a method name, a dataset) refuse their ``bad`` words
    when the command checks its arguments, before any work."""

    expected = "a value"
    plural = "values"
    bad: tuple[str, ...] = ()

    def __call__(self, text: str) -> Any:
        return self.convert(text)

    def convert(self, text: str) -> Any:
        return text

    def refuse(self, text: str, why: str = "") -> None:
        raise argparse.ArgumentTypeError(f"expected {self.expected}, got {text!r}" + (f" ({why})" if why else ""))

    @property
    def __name__(self) -> str:  # argparse names a type by its __name__ in some messages
        return type(self).__name__.lower()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.expected!r})"


def _bound_text(low: float | None, high: float | None, low_open: bool, high_open: bool, fmt=str) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{fmt(low)}, {fmt(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {fmt(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {fmt(high)}"
    return ""


class Integer(ValueType):
    """An integer (``1e6`` counts too) within [min, max]; ``none`` gives None when ``allow_none``.
    ``max`` defaults to :data:`~divopt_rag.models.domains.COUNT_MAX`: no flag takes an integer past
    the machine's."""

    def __init__(self, min: int | None = None, max: int | None = COUNT_MAX, allow_none: bool = False) -> None:
        self.min, self.max, self.allow_none = min, max, allow_none
        # the machine's bound goes without saying until a value passes it (then the refusal says it)
        bound = _bound_text(min, None if max == COUNT_MAX else max, False, False)
        self.expected = f"an integer {bound}".strip() + (" or none" if allow_none else "")
        self.plural = f"integers {bound}".strip() + (" or none" if allow_none else "")
        bad = ["1.5", "x", "nan", "inf", ""]
        if min is not None:
            bad.insert(0, str(min - 1))
        if max is not None:
            bad.insert(0, str(max + 1))
        self.bad = tuple(bad)

    def convert(self, text: str) -> int | None:
        t = text.strip()
        if self.allow_none and t.lower() in ("none", "null"):
            return None
        try:
            value = float(t)
        except ValueError:
            self.refuse(text)
        if not value.is_integer():  # nan and inf are not integers either
            self.refuse(text)
        try:
            number = int(t)  # exact for long integers
        except ValueError:
            number = int(value)
        if self.max == COUNT_MAX and number > self.max:
            self.refuse(text, f"at most {COUNT_MAX}")
        if (self.min is not None and number < self.min) or (self.max is not None and number > self.max):
            self.refuse(text)
        return number


class Real(ValueType):
    """A finite number within its bounds (``min_open`` / ``max_open``: excluded)."""

    def __init__(self, min: float | None = None, max: float | None = None, *, min_open: bool = False,
                 max_open: bool = False) -> None:
        self.min, self.max, self.min_open, self.max_open = min, max, min_open, max_open
        bound = _bound_text(min, max, min_open, max_open, fmt=lambda v: f"{v:g}")
        self.expected = f"a number {bound}".strip()
        self.plural = f"numbers {bound}".strip()
        bad = ["x", "nan", "inf", ""]
        if min is not None:
            bad.insert(0, f"{min:g}" if min_open else f"{min - 0.5:g}")
        if max is not None:
            bad.insert(0, f"{max:g}" if max_open else f"{max + 0.5:g}")
        self.bad = tuple(bad)

    def convert(self, text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            self.refuse(text)
        if not math.isfinite(value):
            self.refuse(text)
        if self.min is not None and (value < self.min or (self.min_open and value == self.min)):
            self.refuse(text)
        if self.max is not None and (value > self.max or (self.max_open and value == self.max)):
            self.refuse(text)
        return value


class Name(ValueType):
    """A name (method, metric, column, module): letters, digits and ``_ @ . + -``, not starting
    with a dot, never a path. What the name must refer to is checked by the command."""

    _PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_@.+:-]*$")

    def __init__(self, what: str = "a name", plural: str | None = None, bad: Sequence[str] = ("nosuch",),
                 pattern: str | None = None) -> None:
        self.expected, self.plural = what, plural or what
        self.pattern = re.compile(pattern) if pattern else self._PATTERN
        self.bad = (*bad, "../x", "a/b", "")

    def convert(self, text: str) -> str:
        if not self.pattern.match(text) or ".." in text:
            self.refuse(text)
        return text


class Choice(ValueType):
    """One of fixed words (argparse's ``choices`` with this module's message)."""

    def __init__(self, choices: Sequence[str]) -> None:
        self.choices = tuple(choices)
        self.expected = "one of " + ", ".join(self.choices)
        self.plural = "some of " + ", ".join(self.choices)
        self.bad = ("nosuch", "")

    def convert(self, text: str) -> str:
        if text not in self.choices:
            from divopt_rag.models.names import did_you_mean

            hint = did_you_mean(text, self.choices)
            raise argparse.ArgumentTypeError(f"{hint}expected {self.expected}, got {text!r}")
        return text


class Text(ValueType):
    """Free text checked by the command (a dataset spec, a device, an address); ``pattern``
    refuses what can never be right up front."""

    def __init__(self, what: str, bad: Sequence[str] = (), pattern: str | None = None) -> None:
        self.expected = self.plural = what
        self.pattern = re.compile(pattern) if pattern else None
        self.bad = tuple(bad)

    def convert(self, text: str) -> str:
        if not text.strip() or (self.pattern is not None and not self.pattern.match(text)):
            self.refuse(text)
        return text


def parse_value(text: str) -> Any:
    """A value typed on the command line: ``none`` -> None, ``true``/``false`` -> bool, then
    int (``1e6`` too: an integer written with an exponent and no decimal point is an int, exact,
    so a count reads as a count and a message shows the number, not ``1000000.0``), float, else
    the string."""
    t = text.strip()
    low = t.lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(t)
    except ValueError:
        pass
    if _INTEGER_EXPONENT.fullmatch(t):
        return int(decimal.Decimal(t))
    try:
        return float(t)
    except ValueError:
        return t


_INTEGER_EXPONENT = re.compile(r"[+-]?\d+[eE]\+?\d{1,4}")


class KeyValues(ValueType):
    """``NAME=V1,V2,...`` -> (NAME, [values]) (``many=False``: ``NAME=VALUE`` -> (NAME, value)),
    each value read by :func:`parse_value`; ``dotted``: NAME is ``METHOD.NAME``."""

    def __init__(self, many: bool = True, dotted: bool = False) -> None:
        self.many, self.dotted = many, dotted
        name = "METHOD.NAME" if dotted else "NAME"
        self.expected = f"{name}=V1,V2,..." if many else f"{name}=VALUE"
        self.plural = self.expected
        self.bad = ("noequals", "=1") + (("nodot=1",) if dotted else ())

    def convert(self, text: str) -> tuple[str, Any]:
        name, sep, values = text.partition("=")
        name = name.strip()
        if not sep or not name or any(c.isspace() for c in name) or (self.dotted and not re.fullmatch(r"[^.]+\.[^.]+", name)):
            self.refuse(text)
        if not self.many:
            return name, parse_value(values)
        return name, [parse_value(v) for v in values.split(",")]


class ExistingPath(ValueType):
    """A file (``kind="file"``), a folder (``"dir"``) or either (``"any"``) that exists."""

    def __init__(self, kind: str = "any", what: str | None = None) -> None:
        self.kind = kind
        noun = {"file": "file", "dir": "folder", "any": "file or folder"}[kind]
        self.expected = what or f"an existing {noun}"
        self.plural = f"existing {noun}s"
        self.bad = ("/nonexistent/divopt-missing",)

    def convert(self, text: str) -> str:
        p = Path(text).expanduser()
        if not text.strip() or not p.exists():
            self.refuse(text, "no such file or folder")
        if self.kind == "file" and not p.is_file():
            self.refuse(text, "a folder, not a file")
        if self.kind == "dir" and not p.is_dir():
            self.refuse(text, "a file, not a folder")
        return str(p)


class OutputPath(ValueType):
    """A folder or file to write: not empty (``--out ''`` wrote into the current folder) and
    without control characters (a newline in a file name breaks every log and listing). That it
    can be written is :func:`~divopt_rag.experiments.cli.flag_checks.check_output_path`'s check,
    before any work. ``as_path``: a ``Path`` (else the text)."""

    def __init__(self, what: str = "a folder to write", as_path: bool = True) -> None:
        self.expected = f"{what} (not empty, no control characters)"
        self.plural = self.expected
        self.as_path = as_path
        self.bad = ("", " ", "a\nb")

    def convert(self, text: str) -> Path | str:
        if not text.strip():
            self.refuse(text, "empty")
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            self.refuse(text, "a control character")
        return Path(text) if self.as_path else text


class ListOf(ValueType):
    """One word of a list flag: its comma-separated values, each converted by ``item``. An empty
    word is an empty list only when ``empty`` says what it means."""

    def __init__(self, item: ValueType, empty: str | None = None, split: Callable[[str], list[str]] | None = None) -> None:
        self.item, self.empty = item, empty
        self.split = split or (lambda text: text.split(","))
        self.expected = f"{item.plural} (several as 5 10 or 5,10)"
        self.plural = item.plural
        bad = [b for b in item.bad if b or empty is None]
        if bad and bad[0]:  # a bad value among good ones
            bad.append(f"{_good_example(item)},{bad[0]}")
        self.bad = tuple(bad)

    def convert(self, text: str) -> list[Any]:
        if not text.strip():
            if self.empty is not None:
                return []
            self.refuse(text)
        words = self.split(text)
        out = []
        for w in words:
            try:
                out.append(self.item.convert(w.strip()))
            except argparse.ArgumentTypeError as exc:
                if len(words) == 1:
                    raise
                message = str(exc).replace(f"expected {self.item.expected}", f"expected {self.item.plural}", 1)
                raise argparse.ArgumentTypeError(message.replace(f"got {w.strip()!r}", f"got {w.strip()!r} in {text!r}",
                                                                 1)) from None
        return out


def _good_example(item: ValueType) -> str:
    if isinstance(item, Integer):
        return str(item.min if item.min is not None else 1)
    if isinstance(item, Real):
        return f"{item.min:g}" if item.min is not None and not item.min_open else "1"
    if isinstance(item, Choice):
        return item.choices[0]
    return "fw"


class ListAction(argparse.Action):
    """A list flag (``nargs="+"``; its type is a :class:`ListOf`): ``--k 5 10``, ``--k 5,10`` and
    ``--k 5 --k 10`` all give [5, 10]. The first use replaces the default, later ones extend."""

    def __init__(self, option_strings, dest, nargs=None, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs="+", **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        items = [v for word in values for v in word]
        current = getattr(namespace, self.dest, None)
        if current is None or current is self.default:
            setattr(namespace, self.dest, items)
        else:
            setattr(namespace, self.dest, [*current, *items])


def add_list(parser: argparse.ArgumentParser, *flags: str, item: ValueType, empty: str | None = None,
             split: Callable[[str], list[str]] | None = None, **kwargs: Any) -> argparse.Action:
    """Add a list flag of ``item`` values (:class:`ListAction`)."""
    kwargs.setdefault("metavar", flags[0].lstrip("-").upper().replace("-", "_"))
    return parser.add_argument(*flags, action=ListAction, type=ListOf(item, empty, split), **kwargs)


def _paths_split(text: str) -> list[str]:
    """Comma-separated paths, unless the whole word names an existing file (a comma in its name)."""
    return [text] if os.path.exists(os.path.expanduser(text)) else text.split(",")


#: What every command's --help ends with.
EPILOG = ("Flags that take several values take them as separate words or comma-separated: --k 5 10, --k 5,10 "
          "and --k 5 --k 10 are the same. Bad input is refused before any work, in one line, with exit code 2.")

#: Counts (sizes, numbers of queries, repeats): integers in [1, COUNT_MAX].
COUNT = Integer(min=1, max=COUNT_MAX)
#: A pool an exact solver certifies (bench exact --n, bench quality --pool): 2 to EXACT_N_MAX.
EXACT_N = Integer(min=2, max=EXACT_N_MAX)
#: Timed repeats per cell: 1 to REPEATS_MAX.
REPEATS = Integer(min=1, max=REPEATS_MAX)
#: WordNet glosses embedded: 1 to CORPUS_MAX (WordNet's synsets).
CORPUS = Integer(min=1, max=CORPUS_MAX)
#: This machine's CPUs: the most threads or local worker processes that do not oversubscribe it.
CPUS = THREADS_MAX
#: Intra-op threads (0: torch's choice): at most this machine's CPUs (``--threads 100000`` crashed torch).
THREADS = Integer(min=0, max=CPUS)
#: A solver's threads: 1 to this machine's CPUs.
SOLVER_THREADS = Integer(min=1, max=CPUS)
#: Seeds: the range every generator takes (numpy, torch, Python).
SEED = Integer(min=0, max=SEED_MAX)
#: The relevance-diversity trade-off theta in [0, 1].
THETA = Real(*THETA_RANGE)
#: Upper end of --n-workers (a Ray cluster may have more CPUs than this machine: the local
#: backend's bound, this machine's CPUs, is a check across flags).
WORKERS_MAX = 1024
#: Worker processes (0: in this process).
WORKERS = Integer(min=0, max=WORKERS_MAX)
#: Seconds of a time limit.
SECONDS = Real(0.0, min_open=True)
#: Selector and method names (checked against the registry by the command).
METHOD = Name("a method name", "method names", bad=("nosuch",))
#: Python modules to import (plugins).
MODULE = Name("a Python module name (a.b.c)", "Python module names", bad=("no.such.divopt_plugin",),
              pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
#: A dataset as NAME or NAME:ARG (checked against the registry by the command).
DATASET = Text("a dataset NAME or NAME:ARG (--help lists the registered ones)",
               bad=("nosuch", "beir:/nonexistent/divopt-missing"))
#: An embedding model: a local folder, the default alias or a name in the local Hugging Face cache.
MODEL = Text("a local sentence-transformers folder or a model in the local Hugging Face cache",
             bad=("/nonexistent/divopt-model",))
#: A NAME=V1,V2 grid axis.
KEY_VALUES = KeyValues()
#: An output folder.
OUTPUT = OutputPath()
#: The engine of an exact solve: "auto" or one of the exact engines.
EXACT_SOLVER = Choice(("auto", *EXACT_SOLVERS))
