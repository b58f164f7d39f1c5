"""Debian dictd corpora (``dict-gcide``, ``dict-jargon``, ...): headwords and their definitions.

A dictd database is two files (dictfmt(1)): ``NAME.index``, one line per headword,
``headword<TAB>offset<TAB>length`` with offset and length in dictd's base64 (digits
``A-Za-z0-9+/``, most significant first), and ``NAME.dict.dz``, the definitions in dictzip form,
which is a gzip file (read whole here: gcide is ~40 MB of text). Headwords ``00-database-*``
(and ``00database*``) hold the database's own information (url, short name, licence) and are
not entries. Several headwords can point at the same definition (an alias); each definition is
returned once, under its first headword.
"""
from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DICTD_DIR", "DictEntry", "decode_b64", "read_dictd_index", "load_dictd", "dictd_info"]

#: Where Debian's dict-* packages install their databases.
DICTD_DIR = Path("/usr/share/dictd")
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_VALUE = {ch: i for i, ch in enumerate(_B64)}
_META = re.compile(r"^00-?(database|[a-z]+-)", re.IGNORECASE)


@dataclass(frozen=True)
class DictEntry:
    """One definition: its first headword, its text (whitespace folded) and where it lies in the
    uncompressed .dict file (``offset``, ``length`` in bytes)."""

    headword: str
    text: str
    offset: int
    length: int


def decode_b64(word: str) -> int:
    """dictd's base64 number (``"BgB"`` -> 6145); ValueError naming the bad character."""
    value = 0
    for ch in word:
        if ch not in _B64_VALUE:
            raise ValueError(f"dictd index: expected base64 digits A-Za-z0-9+/, got {word!r}")
        value = value * 64 + _B64_VALUE[ch]
    return value


def _paths(name: str | os.PathLike, dictd_dir: str | os.PathLike | None) -> tuple[Path, Path]:
    base = Path(name)
    if base.parent == Path(".") and not str(name).startswith("."):
        base = Path(DICTD_DIR if dictd_dir is None else dictd_dir) / base
    index, data = base.with_name(base.name + ".index"), base.with_name(base.name + ".dict.dz")
    if not data.exists() and base.with_name(base.name + ".dict").exists():
        data = base.with_name(base.name + ".dict")
    for p in (index, data):
        if not p.exists():
            raise FileNotFoundError(2, f"dictd database {str(name)!r} not found (install dict-{base.name}?)", str(p))
    return index, data


def read_dictd_index(path: str | os.PathLike) -> list[tuple[str, int, int]]:
    """The (headword, offset, length) rows of a .index file, in file order; a malformed line is a
    ValueError naming the file and line."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                raise ValueError(f"{path}:{lineno}: expected headword<TAB>offset<TAB>length, got {line.strip()!r}")
            try:
                rows.append((parts[0], decode_b64(parts[1]), decode_b64(parts[2])))
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: {exc}") from None
    return rows


def _read_data(path: Path) -> bytes:
    if path.suffix == ".dz":
        with gzip.open(path, "rb") as fh:
            return fh.read()
    return path.read_bytes()


def _fold(raw: bytes, headword: str) -> str:
    text = " ".join(raw.decode("utf-8", errors="replace").split())
    # most databases repeat the headword as the definition's first line
    if text.lower().startswith(headword.lower()):
        text = text[len(headword):].lstrip(" :,")
    return text


def load_dictd(name: str | os.PathLike = "gcide", *, dictd_dir: str | os.PathLike | None = None,
               min_chars: int = 1, max_chars: int | None = None) -> list[DictEntry]:
    """Every definition of the dictd database ``name`` (``"gcide"``, ``"jargon"``, or a path
    without the suffixes), in index order, once each; texts shorter than ``min_chars`` are
    dropped, longer than ``max_chars`` cut there."""
    index, data = _paths(name, dictd_dir)
    raw = _read_data(data)
    seen: set[tuple[int, int]] = set()
    out = []
    for head, off, length in read_dictd_index(index):
        if _META.match(head) or (off, length) in seen:
            continue
        if off + length > len(raw):
            raise ValueError(f"{index}: entry {head!r} points past the end of {data} ({off}+{length} > {len(raw)})")
        seen.add((off, length))
        text = _fold(raw[off:off + length], head)
        if len(text) < min_chars:
            continue
        out.append(DictEntry(head, text if max_chars is None else text[:max_chars], off, length))
    return out


def dictd_info(name: str | os.PathLike = "gcide", *, dictd_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """The database's own ``00-database-*`` entries (``{"url": ..., "short": ..., "info": ...}``)."""
    index, data = _paths(name, dictd_dir)
    raw = _read_data(data)
    info = {}
    for head, off, length in read_dictd_index(index):
        if _META.match(head):
            key = re.sub(r"^00-?(database|[a-z]+)-?", "", head, flags=re.IGNORECASE) or "database"
            info[key] = _fold(raw[off:off + length], head)
    return info
