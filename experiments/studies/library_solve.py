"""The proving campaign of the instance library: one solution.json per instance, resumable.

Per instance (``solve_one``; campaign "c2", limits :data:`TIME_LIMITS` per engine):

* n <= 200 (the Gurobi pip licence): an incumbent from ``fw_ws_ms``, then Gurobi (relative MIPGap
  1e-6, one thread), warm-started; divopt's branch-and-bound (bnb, relative gap 1e-6) when Gurobi
  leaves it open;
* 200 < n <= 1000: the incumbent, then (k <= 5, n <= 999) Gurobi on Glover's compact MILP, then bnb;
* n = 10^4: the full-scale certificate (:func:`~divopt_rag.solvers.certificates.certify_full_scale`:
  safe screening, relaxation screening, bounds, exact solve of the survivors when <= 1000 remain).

Status ``optimal`` only where the engine proved it (its "optimal" at its stated relative gap, or
the certificate's "certified"); else ``open`` with the engine's bound. Verification
(``verify_one``, right after each optimum, limits :data:`VERIFY_LIMITS`): the engine that did not
prove it solves it again (bnb for Gurobi's optima, Gurobi for bnb's at n <= 200; at n > 200 Gurobi
on the certificate's screened pool when that fits the licence, else SCIP on it, and Gurobi on the
whole instance in Glover's compact MILP, which the licence takes up to n = 999: first at k <= 5,
last above; each later engine only when the one before timed out), warm-started from the stored
set; its verdict (agree / disagree / timed_out / not_run), time and limit go into ``verified_by``.

Each result is written as it finishes (atomic JSON); a rerun skips instances already solved under
the same campaign settings. ``python -m divopt_rag.experiments.studies.library_solve ROOT`` runs it.
"""
from __future__ import annotations

import math
import os
import sys
import time
import traceback
from pathlib import Path

from divopt_rag.experiments.studies.library_build import solution_record, write_manifest
from divopt_rag.experiments.studies.library_format import (OPEN, OPTIMAL, instance_ids, load_instance, read_json,
                                                           write_json)

__all__ = ["TIME_LIMITS", "VERIFY_LIMITS", "solve_one", "verify_one", "campaign", "reverify", "retry_open", "AGREE", "DISAGREE", "TIMED_OUT",
           "NOT_RUN"]

#: seconds of exact solving per instance, by n (per engine: at n <= 200 Gurobi, then bnb if Gurobi
#: left it open; the certificate's exact stage at n = 10^4)
TIME_LIMITS = {100: 15.0, 300: 10.0, 1000: 10.0, 10_000: 10.0}
#: seconds the second solver gets per optimum, by n
VERIFY_LIMITS = {100: 20.0, 300: 20.0, 1000: 20.0, 10_000: 20.0}
BNB_GAP = 1e-6
GUROBI_GAP = 1e-6
GUROBI_MAX_N = 200
SCIP_GAP = 1e-6
#: the largest (screened) pool SCIP is handed as a second solver; its time limit decides the rest
SCIP_MAX_N = 1000
#: the relative gap each engine is run at, as prover and as second solver
_GAPS = {"gurobi": GUROBI_GAP, "bnb": BNB_GAP, "scip": SCIP_GAP}
CAMPAIGN = "c2"
AGREE = "agree"
DISAGREE = "disagree"
TIMED_OUT = "timed_out"
NOT_RUN = "not_run"


def _limit(n: int, table: dict | None = None) -> float:
    table = TIME_LIMITS if table is None else table
    return table.get(n, max(table.values()))


def _gurobi_ok() -> bool:
    try:
        import gurobipy  # noqa: F401
    except ImportError:
        return False
    return True


