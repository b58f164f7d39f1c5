"""Names read back from disk, checked before they choose a path: the one checker.

A run id in ``config.json``, a dataset key in ``meta.json``, a file name in a manifest, a part's
key: each was written by divopt-rag, and each is read back and joined to a folder. As Git does
with the ref names it reads, a name is checked before it is used: a name that would leave its
folder (``x/../../pwn``), is empty, or holds a control character (``"a\\nb"``) is refused with
:class:`UnsafeName` naming the file it came from, and a name that is a hash must be the
hexadecimal digits the writer makes. Every reader of such a name calls :func:`checked_name`.
"""
from __future__ import annotations

import os
import re
import unicodedata
from typing import Any

__all__ = ["UnsafeName", "checked_name", "is_hex_name"]

_HEX = re.compile(r"[0-9a-f]+")
_SEPARATORS = frozenset(filter(None, {"/", "\\", os.sep, os.altsep}))


class UnsafeName(ValueError):
    """A name read from a file that cannot be used as a file name (the message names the file)."""


def _problem(value: Any, hexadecimal: bool, length: int | None) -> str | None:
    if not isinstance(value, str):
        return f"not a string ({type(value).__name__})"
    if not value:
        return "empty"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        return "holds a control character"
    if any(s in value for s in _SEPARATORS):
        return "holds a path separator"
    if value in (".", "..") or value.startswith("."):
        return "starts with a dot"
    if hexadecimal and not _HEX.fullmatch(value):
        return "not lowercase hexadecimal digits (a hash)"
    if length is not None and len(value) != length:
        return f"{len(value)} characters, expected {length}"
    return None


def is_hex_name(value: Any, length: int | None = None) -> bool:
    """Whether ``value`` is a hash name: lowercase hexadecimal digits (``length`` of them when given)."""
    return _problem(value, True, length) is None


def checked_name(value: Any, what: str, source: Any, *, hexadecimal: bool = False, length: int | None = None) -> str:
    """``value``, checked to be usable as one file name inside its folder: a non-empty string,
    no path separator, no control character, no leading dot; with ``hexadecimal``, lowercase
    hex digits (``length`` of them when given). :class:`UnsafeName` naming ``what`` (e.g.
    "run_id"), the value and ``source`` (the file it was read from) otherwise."""
    problem = _problem(value, hexadecimal, length)
    if problem is not None:
        raise UnsafeName(f"{source}: {what} {value!r} cannot name a file ({problem}); it was not written by "
                         f"divopt-rag, or was changed since")
    return value
