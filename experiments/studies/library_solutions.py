"""The library's durable proven values (issue 50; MIPLIB's ``.solu`` idea): a small file in git.

The built library (pools, subsets, cards) is data outside git and can be lost or rebuilt; what
costs solver time to learn -- each instance's best set, f, bound, status and its second solver's
check -- is kept in :data:`SOLUTIONS_FILE` (``library_data/solutions.jsonl`` beside this module,
one JSON object per line, sorted by id), keyed by the instance id AND the hash of the content the
solver read (:func:`content_hash`: n, d, k, theta and the float32 bytes of E and q).

* :func:`attach_solutions` (called by ``divopt-rag lib build``): every instance of a library whose
  content hash equals its record's gets the record as its ``solution.json`` (f recomputed from the
  stored rows first); a record whose hash differs is NEVER used: it is refused and named (the
  instance is then unsolved, to be solved again).
* :func:`export_solutions` (``python -m divopt_rag.experiments.studies.library_solutions export
  LIB [FILE]``): writes a library's solutions into the file, replacing a record only by one on the
  same content that is at least as good (optimal over open, then the smaller gap) or on new
  content (the old one is stale then), and keeping records of instances the library lacks.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from divopt_rag.experiments.studies.library_format import (OPTIMAL, instance_ids, load_instance, objective, read_json,
                                                           write_json)

__all__ = ["SOLUTIONS_FILE", "RECORD_FIELDS", "content_hash", "read_solutions", "write_solutions", "attach_solutions",
           "export_solutions", "better"]

SOLUTIONS_FILE = Path(__file__).resolve().parent / "library_data" / "solutions.jsonl"
#: what a record keeps of a solution.json (``instance`` and ``content`` are its key)
RECORD_FIELDS = ("instance", "content", "status", "best_set", "f", "bound", "bound_source", "gap", "tolerance",
                 "solver", "seconds", "time_limit", "campaign", "verified_by")
_CONTENT_VERSION = "divopt-ccbqp-instance/1"


def content_hash(inst) -> str:
    """``xxh3:<16 hex>`` of what a solver reads: a header line (n, d, k, theta) and the rows E and
    the query q as little-endian float32 (the library's stored bytes; E, q are their exact widenings)."""
    import xxhash

    E = np.ascontiguousarray(inst.E, dtype="<f4")
    q = np.ascontiguousarray(inst.q, dtype="<f4")
    if not (np.array_equal(E.astype(np.float64), inst.E) and np.array_equal(q.astype(np.float64), inst.q)):
        raise ValueError(f"{inst.id}: rows or query are not float32 values (the library stores float32)")
    h = xxhash.xxh3_64()
    h.update(f"{_CONTENT_VERSION} n={E.shape[0]} d={E.shape[1]} k={int(inst.k)} theta={float(inst.theta)!r}\n".encode())
    h.update(E.tobytes())
    h.update(q.tobytes())
    return "xxh3:" + h.hexdigest()


def read_solutions(path: str | Path = SOLUTIONS_FILE) -> dict[str, dict]:
    """instance id -> record; a missing file is empty; a bad line raises naming the file and line."""
    path = Path(path)
    if not path.exists():
        return {}
    out: dict[str, dict] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("instance"), str) or not isinstance(rec.get("content"), str):
            raise ValueError(f"{path}:{lineno}: expected an object with 'instance' and 'content'")
        if rec["instance"] in out:
            raise ValueError(f"{path}:{lineno}: instance {rec['instance']!r} appears twice")
        out[rec["instance"]] = rec
    return out


def write_solutions(records: dict[str, dict], path: str | Path = SOLUTIONS_FILE) -> Path:
    from divopt_rag.data.atomic import write_atomically

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({f: records[i].get(f) for f in RECORD_FIELDS}, allow_nan=False, separators=(",", ":"))
                   + "\n" for i in sorted(records))
    return write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _rank(sol: dict) -> tuple:
    gap = sol.get("gap")
    return (sol.get("status") == OPTIMAL, -(gap if isinstance(gap, (int, float)) else math.inf),
            sol.get("verified_by") is not None)


def better(a: dict, b: dict | None) -> bool:
    """Is solution ``a`` at least as good as ``b`` on the same content (optimal over open, then
    the smaller gap, then a verified one)?"""
    return b is None or _rank(a) >= _rank(b)


