"""mkdocs hook: the site renders its maths with no network at view time.

MathJax 3 comes from a wheel on PyPI (``django-static-mathjax``, in the ``docs`` extra: the
MathJax release files under ``mathjax/static/mathjax``; nothing of Django is used). After each
build (``mkdocs build`` and every rebuild of ``mkdocs serve``) this hook copies the parts the
site loads into ``site/assets/mathjax/``: the ``tex-mml-chtml.js`` bundle that mkdocs.yml names
in ``extra_javascript``, the CHTML fonts, and the TeX extensions, accessibility and menu
components it loads on demand. The theme's web fonts are off (``theme.font: false``), so no
page asks a CDN for anything.
"""
from __future__ import annotations

import shutil
from importlib.util import find_spec
from pathlib import Path

from mkdocs.exceptions import PluginError

#: what the site needs from MathJax's es5/ folder (the speech engine and SVG output are left out)
PARTS = ("tex-mml-chtml.js", "input", "output/chtml", "a11y", "ui", "adaptors")
TARGET = "assets/mathjax"


def mathjax_dir() -> Path:
    spec = find_spec("mathjax")
    es5 = None if spec is None or spec.origin is None else Path(spec.origin).parent / "static" / "mathjax" / "es5"
    if es5 is None or not (es5 / "tex-mml-chtml.js").is_file():
        raise PluginError(
            'MathJax for the offline docs is missing: pip install -e ".[docs]" (it brings django-static-mathjax)'
        )
    return es5


def on_config(config):
    mathjax_dir()  # fail at the start of the build, not after it
    return config


def on_post_build(config):
    es5, out = mathjax_dir(), Path(config.site_dir) / TARGET
    for part in PARTS:
        src, dst = es5 / part, out / part
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
