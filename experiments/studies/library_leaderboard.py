"""The library's leaderboard (issue 50, item 4): every registered self-contained method, and any
outside submission, scored by :mod:`~divopt_rag.experiments.studies.library_score`, per family x theta.

Each method's picks are written as an ordinary submission (``RESULTS/<method>.csv``:
``instance_id,indices,seconds``) and scored exactly as an outside one is; a method already in
RESULTS is read back (resumable). The page lists, per method, the exact-hit rate on the proven
instances, the mean and worst normalized gap (to the optimum, or to the proven bound on open
instances) and the median seconds per instance.
"""
from __future__ import annotations

import csv
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from divopt_rag.experiments.studies.library_format import instance_ids, load_instance, read_json
from divopt_rag.experiments.studies.library_score import read_submission, score_rows, summarize

__all__ = ["leaderboard_methods", "run_method", "run_leaderboard", "render"]


def leaderboard_methods() -> list[str]:
    """Every registered method that needs nothing beyond the instance (no cross-encoder)."""
    from divopt_rag.solvers.selection import METHOD_NEEDS, METHODS

    return [m for m in METHODS if m not in METHOD_NEEDS]


def run_method(root: Path, method: str, ids: list[str], path: Path, log: Callable[[str], None] = print,
               budget: float | None = None) -> Path:
    """Run ``method`` on ``ids`` and write its submission CSV to ``path`` (rows appended as they
    finish; a partial file is resumed). ``budget``: seconds this call may spend on the method; it
    stops after the instance that passes it, and runs at least one (the page then lists the
    method as partial)."""
    from divopt_rag.solvers.selection import select

    done = set()
    if path.exists():
        done = {s.instance_id for s in read_submission(path)}
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(["instance_id", "indices", "seconds"])
        t_all, wrote = time.perf_counter(), 0
        for iid in ids:
            if iid in done:
                continue
            if budget is not None and wrote and time.perf_counter() - t_all > budget:
                log(f"{method}: budget of {budget:g}s spent")
                break
            I = load_instance(root, iid).to_instance()
            t0 = time.perf_counter()
            sel = select(I, method)
            secs = time.perf_counter() - t0
            w.writerow([iid, " ".join(str(int(i)) for i in sel.indices), f"{secs:.6f}"])
            fh.flush()
            wrote += 1
        log(f"{method}: {wrote} instances in {time.perf_counter() - t_all:.0f}s")
    return path


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _tables(boards: dict[str, list], outside: set[str], title: str) -> list[str]:
    """The page's two tables for one set of rows (one n): every method, then family x theta."""
    boards = {k: rows for k, rows in boards.items() if rows}
    lines = [f"## {title}", "", "| method | rows | refused | hit rate | mean gap | worst gap | median s | proven rows |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    order = sorted(boards, key=lambda k: (-(summarize(boards[k], ())[0]["exact_hit_rate"] or 0),
                                          summarize(boards[k], ())[0]["mean_gap"] or 0))
    for name in order:
        s = summarize(boards[name], ())[0]
        tag = f"{name} (outside)" if name in outside else name
        lines.append(f"| {tag} | {s['rows']} | {s['refused']} | {_fmt(s['exact_hit_rate'], '.3f')} | "
                     f"{_fmt(s['mean_gap'], '.2e')} | {_fmt(s['worst_gap'], '.2e')} | {_fmt(s['median_seconds'], '.3g')} | "
                     f"{s['optimal_instances']} |")
    lines += ["", f"### {title}, per family x theta", "", "Each cell: hit rate / mean gap / worst gap / median s.", ""]
    groups = sorted({(r.family, r.theta) for rows in boards.values() for r in rows if r.family is not None})
    lines += ["| method | " + " | ".join(f"{f} θ={t:g}" for f, t in groups) + " |", "|---|" + "---|" * len(groups)]
    for name in order:
        cells = {(s["family"], s["theta"]): s for s in summarize(boards[name], ("family", "theta"))}
        row = []
        for g in groups:
            s = cells.get(g)
            row.append("-" if s is None else f"{_fmt(s['exact_hit_rate'], '.2f')} / {_fmt(s['mean_gap'], '.1e')} / "
                                             f"{_fmt(s['worst_gap'], '.1e')} / {_fmt(s['median_seconds'], '.2g')}")
        tag = f"{name} (outside)" if name in outside else name
        lines.append(f"| {tag} | " + " | ".join(row) + " |")
    return lines + [""]


