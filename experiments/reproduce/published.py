"""The seed papers' published numbers, shipped with divopt as data (``published/*.csv``, one file
per paper).

Every row is one number as its authors printed it: ``paper``, ``table`` (the paper's table or
section), ``dataset``, ``setting`` (the canonical ``k=..,theta=..`` text of
:func:`~divopt_rag.experiments.reproduce.spec.setting_label`), ``method``, ``metric``, ``value``
(in the unit the paper prints: DF-RAG's F1 and Dartboard's QA accuracy in percent, the rest as
fractions or milliseconds), ``qualifier`` (``exact``; ``up_to`` / ``range_low`` / ``range_high``
for a bound or a range the text states; ``approx`` for "approximately" / "~"), ``row`` and
``column`` (the cell's row and column labels as the paper prints them), ``source`` (paper, arXiv
id, section and table) and ``note``. (table, dataset, setting, method, metric) is the key a
recipe's table joins on; it is unique.

``published/missing.csv`` lists what a recipe would compare with but the paper shows only as a
figure without numbers (``paper, table, what, reason``).
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

import pandas as pd

__all__ = ["published", "missing", "PUBLISHED_COLUMNS", "MISSING_COLUMNS", "KEY_COLUMNS", "CITATION_COLUMNS", "QUALIFIERS",
           "read_folder"]

PUBLISHED_COLUMNS = ("paper", "table", "dataset", "setting", "method", "metric", "value", "qualifier", "row", "column",
                     "source", "note")
#: The columns that make a published number's key (what a recipe's table joins on).
KEY_COLUMNS = ("table", "dataset", "setting", "method", "metric")
#: Columns every published row must fill: where the number is printed.
CITATION_COLUMNS = ("paper", "table", "row", "column", "source")
MISSING_COLUMNS = ("paper", "table", "what", "reason")
QUALIFIERS = ("exact", "up_to", "range_low", "range_high", "approx")


def _files(folder=None) -> list:
    folder = resources.files("divopt_rag.experiments.reproduce") / "published" if folder is None else folder
    return sorted((f for f in folder.iterdir() if f.name.endswith(".csv")), key=lambda f: f.name)


def read_folder(folder=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(published numbers, missing figures) of every CSV in ``folder`` (default: divopt's own);
    a malformed file raises ValueError naming the file, the line and the field."""
    frames, gaps = [], []
    for f in _files(folder):
        with f.open() as fh:
            df = pd.read_csv(fh, dtype=str, keep_default_na=False)
        want = MISSING_COLUMNS if f.name == "missing.csv" else PUBLISHED_COLUMNS
        if tuple(df.columns) != want:
            raise ValueError(f"published/{f.name}: columns must be {list(want)}, got {list(df.columns)}")
        if f.name == "missing.csv":
            gaps.append(df)
            continue
        seen: dict[tuple, int] = {}
        for i, row in enumerate(df.itertuples(index=False), 2):
            rec = row._asdict()
            try:
                float(rec["value"])
            except ValueError:
                raise ValueError(f"published/{f.name}:{i}: field 'value': expected a number, got {rec['value']!r}") from None
            if rec["qualifier"] not in QUALIFIERS:
                raise ValueError(f"published/{f.name}:{i}: field 'qualifier': expected one of {list(QUALIFIERS)}, "
                                 f"got {rec['qualifier']!r}")
            for c in CITATION_COLUMNS:
                if not str(rec[c]).strip():
                    raise ValueError(f"published/{f.name}:{i}: field {c!r}: expected the paper's label, got an empty cell")
            key = tuple(rec[c] for c in KEY_COLUMNS)
            if key in seen:
                raise ValueError(f"published/{f.name}:{i}: key {dict(zip(KEY_COLUMNS, key))} repeats line {seen[key]}")
            seen[key] = i
        frames.append(df.assign(value=df["value"].astype(float)))
    pub = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(PUBLISHED_COLUMNS))
    gap = pd.concat(gaps, ignore_index=True) if gaps else pd.DataFrame(columns=list(MISSING_COLUMNS))
    return pub, gap


@lru_cache(maxsize=1)
def _load() -> tuple[pd.DataFrame, pd.DataFrame]:
    return read_folder()


def published(paper: str | None = None, table: str | None = None) -> pd.DataFrame:
    """The published numbers (one row each), optionally of one ``paper`` (and ``table``)."""
    df = _load()[0]
    if paper is not None:
        df = df[df["paper"] == paper]
    if table is not None:
        df = df[df["table"] == table]
    return df.reset_index(drop=True)


def missing(paper: str | None = None) -> pd.DataFrame:
    """What a paper shows only as a figure without numbers, optionally of one paper."""
    df = _load()[1]
    if paper is not None:
        df = df[df["paper"] == paper]
    return df.reset_index(drop=True)
