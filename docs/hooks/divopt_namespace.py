"""mkdocs hook: let griffe (mkdocstrings' Python collector) find the ``divopt_rag`` namespace.

divopt's top-level folders are installed as ``divopt_rag.<folder>`` through setuptools'
``package-dir`` mapping (``models/`` -> ``divopt_rag.models``); there is no ``divopt_rag/`` folder on
disk, so griffe's static finder cannot see the package. This hook builds a temporary
``divopt_rag/`` folder of symlinks (copies where symlinks are not allowed) and puts it first on
the search path, so ``::: divopt_rag.models`` works without importing anything. The folders
come from pyproject.toml's mapping when mkdocs.yml sits in the repository (new subpackages
appear as soon as pyproject maps them); from a copy of ``docs/`` and ``mkdocs.yml`` alone, from
the installed divopt-rag (where each subpackage that the API pages name lies); with neither, the
build stops with one line that says what is missing.
"""
from __future__ import annotations

import re
import shutil
import sys
import tempfile
import tomllib
from importlib.util import find_spec
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

_TMP: list[Path] = []


def _mapping(root: Path, docs_dir: Path) -> dict[str, Path]:
    """``divopt_rag.<name>`` -> its folder: the repository's mapping, or the installed packages'."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        tool = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]
        return {name: root / folder for name, folder in tool["package-dir"].items() if name.startswith("divopt_rag.")}
    named = sorted({m.group(1) for page in docs_dir.rglob("*.md")
                    for m in re.finditer(r"^:::\s*(divopt_rag\.\w+)", page.read_text(encoding="utf-8"), re.M)})
    found, missing = {}, []
    for name in named:
        try:
            spec = find_spec(name)
        except ImportError:
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if locations:
            found[name] = Path(locations[0])
        else:
            missing.append(name)
    if missing or not found:
        raise PluginError(
            f"the API pages need divopt-rag's sources: no pyproject.toml beside {root / 'mkdocs.yml'} and "
            f"{', '.join(missing) or 'divopt_rag'} not installed; build from the repository root or pip install divopt-rag"
        )
    return found


@event_priority(100)  # before mkdocstrings' on_config, which creates the Python handler
def on_config(config):
    root = Path(config.config_file_path).resolve().parent
    mapping = _mapping(root, Path(config.docs_dir))
    tmp = Path(tempfile.mkdtemp(prefix="divopt-docs-"))
    _TMP.append(tmp)
    pkg = tmp / "divopt_rag"
    pkg.mkdir()
    for name, folder in mapping.items():
        target = pkg / name.split(".", 1)[1]
        try:
            target.symlink_to(folder, target_is_directory=True)
        except OSError:
            shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    sys.path.insert(0, str(tmp))
    handler = config.plugins["mkdocstrings"].config["handlers"].setdefault("python", {})
    handler["paths"] = [str(tmp), *handler.get("paths", [])]
    return config


def on_shutdown():
    while _TMP:
        tmp = _TMP.pop()
        if str(tmp) in sys.path:
            sys.path.remove(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)
