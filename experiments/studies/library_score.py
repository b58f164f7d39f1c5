"""Score anyone's solutions against the instance library (issue 50, item 3), and verify a library.

* :func:`read_submission`: a CSV (header ``instance_id,indices[,seconds]``; indices separated by
  spaces, ``;`` or ``,`` inside quotes, or a JSON list) or a JSON file (a list of
  ``{"instance_id", "indices"[, "seconds"]}`` objects, or an object ``{id: indices}``).
* :func:`score_rows`: per row f (float64, from the stored rows), gap to the optimum or to the
  proven bound, gap to the best known f, feasibility; a bad row (unknown instance, wrong k,
  duplicates, out-of-range or non-integer indices) is refused and named, the others are scored.
* :func:`score_callable`: the same for a Python callable ``fn(instance) -> indices``
  (``instance`` a :class:`~divopt_rag.experiments.studies.library_format.LibraryInstance`, timed).
* :func:`summarize`: by family (and theta): rows, feasible, exact hits, mean and worst gap.
* :func:`verify_library`: every file's xxh3 against the manifest and the cards, every stored f
  recomputed, every stored set's feasibility, the content hash a card or solution names.
"""
from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from divopt_rag.experiments.studies.library_format import (OPTIMAL, LibraryInstance, check_library, check_set, file_hash,
                                                           instance_ids, load_instance, normalized_gap, read_json)

__all__ = ["Submission", "ScoredRow", "read_submission", "score_rows", "score_callable", "summarize",
           "verify_library", "write_scores", "EXACT_TOL"]

#: A set is an exact hit when its f is within EXACT_TOL k (k-1) of a proven optimum.
EXACT_TOL = 1e-9


@dataclass
class Submission:
    row: int                # 1-based row (CSV: line of the file; JSON: position)
    instance_id: str
    indices: Any            # as read (validated by score_rows)
    seconds: float | None = None


@dataclass
class ScoredRow:
    row: int
    instance_id: str
    family: str | None
    theta: float | None
    n: int | None
    k: int | None
    feasible: bool
    reason: str             # "" when feasible, else why the row was refused
    f: float | None
    best_f: float | None
    bound: float | None
    status: str | None      # the instance's: optimal / open
    gap: float | None       # (optimum or bound - f) / (k (k-1))
    gap_best: float | None  # (best known f - f) / (k (k-1)); negative: a better set than the library's
    exact_hit: bool | None  # on optimal instances
    seconds: float | None


def _parse_indices(value: Any) -> Any:
    if isinstance(value, list):
        return value
    text = str(value).strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return [t for t in text.replace(";", " ").replace(",", " ").split() if t]


