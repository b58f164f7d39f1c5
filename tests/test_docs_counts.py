"""Every count and list the README and the docs state is the code's or a run's (issue 49, item 4):
the Quick start is one text in both places, the recipes are the registry's, the demo's files are
the files it writes, and no page calls a package of an extra "not installed"."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INDEX = ROOT / "docs" / "index.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


def _quick_start(path: Path) -> tuple[str, str]:
    """The Quick start's Python block and the sentence that says what it prints."""
    section = path.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    code = re.search(r"^```python\n(.*?)^```", section, re.M | re.S)
    prints = re.search(r"^prints .*?(?=\n\n)", section[code.end():], re.M | re.S)
    return code.group(1), " ".join(prints.group(0).split()) if prints else ""


def test_the_quick_start_is_the_same_in_the_readme_and_the_docs():
    readme, docs = _quick_start(README), _quick_start(INDEX)
    assert readme == docs, "docs/index.md's Quick start differs from the README's: copy the README's block"


def test_the_recipe_count_is_the_registrys():
    from divopt_rag.experiments.reproduce import RECIPES

    text = " ".join(README.read_text(encoding="utf-8").split())
    said = re.search(r"reproduce --list` shows (\d+) recipes", text)
    assert said, "the README no longer says how many recipes --list shows"
    assert int(said.group(1)) == len(RECIPES), f"README says {said.group(1)} recipes, RECIPES holds {len(RECIPES)}"


def test_the_demo_files_named_are_the_files_the_demo_writes(tmp_path):
    import pytest

    pytest.importorskip("matplotlib")
    from divopt_rag.experiments.cli.main import main

    assert main(["demo", "--n", "300", "--d", "8", "--k", "3", "--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    for page in (README, INDEX):
        flat = " ".join(page.read_text(encoding="utf-8").split())
        sentence = re.search(r"`divopt-rag demo`[^.]*?writes (.*?)[.:](?:\s|$)|and writes (`divopt-demo/.*?)[.:](?:\s|$)", flat)
        assert sentence, f"{page.name} no longer says what the demo writes"
        named = sorted(re.findall(r"`divopt-demo/([\w.]+)`", sentence.group(0)))
        assert named == written, f"{page.name} names {named}; the demo writes {written}"


def _extra_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = set()
    for spec in [*project["dependencies"], *(s for specs in project["optional-dependencies"].values() for s in specs)]:
        name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0)
        if name != "divopt-rag":
            names |= {name.lower(), name.lower().replace("-", "_")}
    return names


def test_no_page_calls_a_package_the_extras_install_not_installed():
    packages = _extra_distributions()
    assert "pyndeval" in packages  # the [ir] extra, the case issue 49 found
    wrong = []
    for page in PAGES:
        flat = " ".join(page.read_text(encoding="utf-8").split())
        for sentence in re.split(r"(?<=[.;])\s", flat):
            if re.search(r"\bnot installed\b", sentence):
                named = sorted(p for p in packages if re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", sentence.lower()))
                if named:
                    wrong.append(f"{page.relative_to(ROOT)}: {named}: {sentence[:160]}")
    assert not wrong, "pages that call an extra's package not installed:\n" + "\n".join(wrong)


def test_the_dataset_names_the_data_page_lists_are_the_registrys():
    import json
    import subprocess
    import sys

    # the built-in registry, as a fresh process has it (tests register datasets of their own)
    code = "import json, divopt_rag.data as dd; print(json.dumps(sorted(dd.DATASETS)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    DATASETS = json.loads(out.stdout.splitlines()[-1])
    text = (ROOT / "docs" / "howto" / "data.md").read_text(encoding="utf-8")
    listed = re.search(r"sorted\(dd\.DATASETS\)\s+#\s*(.*)", text)
    assert listed, "docs/howto/data.md no longer lists sorted(dd.DATASETS)"
    assert listed.group(1).split() == sorted(DATASETS)


def test_the_cells_per_paper_the_reproduce_page_counts_are_the_published_files():
    """docs/howto/reproduce.md's table of published cells per paper, against the files the
    recipes compare with (issue 49, item 4: every count in the docs written from the code)."""
    from divopt_rag.experiments.reproduce import published

    names = {"CCBQP": "ccbqp", "DF-RAG": "dfrag", "Dartboard": "dartboard", "VRSD": "vrsd", "MIO report": "mio"}
    page = (ROOT / "docs" / "howto" / "reproduce.md").read_text(encoding="utf-8")
    said = dict(re.findall(r"^\| (CCBQP|DF-RAG|Dartboard|VRSD|MIO report) \| (\d+) \|", page, re.M))
    assert set(said) == set(names), f"the page's cells table names {sorted(said)}"
    for label, paper in names.items():
        assert int(said[label]) == len(published(paper)), f"{label}: the page says {said[label]} cells"
