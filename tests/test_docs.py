"""The docs site builds in strict mode: a broken page, link or docstring fails the suite."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _missing(modules=("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")):
    out = []
    for m in modules:
        try:
            found = importlib.util.find_spec(m) is not None
        except ModuleNotFoundError:  # the parent package is missing
            found = False
        if not found:
            out.append(m)
    return out


MISSING = _missing()


@pytest.mark.skipif(bool(MISSING), reason=f"docs tools not installed ({', '.join(MISSING)}); pip install -e '.[docs]'")
def test_mkdocs_build_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    site = tmp_path / "site"
    # the API reference was generated from the docstrings, and the math reached the pages
    api = (site / "api" / "solvers" / "index.html").read_text(encoding="utf-8")
    assert 'id="divopt_rag.solvers.select"' in api
    assert 'id="divopt_rag.integrations.langchain.DivoptRetriever"' in (site / "api" / "integrations" / "index.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' in (site / "concepts" / "ccbqp" / "index.html").read_text(encoding="utf-8")