def solve_one(inst, time_limit: float | None = None, *, gurobi_fallback: bool = True, compact: bool = True) -> dict:
    """Prove or bound one :class:`LibraryInstance`; returns its solution.json body.

    n <= 200 (Gurobi's pip licence): Gurobi first (relative MIPGap 1e-6, one thread), warm-started
    from ``fw_ws_ms``; divopt's bnb when Gurobi leaves it open. 200 < n <= 1000: bnb (relative gap
    1e-6), after Gurobi on Glover's compact MILP at k <= :data:`COMPACT_FIRST_MAX_K` where its
    licence takes it (``compact``; n <= 999). n > 1000: the full-scale certificate. Each engine
    gets ``time_limit`` seconds."""
    from divopt_rag.solvers import solve_exact
    from divopt_rag.solvers.selection import select

    t0 = time.perf_counter()
    I = inst.to_instance()
    T = _limit(inst.n) if time_limit is None else time_limit
    if inst.n > 1000:
        from divopt_rag.solvers.certificates import CERTIFIED, certify_full_scale

        cert = certify_full_scale(I, max_exact=1000, time_limit=T)
        ok = cert.status == CERTIFIED
        exact = str(cert.info.get("exact_solver", ""))
        return solution_record(
            inst, cert.incumbent, cert.upper_bound, status=OPTIMAL if ok else OPEN,
            bound_source=f"full-scale certificate ({cert.how})",
            solver="certify_full_scale" + (f" + {exact}" if exact else ""),
            tolerance="a MIP engine's own optimality (bnb relative gap 1e-6, Gurobi 1e-4) on the screened pool, or "
                      "bound - f <= 1e-6 k(k-1)", seconds=time.perf_counter() - t0,
            extra={"campaign": CAMPAIGN, "time_limit": T, "survivors": cert.n_survivors,
                   "exact_status": str(cert.info.get("exact_status", ""))})
    heur = select(I, "fw_ws_ms")
    best, best_f = heur.indices, float(heur.objective)
    bound, source, solver, tol, proven = None, None, None, None, False
    engines = (["gurobi"] if gurobi_fallback and inst.n <= GUROBI_MAX_N and _gurobi_ok() else []) + (
        [COMPACT] if compact and inst.k <= COMPACT_FIRST_MAX_K and _compact_applies(inst.n, inst.theta, "bnb", GUROBI_MAX_N) else []
    ) + ["bnb"]
    for engine in engines:
        solver_name, form = engine.split("/") if "/" in engine else (engine, "auto")
        gap = _GAPS[solver_name]
        r = solve_exact(I, solver_name, time_limit=T, mip_gap=gap, warm_start=best, threads=1, formulation=form)
        if r.objective is not None and r.objective > best_f:
            best, best_f = r.indices, float(r.objective)
        b = _finite(r.bound)
        if r.proven_optimal:
            proven, solver, source = True, engine, engine
            bound = b if bound is None or b is None else min(bound, b)
            tol = f"{engine} relative gap <= {gap:g}"
            break
        if b is not None and (bound is None or b < bound):
            bound, source = b, engine
        solver = "+".join(engines[:engines.index(engine) + 1])
    return solution_record(inst, best, bound, status=OPTIMAL if proven else OPEN, bound_source=source or "none",
                           solver=solver, tolerance=tol or "-", seconds=time.perf_counter() - t0,
                           extra={"campaign": CAMPAIGN, "time_limit": T, "incumbent_from": "fw_ws_ms + " + solver})


def _agreement_tol(f: float) -> float:
    return 2e-6 * max(1.0, abs(f))


def _scip_ok() -> bool:
    from divopt_rag.models.solver_limits import available_solvers

    return "scip" in available_solvers()


#: the engine tag of Gurobi on Glover's compact MILP of the whole instance (``verified_by["tried"]``)
COMPACT = "gurobi/milp_compact"


def _engine_tag(v: dict) -> str:
    return f"{v['solver']}/{v['formulation']}" if v.get("formulation") else str(v.get("solver"))


