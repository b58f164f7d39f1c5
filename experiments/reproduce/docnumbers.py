"""Numbers in the docs, written from the recorded runs: a doc states a measured number only inside
a marker that names where it is recorded, and :func:`fill` writes it from there.

A marker is an HTML comment pair around the number (invisible on the rendered page)::

    <!--num file=vrsd-tables-wordnet.csv table="Table 1" method=vrsd metric=sim_mean fmt=.3f-->0.820<!--/num-->

Attributes (``shlex`` words ``key=value``):

* ``file``: a CSV under the results folder (``benchmarks/results/reproduce``);
* ``column``: the column read (default ``value``), or an expression of numeric columns
  (``"mmr_seconds / fw_seconds"``, pandas ``eval``);
* every other key but ``fmt``, ``scale``, ``agg``: a filter, ``column == value`` (compared as text,
  so ``k=6`` matches 6 and 6.0 alike; ``theta=0.7|0.9`` matches either, ``setting="k=18,*"`` is a
  shell-style pattern; ``key=*`` lifts a default filter);
* ``agg``: ``min``, ``max``, ``mean``, ``median``, ``first`` over the rows that match (default:
  exactly one row must match, else an error naming the marker);
* ``scale``: a factor applied first (100 for a percentage); ``fmt``: a format spec (default ``.4g``;
  ``,.0f`` for thousands separators; ``s`` for text such as a run id);
* ``over``: a ratio, this value over the value selected with the filters changed as ``over`` says
  (``over="method=fw"``: MMR's time over FW's in the same setting).

``<!--numdefaults key=value ...-->`` sets attributes for the markers after it (until the next
one); a marker's own attributes win.

``python -m divopt_rag.experiments.reproduce.docnumbers DOC RESULTS`` writes the numbers into DOC;
with ``--check`` it only lists the numbers that differ from their runs (exit code 1).
tests/experiments/reproduce/test_reproduce_docs.py fails when a number of docs/howto/reproduce.md differs from its run.
"""
from __future__ import annotations

import fnmatch
import math
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from divopt_rag.experiments.cli.scripts import docnumbers_parser
from divopt_rag.experiments.engine.store import write_text

__all__ = ["MARKER", "DEFAULTS", "Marker", "markers", "value_of", "fill", "differences", "main"]

MARKER = re.compile(r"<!--num (?P<attrs>[^>]*?)-->(?P<written>.*?)<!--/num-->", re.DOTALL)
DEFAULTS = re.compile(r"<!--numdefaults (?P<attrs>[^>]*?)-->")
_OPTIONS = ("file", "column", "fmt", "scale", "agg", "over")
_AGG = {"min": min, "max": max, "mean": lambda v: sum(v) / len(v), "first": lambda v: v[0],
        "median": lambda v: float(pd.Series(v).median())}


@dataclass(frozen=True)
class Marker:
    """One number of a doc: its attributes, the text written, and where it is (line)."""

    attrs: dict
    written: str
    line: int
    span: tuple[int, int]

    def describe(self) -> str:
        return f"line {self.line}: <!--num {' '.join(f'{k}={v!r}' for k, v in self.attrs.items())}-->"


def markers(text: str) -> list[Marker]:
    """Every marker of ``text``, in order; ValueError naming the line of a malformed one."""
    defaults = [(m.start(), _attrs(text, m)) for m in DEFAULTS.finditer(text)]
    out = []
    for m in MARKER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = [a for pos, a in defaults if pos < m.start()]
        attrs = {**(before[-1] if before else {}), **_attrs(text, m)}
        if "file" not in attrs:
            raise ValueError(f"line {line}: a number marker needs file=...: {m.group(0)[:120]!r}")
        out.append(Marker(attrs=attrs, written=m.group("written"), line=line, span=m.span()))
    return out


def _attrs(text: str, m: re.Match) -> dict:
    try:
        return dict(w.split("=", 1) for w in shlex.split(m.group("attrs")))
    except ValueError as exc:
        line = text.count("\n", 0, m.start()) + 1
        raise ValueError(f"line {line}: malformed number marker ({exc}): {m.group(0)[:120]!r}") from None