def read_submission(path: str | Path) -> list[Submission]:
    """The rows of a CSV or JSON submission (the file's layout is checked here, each row's
    content in :func:`score_rows`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(2, "submission not found", str(path))
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json" or text.lstrip()[:1] in "[{":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        if isinstance(data, dict):
            data = [{"instance_id": k, "indices": v} for k, v in data.items()]
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of {{instance_id, indices}} or an object id -> indices")
        out = []
        for i, item in enumerate(data, 1):
            if not isinstance(item, dict) or "instance_id" not in item or "indices" not in item:
                out.append(Submission(i, str(item.get("instance_id", "?")) if isinstance(item, dict) else "?", None))
                continue
            out.append(Submission(i, str(item["instance_id"]), _parse_indices(item["indices"]), item.get("seconds")))
        return out
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None or [h.strip() for h in header[:2]] != ["instance_id", "indices"]:
        raise ValueError(f"{path}: expected a CSV header 'instance_id,indices[,seconds]', got {header!r}")
    has_seconds = len(header) > 2 and header[2].strip() == "seconds"
    out = []
    for lineno, fields in enumerate(reader, 2):
        if not fields:
            continue
        iid = fields[0].strip()
        if has_seconds and len(fields) >= 3:
            idx, secs = ",".join(fields[1:-1]), fields[-1]
        else:
            idx, secs = ",".join(fields[1:]), None
        try:
            secs = None if secs in (None, "") else float(secs)
        except ValueError:
            secs = None
        out.append(Submission(lineno, iid, _parse_indices(idx), secs))
    return out


def _score(inst: LibraryInstance, sub: Submission) -> ScoredRow:
    sol = inst.solution or {}
    best_f, bound, status = sol.get("f"), sol.get("bound"), sol.get("status")
    S, reason = check_set(sub.indices, inst.n, inst.k)
    base = dict(row=sub.row, instance_id=inst.id, family=inst.family, theta=inst.theta, n=inst.n, k=inst.k,
                best_f=best_f, bound=bound, status=status, seconds=sub.seconds)
    if S is None:
        return ScoredRow(feasible=False, reason=reason, f=None, gap=None, gap_best=None, exact_hit=None, **base)
    f = inst.f(S)
    ref = best_f if status == OPTIMAL else bound
    gap = None if ref is None else normalized_gap(ref, f, inst.k)
    gap_best = None if best_f is None else (best_f - f) / max(1, inst.k * (inst.k - 1))
    hit = None if status != OPTIMAL else bool(gap is not None and gap <= EXACT_TOL)
    return ScoredRow(feasible=True, reason="", f=f, gap=gap, gap_best=gap_best, exact_hit=hit, **base)


def score_rows(root: str | Path, rows: Iterable[Submission]) -> list[ScoredRow]:
    """Score each submitted row; refused rows are kept with their reason (nothing raises per row)."""
    root = check_library(root)
    known = set(instance_ids(root))
    out, seen = [], set()
    for sub in rows:
        if sub.instance_id not in known:
            out.append(ScoredRow(sub.row, sub.instance_id, None, None, None, None, False,
                                 f"unknown instance {sub.instance_id!r}", None, None, None, None, None, None, None,
                                 sub.seconds))
            continue
        if sub.instance_id in seen:
            out.append(ScoredRow(sub.row, sub.instance_id, None, None, None, None, False,
                                 "instance submitted twice (the first row counts)", None, None, None, None, None,
                                 None, None, sub.seconds))
            continue
        seen.add(sub.instance_id)
        out.append(_score(load_instance(root, sub.instance_id), sub))
    return out


def score_callable(root: str | Path, fn: Callable[[LibraryInstance], Any], ids: Iterable[str] | None = None) -> list[ScoredRow]:
    """Run ``fn(instance) -> indices`` on every instance (or ``ids``), timed, and score it; an
    exception in ``fn`` refuses that instance's row with the exception named."""
    root = check_library(root)
    out = []
    for row, iid in enumerate(ids if ids is not None else instance_ids(root), 1):
        inst = load_instance(root, iid)
        t0 = time.perf_counter()
        try:
            idx = fn(inst)
            idx = list(np.asarray(idx).ravel())
        except Exception as exc:  # noqa: BLE001 - the caller's code: its failure is a refused row
            out.append(ScoredRow(row, iid, inst.family, inst.theta, inst.n, inst.k, False,
                                 f"the callable raised {type(exc).__name__}: {exc}", None, None, None, None, None,
                                 None, None, time.perf_counter() - t0))
            continue
        out.append(_score(inst, Submission(row, iid, idx, time.perf_counter() - t0)))
    return out


def summarize(scored: list[ScoredRow], by: tuple[str, ...] = ("family",)) -> list[dict]:
    """Per group: rows, feasible, refused, optimal instances, exact hits and their rate, mean and
    worst gap (feasible rows with a reference value), median seconds."""
    groups: dict[tuple, list[ScoredRow]] = {}
    for r in scored:
        groups.setdefault(tuple(getattr(r, b) for b in by), []).append(r)
    out = []
    for key in sorted(groups, key=lambda t: tuple("" if v is None else str(v) for v in t)):
        rs = groups[key]
        ok = [r for r in rs if r.feasible]
        gaps = [r.gap for r in ok if r.gap is not None]
        opt = [r for r in ok if r.status == OPTIMAL]
        secs = [r.seconds for r in ok if r.seconds is not None]
        out.append({**dict(zip(by, key)), "rows": len(rs), "feasible": len(ok), "refused": len(rs) - len(ok),
                    "optimal_instances": len(opt), "exact_hits": sum(bool(r.exact_hit) for r in opt),
                    "exact_hit_rate": (sum(bool(r.exact_hit) for r in opt) / len(opt)) if opt else None,
                    "mean_gap": float(np.mean(gaps)) if gaps else None, "worst_gap": max(gaps) if gaps else None,
                    "median_seconds": float(np.median(secs)) if secs else None})
    return out


