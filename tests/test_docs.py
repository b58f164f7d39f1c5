"""The docs site builds in strict mode: a broken page, link or docstring fails the suite."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
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


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once for the tests below."""
    if MISSING:
        pytest.skip(f"docs tools not installed ({', '.join(MISSING)}); pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out


def test_mkdocs_build_strict(site):
    # the API reference was generated from the docstrings, and the math reached the pages
    api = (site / "api" / "solvers" / "index.html").read_text(encoding="utf-8")
    assert 'id="divopt_rag.solvers.select"' in api
    assert 'id="divopt_rag.integrations.langchain.DivoptRetriever"' in (site / "api" / "integrations" / "index.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' in (site / "concepts" / "ccbqp" / "index.html").read_text(encoding="utf-8")


def test_site_works_offline_and_api_pages_read_well(site):
    """Maths from a local MathJax, no resource from another host, and the API pages free of
    raw Sphinx roles."""
    import re

    assert (site / "assets" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert list((site / "assets" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    loads = re.compile(r"<(?:script|img|iframe)[^>]*\ssrc=\"(?:https?:)?//|<link[^>]*\shref=\"(?:https?:)?//[^\"]*\"[^>]*>")
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        remote = [m.group(0) for m in loads.finditer(text) if "canonical" not in m.group(0)]
        assert not remote, f"{page.relative_to(site)} loads from another host: {remote[:2]}"
    for page in (site / "api").rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        raw = re.findall(r":(?:func|class|mod|meth|data|attr):`", text)
        assert not raw, f"{page.relative_to(site)} shows raw Sphinx roles"
    api = (site / "api" / "integrations" / "index.html").read_text(encoding="utf-8")
    # roles became links, and a parameter's description is not rendered as its type
    assert 'href="../solvers/#divopt_rag.solvers.select"' in api
    assert "<code>number to choose" not in api and "number to choose (fewer when" in api


def test_default_method_is_named_the_same_everywhere():
    """Every adapter defaults to DEFAULT_METHOD, and no page or adapter docstring names another
    method as the default or as the one with the highest exact-hit rate (the README's table)."""
    import inspect
    import re

    from divopt_rag.integrations import select_candidates
    from divopt_rag.solvers import DEFAULT_METHOD, METHODS

    # the adapters take method=None for the default (so that importing them loads no solver) and
    # hold its name once built
    E, q = np.eye(4), np.ones(4)
    assert inspect.signature(select_candidates).parameters["method"].default is None
    assert select_candidates(q, E, 2, 0.5).method == DEFAULT_METHOD
    built = []
    try:
        from divopt_rag.integrations.langchain import DivoptRetriever
        from langchain_core.documents import Document
        from helpers.langchain_fakes import HashEmbedding
    except ImportError:
        pass
    else:
        built.append(DivoptRetriever(documents=[Document(page_content=str(i)) for i in range(4)],
                                     document_embeddings=E, embedding=HashEmbedding()))
    for module, cls in [("llamaindex", "DivoptPostprocessor"), ("haystack", "DivoptRanker")]:
        try:
            built.append(getattr(importlib.import_module(f"divopt_rag.integrations.{module}"), cls)())
        except ImportError:
            continue
    assert built and all(adapter.method == DEFAULT_METHOD for adapter in built)

    q = r"[`'\"*]+"
    claims = [
        rf"\bdefault(?: method)?\s*(?:is|was|:)?\s*{q}(?P<m>\w+){q}",          # default is `x`, default: ``x``
        r"\bdefault(?: method)?\s*\((?P<m>\w+)\)",                              # the default method (x)
        rf"(?<!is )(?<![`'\"*]){q}(?P<m>\w+){q}\s*\((?:the )?default\b",     # **x** (default), not `p` is `x` (default)
        rf"(?<!drop-in )\bdefaults? to\s+{q}(?P<m>\w+){q}",                    # defaults to `x`
        rf"{q}(?P<m>\w+){q} (?:had|has|gives) the highest exact-hit",           # `x` had the highest exact-hit rate
        r"Divopt\w+\([^)]*\bk=4, fetch_k=20\b[^)]*\bmethod=[\"'](?P<m>\w+)",  # a constructor shown with its defaults
    ]
    # benchmarks.md is the dated lab notebook: it records which default each past run had
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "integrations").glob("*.py"))]
    wrong = []
    for path in files:
        if path.name == "benchmarks.md":
            continue
        flat = " ".join(path.read_text(encoding="utf-8").split())
        for pattern in claims:
            for m in re.finditer(pattern, flat):
                if m["m"] in METHODS and m["m"] != DEFAULT_METHOD:
                    wrong.append(f"{path.relative_to(ROOT)}: ...{flat[max(0, m.start() - 40):m.end() + 10]}...")
    assert not wrong, f"pages naming a default other than {DEFAULT_METHOD!r}:\n" + "\n".join(wrong)


def _namespace_hook():
    if MISSING:
        pytest.skip(f"docs tools not installed ({', '.join(MISSING)})")
    spec = importlib.util.spec_from_file_location("divopt_namespace_hook", ROOT / "docs" / "hooks" / "divopt_namespace.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def test_a_copy_of_docs_and_mkdocs_yml_finds_the_installed_package(tmp_path):
    """Built from a copy of docs/ and mkdocs.yml (no pyproject.toml beside it), the API pages'
    packages come from the installed divopt-rag: the folders the repository's mapping names."""
    hook = _namespace_hook()
    from_repo = hook._mapping(ROOT, ROOT / "docs")
    from_copy = hook._mapping(tmp_path, ROOT / "docs")
    assert from_copy and set(from_copy) <= set(from_repo)
    assert {n: p.resolve() for n, p in from_copy.items()} == {n: from_repo[n].resolve() for n in from_copy}


def test_with_neither_sources_nor_an_install_the_build_says_what_is_missing(tmp_path, monkeypatch):
    hook = _namespace_hook()
    from mkdocs.exceptions import PluginError

    monkeypatch.setattr(hook, "find_spec", lambda name: None)
    with pytest.raises(PluginError) as err:
        hook._mapping(tmp_path, ROOT / "docs")
    message = str(err.value)
    assert "\n" not in message and "no pyproject.toml beside" in message and "pip install divopt-rag" in message
    assert "divopt_rag.models" in message