def _compact_applies(n: int, theta: float, primary: str, gurobi_max_n: int = GUROBI_MAX_N) -> bool:
    """Whether Gurobi on the compact MILP may check (or prove) a non-Gurobi optimum: at
    n > ``gurobi_max_n``, with gurobipy installed and its licence taking the model (n <= 999)."""
    from divopt_rag.solvers.exact import licence_refusal

    return ("gurobi" not in primary and n > gurobi_max_n and _gurobi_ok()
            and licence_refusal("gurobi", n, theta, "milp_compact") is None)


def _verdict(f: float, tol: float, f2: float | None, proven: bool, b2: float | None) -> str:
    if f2 is not None and f2 > f + tol:
        return DISAGREE  # a better set than the "optimum"
    if proven and f2 is not None:
        return AGREE if abs(f2 - f) <= tol else DISAGREE
    if b2 is not None and b2 <= f + tol:
        return AGREE  # its proven bound meets f
    return TIMED_OUT


#: Gurobi's compact MILP runs before the screened-pool engines at k <= this, after them above it.
#: Measured on the library's n = 300 optima that SCIP left unchecked at 150-600 s: at k = 5 the
#: compact MILP proved all three in under 90 s; at k = 10 its bound stayed 20-160 % above f after
#: 300-600 s (docs/library.md), where SCIP proves most k = 10 and 25 checks.
COMPACT_FIRST_MAX_K = 5


def _summary(v: dict) -> dict:
    return {k: v.get(k) for k in ("solver", "formulation", "verdict", "bound", "seconds", "time_limit") if k in v}


def verify_one(inst, sol: dict, time_limit: float | None = None, *, gurobi_max_n: int = GUROBI_MAX_N,
               compact: bool = True, skip: tuple[str, ...] = ()) -> dict | None:
    """A second exact solver's check of an optimum: {"solver", "on", "verdict", "status", "f",
    "bound", "seconds", "engine_seconds", "time_limit", "warm_start"}, or None when ``sol`` is not
    optimal (``seconds``: the whole check; ``engine_seconds``: the run of the engine that decided,
    with its certificate's screening at n > ``gurobi_max_n``).

    The second solver is the engine that did not prove it: bnb for a Gurobi optimum; for a bnb
    optimum Gurobi where its licence takes the pool (``gurobi_max_n`` binaries, the pip licence's
    200; tests lower it), else SCIP (relative gap 1e-6, no size limit but its time). The pool is the
    instance at n <= ``gurobi_max_n``; above it the full-scale certificate's screened pool
    (divopt's screening, which keeps every optimal set; the certificate is run again with SCIP
    when the screened pool is too large for Gurobi; bnb for a certificate whose exact stage was
    Gurobi). It is warm-started from the stored set and has to prove no better set exists.
    verdict: ``agree`` (it proved an optimum, or a bound, within 2e-6 max(1, |f|) of f),
    ``disagree`` (it proved an optimum that differs, or found a better set), ``timed_out`` (its
    limit passed with its bound above f), ``not_run`` (no second engine could take it; ``why``
    says why).

    For a bnb optimum at n > ``gurobi_max_n`` Gurobi also solves the whole instance in Glover's
    compact MILP (:func:`~divopt_rag.models.mip_ccbqp.build_ccbqp_compact`, no screening; with
    ``compact``, when its licence takes it: n <= 999): before the screened-pool engines at
    k <= :data:`COMPACT_FIRST_MAX_K`, after them above it, each with the whole limit; the next one
    runs only when the one before timed out, whose attempt is kept under ``tried``. ``skip``:
    engine tags ("gurobi/milp_compact", "gurobi", "scip") not to run (they timed out at this limit)."""
    if sol["status"] != OPTIMAL:
        return None
    V = _limit(inst.n, VERIFY_LIMITS) if time_limit is None else time_limit
    primary = str(sol.get("solver", ""))
    steps = [lambda: _screened_check(inst, sol, V, gurobi_max_n, skip)]
    if compact and COMPACT not in skip and _compact_applies(inst.n, inst.theta, primary, gurobi_max_n):
        if set(skip) >= {"gurobi", "scip"}:
            steps = []
        at = 0 if inst.k <= COMPACT_FIRST_MAX_K else len(steps)
        steps.insert(at, lambda: _compact_check(inst, sol, V))
    results: list[dict] = []
    for step in steps:
        results.append(step())
        if results[-1]["verdict"] not in (TIMED_OUT, NOT_RUN):
            break
    # the answer: the deciding check, else the last one that ran (over one that could not run)
    ran = [r for r in results if r["verdict"] != NOT_RUN]
    v = ran[-1] if ran and results[-1]["verdict"] == NOT_RUN else results[-1]
    tried = [_summary(r) for r in results if r is not v]
    return {**v, "tried": tried} if tried else v