def write_scores(scored: list[ScoredRow], out: str | Path) -> tuple[Path, Path]:
    """``scores.csv`` (one line per row) and ``summary.json`` (by family, by family x theta) in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    from divopt_rag.data.atomic import write_atomically

    fields = list(ScoredRow.__dataclass_fields__)

    def rows_csv(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            for r in scored:
                w.writerow({k: ("" if v is None else v) for k, v in asdict(r).items()})

    a = write_atomically(out / "scores.csv", rows_csv)
    summary = {"by_family": summarize(scored), "by_family_theta": summarize(scored, ("family", "theta")),
               "all": summarize(scored, ())}
    text = json.dumps(summary, indent=1, default=lambda v: None)
    b = write_atomically(out / "summary.json", lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return a, b


def verify_library(root: str | Path, *, tol: float = 1e-9) -> list[str]:
    """Every problem found (empty: the library verifies): a file whose xxh3 differs from the
    manifest's or a card's, a file missing or not in the manifest, a stored f that the stored
    rows do not give (within ``tol`` k (k-1)), an infeasible stored set, a bound below f."""
    root = check_library(root)
    problems = []
    manifest = read_json(root / "manifest.json") if (root / "manifest.json").exists() else None
    if manifest is None:
        problems.append("manifest.json is missing")
        listed: dict = {}
    else:
        listed = manifest.get("files", {})
    hashes: dict[str, str] = {}

    def digest(rel: str) -> str | None:
        if rel not in hashes:
            p = root / rel
            hashes[rel] = file_hash(p) if p.is_file() else None
        return hashes[rel]

    for rel, h in sorted(listed.items()):
        got = digest(rel)
        if got is None:
            problems.append(f"{rel}: missing")
        elif got != h:
            problems.append(f"{rel}: hash {got} differs from the manifest's {h}")
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel != "manifest.json" and rel not in listed and manifest is not None:
            problems.append(f"{rel}: not in the manifest")
    for iid in instance_ids(root):
        card_path = root / "instances" / iid / "card.json"
        try:
            card = read_json(card_path)
        except (ValueError, OSError) as exc:
            problems.append(f"{iid}: card unreadable: {exc}")
            continue
        bad_file = False
        for rel, h in card.get("files", {}).items():
            got = digest(rel)
            if got != h:
                problems.append(f"{iid}: {rel}: hash {got} differs from the card's {h}")
                bad_file = True
        if bad_file:
            continue
        try:
            inst = load_instance(root, iid)
        except (ValueError, OSError) as exc:
            problems.append(f"{iid}: unreadable: {exc}")
            continue
        if inst.n != card["n"]:
            problems.append(f"{iid}: {inst.n} rows, the card says n = {card['n']}")
        sol = inst.solution
        if card.get("content") is not None or (sol or {}).get("content") is not None:
            from divopt_rag.experiments.studies.library_solutions import content_hash

            h = content_hash(inst)
            for what, got in (("card", card.get("content")), ("solution", (sol or {}).get("content"))):
                if got is not None and got != h:
                    problems.append(f"{iid}: the {what} names content {got}, the instance reads {h}")
        if sol is None:
            continue
        S, reason = check_set(sol.get("best_set"), inst.n, inst.k)
        if S is None:
            problems.append(f"{iid}: stored set refused: {reason}")
            continue
        f = inst.f(S)
        scale = max(1, inst.k * (inst.k - 1))
        if not (isinstance(sol.get("f"), (int, float)) and abs(f - sol["f"]) <= tol * scale):
            problems.append(f"{iid}: stored f {sol.get('f')!r} but the stored rows give {f!r}")
        b = sol.get("bound")
        if b is not None and b < sol.get("f", -math.inf) - tol * scale:
            problems.append(f"{iid}: bound {b} below f {sol.get('f')}")
    return problems
