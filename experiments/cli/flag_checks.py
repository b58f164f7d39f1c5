"""Checks of the command line that need the file system or the registries: output paths
(:func:`check_output_path`), method and dataset names (:func:`check_methods`,
:func:`check_dataset`). Standard library at import; what a check needs (the registries) is
imported when it is called. Every check runs before any work and refuses in one line naming the
flag (:func:`divopt_rag.experiments.engine.limits.naming`); the memory and config-size limits are
:mod:`divopt_rag.experiments.engine.limits`.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from divopt_rag.experiments.engine.limits import check_dataset_memory, naming

__all__ = ["check_output_path", "check_methods", "check_dataset"]


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


# =============================================================================================
# Checks that need the registries (what they import is imported when they are called)
# =============================================================================================
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
