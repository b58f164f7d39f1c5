"""What a newcomer's first hour costs, at two revisions side by side (issue 49, item 1): importing
each RAG adapter, and loading a text dataset twice (``divopt_rag.data.load("wordnet:10")``).

    python benchmarks/first_hour.py --base main --head HEAD --repeat 5 \
        --out benchmarks/results/first_hour/first_hour.csv

For each revision the package is laid out from ``git archive`` as ``DIR/divopt_rag/<folder>`` (the
``package-dir`` mapping of that revision's pyproject.toml, the Haystack component under
``haystack_integrations``) and put first on ``PYTHONPATH``; every measurement is a fresh
interpreter, the revisions interleaved so that the machine's load falls on both alike.

* ``import``: ``python -X importtime -c "import <adapter>"``, ``--repeat`` times per module: the
  module's cumulative import time as importtime reports it, and whether torch was imported;
* ``load``: a fresh embedding cache folder per revision (``DIVOPT_RAG_CACHE_DIR``), then
  ``load("wordnet:10")`` in two processes one after the other (``first``, ``second``): wall seconds,
  and whether sentence-transformers was imported (a second load that finds every vector cached
  loads no model). Needs the system WordNet (``apt-get install wordnet-base``).

A row per measurement, with the load average beside it.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path

MODULES = ("divopt_rag.integrations.langchain", "divopt_rag.integrations.llamaindex",
           "divopt_rag.integrations.haystack")


def lay_out(rev: str, repo: Path, into: Path) -> str:
    """The package of ``rev`` under ``into`` (as an installed wheel would place it); its commit."""
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=repo, capture_output=True, text=True,
                            check=True).stdout.strip()
    blob = subprocess.run(["git", "archive", "--format=tar", rev], cwd=repo, capture_output=True, check=True).stdout
    src = into / "src"
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(src, filter="data")
    mapping = tomllib.loads((src / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for name, folder in sorted(mapping.items(), key=lambda kv: len(kv[0])):
        target = into / "site" / Path(*name.split("."))
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(src / folder, target_is_directory=True)
    return commit


def import_once(module: str, site: Path) -> tuple[int, bool]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], env=env,
                         capture_output=True, text=True, timeout=600, check=True).stderr
    rows = [line.split("|") for line in out.splitlines() if line.startswith("import time:") and "|" in line]
    cumulative = {r[2].strip(): int(r[1]) for r in rows if r[1].strip().isdigit()}
    torch = any(re.fullmatch(r"\s*torch", r[2]) for r in rows)
    return cumulative[module], torch


def load_twice(site: Path, cache: Path) -> list[tuple[str, float, bool]]:
    """(which, wall seconds, sentence-transformers imported) of two loads of wordnet:10 sharing a cache."""
    env = {**os.environ, "PYTHONPATH": str(site), "DIVOPT_RAG_CACHE_DIR": str(cache)}
    code = ("import sys, time, json; t = time.perf_counter()\nimport divopt_rag.data as dd\n"
            "d = dd.load('wordnet:10')\n"
            "print(json.dumps([time.perf_counter() - t, 'sentence_transformers' in sys.modules, d.E.shape[0]]))")
    out = []
    for which in ("first", "second"):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1200,
                              check=True)
        wall = time.perf_counter() - t
        _, loaded, _ = json.loads(proc.stdout.splitlines()[-1])
        out.append((which, wall, loaded))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="revision before the change (default: main)")
    parser.add_argument("--head", default="HEAD", help="revision after it (default: HEAD)")
    parser.add_argument("--repeat", type=int, default=5, help="imports per module and revision (default: 5)")
    parser.add_argument("--no-load", action="store_true", help="skip the two loads of wordnet:10")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/first_hour/first_hour.csv"),
                        help="CSV to write (default: benchmarks/results/first_hour/first_hour.csv)")
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parents[1]
    rows = []
    with tempfile.TemporaryDirectory(prefix="divopt-imports-") as tmp:
        sites = {}
        for label, rev in (("base", args.base), ("head", args.head)):
            folder = Path(tmp) / label
            commit = lay_out(rev, repo, folder)
            sites[label] = (commit, folder / "site")
        for module in MODULES:
            for i in range(args.repeat):
                for label, (commit, site) in sites.items():
                    us, torch = import_once(module, site)
                    rows.append({"measure": "import", "revision": label, "commit": commit, "what": module,
                                 "repeat": i, "seconds": us / 1e6, "heavy_imported": torch,
                                 "load_1min": os.getloadavg()[0]})
                    print(f"import {label} {commit} {module} {us / 1e6:.2f} s torch={torch}", flush=True)
        if not args.no_load:
            for label, (commit, site) in sites.items():
                for which, wall, loaded in load_twice(site, Path(tmp) / f"cache-{label}"):
                    rows.append({"measure": "load", "revision": label, "commit": commit, "what": f"wordnet:10 {which}",
                                 "repeat": 0, "seconds": wall, "heavy_imported": loaded,
                                 "load_1min": os.getloadavg()[0]})
                    print(f"load {label} {commit} wordnet:10 {which} {wall:.1f} s sentence_transformers={loaded}",
                          flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
