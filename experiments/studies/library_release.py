"""Release and fetch the instance library (issue 50, item 6).

:func:`build_release` verifies the library (every hash, every f), then writes
``<name>-<version>.tar.gz``: one top folder ``<name>-<version>/`` with manifest.json,
CHANGELOG.md, LICENCES.md, pools/, subsets/ and instances/, and a ``.sha256``-style sidecar
``<archive>.xxh3``. :func:`fetch_release` unpacks such an archive (a local path or a
``file://`` URL; there is no network download) into a library folder, refusing members that
would land outside it.
"""
from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from divopt_rag.experiments.studies.library_format import check_library, file_hash, read_json

__all__ = ["build_release", "fetch_release", "archive_name"]


def archive_name(root: str | Path) -> str:
    m = read_json(Path(root) / "manifest.json")
    return f"{m['name']}-{m['version']}"


def build_release(root: str | Path, out: str | Path, *, max_mb: float = 100.0) -> tuple[Path, int]:
    """The archive's path and size in bytes; ValueError when the library does not verify or the
    archive would pass ``max_mb``."""
    from divopt_rag.experiments.studies.library_score import verify_library

    root = check_library(root)
    if not (root / "manifest.json").exists() or not (root / "CHANGELOG.md").exists():
        raise ValueError(f"--library {root}: expected manifest.json and CHANGELOG.md (run lib build first)")
    problems = verify_library(root)
    if problems:
        raise ValueError(f"--library {root}: does not verify ({len(problems)} problem(s), first: {problems[0]})")
    name = archive_name(root)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}.tar.gz"
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.relative_to(root).as_posix().startswith("."))
    with tempfile.NamedTemporaryFile(dir=out, prefix=".release-", suffix=".tar.gz", delete=False) as tmp:
        tmp_path = Path(tmp.name)
    try:
        with tarfile.open(tmp_path, "w:gz", compresslevel=9) as tar:
            for p in files:
                info = tar.gettarinfo(str(p), arcname=f"{name}/{p.relative_to(root).as_posix()}")
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with open(p, "rb") as fh:
                    tar.addfile(info, fh)
        size = tmp_path.stat().st_size
        if size > max_mb * 1e6:
            raise ValueError(f"--max-mb: expected an archive <= {max_mb} MB, got {size / 1e6:.1f} MB")
        tmp_path.chmod(0o644)  # a release is for others to read (the temporary was private)
        tmp_path.replace(target)
    finally:
        tmp_path.unlink(missing_ok=True)
    (out / f"{name}.tar.gz.xxh3").write_text(f"{file_hash(target)}  {target.name}\n", encoding="utf-8")
    return target, size


def fetch_release(source: str, library: str | Path, *, force: bool = False) -> Path:
    """Unpack the archive ``source`` (path or file:// URL) into ``library``; returns it."""
    src = Path(source[len("file://"):] if source.startswith("file://") else source).expanduser()
    if not src.is_file():
        raise FileNotFoundError(2, "release archive not found", str(src))
    lib = Path(library).expanduser()
    if lib.exists() and any(lib.iterdir()):
        if not force:
            raise ValueError(f"--library {lib}: expected an empty or new folder (or --force)")
        shutil.rmtree(lib)
    sidecar = src.with_name(src.name + ".xxh3")
    if sidecar.exists() and sidecar.read_text().split()[0] != file_hash(src):
        raise ValueError(f"{src}: its xxh3 differs from {sidecar.name} (a damaged download?)")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent, prefix=".fetch-") as tmp:
        with tarfile.open(src, "r:gz") as tar:
            tops = {m.name.split("/", 1)[0] for m in tar.getmembers()}
            if len(tops) != 1:
                raise ValueError(f"{src}: expected one top folder, got {sorted(tops)[:3]}")
            tar.extractall(tmp, filter="data")  # refuses absolute paths, '..' and links out of tmp
        top = Path(tmp) / tops.pop()
        check_library(top)
        shutil.move(str(top), str(lib))
    return lib
