"""The proving campaign of the instance library: one solution.json per instance, resumable.

Per instance (``solve_one``):

* n <= 1000: an incumbent from ``fw_ms`` (divopt's multistart, :func:`~divopt_rag.solvers.selection.select`),
  then divopt's branch-and-bound (``solve_exact(..., "bnb")``, relative gap tolerance 1e-6) under
  the campaign's time limit, warm-started (``gurobi_fallback``: at n <= 200 an instance bnb
  leaves open goes on to Gurobi, the pip licence's size; off in the first campaign, for time);
* n = 10^4: the full-scale certificate (:func:`~divopt_rag.solvers.certificates.certify_full_scale`:
  safe screening, relaxation screening, bounds, exact solve of the survivors when <= 1000 remain).

Status ``optimal`` only where the engine proved it (bnb/Gurobi "optimal" at their stated relative
gap, or the certificate's "certified"); else ``open`` with the engine's bound. Verification
(``verify_one``): an optimum at n <= 200 is solved again by Gurobi (or by bnb when Gurobi was the
prover); agreement within the tolerance is written into ``verified_by``.

Each result is written as it finishes (atomic JSON); a rerun skips instances already solved under
the same campaign settings. ``python -m divopt_rag.experiments.studies.library_solve ROOT`` runs it.
"""
from __future__ import annotations

import math
import sys
import time
import traceback
from pathlib import Path

from divopt_rag.experiments.studies.library_build import solution_record, write_manifest
from divopt_rag.experiments.studies.library_format import (OPEN, OPTIMAL, instance_ids, load_instance, read_json,
                                                           write_json)

__all__ = ["TIME_LIMITS", "solve_one", "verify_one", "campaign"]

#: seconds of exact solving per instance, by n (the certificate's exact stage at n = 10^4)
TIME_LIMITS = {100: 4.0, 300: 5.0, 1000: 6.0, 10_000: 6.0}
BNB_GAP = 1e-6
GUROBI_MAX_N = 200
CAMPAIGN = "c1"


def _limit(n: int) -> float:
    return TIME_LIMITS.get(n, max(TIME_LIMITS.values()))


def solve_one(inst, time_limit: float | None = None, *, gurobi_fallback: bool = False) -> dict:
    """Prove or bound one :class:`LibraryInstance`; returns its solution.json body."""
    from divopt_rag.solvers import solve_exact
    from divopt_rag.solvers.selection import select

    t0 = time.perf_counter()
    I = inst.to_instance()
    T = _limit(inst.n) if time_limit is None else time_limit
    if inst.n > 1000:
        from divopt_rag.solvers.certificates import CERTIFIED, certify_full_scale

        cert = certify_full_scale(I, max_exact=1000, time_limit=T)
        ok = cert.status == CERTIFIED
        return solution_record(
            inst, cert.incumbent, cert.upper_bound, status=OPTIMAL if ok else OPEN,
            bound_source=f"full-scale certificate ({cert.how})", solver="certify_full_scale",
            tolerance="a MIP engine's own optimality (bnb relative gap 1e-6, Gurobi 1e-4) on the screened pool, or "
                      "bound - f <= 1e-6 k(k-1)", seconds=time.perf_counter() - t0,
            extra={"campaign": CAMPAIGN, "time_limit": T, "survivors": cert.n_survivors,
                   "exact_status": str(cert.info.get("exact_status", ""))})
    heur = select(I, "fw_ms")
    best, best_f = heur.indices, float(heur.objective)
    r = solve_exact(I, "bnb", time_limit=T, mip_gap=BNB_GAP, warm_start=heur.indices)
    if r.objective is not None and r.objective > best_f:
        best, best_f = r.indices, float(r.objective)
    bound, source, solver, tol = r.bound, "bnb", "bnb", f"bnb relative gap <= {BNB_GAP:g}"
    proven = r.proven_optimal
    if not proven and gurobi_fallback and inst.n <= GUROBI_MAX_N:
        g = solve_exact(I, "gurobi", time_limit=T, warm_start=best)
        if g.objective is not None and g.objective > best_f:
            best, best_f = g.indices, float(g.objective)
        if g.proven_optimal:
            proven, bound, source, solver = True, g.bound, "gurobi", "gurobi"
            tol = "Gurobi MIPGap <= 1e-4 (relative)"
        elif g.bound is not None and (bound is None or g.bound < bound):
            bound, source = g.bound, "gurobi"
    return solution_record(inst, best, None if bound is None or not math.isfinite(bound) else float(bound),
                           status=OPTIMAL if proven else OPEN, bound_source=source, solver=solver, tolerance=tol,
                           seconds=time.perf_counter() - t0,
                           extra={"campaign": CAMPAIGN, "time_limit": T, "incumbent_from": "fw_ms + " + solver})


def verify_one(inst, sol: dict, time_limit: float = 10.0) -> dict | None:
    """A second solver's check of an optimum at n <= 200: {"solver", "f", "status", "agree"}, or None."""
    from divopt_rag.solvers import solve_exact

    if sol["status"] != OPTIMAL or inst.n > GUROBI_MAX_N:
        return None
    other = "bnb" if sol["solver"] == "gurobi" else "gurobi"
    r = solve_exact(inst.to_instance(), other, time_limit=time_limit)
    f2 = None if r.objective is None else inst.f(r.indices)
    tol = 1e-4 * max(1.0, abs(sol["f"])) + 1e-6 * inst.k * (inst.k - 1)
    return {"solver": other, "status": str(r.status), "f": f2, "seconds": round(r.seconds, 3),
            "agree": bool(r.proven_optimal and f2 is not None and abs(f2 - sol["f"]) <= tol)}


def _order(ids: list[str]) -> list[str]:
    def key(iid):
        n = int(iid.split("-n")[1].split("-")[0])
        return ({100: 0, 10_000: 1, 300: 2, 1000: 3}.get(n, 4), iid)
    return sorted(ids, key=key)


def campaign(root: str | Path, *, verify: bool = True, log=print, only: list[str] | None = None) -> None:
    root = Path(root)
    ids = _order(only or instance_ids(root))
    done = 0
    for iid in ids:
        path = root / "instances" / iid / "solution.json"
        if path.exists() and read_json(path).get("campaign") == CAMPAIGN:
            continue
        inst = load_instance(root, iid)
        try:
            sol = solve_one(inst)
        except Exception as exc:  # noqa: BLE001 - one instance's failure is recorded, the campaign goes on
            log(f"{iid}: ERROR {type(exc).__name__}: {exc}")
            traceback.print_exc()
            continue
        write_json(path, sol)
        done += 1
        log(f"{iid}: {sol['status']} f={sol['f']:.6g} gap={sol['gap']} {sol['seconds']:.1f}s")
        if done % 20 == 0:
            write_manifest(root)
    if verify:
        for iid in ids:
            path = root / "instances" / iid / "solution.json"
            if not path.exists():
                continue
            sol = read_json(path)
            if sol.get("verified_by") is not None or sol["status"] != OPTIMAL:
                continue
            inst = load_instance(root, iid)
            v = verify_one(inst, sol)
            if v is not None:
                sol["verified_by"] = v
                write_json(path, sol)
                log(f"{iid}: verified by {v['solver']}: agree={v['agree']}")
    write_manifest(root)


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
    from divopt_rag.experiments.studies.library_score import check_set
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


if __name__ == "__main__":
    campaign(sys.argv[1], log=lambda s: print(time.strftime("%H:%M:%S"), s, flush=True))