def _finite(bound) -> float | None:
    """An engine's bound as a float, or None when it has none (None or not finite)."""
    return None if bound is None or not math.isfinite(bound) else float(bound)


def _instance_check(inst, sol: dict, V: float, solver: str, formulation: str = "auto") -> dict:
    """``solver`` (in ``formulation``) on the whole instance, warm-started from the stored set."""
    from divopt_rag.solvers import solve_exact

    t0 = time.perf_counter()
    f = float(sol["f"])
    r = solve_exact(inst.to_instance(), solver, formulation=formulation, time_limit=V, mip_gap=_GAPS[solver],
                    warm_start=sol["best_set"], threads=1)
    f2 = None if r.objective is None else inst.f(r.indices)
    b2 = _finite(r.bound)
    verdict = _verdict(f, _agreement_tol(f), f2, r.proven_optimal, b2)
    form = {} if formulation == "auto" else {"formulation": formulation}
    return {"solver": solver, **form, "on": "the instance" + (" (Glover's compact MILP)" if form else ""),
            "verdict": verdict, "status": str(r.status), "f": f2, "bound": b2,
            "seconds": round(time.perf_counter() - t0, 3), "engine_seconds": round(float(r.seconds), 3),
            "time_limit": V, "warm_start": "the stored set", "agree": verdict == AGREE, "n_solved": inst.n}


def _compact_check(inst, sol: dict, V: float) -> dict:
    """Gurobi on Glover's compact MILP of the whole instance, warm-started from the stored set."""
    return _instance_check(inst, sol, V, "gurobi", "milp_compact")


def _screened_check(inst, sol: dict, V: float, gurobi_max_n: int, skip: tuple[str, ...]) -> dict:
    """The check by the other engine on the instance (n <= ``gurobi_max_n``) or on the full-scale
    certificate's screened pool (:func:`verify_one`)."""
    primary = str(sol.get("solver", ""))
    if inst.n <= gurobi_max_n:
        other = "bnb" if "gurobi" in primary else "gurobi" if _gurobi_ok() else "scip" if _scip_ok() else None
        if other is None:
            return {"solver": "gurobi", "on": "the instance", "verdict": NOT_RUN,
                    "why": "neither gurobipy nor pyscipopt is installed", "time_limit": V}
        return _instance_check(inst, sol, V, other)
    from divopt_rag.solvers.certificates import certify_full_scale

    if "gurobi" in primary:
        engines = [("bnb", 1000)]
    else:  # Gurobi where its licence takes the screened pool, else SCIP
        engines = ([("gurobi", gurobi_max_n)] if _gurobi_ok() and "gurobi" not in skip else []) + (
            [("scip", SCIP_MAX_N)] if _scip_ok() and "scip" not in skip else [])
    if not engines:
        return {"solver": "gurobi", "on": "the certificate's screened pool", "verdict": NOT_RUN,
                "why": f"skipped here: {', '.join(skip)}" if skip else "neither gurobipy nor pyscipopt is installed",
                "time_limit": V}
    t0 = time.perf_counter()
    I = inst.to_instance()
    cert, ran = None, ""
    for other, max_exact in engines:
        cert = certify_full_scale(I, max_exact=max_exact, exact_solver=other, time_limit=V,
                                  mip_gap=_GAPS[other], warm_start=sol["best_set"])
        ran = str(cert.info.get("exact_solver", ""))
        if ran:
            break
    n_on = cert.n_survivors
    on = f"the certificate's screened pool ({n_on} of {inst.n} items; divopt's screening)"
    if not ran:
        why = f"the screened pool has {n_on} items, more than " + " or ".join(
            f"{e} takes here ({m})" for e, m in engines)
        return {"solver": "+".join(e for e, _ in engines), "on": on, "verdict": NOT_RUN,
                "time_limit": V, "seconds": round(time.perf_counter() - t0, 3), "why": why}
    f = float(sol["f"])
    f2, b2 = inst.f(cert.incumbent), float(cert.upper_bound)
    verdict = _verdict(f, _agreement_tol(f), f2, cert.info.get("exact_status") == "optimal", b2)
    warm_note = {"used": "the stored set", "beaten": "a fast selector's better set",
                 "screened out": "the certificate's incumbent (safe screening removed an item of the stored set)"
                 }.get(cert.info.get("warm_start"), "the certificate's incumbent")
    return {"solver": ran, "on": on, "verdict": verdict, "status": str(cert.info.get("exact_status")), "f": f2,
            "bound": b2, "seconds": round(time.perf_counter() - t0, 3),
            # the certificate run whose exact stage ran (screening included)
            "engine_seconds": round(float(cert.seconds), 3), "time_limit": V,
            "warm_start": warm_note, "agree": verdict == AGREE, "n_solved": n_on}


