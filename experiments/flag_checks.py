"""Checks of the command line that need the file system, this machine's memory or the
registries: output paths (:func:`check_output_path`, :func:`safe_name`, :func:`inside`), memory
estimates (:func:`check_memory`), method and dataset names (:func:`check_methods`,
:func:`check_dataset`, :func:`naming`) and the size of a config file (:func:`config_tree_problem`,
:func:`yaml_loader`: bytes, nesting, values, no YAML aliases). Standard library at import; what a check needs (the
registries, the memory reader) is imported when it is called. Every check runs before any work
and refuses in one line naming the flag.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from divopt_rag.experiments.flag_types import UsageError

__all__ = ["check_output_path", "safe_name", "inside", "check_memory", "naming", "check_methods", "check_dataset",
           "check_dataset_memory", "BASE_BYTES", "config_tree_problem", "yaml_loader", "CONFIG_MAX_BYTES", "CONFIG_MAX_DEPTH", "CONFIG_MAX_VALUES"]


# =============================================================================================
# Output paths
# =============================================================================================
def check_output_path(path: str | os.PathLike, kind: str = "dir", name: str = "out") -> Path:
    """Check, before any work, that ``path`` can be written as a folder (``kind="dir"``) or a
    file (``kind="file"``): not a file where a folder is wanted (or the reverse), no file among
    its parents, writable (tried by creating and removing a probe folder in the nearest existing
    one). Leaves nothing behind. ValueError naming ``name`` and the path otherwise."""
    if kind not in ("dir", "file"):
        raise ValueError(f"kind must be 'dir' or 'file', got {kind!r}")
    p = Path(path).expanduser()
    if p.exists():
        if kind == "dir" and not p.is_dir():
            raise ValueError(f"{name} {p}: is a file, expected a folder")
        if kind == "file" and p.is_dir():
            raise ValueError(f"{name} {p}: is a folder, expected a file name")
        target = p
    else:
        target = p.parent if kind == "file" else p
        while not target.exists() and target != target.parent:
            target = target.parent
        if not target.is_dir():
            raise ValueError(f"{name} {p}: {target} is a file, so nothing can be created under it")
    folder = target if target.is_dir() else target.parent
    # os.access answers "yes" to root and on read-only mounts: create (and remove) a probe
    # folder instead, as the run itself would
    try:
        tempfile.TemporaryDirectory(dir=folder, prefix=".divopt-probe-").cleanup()
        if target.is_file():
            with open(target, "ab"):
                pass
    except OSError as exc:
        raise ValueError(f"{name} {p}: {target} is not writable ({exc.strerror or exc})") from exc
    return p


_UNSAFE = re.compile(r"[^A-Za-z0-9_@.+=,-]+")


def safe_name(text: str) -> str:
    """``text`` as one file name: every run of characters other than letters, digits and
    ``_ @ . + = , -`` becomes "_" (path separators included), no leading dot, no "..". A file
    named after a flag's value (a metric, a column) then stays in its folder."""
    name = _UNSAFE.sub("_", str(text)).replace("..", "_").lstrip(".")
    return name or "_"


def inside(folder: str | os.PathLike, name: str) -> Path:
    """``folder / name``, after checking that it stays inside ``folder`` (ValueError otherwise)."""
    base = Path(folder).resolve()
    path = (base / name).resolve()
    if path != base and base not in path.parents:
        raise ValueError(f"output file {name!r} would be written outside its folder {folder}")
    return Path(folder) / name


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


# =============================================================================================
# Checks that need the registries (what they import is imported when they are called)
# =============================================================================================
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


def check_methods(names: Iterable[str], flag: str, selectors: bool = False) -> None:
    """Every name is a method (``selectors``: a fast selector of ``divopt_rag.solvers.METHODS``);
    ValueError naming ``flag`` and the valid names otherwise."""
    from divopt_rag.experiments.methods import check_selectors, resolve_method

    with naming(flag):
        if selectors:
            check_selectors(list(names))
        else:
            for name in names:
                resolve_method(name)


def check_dataset(spec: Any, flag: str) -> None:
    """A dataset spec (NAME, NAME:ARG or a mapping) names a registered dataset, options it
    takes with values of the types its loader's defaults have, and files that exist; ValueError
    naming ``flag`` otherwise. Values within their types (``n_queries=0``) are the loader's to
    check, before it generates or reads anything."""
    import inspect

    from divopt_rag.data import registry

    with naming(flag):
        req = registry._resolve(spec, {})  # the registry's own checks: name, unknown and missing options
        for option in req.entry.paths:
            path = req.options.get(option)
            if path is not None and not os.path.exists(os.path.expanduser(str(path))):
                raise ValueError(f"dataset {req.name!r}: expected an existing file or folder as its {option}, "
                                 f"got {str(path)!r}")
        try:
            params = inspect.signature(req.entry.loader).parameters
        except (TypeError, ValueError):
            return
        for option, value in req.options.items():
            default = params[option].default if option in params else None
            if isinstance(default, bool) and not isinstance(value, bool):
                raise ValueError(f"dataset {req.name!r} option {option}: expected true or false, got {value!r}")
            if isinstance(default, (int, float)) and not isinstance(default, bool) and value is not None and (
                    isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"dataset {req.name!r} option {option}: expected a number, got {value!r}")
            if isinstance(default, int) and not isinstance(default, bool) and isinstance(value, float):
                raise ValueError(f"dataset {req.name!r} option {option}: expected an integer, got {value:g}")
    check_dataset_memory(spec, flag)


def check_dataset_memory(spec: Any, flag: str) -> None:
    """Refuse, before anything is generated or read, a dataset whose registered memory estimate
    (:func:`divopt_rag.data.registry.estimate_memory`) this machine cannot hold (``--dataset-opt
    n=99999999`` ran for minutes into a MemoryError)."""
    from divopt_rag.data import registry

    with naming(flag):
        need = registry.estimate_memory(spec)
        if need is not None:
            name = registry.parse_spec(spec)["name"]
            check_memory(BASE_BYTES + need, f"dataset {name!r}", flag, "use smaller sizes")


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
    needs one, so it is refused where it appears (a ``yaml.YAMLError`` with its line)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} found: aliases are not "
                                                              f"allowed in a config (write the value out)",
                                                  event.start_mark)
            return super().compose_node(parent, index)

    return NoAliasLoader
