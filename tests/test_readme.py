"""The README stays a front door: small, its CI commands readable by .ci/run, and every relative
link in it and in the docs pages pointing at a file that exists."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
# [text](target) and [text]: target; not images' alt text quirks, not code spans
_INLINE = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFDEF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")


def _relative_links(path: Path):
    text = _CODE.sub("", _FENCE.sub("", path.read_text(encoding="utf-8")))
    for target in _INLINE.findall(text) + _REFDEF.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # http:, https:, mailto:, in-page anchors
        yield target


def test_readme_is_at_most_15_kb():
    size = README.stat().st_size
    assert size <= 15 * 1024, f"README.md is {size} bytes; move detail into docs/"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    missing = []
    for target in _relative_links(page):
        file_part = target.split("#", 1)[0]
        if file_part and not (page.parent / file_part).exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_link_finder_sees_links():
    # guard against a regex that silently finds nothing
    assert "docs/index.md" in set(_relative_links(README))
    assert any(t.startswith("../benchmarks.md") for t in _relative_links(ROOT / "docs" / "howto" / "certify.md"))


def _ci_extract(marker: str) -> str:
    """The command .ci/run would read, using .ci/run's own extract() function."""
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    func = re.search(r"^extract\(\)\s*\{.*?^\}", script, re.M | re.S)
    assert func, ".ci/run has no extract() function"
    proc = subprocess.run(["bash", "-c", func.group(0) + f'\nextract {marker}'], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("awk") is None, reason="needs bash and awk")
def test_ci_reads_the_install_and_test_commands():
    assert _ci_extract("install") == 'pip install -e ".[dev]" -c constraints-cpu.txt'
    assert _ci_extract("test") == "python -m pytest -q -n 2"


def test_headline_tables_are_marked_for_replacement():
    text = README.read_text(encoding="utf-8")
    for name in ("speed", "quality", "exact"):
        body = re.search(rf"<!-- table:{name} -->\n(.*?)\n<!-- /table:{name} -->", text, re.S)
        assert body and body.group(1).lstrip().startswith("|"), f"table:{name} markers missing or empty"


def test_quick_start_runs_and_prints_its_selection_and_certificate():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    code = re.search(r"^```python\n(.*?)^```", section, re.M | re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("selected [") and "f = " in lines[0]
    assert lines[1].startswith("certified optimal at full scale"), lines  # as the README says it prints
    assert lines[2].startswith("optimal f = "), lines