def _check_record(inst, rec: dict, tol: float = 1e-9) -> str:
    """"" when the record's set is a feasible k-set whose f the stored rows give, else why not."""
    from divopt_rag.experiments.studies.library_format import check_set

    S, reason = check_set(rec.get("best_set"), inst.n, inst.k)
    if S is None:
        return f"its set is refused: {reason}"
    f = objective(inst.E, inst.q, inst.theta, S)
    scale = max(1, inst.k * (inst.k - 1))
    if not isinstance(rec.get("f"), (int, float)) or abs(f - rec["f"]) > tol * scale:
        return f"its f {rec.get('f')!r} is not what the rows give ({f!r})"
    b = rec.get("bound")
    if b is not None and b < f - tol * scale:
        return f"its bound {b!r} is below f {f!r}"
    return ""


def attach_solutions(root: str | Path, path: str | Path = SOLUTIONS_FILE, *, log: Callable[[str], Any] = print,
                     only: list[str] | None = None) -> dict[str, list]:
    """Give each instance of the library at ``root`` its record from ``path`` where the content
    hashes match. Returns {"attached", "kept", "stale", "refused", "absent"}: ids attached; ids
    whose own solution.json was as good and kept; (id, why) of records refused for a different
    content hash; (id, why) of records refused otherwise; ids with no record."""
    root = Path(root)
    records = read_solutions(path)
    out: dict[str, list] = {"attached": [], "kept": [], "stale": [], "refused": [], "absent": []}
    for iid in only or instance_ids(root):
        rec = records.get(iid)
        if rec is None:
            out["absent"].append(iid)
            continue
        inst = load_instance(root, iid)
        h = content_hash(inst)
        if rec["content"] != h:
            why = f"stale: the solutions file's record is for content {rec['content']}, the instance reads {h}"
            out["stale"].append((iid, why))
            log(f"{iid}: {why}; not reused")
            continue
        why = _check_record(inst, rec)
        if why:
            out["refused"].append((iid, why))
            log(f"{iid}: record refused: {why}")
            continue
        sol_path = root / "instances" / iid / "solution.json"
        own = read_json(sol_path) if sol_path.exists() else None
        if own is not None and own.get("content") == h and not better(rec, own):
            out["kept"].append(iid)
            continue
        body = {f: rec.get(f) for f in RECORD_FIELDS}
        body["from"] = f"solutions file ({Path(path).name}), content {h}"
        write_json(sol_path, body)
        out["attached"].append(iid)
    log(f"solutions: {len(out['attached'])} attached, {len(out['kept'])} kept, {len(out['stale'])} stale (refused), "
        f"{len(out['refused'])} refused, {len(out['absent'])} without a record")
    return out


def export_solutions(root: str | Path, path: str | Path = SOLUTIONS_FILE, *, log: Callable[[str], Any] = print) -> dict:
    """Write the library's solutions into ``path`` (see the module doc). Returns counts."""
    root = Path(root)
    records = read_solutions(path)
    counts = {"new": 0, "replaced": 0, "replaced_stale": 0, "kept": 0}
    for iid in instance_ids(root):
        sol_path = root / "instances" / iid / "solution.json"
        if not sol_path.exists():
            continue
        sol = read_json(sol_path)
        inst = load_instance(root, iid)
        h = content_hash(inst)
        if sol.get("content") not in (None, h):
            log(f"{iid}: its solution.json names content {sol['content']}, the instance reads {h}: not exported")
            continue
        why = _check_record(inst, sol)
        if why:
            log(f"{iid}: not exported: {why}")
            continue
        rec = {f: sol.get(f) for f in RECORD_FIELDS}
        rec["instance"], rec["content"] = iid, h
        old = records.get(iid)
        if old is None:
            counts["new"] += 1
        elif old["content"] != h:
            counts["replaced_stale"] += 1
            log(f"{iid}: the file's record (content {old['content']}) is stale: replaced")
        elif better(rec, old):
            counts["replaced"] += old != rec
        else:
            counts["kept"] += 1
            continue
        records[iid] = rec
    write_solutions(records, path)
    log(f"exported to {path}: {counts}")
    return counts


if __name__ == "__main__":  # python -m ...library_solutions export LIB [FILE]
    # attaching also rewrites the manifest, which is library_build's job: python -m ...library_build attach LIB [FILE]
    cmd, lib = sys.argv[1], sys.argv[2]
    target = sys.argv[3] if len(sys.argv) > 3 else SOLUTIONS_FILE
    if cmd == "export":
        export_solutions(lib, target)
    else:
        raise SystemExit(f"usage: python -m divopt_rag.experiments.studies.library_solutions export LIB [FILE] (got {cmd!r}; "
                         "to attach: python -m divopt_rag.experiments.studies.library_build attach LIB [FILE])")