def _order(ids: list[str]) -> list[str]:
    def key(iid):
        n = int(iid.split("-n")[1].split("-")[0])
        return ({100: 0, 10_000: 1, 300: 2, 1000: 3}.get(n, 4), iid)
    return sorted(ids, key=key)


def campaign(root: str | Path, *, verify: bool = True, log=print, only: list[str] | None = None,
             manifest: bool = True) -> None:
    """Solve every instance not yet solved in this campaign (or proven optimal before), and
    verify each optimum with a second solver right after it (resumable: a verified optimum, or an
    instance of this campaign, is skipped)."""
    root = Path(root)
    ids = _order(only or instance_ids(root))
    done = 0
    for iid in ids:
        path = root / "instances" / iid / "solution.json"
        sol = read_json(path) if path.exists() else None
        inst = None
        if sol is None or (sol.get("campaign") != CAMPAIGN and sol.get("status") != OPTIMAL):
            inst = load_instance(root, iid)
            try:
                new = solve_one(inst)
            except Exception as exc:  # noqa: BLE001 - one instance's failure is recorded, the campaign goes on
                log(f"{iid}: ERROR {type(exc).__name__}: {exc}")
                traceback.print_exc()
                continue
            if sol is not None and sol.get("f") is not None and sol["f"] > new["f"] and sol.get("content") == new["content"]:
                # an earlier campaign's set is better: keep it, with the tighter of the two proven bounds
                b = min(x for x in (sol.get("bound"), new.get("bound")) if x is not None) if (
                    sol.get("bound") is not None or new.get("bound") is not None) else None
                new = solution_record(inst, sol["best_set"], b, status=OPEN, bound_source=new["bound_source"],
                                      solver=new["solver"], tolerance=new["tolerance"], seconds=new["seconds"],
                                      extra={"campaign": CAMPAIGN, "time_limit": new.get("time_limit"),
                                             "incumbent_from": f"campaign {sol.get('campaign')}"})
            sol = new
            write_json(path, sol)
            done += 1
            log(f"{iid}: {sol['status']} f={sol['f']:.6g} gap={sol['gap']} {sol['seconds']:.1f}s")
        if verify and sol["status"] == OPTIMAL and (sol.get("verified_by") or {}).get("verdict") in (None, TIMED_OUT) \
                and not (sol.get("verified_by") or {}).get("campaign") == CAMPAIGN:
            inst = inst or load_instance(root, iid)
            try:
                v = verify_one(inst, sol)
            except Exception as exc:  # noqa: BLE001
                log(f"{iid}: verification ERROR {type(exc).__name__}: {exc}")
                continue
            if v is not None:
                v["campaign"] = CAMPAIGN
                sol["verified_by"] = v
                write_json(path, sol)
                log(f"{iid}: second solver {v['solver']}: {v['verdict']} ({v.get('seconds')}s of {v['time_limit']}s)")
        if manifest and done and done % 20 == 0:
            write_manifest(root)
    if manifest:
        write_manifest(root)


