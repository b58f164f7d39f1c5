"""Reading JSON documents record by record with the line each record starts on.

``json.load`` forgets where a value came from, so a malformed record in a 30 MB JSON file
(ASQA, SciQ) could only be reported as "somewhere in the file". These readers walk the top
level of a JSON array or object with :meth:`json.JSONDecoder.raw_decode`, decoding one
record at a time and keeping its start offset, so loaders can raise
:class:`~divopt_rag.data.dataset.DataFormatError` with file, line and field.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

from .dataset import DataFormatError

__all__ = ["read_text", "iter_array", "iter_object", "line_of"]

_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


def read_text(path: Path) -> str:
    """The file's UTF-8 text (gunzipped for ``.gz``); DataFormatError naming it if it is not."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, None, None, f"not UTF-8 text ({exc.reason})") from None
    except (gzip.BadGzipFile, EOFError) as exc:
        raise DataFormatError(path, None, None, f"not a readable gzip file ({exc})") from None


def line_of(text: str, pos: int) -> int:
    """1-based line number of character offset ``pos``."""
    return text.count("\n", 0, pos) + 1


class _Lines:
    """Line numbers of increasing offsets in O(total length), not O(offset) per call."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.pos:
            return line_of(self.text, pos)
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _fail(path: Path, text: str, pos: int, problem: str) -> DataFormatError:
    return DataFormatError(path, line_of(text, min(pos, len(text))), None, problem)


def _decode(path: Path, text: str, pos: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, exc.lineno, None, f"invalid JSON ({exc.msg} at column {exc.colno})") from None


def iter_array(path: Path, text: str, pos: int = 0) -> Iterator[tuple[int, Any]]:
    """(line, value) of each element of the JSON array starting at ``pos``."""
    pos = _skip(text, pos)
    if pos >= len(text) or text[pos] != "[":
        raise _fail(path, text, pos, "expected a JSON array")
    pos = _skip(text, pos + 1)
    if pos < len(text) and text[pos] == "]":
        return
    lines = _Lines(text)
    while True:
        start = _skip(text, pos)
        value, pos = _decode(path, text, start)
        yield lines(start), value
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "]":
            return
        raise _fail(path, text, pos, "expected ',' or ']' in a JSON array")


def iter_object(path: Path, text: str, pos: int = 0) -> Iterator[tuple[str, int, int, Any]]:
    """(key, line, start offset, decoded value) of each member of the JSON object at ``pos``;
    pass the start offset back in to walk a nested object record by record."""
    pos = _skip(text, pos)
    if pos >= len(text) or text[pos] != "{":
        raise _fail(path, text, pos, "expected a JSON object")
    pos = _skip(text, pos + 1)
    if pos < len(text) and text[pos] == "}":
        return
    lines = _Lines(text)
    while True:
        key, pos = _decode(path, text, _skip(text, pos))
        if not isinstance(key, str):
            raise _fail(path, text, pos, "expected a string key in a JSON object")
        pos = _skip(text, pos)
        if pos >= len(text) or text[pos] != ":":
            raise _fail(path, text, pos, "expected ':' after a key")
        start = _skip(text, pos + 1)
        value, pos = _decode(path, text, start)
        yield key, lines(start), start, value
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "}":
            return
        raise _fail(path, text, pos, "expected ',' or '}' in a JSON object")
