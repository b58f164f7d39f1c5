"""The seed papers' published numbers, shipped with divopt as data (``published/*.csv``).

Every row is one number as its authors published it: ``paper``, ``table`` (the paper's table
or figure, or the file of the authors' repository it comes from), ``dataset``, ``setting`` (the
canonical ``k=..,theta=..`` text of :func:`~divopt_rag.experiments.reproduce.spec.setting_label`),
``method``, ``metric``, ``value``, ``qualifier`` (``exact``; ``up_to`` / ``range_low`` /
``range_high`` for a claim the abstract states as a bound or range), ``source`` (where it was
read: arXiv id and version, table, page, or repository file and commit) and ``note``.

``published/missing.csv`` lists the numbers a recipe would compare with but that could not be
read from any stored copy available to divopt (``paper, table, what, reason``): they are left
out rather than guessed.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

import pandas as pd

__all__ = ["published", "missing", "PUBLISHED_COLUMNS", "MISSING_COLUMNS"]

PUBLISHED_COLUMNS = ("paper", "table", "dataset", "setting", "method", "metric", "value", "qualifier", "source", "note")
MISSING_COLUMNS = ("paper", "table", "what", "reason")
_QUALIFIERS = {"exact", "up_to", "range_low", "range_high"}


def _files() -> list:
    folder = resources.files("divopt_rag.experiments.reproduce") / "published"
    return sorted((f for f in folder.iterdir() if f.name.endswith(".csv")), key=lambda f: f.name)


@lru_cache(maxsize=1)
def _load() -> tuple[pd.DataFrame, pd.DataFrame]:
    frames, gaps = [], []
    for f in _files():
        with f.open() as fh:
            df = pd.read_csv(fh, dtype=str, keep_default_na=False)
        want = MISSING_COLUMNS if f.name == "missing.csv" else PUBLISHED_COLUMNS
        if tuple(df.columns) != want:
            raise ValueError(f"published/{f.name}: columns must be {list(want)}, got {list(df.columns)}")
        if f.name == "missing.csv":
            gaps.append(df)
            continue
        for i, (v, q) in enumerate(zip(df["value"], df["qualifier"]), 2):
            try:
                float(v)
            except ValueError:
                raise ValueError(f"published/{f.name}:{i}: field 'value': expected a number, got {v!r}") from None
            if q not in _QUALIFIERS:
                raise ValueError(f"published/{f.name}:{i}: field 'qualifier': expected one of {sorted(_QUALIFIERS)}, got {q!r}")
        frames.append(df.assign(value=df["value"].astype(float)))
    pub = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(PUBLISHED_COLUMNS))
    gap = pd.concat(gaps, ignore_index=True) if gaps else pd.DataFrame(columns=list(MISSING_COLUMNS))
    return pub, gap


def published(paper: str | None = None, table: str | None = None) -> pd.DataFrame:
    """The published numbers (one row each), optionally of one ``paper`` (and ``table``)."""
    df = _load()[0]
    if paper is not None:
        df = df[df["paper"] == paper]
    if table is not None:
        df = df[df["table"] == table]
    return df.reset_index(drop=True)


def missing(paper: str | None = None) -> pd.DataFrame:
    """The numbers known to be missing (not readable from a stored copy), optionally of one paper."""
    df = _load()[1]
    if paper is not None:
        df = df[df["paper"] == paper]
    return df.reset_index(drop=True)