def reverify(root: str | Path, time_limit: float, *, log=print, max_n: int = 10_000,
             only: list[str] | None = None, gurobi_max_n: int = GUROBI_MAX_N, compact: bool = True) -> dict:
    """Run the second solver again, with ``time_limit`` seconds, on every optimum whose check timed
    out at a shorter limit (the campaign's :data:`VERIFY_LIMITS`), or timed out at this one without
    trying Gurobi on the compact MILP where that applies now (:func:`verify_one`; the engines that
    timed out are not run again), or did not run (``not_run``: no
    engine took its pool then; one may now, e.g. SCIP where Gurobi's licence cannot); the new
    verdict replaces the old one (kept under ``earlier``), and the manifest is rewritten.
    ``only``: these instance ids alone. An optimum with no check yet is left to the campaign, which checks
    it right after proving it (so a reverify beside a running campaign does not race it). Returns
    counts of the new verdicts. ``gurobi_max_n``, ``compact``: as in :func:`verify_one` (tests lower
    the first; ``compact=False`` leaves Gurobi's compact MILP out)."""
    root = Path(root)
    counts: dict[str, int] = {}
    for iid in _order(only or instance_ids(root)):
        path = root / "instances" / iid / "solution.json"
        sol = read_json(path) if path.exists() else None
        if sol is None or sol["status"] != OPTIMAL or int(iid.split("-n")[1].split("-")[0]) > max_n:
            continue
        old = sol.get("verified_by") or {}
        verdict, inst, skip = old.get("verdict"), None, ()
        if verdict == TIMED_OUT and (old.get("time_limit") or 0) >= time_limit:
            # timed out at this limit already: again only if an engine it did not try applies now
            done_tags = {_engine_tag(old)} | {_engine_tag(t) for t in old.get("tried") or ()}
            inst = load_instance(root, iid)
            if not compact or COMPACT in done_tags or not _compact_applies(inst.n, inst.theta, str(sol.get("solver", "")), gurobi_max_n):
                continue
            skip = tuple(sorted(done_tags))
        elif verdict not in (NOT_RUN, TIMED_OUT):
            continue
        v = verify_one(inst or load_instance(root, iid), sol, time_limit=time_limit, skip=skip,
                       gurobi_max_n=gurobi_max_n, compact=compact)
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
        log(f"{iid}: second solver {_engine_tag(v)} again: {v['verdict']} ({v.get('seconds')}s of {time_limit:g}s)")
        v["campaign"] = CAMPAIGN
        v["earlier"] = ({k: old.get(k) for k in ("solver", "verdict", "seconds", "time_limit")}
                        | ({"formulation": old["formulation"]} if old.get("formulation") else {})) if old else None
        sol["verified_by"] = v
        write_json(path, sol)
    if counts:
        write_manifest(root)  # the manifest holds every solution file's hash and verdict
    log(f"reverify at {time_limit:g}s: {counts}")
    return counts


