"""``divopt-rag lib ...``: the instance library's commands (flags in
:mod:`divopt_rag.experiments.cli.library_flags`). ``main(args)`` dispatches on ``args.subcommand``
(set by the CLI's path) or on the flags present."""
from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["main"]


def _build(args) -> int:
    from divopt_rag.experiments.studies.library_build import build_library

    lib = Path(args.library).expanduser()
    cache = Path(args.cache) if args.cache else lib.parent / "library-cache"
    solutions = None if getattr(args, "no_solutions", False) else (getattr(args, "solutions", None) or "committed")
    ids = build_library(lib, cache, corpora=tuple(args.corpora), rgb_path=args.rgb, solutions=solutions,
                        log=lambda s: print(s, flush=True))
    print(f"{len(ids)} instances in {lib}")
    if args.solve:
        from divopt_rag.experiments.studies.library_solve import campaign

        campaign(lib, log=lambda s: print(s, flush=True))
    return 0


def _list(args) -> int:
    from divopt_rag.experiments.studies.library_format import read_json

    lib = Path(args.library)
    m = read_json(lib / "manifest.json")
    print(f"{m['name']} {m['version']}: {m['n_instances']} instances, {m['counts']}")
    print(f"{'instance':34s} {'status':8s} {'f':>14s} {'bound':>14s} {'gap':>10s}  bound source")
    for iid, s in m["instances"].items():
        if args.status != "all" and s["status"] != args.status:
            continue
        if args.family is not None and s["family"] != args.family:
            continue
        fmt = lambda v, w: f"{v:{w}.6f}" if isinstance(v, (int, float)) else f"{'-':>{w}s}"  # noqa: E731
        gap = f"{s['gap']:10.2e}" if isinstance(s.get("gap"), (int, float)) else f"{'-':>10s}"
        print(f"{iid:34s} {s['status']:8s} {fmt(s['f'], 14)} {fmt(s['bound'], 14)} {gap}  {s.get('bound_source') or '-'}")
    return 0


def _verify(args) -> int:
    from divopt_rag.experiments.studies.library_format import instance_ids
    from divopt_rag.experiments.studies.library_score import verify_library

    problems = verify_library(args.library)
    for p in problems:
        print(p)
    n = len(instance_ids(args.library))
    print(f"verify: {n} instances, {len(problems)} problem(s)" + ("" if problems else ": every hash and every f holds"))
    return 1 if problems else 0


def _score(args) -> int:
    from divopt_rag.experiments.studies.library_score import read_submission, score_rows, summarize, write_scores

    rows = read_submission(args.submission)
    scored = score_rows(args.library, rows)
    for r in scored:
        if not r.feasible:
            print(f"row {r.row} ({r.instance_id}): refused: {r.reason}")
    a, b = write_scores(scored, args.out)
    print(f"{'family':10s} {'rows':>5s} {'ok':>5s} {'refused':>7s} {'hit rate':>9s} {'mean gap':>10s} {'worst gap':>10s}")
    for s in summarize(scored):
        rate = "-" if s["exact_hit_rate"] is None else f"{s['exact_hit_rate']:.3f}"
        mg = "-" if s["mean_gap"] is None else f"{s['mean_gap']:.2e}"
        wg = "-" if s["worst_gap"] is None else f"{s['worst_gap']:.2e}"
        print(f"{str(s['family'] or '(unknown)'):10s} {s['rows']:5d} {s['feasible']:5d} {s['refused']:7d} {rate:>9s} {mg:>10s} {wg:>10s}")
    print(f"wrote {a} and {b}")
    return 0


def _fetch(args) -> int:
    from divopt_rag.experiments.studies.library_release import fetch_release

    root = fetch_release(args.source, args.library, force=args.force)
    print(f"unpacked to {root}; run `divopt-rag lib verify --library {root}`")
    return 0


def _release(args) -> int:
    from divopt_rag.experiments.studies.library_release import build_release

    path, size = build_release(args.library, args.out, max_mb=args.max_mb)
    print(f"wrote {path} ({size / 1e6:.1f} MB)")
    return 0


def _leaderboard(args) -> int:
    from divopt_rag.experiments.studies.library_leaderboard import run_leaderboard

    subs = dict(s.split("=", 1) for s in args.submission or [])
    page = run_leaderboard(args.library, methods=args.methods, submissions=subs, max_n=args.max_n,
                           results=args.results, out=args.out, log=lambda s: print(s, file=sys.stderr, flush=True),
                           score_only=args.score_only, min_n=args.min_n,
                           budget=args.budget)
    print(f"wrote {page}")
    return 0


_DISPATCH = {"build": _build, "list": _list, "verify": _verify, "score": _score, "fetch": _fetch, "release": _release,
             "leaderboard": _leaderboard}


def main(args) -> int:
    return _DISPATCH[args.lib_command](args)