def value_of(marker: Marker, table: Callable[[str], pd.DataFrame]) -> str:
    """The text of ``marker``'s number, read from ``table(file)`` (a CSV of the results folder)."""
    a = marker.attrs
    if "over" in a:
        try:
            changed = dict(w.split("=", 1) for w in shlex.split(a["over"]))
        except ValueError as exc:
            raise ValueError(f"{marker.describe()}: over must be key=value words ({exc})") from None
        plain = {k: v for k, v in a.items() if k not in ("over", "fmt", "scale")}
        num = value_of(Marker({**plain, "fmt": "r"}, marker.written, marker.line, marker.span), table)
        den = value_of(Marker({**plain, **changed, "fmt": "r"}, marker.written, marker.line, marker.span), table)
        return format(float(num) / float(den) * float(a.get("scale", 1)), a.get("fmt", ".4g"))
    df = table(a["file"])
    column = a.get("column", "value")
    sel = df
    for key, want in a.items():
        if key in _OPTIONS or want == "*":  # "*": no filter (lifts a default's)
            continue
        if key not in sel.columns:
            raise ValueError(f"{marker.describe()}: {a['file']} has no column {key!r}")
        wants = [_text(w) for w in want.split("|")]
        sel = sel[sel[key].map(lambda v: any(fnmatch.fnmatchcase(_text(v), w) for w in wants))]
    if column in sel.columns:
        vals = sel[column].tolist()
    else:
        try:
            vals = sel.apply(pd.to_numeric, errors="coerce").eval(column).tolist() if len(sel) else []
        except Exception as exc:  # pandas raises many kinds for a bad expression
            raise ValueError(f"{marker.describe()}: {a['file']}: column {column!r} is neither a column nor an "
                             f"expression of its columns ({exc})") from None
    agg = a.get("agg")
    if agg is None and len(vals) != 1:
        raise ValueError(f"{marker.describe()}: {len(vals)} rows of {a['file']} match (one needed, or agg=...)")
    if not vals:
        raise ValueError(f"{marker.describe()}: no row of {a['file']} matches")
    if agg is not None and agg not in _AGG:
        raise ValueError(f"{marker.describe()}: agg must be one of {sorted(_AGG)}, got {agg!r}")
    fmt = a.get("fmt", ".4g")
    if fmt == "s":
        return str(vals[0])
    x = _AGG[agg or "first"]([float(v) for v in vals]) * float(a.get("scale", 1))
    if fmt == "r":  # full precision, for a ratio's parts
        return repr(x)
    return format(x, fmt) if not math.isnan(x) else "nan"


def _text(v) -> str:
    """A cell or a wanted value as text: numbers in %g (6 and 6.0 alike), the rest as written."""
    if isinstance(v, float) and v.is_integer():
        return f"{v:g}"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return f"{f:g}" if re.fullmatch(r"-?\d+(\.\d+)?", str(v).strip()) else str(v)


def _reader(results: Path) -> Callable[[str], pd.DataFrame]:
    cache: dict[str, pd.DataFrame] = {}

    def table(name: str) -> pd.DataFrame:
        if name not in cache:
            path = Path(results) / name
            if not path.is_file():
                raise ValueError(f"no recorded run {name!r} under {results}")
            cache[name] = pd.read_csv(path, dtype=str, keep_default_na=False)
        return cache[name]

    return table


def fill(text: str, results: Path | Callable[[str], pd.DataFrame]) -> str:
    """``text`` with every marker's number written from its run."""
    table = results if callable(results) else _reader(results)
    found = iter(markers(text))

    def write(m: re.Match) -> str:
        return f"<!--num {m.group('attrs')}-->{value_of(next(found), table)}<!--/num-->"

    return MARKER.sub(write, text)


def differences(text: str, results: Path | Callable[[str], pd.DataFrame]) -> list[str]:
    """One line per marker whose written number is not its run's."""
    table = results if callable(results) else _reader(results)
    return [f"{m.describe()} writes {m.written!r}, the run says {v!r}" for m in markers(text)
            if (v := value_of(m, table)) != m.written]


def main(argv: list[str] | None = None) -> int:
    args = docnumbers_parser().parse_args(argv)
    text = args.doc.read_text(encoding="utf-8")
    try:
        diff = differences(text, args.results)
        if args.check:
            for d in diff:
                print(f"{args.doc}: {d}")
            return 1 if diff else 0
        write_text(fill(text, args.results), args.doc)
    except ValueError as exc:
        print(f"{args.doc}: {exc}", file=sys.stderr)
        return 2
    print(f"{args.doc}: {len(markers(text))} numbers, {len(diff)} rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