def retry_open(root: str | Path, time_limit: float, *, ns: set[int] | None = None, log=print,
               verify: bool = True, only: list[str] | None = None) -> dict:
    """Solve every open instance (of the sizes ``ns``) again with ``time_limit`` seconds per engine,
    warm-started from its stored set (``solve_one``). The new result replaces the stored one only
    when it is proven optimal (then the second solver checks it at once) or has a tighter bound
    (the better of the two sets is kept, with the tighter bound); the earlier record's solver,
    bound and limit are kept under ``earlier``; the manifest is rewritten when a record changed.
    ``only``: these instance ids alone. Returns {"closed", "tighter", "unchanged"}."""
    root = Path(root)
    counts = {"closed": 0, "tighter": 0, "unchanged": 0}
    for iid in _order(only or instance_ids(root)):
        path = root / "instances" / iid / "solution.json"
        sol = read_json(path) if path.exists() else None
        if sol is None or sol["status"] == OPTIMAL or (ns and int(iid.split("-n")[1].split("-")[0]) not in ns):
            continue
        inst = load_instance(root, iid)
        new = solve_one(inst, time_limit=time_limit)
        earlier = {k: sol.get(k) for k in ("solver", "bound", "gap", "time_limit", "campaign")}
        old_b = sol.get("bound")
        if new["status"] == OPTIMAL and new["f"] >= sol["f"] - _agreement_tol(sol["f"]):
            counts["closed"] += 1
        elif new.get("bound") is not None and (old_b is None or new["bound"] < old_b):
            counts["tighter"] += 1
            if sol["f"] > new["f"]:
                new = solution_record(inst, sol["best_set"], new["bound"], status=OPEN, bound_source=new["bound_source"],
                                      solver=new["solver"], tolerance=new["tolerance"], seconds=new["seconds"],
                                      extra={"campaign": CAMPAIGN, "time_limit": time_limit,
                                             "incumbent_from": sol.get("incumbent_from") or "the stored set"})
        else:
            counts["unchanged"] += 1
            log(f"{iid}: still open, bound not tighter ({time_limit:g}s)")
            continue
        new["earlier"] = earlier
        if verify and new["status"] == OPTIMAL:
            v = verify_one(inst, new)
            if v is not None:
                v["campaign"] = CAMPAIGN
                new["verified_by"] = v
        write_json(path, new)
        log(f"{iid}: {new['status']} gap={new['gap']} ({time_limit:g}s; was {earlier['gap']})"
            + (f"; second solver {new['verified_by']['verdict']}" if new.get("verified_by") else ""))
    if counts["closed"] or counts["tighter"]:
        write_manifest(root)  # the manifest holds every solution file's hash and verdict
    log(f"retry_open at {time_limit:g}s: {counts}")
    return counts


def _method_sets(results: Path) -> dict[str, list[tuple[str, list[int]]]]:
    """instance id -> [(method, indices)] from the leaderboard's submission CSVs in ``results``."""
    from divopt_rag.experiments.studies.library_score import read_submission

    out: dict[str, list] = {}
    for path in sorted(Path(results).glob("*.csv")):
        for sub in read_submission(path):
            out.setdefault(sub.instance_id, []).append((path.stem, sub.indices))
    return out


