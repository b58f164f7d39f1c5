"""divopt-rag installs beside PyPI's unrelated ``divopt`` (issue 34, item 1).

PyPI's ``divopt`` (0.0.0-0.0.3, "optimization tools based on domain division") ships a regular
``divopt/__init__.py``. This project's distribution is ``divopt-rag`` and its import namespace
``divopt_rag``, so neither shadows the other. The test builds a wheel of the same shape as that
package's (a top-level ``divopt`` package and its dist-info), installs it offline into a folder
that is put first on the path, and imports and runs divopt_rag beside it.
"""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _fake_divopt_wheel(folder: Path) -> Path:
    files = {
        "divopt/__init__.py": b"FOREIGN = 'optimization tools based on domain division'\n",
        "divopt/test.py": b"",
        "divopt-0.0.3.dist-info/METADATA": b"Metadata-Version: 2.1\nName: divopt\nVersion: 0.0.3\n",
        "divopt-0.0.3.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: fake\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "divopt-0.0.3.dist-info/top_level.txt": b"divopt\n",
    }
    record = "\n".join([*(_record_line(n, d) for n, d in files.items()), "divopt-0.0.3.dist-info/RECORD,,", ""])
    wheel = folder / "divopt-0.0.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("divopt-0.0.3.dist-info/RECORD", record)
    return wheel


def test_names_do_not_collide_with_pypi_divopt():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["name"] == "divopt-rag"
    assert set(project["project"]["scripts"]) == {"divopt-rag"}
    packages = project["tool"]["setuptools"]["packages"]
    # the Haystack component also lives where Haystack's integrations live (the namespace its
    # pipeline loader trusts), in a folder of its own under that shared namespace
    ours = [p for p in packages if not p.startswith("divopt_rag.")]
    assert packages and ours == ["haystack_integrations.components.rankers.divopt"], packages


def test_imports_and_cli_work_beside_the_foreign_divopt_wheel(tmp_path):
    wheel = _fake_divopt_wheel(tmp_path)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                    "--disable-pip-version-check", "--target", str(target), str(wheel)], check=True)
    assert (target / "divopt" / "__init__.py").is_file()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p)}
    code = ("import divopt, divopt_rag.models, divopt_rag.solvers, divopt_rag.experiments.cli.main as cli; "
            "from divopt_rag.models import Instance; from divopt_rag.solvers import select; import numpy as np; "
            "E = np.random.default_rng(0).standard_normal((6, 4)); "
            "inst = Instance(E, np.ones(4), k=2, theta=.5, normalize=True); "
            "print(divopt.FOREIGN); print(len(set(select(inst, 'mmr').indices.tolist()))); "
            "print(divopt_rag.models.__file__)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    foreign, picks, models_file = out.strip().splitlines()
    assert foreign == "optimization tools based on domain division"
    assert picks == "2"
    models = Path(models_file).resolve()
    assert models.parent.name == "models" and target not in models.parents, models  # this project's folder
    version = subprocess.run([sys.executable, "-m", "divopt_rag.experiments.cli", "--version"], env=env,
                             capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("divopt-rag "), version
