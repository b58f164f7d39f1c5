"""griffe extension (loaded by mkdocstrings, see mkdocs.yml): divopt's docstrings, read as numpy style.

divopt writes numpy-style docstrings in a compact dialect that reads well in a terminal
(``help()``) but that griffe's numpy parser would mis-read. Before the docstrings are parsed,
this extension rewrites their text, leaving the source untouched:

* Sphinx roles (``:func:`select```, ``:class:`~divopt_rag.models.Instance```, ``:mod:``,
  ``:meth:``, ``:data:``, ``:attr:``, ``:exc:``, ``:obj:``) become cross-references: the name is
  resolved in the docstring's own scope (so imported and relative names work) and linked
  through mkdocs-autorefs; a name that is not part of the documented API (another library's,
  a private helper's) stays as code, without a link and without a warning.
* Items of ``Parameters``/``Attributes`` sections written ``name : what it is`` (the
  description after the colon, as divopt writes them) become ``name`` + indented description,
  so the description lands in the description column and the type comes from the signature.
* ``Returns``/``Raises`` sections written as prose (not ``Type`` + indented description) get
  that shape: a Raises section's leading exception names become its type, a Returns section
  takes the function's return annotation.
* Other underlined titles in module docstrings (``Retriever\\n---------``) become bold
  paragraph titles instead of headings that would compete with the API headings.
"""
from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?P<role>func|class|mod|meth|data|attr|exc|obj):`(?P<target>[^`]+)`")
ITEM_SECTIONS = {"Parameters", "Other Parameters", "Attributes"}
PROSE_SECTIONS = {"Returns", "Raises", "Yields", "Warns"}
KEPT_SECTIONS = {"Notes", "Examples", "References", "See Also", "Methods", "Warnings", "Receives"}
UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
# "name : description" and "name: description" (several names: "min_val, max_val : ...")
ITEM = re.compile(r"^(?P<indent>\s*)(?P<names>\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s?:\s+(?P<rest>\S.*)$")


def _resolve(obj: griffe.Object, target: str) -> str | None:
    """The full path of ``target`` seen from ``obj``'s scope, or None outside divopt_rag."""
    if target.startswith("divopt_rag."):
        return target
    head, _, tail = target.partition(".")
    for scope in (obj, *_parents(obj)):
        try:
            path = scope.resolve(head)
        except Exception:  # griffe's NameResolutionError, or a scope that cannot resolve
            continue
        full = f"{path}.{tail}" if tail else path
        return full if full.startswith("divopt_rag.") else None
    return None


def _parents(obj: griffe.Object):
    while obj.parent is not None:
        obj = obj.parent
        yield obj


def convert_roles(obj: griffe.Object, text: str) -> str:
    def link(match: re.Match) -> str:
        target = match["target"].strip()
        short = target.startswith("~")
        target = target.lstrip("~")
        shown = target.rsplit(".", 1)[-1] if short else target
        title = f"<code>{html.escape(shown)}</code>"
        full = _resolve(obj, target)
        if full is None:
            return title
        return f'<autoref identifier="{html.escape(full)}" optional>{title}</autoref>'

    return ROLE.sub(link, text)


def _looks_like_type(text: str) -> bool:
    """``int``, ``float, optional``, ``list[str]``: a numpy-style type, not a description."""
    return bool(re.fullmatch(r"[\w.\[\]]+(\s*\|\s*[\w.\[\]]+)*(,\s*optional)?", text.strip())) and not text.strip().endswith(".")


EXCEPTIONS = re.compile(r"^(?P<types>[A-Z]\w*(?:Error|Exception|Warning)(?:\s*(?:/|,|or)\s*[A-Z]\w*(?:Error|Exception|Warning))*)[\s:]+(?P<rest>.*)$")


def _prose_section(obj: griffe.Object | None, title: str, prose: str) -> list[str]:
    """A prose Returns/Raises section in numpy shape: ``Type`` + indented description."""
    if title in ("Raises", "Warns") and (m := EXCEPTIONS.match(prose)):
        kind, prose = m["types"], m["rest"]
        kind = re.sub(r"\s*(?:/|,|\bor\b)\s*", " | ", kind)
    else:
        returns = getattr(obj, "returns", None) if obj is not None else None
        kind = str(returns) if returns else ("Exception" if title in ("Raises", "Warns") else "Any")
    return [title, "-" * len(title), kind, f"    {prose[:1].upper()}{prose[1:]}", ""]


def convert_sections(text: str, obj: griffe.Object | None = None) -> str:
    lines = text.split("\n")
    out: list[str] = []
    section: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and UNDERLINE.match(lines[i + 1]) \
                and len(lines[i + 1].strip()) >= len(line.strip()) - 2:
            title = line.strip()
            i += 2
            if title in ITEM_SECTIONS or title in KEPT_SECTIONS:
                section = title
                out += [line, lines[i - 1]]
            elif title in PROSE_SECTIONS:
                body = []
                while i < len(lines) and not (i + 1 < len(lines) and lines[i].strip() and UNDERLINE.match(lines[i + 1])):
                    body.append(lines[i])
                    i += 1
                first = body[0].strip() if body else ""
                shaped = len(body) > 1 and _looks_like_type(first.split(" : ")[-1]) and body[1].startswith((" ", "\t"))
                if shaped:  # already "Type\n    description": griffe reads it
                    out += [line, lines[i - len(body) - 1], *body]
                else:
                    out += _prose_section(obj, title, " ".join(b.strip() for b in body if b.strip()))
                section = None
            else:
                out += [f"**{title}**", ""]
                section = None
            continue
        if section in ITEM_SECTIONS:
            m = ITEM.match(line)
            if m and not line.startswith((" ", "\t")) and not _looks_like_type(m["rest"]):
                out += [f"{m['indent']}{m['names']}", f"{m['indent']}    {m['rest']}"]
                i += 1
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DivoptDocstrings(griffe.Extension):
    """Rewrite each docstring of the loaded package (see module doc)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg, seen=set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = convert_roles(obj, convert_sections(obj.docstring.value, obj))
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, seen)