def finalize(root: str | Path, results: str | Path | None = None, *, log=print, bound_iter: int = 300,
             fallback_method: str = "fw_ls", only: list[str] | None = None) -> dict:
    """After the campaign: every instance gets a solution. The best set of the leaderboard's
    method runs (``results``) replaces a stored set it beats; an instance the campaign did not
    reach gets that set and the concave relaxation's bound (status open unless the bound meets
    f); the bound-meets-f rule is applied to every stored solution. Returns counts."""
    from divopt_rag.experiments.studies.library_build import BOUND_MEETS_F
    from divopt_rag.experiments.studies.library_format import normalized_gap, objective
    from divopt_rag.experiments.studies.library_format import check_set
    from divopt_rag.solvers.bounds import concave_bound

    root = Path(root)
    sets = _method_sets(Path(results)) if results else {}
    counts = {"filled": 0, "improved": 0, "closed_by_bound": 0}
    for iid in only or instance_ids(root):
        inst = load_instance(root, iid)
        path = root / "instances" / iid / "solution.json"
        sol = read_json(path) if path.exists() else None
        best_m, best_S, best_f = None, None, -math.inf
        for m, idx in sets.get(iid, []):
            S, _ = check_set(idx, inst.n, inst.k)
            if S is not None:
                f = objective(inst.E, inst.q, inst.theta, S)
                if f > best_f:
                    best_m, best_S, best_f = m, S, f
        scale = max(1, inst.k * (inst.k - 1))
        if sol is None:
            t0 = time.perf_counter()
            if best_S is None:  # no leaderboard run reached it: a fast method's set
                from divopt_rag.solvers.selection import select

                best_m = fallback_method
                best_S = select(inst.to_instance(), fallback_method).indices
            ub, _ = concave_bound(inst.to_instance(), max_iter=bound_iter)
            sol = solution_record(inst, best_S, float(ub), status=OPEN, bound_source="concave relaxation (FW, "
                                  f"{bound_iter} iterations)", solver=f"fast method {best_m}",
                                  tolerance="-", seconds=time.perf_counter() - t0,
                                  extra={"campaign": "fill", "note": "not reached by the proving campaign"})
            counts["filled"] += 1
            counts["closed_by_bound"] += sol["status"] == OPTIMAL
        else:
            changed = False
            if best_S is not None and best_f > sol["f"] + 1e-12 * scale:
                sol.update(best_set=sorted(int(i) for i in best_S), f=best_f,
                           incumbent_from=f"{best_m} (leaderboard run; better than the solver's set)")
                counts["improved"] += 1
                changed = True
            b = sol.get("bound")
            if b is not None:
                if sol["status"] == OPTIMAL:
                    b = max(b, sol["f"])
                sol["bound"], sol["gap"] = b, normalized_gap(b, sol["f"], inst.k)
                if sol["status"] != OPTIMAL and b - sol["f"] <= BOUND_MEETS_F * scale:
                    sol["status"] = OPTIMAL
                    sol["tolerance"] = f"proven bound - f <= {BOUND_MEETS_F:g} k(k-1) ({sol['bound_source']}'s bound)"
                    counts["closed_by_bound"] += 1
                changed = True
            if not changed:
                continue
        write_json(path, sol)
        log(f"{iid}: {sol['status']} gap={sol['gap']}")
    if only is None:
        write_manifest(root)
    log(f"finalize: {counts}")
    return counts


if __name__ == "__main__" and len(sys.argv) > 3 and sys.argv[2] == "--retry-open":
    # python -m ...library_solve LIB --retry-open SECONDS [N ...]: the open instances again, longer
    retry_open(sys.argv[1], float(sys.argv[3]), ns={int(a) for a in sys.argv[4:]} or None,
               log=lambda s: print(time.strftime("%H:%M:%S"), s, flush=True))
elif __name__ == "__main__" and len(sys.argv) > 3 and sys.argv[2] == "--reverify":
    # python -m ...library_solve LIB --reverify SECONDS [MAX_N] [ID ...]: timed-out or not-run
    # second-solver checks again (of those instances only, if named)
    # (DIVOPT_LIB_NO_COMPACT=1: without Gurobi's compact MILP)
    reverify(sys.argv[1], float(sys.argv[3]), max_n=int(sys.argv[4]) if len(sys.argv) > 4 else 10_000,
             only=sys.argv[5:] or None, log=lambda s: print(time.strftime("%H:%M:%S"), s, flush=True),
             compact=os.environ.get("DIVOPT_LIB_NO_COMPACT") != "1")
elif __name__ == "__main__":  # python -m ...library_solve LIB [N ...]: the campaign (only those n, if given)
    _root = sys.argv[1]
    _ns = {int(a) for a in sys.argv[2:]}
    _only = [i for i in instance_ids(_root) if not _ns or int(i.split("-n")[1].split("-")[0]) in _ns]
    campaign(_root, log=lambda s: print(time.strftime("%H:%M:%S"), s, flush=True), only=_only, manifest=not _ns)