def render(root: Path, boards: dict[str, list], outside: set[str], command: str, seconds: float) -> str:
    m = read_json(root / "manifest.json")
    n_ids = {r.instance_id for rows in boards.values() for r in rows}
    partial = sorted(k for k, rows in boards.items() if len(rows) < len(n_ids))
    lines = [
        "# Leaderboard of the CCBQP instance library",
        "",
        f"Written by `{command}` on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from "
        f"{m['name']} {m['version']} ({m['n_instances']} instances: {m['counts'].get('optimal', 0)} optimal, "
        f"{m['counts'].get('open', 0)} open; {len(n_ids)} scored here); machine: 2-core x86_64 VM, shared "
        f"with other jobs (times are wall clock under that load: compare them within this page only); "
        f"the run took {seconds / 60:.0f} min. Do not edit by hand.",
        "",
        *([f"Methods that did not reach every instance in the time the run had (their rows column says how many "
           f"they did; their rates are over those rows only): {', '.join(f'`{p}`' for p in partial)}.", ""]
          if partial else []),
        "- **hit rate**: share of the proven (status `optimal`) instances where the method's f is within "
        "1e-9 k(k-1) of the optimum;",
        "- **mean / worst gap**: (optimum - f) / (k(k-1)) on proven instances, (proven bound - f) / (k(k-1)) on "
        "open ones (an upper estimate of the true gap there);",
        "- **time**: median seconds per instance (outside baselines: as their submission reports it);",
        "- **proven rows**: the rows on instances with status `optimal` (the hit rate's denominator).",
        "- outside baselines (scored through `divopt-rag lib score` from their CSV): " +
        (", ".join(f"`{o}`" for o in sorted(outside)) or "none") + ".",
        "",
        "Every table is for one n (a summary never averages over pool sizes).",
        "",
    ]
    for n in sorted({r.n for rows in boards.values() for r in rows if r.n is not None}):
        lines += _tables({k: [r for r in rows if r.n == n] for k, rows in boards.items()}, outside, f"n = {n}")
    lines.append("")
    return "\n".join(lines)


def _spread(ids: list[str], man: dict) -> list[str]:
    """``ids`` by n, and within one n round-robin over (family, theta), so that a method stopped by
    its budget has covered every family x theta cell about equally."""
    cells: dict = {}
    for i in sorted(ids):
        cells.setdefault((man[i]["n"], man[i]["family"], man[i]["theta"]), []).append(i)
    out = []
    for n in sorted({c[0] for c in cells}):
        queues = [cells[c] for c in sorted(cells) if c[0] == n]
        for j in range(max(len(q) for q in queues)):
            out += [q[j] for q in queues if j < len(q)]
    return out


def run_leaderboard(root, *, methods=None, submissions: dict[str, str] | None = None, max_n: int = 10_000,
                    results="results/lib-leaderboard", out="docs/leaderboard.md", log=print,
                    score_only: bool = False, min_n: int = 0, budget: float | None = None) -> Path:
    from divopt_rag.experiments.studies.library_score import write_scores

    t0 = time.perf_counter()
    root, results, out = Path(root), Path(results), Path(out)
    results.mkdir(parents=True, exist_ok=True)
    man = read_json(root / "manifest.json")["instances"]
    ids = _spread([i for i in instance_ids(root) if min_n <= man[i]["n"] <= max_n], man)
    known = leaderboard_methods()
    methods = list(methods) if methods else known
    bad = [m for m in methods if m not in known]
    if bad:
        raise ValueError(f"--methods: expected self-contained registered methods ({', '.join(known)}), got {bad}")
    boards: dict[str, list] = {}
    for m in methods:
        path = results / f"{m}.csv"
        if not score_only:
            run_method(root, m, ids, path, log, budget=budget)
        elif not path.exists():
            continue
        boards[m] = score_rows(root, [s for s in read_submission(path) if s.instance_id in set(ids)])
        write_scores(boards[m], results / m)
    for name, path in (submissions or {}).items():
        rows = [s for s in read_submission(path) if s.instance_id in set(ids)]
        boards[name] = score_rows(root, rows)
        write_scores(boards[name], results / name)
    cmd = f"divopt-rag lib leaderboard --max-n {max_n}" + (f" --min-n {min_n}" if min_n else "") + (" --score-only" if score_only else "") + (
        f" --budget {budget:g}" if budget is not None else "") + "".join(f" --submission {k}=..." for k in (submissions or {}))
    text = render(root, boards, set(submissions or {}), cmd, time.perf_counter() - t0)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
