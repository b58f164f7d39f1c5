"""A normal package (issue 49, item 4): a ``__version__`` read from the installed distribution's
metadata in every subpackage of the namespace, and a PEP 561 ``py.typed`` marker in every
package a wheel ships, as setuptools' own build step lists them."""
import importlib
import importlib.metadata
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SUBPACKAGES = ["divopt_rag.models", "divopt_rag.solvers", "divopt_rag.robust", "divopt_rag.data",
               "divopt_rag.integrations", "divopt_rag.experiments"]


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_every_subpackage_has_the_distributions_version(name):
    """``divopt_rag`` is a namespace with no folder (and so no attributes) of its own: each of its
    subpackages carries ``__version__``, the installed metadata's, which is pyproject.toml's."""
    module = importlib.import_module(name)
    assert module.__version__ == importlib.metadata.version("divopt-rag") == PROJECT["project"]["version"]


def test_every_package_a_wheel_ships_carries_py_typed():
    # setuptools' build_py is what a wheel is made of: its data_files list what each package ships
    code = ("import json; from setuptools.dist import Distribution\n"
            "d = Distribution({'script_name': 'setup.py'}); d.parse_config_files()\n"
            "cmd = d.get_command_obj('build_py'); cmd.ensure_finalized()\n"
            "print(json.dumps({pkg: files for pkg, _, _, files in cmd.data_files}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    shipped = json.loads(out.stdout.splitlines()[-1])
    assert set(shipped) == set(PROJECT["tool"]["setuptools"]["packages"])
    missing = sorted(pkg for pkg, files in shipped.items() if "py.typed" not in files)
    assert not missing, f"packages without a py.typed marker: {missing}"
