"""Optional downloads of the public corpora the loaders read (a convenience when online; the
loaders and the tests never need it).

    fetch("beir/scifact", "datasets/")            -> datasets/scifact/{corpus,queries}.jsonl, qrels/
    fetch("rag-mini-wikipedia", "datasets/")      -> datasets/rag-mini-wikipedia/data/...
    fetch("rgb", "datasets/")                     -> datasets/rgb/ (en.json and en_int.json: the
                                                     Dartboard paper's Table 2 files)
    fetch("rgb/en_int", "datasets/")              -> datasets/rgb/en_int.json (one file)
    fetch("asqa", "datasets/")                    -> datasets/asqa/ASQA.json
    fetch("qampari", "datasets/")                 -> datasets/qampari/  (…/dev_data.jsonl)
    fetch("longbench", "datasets/")               -> datasets/longbench/ (…/hotpotqa.jsonl, …)
    fetch("arc-da" | "openbookqa" | "sciq", "datasets/") -> datasets/<name>/ (the release zip, unpacked)

Offline, each raises ConnectionError saying what to place where by hand.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from .atomic import atomic_write

__all__ = ["fetch", "BEIR_URL", "RGB_URL", "RGB_FILES", "ARCHIVES"]

BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
RGB_URL = "https://raw.githubusercontent.com/chen700564/RGB/master/data/{name}.json"
#: The RGB files ``fetch("rgb", root)`` brings: the simple and the information-integration
#: questions (Dartboard, Pickett et al. 2024, Table 2).
RGB_FILES = ("en", "en_int")
MINI_WIKI_REPO = "rag-datasets/rag-mini-wikipedia"
ASQA_URL = "https://storage.googleapis.com/gresearch/ASQA/ASQA.json"  # the TFDS builder's source

#: Zip releases unpacked under ``<root>/<name>``: name -> (url, a file that marks it done).
#: Addresses as the datasets' own pages / loading scripts give them.
ARCHIVES = {
    "qampari": ("https://aggreg-qa.s3.amazonaws.com/qampari.zip", "dev_data.jsonl"),
    "longbench": ("https://huggingface.co/datasets/THUDM/LongBench/resolve/main/data.zip", "hotpotqa.jsonl"),
    "arc-da": ("https://aristo-data-public.s3-us-west-2.amazonaws.com/arc-da/ARC-DA-v1.1.zip", "test.jsonl"),
    "openbookqa": ("https://s3-us-west-2.amazonaws.com/ai2-website/data/OpenBookQA-V1-Sep2018.zip", "openbook.txt"),
    "sciq": ("https://s3-us-west-2.amazonaws.com/ai2-website/data/SciQ.zip", "test.json"),
}


def _download(url: str, dest: Path) -> None:
    def fetch_into(fh) -> None:
        with urllib.request.urlopen(url, timeout=60) as resp:
            shutil.copyfileobj(resp, fh)

    try:
        atomic_write(dest, fetch_into)  # a killed download leaves no half file under its name
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectionError(f"could not download {url} ({exc}); download it by hand to {dest}") from exc


def fetch(name: str, root: str | os.PathLike, *, url: str | None = None) -> Path:
    """Download corpus ``name`` under ``root`` (skipped when already there); returns the path
    to pass to the matching loader. ``url`` overrides the source (mirrors, tests)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    kind, _, sub = name.partition("/")
    if kind == "beir":
        if not sub:
            raise ValueError("BEIR needs a dataset name, e.g. 'beir/scifact'")
        target = root / sub
        if (target / "corpus.jsonl").exists():
            return target
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            archive = Path(tmp) / f"{sub}.zip"
            _download(url or BEIR_URL.format(name=sub), archive)
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(tmp)
            extracted = Path(tmp) / sub
            if not (extracted / "corpus.jsonl").exists():
                raise ValueError(f"archive {archive.name} has no {sub}/corpus.jsonl")
            shutil.move(str(extracted), target)
        return target
    if kind == "rgb":
        # "rgb": every file of RGB_FILES (url, if given, a template with {name}); "rgb/<file>": one
        names = (sub,) if sub else RGB_FILES
        for one in names:
            target = root / "rgb" / f"{one}.json"
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                _download((url.format(name=one) if url and not sub else url) or RGB_URL.format(name=one), target)
        return target if sub else root / "rgb"
    if kind == "asqa":
        target = root / "asqa" / "ASQA.json"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            _download(url or ASQA_URL, target)
        return target.parent
    if kind in ARCHIVES:
        source, marker = ARCHIVES[kind]
        target = root / kind
        if target.is_dir() and any(target.rglob(marker)):
            return target
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            archive = Path(tmp) / f"{kind}.zip"
            _download(url or source, archive)
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(target)
        if not any(target.rglob(marker)):
            raise ValueError(f"archive for {kind!r} has no {marker}; is {url or source} the right file?")
        return target
    if kind == "rag-mini-wikipedia":
        target = root / "rag-mini-wikipedia"
        if (target / "data").exists():
            return target
        try:
            from huggingface_hub import snapshot_download

            snapshot_download(repo_id=MINI_WIKI_REPO, repo_type="dataset", local_dir=str(target), allow_patterns=["data/*"])
        except Exception as exc:
            raise ConnectionError(
                f"could not download {MINI_WIKI_REPO} from the Hugging Face hub ({exc}); place its data/ folder in {target}"
            ) from exc
        return target
    raise ValueError(
        f"unknown corpus {name!r}; expected 'beir/<name>', 'rag-mini-wikipedia', 'rgb/<file>', 'asqa' or one of "
        f"{sorted(ARCHIVES)}"
    )
