"""mkdocs hook: let griffe (mkdocstrings' Python collector) find the ``divopt_rag`` namespace.

divopt's top-level folders are installed as ``divopt_rag.<folder>`` through setuptools'
``package-dir`` mapping (``models/`` -> ``divopt_rag.models``); there is no ``divopt_rag/`` folder on
disk, so griffe's static finder cannot see the package. This hook reads the mapping from
pyproject.toml, builds a temporary ``divopt_rag/`` folder of symlinks (copies where symlinks are not
allowed) and puts it first on the search path, so ``::: divopt_rag.models`` works from a clean
checkout without importing anything. New subpackages appear as soon as pyproject maps them.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

from mkdocs.plugins import event_priority

_TMP: list[Path] = []


def _mapping(root: Path) -> dict[str, Path]:
    tool = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return {name: root / folder for name, folder in tool["package-dir"].items() if name.startswith("divopt_rag.")}


@event_priority(100)  # before mkdocstrings' on_config, which creates the Python handler
def on_config(config):
    root = Path(config.config_file_path).resolve().parent
    tmp = Path(tempfile.mkdtemp(prefix="divopt-docs-"))
    _TMP.append(tmp)
    pkg = tmp / "divopt_rag"
    pkg.mkdir()
    for name, folder in _mapping(root).items():
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
