"""What a run may take, checked before it starts, and how a refusal names its source.

* **Memory** (:func:`check_memory`, :func:`check_dataset_memory`): a run whose arrays would not fit
  in this machine's available memory (:func:`~divopt_rag.models.memory.available_memory`, the figure
  the exact solvers' refusals use) is refused before anything is allocated; ``DIVOPT_MEMORY_LIMIT``
  lowers the limit (tests, shared machines).
* **Config files** (:func:`config_tree_problem`, :func:`yaml_loader`): bytes, nesting and values
  bounded before a config is used; no YAML aliases, no key given twice.
* **Refusals** (:class:`UsageError`, :func:`naming`): one line naming where the bad value came
  from (a flag, a config entry), what was expected and what was received.

Standard library at import (the command line's flag types read :class:`UsageError` without
loading numpy or torch); what a check needs (the registries, the memory reader) is imported when
it is called.
"""
from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Iterator

__all__ = ["UsageError", "naming", "BASE_BYTES", "check_memory", "check_dataset_memory", "CONFIG_MAX_BYTES",
           "CONFIG_MAX_DEPTH", "CONFIG_MAX_VALUES", "config_tree_problem", "yaml_loader"]


class UsageError(ValueError):
    """Bad command-line input found by a check across flags: ``FLAG: expected X, got Y``
    (a ValueError, so the CLI prints it as one line with exit code 2)."""

    def __init__(self, flag: str, expected: str, got: str, hint: str = "") -> None:
        self.flag = flag
        super().__init__(f"{flag}: expected {expected}, got {got}" + (f" ({hint})" if hint else ""))


@contextlib.contextmanager
def naming(flag: str) -> Iterator[None]:
    """Bad input found inside the block (ValueError, TypeError, ImportError) is reported as a
    ValueError whose message starts with ``flag``: "--methods: unknown method 'x'; expected ..."."""
    try:
        yield
    except (ValueError, TypeError, ImportError) as exc:
        text = str(exc) or type(exc).__name__
        if text.startswith(flag):
            raise
        raise ValueError(f"{flag}: {text}") from None


# =============================================================================================
# Memory
# =============================================================================================
#: What a command holds before any array (interpreter, torch, numpy, pandas): about 345 MB measured.
BASE_BYTES = 400 * 2**20


def check_memory(need: float, what: str, flags: str, instead: str = "") -> None:
    """Refuse (:class:`UsageError` naming ``flags``) a run whose arrays need ``need`` bytes when
    this machine has less available (:func:`~divopt_rag.models.memory.available_memory`, the
    figure the exact solvers' refusals use); nothing is allocated. The environment variable
    ``DIVOPT_MEMORY_LIMIT`` (bytes, or with a K/M/G/T suffix) lowers the limit (tests, shared
    machines)."""
    from divopt_rag.models.memory import available_memory, format_bytes

    avail = available_memory()[0]
    cap = os.environ.get("DIVOPT_MEMORY_LIMIT", "").strip()
    if cap:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", cap, re.IGNORECASE)
        if m:
            limit = float(m[1]) * 1024 ** " KMGT".index(m[2].upper() or " ")
            avail = min(avail, limit)
    if need <= avail:
        return
    raise UsageError(flags, f"a size whose {what} fits in the {format_bytes(avail)} of memory available",
                     f"an estimated {format_bytes(need)}", instead)


def check_dataset_memory(spec: Any, flag: str) -> None:
    """Refuse, before anything is generated or read, a dataset whose registered memory estimate
    (:func:`divopt_rag.data.registry.estimate_memory`) this machine cannot hold (``--dataset-opt
    n=99999999`` ran for minutes into a MemoryError)."""
    from divopt_rag.data import registry

    with naming(flag):
        need = registry.estimate_memory(spec)
        if need is not None:
            parsed = registry.parse_spec(spec)
            name, path = parsed["name"], parsed.get("path")
            check_memory(BASE_BYTES + need, f"dataset {name!r}" + (f" ({path})" if path else ""), flag, "use smaller sizes")


# =============================================================================================
# Config files: bounded before they are used
# =============================================================================================
#: A config file is a few lines: past this size it is refused before it is read.
CONFIG_MAX_BYTES = 4 * 2**20
#: Nesting of a config's mappings and lists (a sweep's deepest is methods -> name -> param -> values).
CONFIG_MAX_DEPTH = 32
#: Values in a config, every list item and mapping entry counted where it is reached.
CONFIG_MAX_VALUES = 100_000


def config_tree_problem(obj: Any) -> str | None:
    """None, or why a parsed config is too large to use: nested deeper than
    :data:`CONFIG_MAX_DEPTH` or holding more than :data:`CONFIG_MAX_VALUES` values. The walk is
    iterative (no RecursionError) and stops at the first excess, so a structure that shares
    itself many times (a YAML alias bomb) costs at most that many steps."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > CONFIG_MAX_VALUES:
            return f"holds more than {CONFIG_MAX_VALUES} values (a sweep config is a few lines)"
        if depth > CONFIG_MAX_DEPTH:
            return f"is nested deeper than {CONFIG_MAX_DEPTH} levels"
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for pair in node.items() for v in pair)
        elif isinstance(node, (list, tuple)):
            stack.extend((v, depth + 1) for v in node)
    return None


def yaml_loader() -> type:
    """PyYAML's safe loader without aliases: ``*name`` refers to an anchored node, and a few
    lines of them expand to billions of values (the "billion laughs"); a sweep config never
    needs one, so it is refused where it appears (a ``yaml.YAMLError`` with its line). A key
    given twice in one mapping is refused the same way (PyYAML keeps the last silently)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} found: aliases are not "
                                                              f"allowed in a config (write the value out)",
                                                  event.start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML's signature
            # a key given twice (two ``grid:``) would silently keep the second: refused at its line
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, Any] = {}
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.setdefault(key, key_node.start_mark)
                    except TypeError:  # an unhashable key: PyYAML's own error follows
                        continue
                    if first is not key_node.start_mark:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r} (first given at line {first.line + 1}): "
                                        f"each key once", key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    return NoAliasLoader
