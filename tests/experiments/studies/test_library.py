"""The instance library (issue 50): the format round trip, hashes, the scorer against brute force,
per-row refusals, verify catching a flipped byte, release/fetch, the CLI's bad input."""
from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from divopt_rag.data.dictd import decode_b64, load_dictd, read_dictd_index
from divopt_rag.experiments.cli.main import main as cli
from divopt_rag.experiments.studies.library_build import solution_record, write_instances, write_manifest
from divopt_rag.experiments.studies.library_corpora import LICENCES, Corpus
from divopt_rag.experiments.studies.library_format import OPTIMAL, file_hash, instance_ids, load_instance, write_json
from divopt_rag.experiments.studies.library_release import build_release, fetch_release
from divopt_rag.experiments.studies.library_score import (Submission, read_submission, score_callable, score_rows,
                                                          verify_library)

SAMPLE = Path(__file__).resolve().parents[2] / "helpers" / "fixtures" / "library_sample"


def _brute(E, q, k, theta):
    """Independent truth: every k-set, f in float64 written out pair by pair."""
    E, q = E.astype(np.float64), q.astype(np.float64)
    best, best_f = None, -np.inf
    for S in itertools.combinations(range(E.shape[0]), k):
        rel = sum(float(E[i] @ q) for i in S)
        red = sum(float(E[i] @ E[j]) for i in S for j in S if i != j)
        f = theta * (k - 1) * rel - (1 - theta) * red
        if f > best_f:
            best, best_f = list(S), f
    return best, best_f


def make_library(root: Path, n_pool: int = 14, d: int = 6, seed: int = 0) -> list[str]:
    """A tiny library: one synthetic corpus, pools of 9 and 14 rows, every optimum by enumeration."""
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n_pool, d)).astype(np.float32)
    E[5] = E[4] + 0.01  # a near-duplicate
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    Q = rng.standard_normal((3, d)).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    corpus = Corpus("toy", [f"t{i}" for i in range(n_pool)], [f"text {i}" for i in range(n_pool)], ["a", "b", "c"],
                    ["qa", "qb", "qc"], {"generator": "tests"})
    specs = [{"n": n, "k": k, "theta": t, "query": j} for n, k, t, j in
             [(9, 3, 0.3, 0), (9, 4, 0.7, 1), (n_pool, 3, 0.5, 2), (n_pool, 2, 0.9, 0)]]
    ids = write_instances(root, corpus, E, Q, specs, LICENCES["cone"])
    for iid in ids:
        inst = load_instance(root, iid)
        S, f = _brute(inst.E, inst.q, inst.k, inst.theta)
        write_json(root / "instances" / iid / "solution.json",
                   solution_record(inst, S, f, status=OPTIMAL, bound_source="enumeration", solver="brute",
                                   tolerance="exact", seconds=0.0))
    write_manifest(root)
    return ids


@pytest.fixture
def lib(tmp_path):
    root = tmp_path / "lib"
    make_library(root)
    return root


def test_round_trip_and_f_against_brute_force(lib):
    ids = instance_ids(lib)
    assert len(ids) == 4
    for iid in ids:
        inst = load_instance(lib, iid)
        card = json.loads((lib / "instances" / iid / "card.json").read_text())
        assert inst.n == card["n"] and inst.k == card["k"] and inst.E.dtype == np.float64
        assert all(file_hash(lib / rel) == h for rel, h in card["files"].items())
        S, f = _brute(inst.E, inst.q, inst.k, inst.theta)
        assert inst.solution["f"] == pytest.approx(f, abs=1e-12)
        from divopt_rag.models import ccbqp_objective  # divopt's own f on the same rows
        assert ccbqp_objective(inst.to_instance(), S) == pytest.approx(f, abs=1e-5)
    assert verify_library(lib) == []


def test_scorer_matches_brute_force(lib):
    rows, truth = [], {}
    rng = np.random.default_rng(1)
    for r, iid in enumerate(instance_ids(lib), 1):
        inst = load_instance(lib, iid)
        S = rng.choice(inst.n, size=inst.k, replace=False)
        X = inst.E[S]
        f = inst.theta * (inst.k - 1) * (X @ inst.q).sum() - (1 - inst.theta) * sum(
            X[a] @ X[b] for a in range(inst.k) for b in range(inst.k) if a != b)
        truth[iid] = (f, inst.solution["f"], inst.k)
        rows.append(Submission(r, iid, list(S)))
    for s in score_rows(lib, rows):
        f, opt, k = truth[s.instance_id]
        assert s.feasible and s.f == pytest.approx(f, abs=1e-12)
        assert s.gap == pytest.approx(max(0.0, (opt - f) / (k * (k - 1))), abs=1e-12)
    best = score_callable(lib, lambda inst: _brute(inst.E, inst.q, inst.k, inst.theta)[0])
    assert all(s.exact_hit and s.gap == 0 for s in best)


def test_refusals_are_per_row_and_named(lib, tmp_path):
    a, b, c = "toy-n9-k3-t03-q00", "toy-n9-k4-t07-q01", "toy-n14-k3-t05-q02"
    sub = tmp_path / "sub.csv"
    sub.write_text("instance_id,indices\n"
                   f"{a},0 1\n"           # wrong k (3)
                   f"{b},0 0 1 2\n"       # duplicates
                   f"{a},0 1 99\n"        # out of range (and a's second row)
                   "nosuch,0 1 2\n"
                   f"{c},0 1 x\n", encoding="utf-8")
    out = {s.row: s for s in score_rows(lib, read_submission(sub))}
    assert "wrong k" in out[2].reason and "expected 3" in out[2].reason
    assert "duplicates" in out[3].reason
    assert "twice" in out[4].reason
    assert "unknown instance 'nosuch'" in out[5].reason
    assert "index 'x' is not an integer" in out[6].reason
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"instance_id": a, "indices": [0, 1, 99]}, {"instance_id": b, "indices": [0, 1, 2, 3]}]))
    rows = {s.instance_id: s for s in score_rows(lib, read_submission(good))}
    assert "out of range: [99]" in rows[a].reason and rows[b].feasible


def test_verify_detects_a_flipped_byte(lib):
    rows = lib / "pools" / "toy" / "rows.npy"
    data = bytearray(rows.read_bytes())
    data[-3] ^= 0x01
    rows.write_bytes(bytes(data))
    problems = verify_library(lib)
    assert any("pools/toy/rows.npy: hash" in p for p in problems)


def test_verify_detects_a_wrong_f(lib):
    iid = instance_ids(lib)[0]
    path = lib / "instances" / iid / "solution.json"
    sol = json.loads(path.read_text())
    sol["f"] += 1e-3
    path.write_text(json.dumps(sol))
    write_manifest(lib)  # the hashes agree again: only f is wrong
    assert any(f"{iid}: stored f" in p for p in verify_library(lib))


def test_release_fetch_round_trip(lib, tmp_path):
    archive, size = build_release(lib, tmp_path / "dist")
    assert archive.name == "divopt-ccbqp-lib-0.1.0.tar.gz" and size > 0
    got = fetch_release("file://" + str(archive), tmp_path / "fetched")
    assert verify_library(got) == [] and instance_ids(got) == instance_ids(lib)
    assert (got / "CHANGELOG.md").exists() and (got / "LICENCES.md").exists()


def test_cli(lib, tmp_path, capsys):
    sub = tmp_path / "s.csv"
    iid = "toy-n9-k3-t03-q00"
    sub.write_text(f"instance_id,indices\n{iid},0 1 2\n{iid}x,0 1 2\n")
    assert cli(["lib", "score", "--library", str(lib), "--submission", str(sub), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "row 3" in out and "unknown instance" in out and (tmp_path / "o" / "scores.csv").exists()
    assert cli(["lib", "verify", "--library", str(lib)]) == 0
    assert cli(["lib", "list", "--library", str(lib), "--status", "optimal"]) == 0
    assert cli(["lib", "verify", "--library", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--library" in err
    assert cli(["lib", "fetch", "http://example.org/x.tar.gz", "--library", str(tmp_path / "f")]) == 2
    assert cli(["lib", "score", "--library", str(lib), "--submission", str(tmp_path / "missing.csv")]) == 2


def test_sample_fixture_verifies_and_shell_reader_agrees(tmp_path):
    assert verify_library(SAMPLE) == []
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    script = Path(__file__).resolve().parents[3] / "docs" / "library_reader.sh"
    for iid in instance_ids(SAMPLE):
        out = subprocess.run(["bash", str(script), str(SAMPLE), iid], capture_output=True, text=True, check=True).stdout
        stored, recomputed = (float(v) for v in out.split()[-2:])
        assert recomputed == pytest.approx(stored, abs=1e-5 * max(1.0, abs(stored)))


def test_dictd_reader(tmp_path):
    assert decode_b64("BgB") == 1 * 64 * 64 + 32 * 64 + 1
    text = b"alpha\n  the first letter\nbeta\n  the second\n"
    (tmp_path / "t.index").write_text("00-database-url\tA\tA\nalpha\tA\tZ\nbeta\tZ\tS\n")
    import gzip
    (tmp_path / "t.dict.dz").write_bytes(gzip.compress(text))
    assert [r[0] for r in read_dictd_index(tmp_path / "t.index")] == ["00-database-url", "alpha", "beta"]
    entries = load_dictd(tmp_path / "t")
    assert [(e.headword, e.text) for e in entries] == [("alpha", "the first letter"), ("beta", "the second")]
    (tmp_path / "bad.index").write_text("alpha\tA!\tZ\n")
    (tmp_path / "bad.dict.dz").write_bytes(gzip.compress(text))
    with pytest.raises(ValueError, match="bad.index:1"):
        load_dictd(tmp_path / "bad")


def test_finalize_fills_from_submissions_with_a_valid_bound(lib, tmp_path):
    from divopt_rag.experiments.studies.library_solve import finalize

    iid = "toy-n14-k3-t05-q02"
    inst = load_instance(lib, iid)
    S, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    (lib / "instances" / iid / "solution.json").unlink()
    res = tmp_path / "res"
    res.mkdir()
    (res / "m.csv").write_text(f"instance_id,indices\n{iid},0 1 2\n")
    finalize(lib, res, log=lambda s: None)
    sol = load_instance(lib, iid).solution
    assert sol["best_set"] == [0, 1, 2] and sol["bound"] >= opt - 1e-9
    assert sol["status"] == ("optimal" if sol["bound"] - sol["f"] <= 1e-9 * 6 else "open")
    assert verify_library(lib) == []


def test_leaderboard_page_from_methods_and_an_outside_submission(lib, tmp_path):
    from divopt_rag.experiments.studies.library_leaderboard import run_leaderboard
    from helpers.library_baselines import write_submission

    sub = write_submission(lib, "rrls", tmp_path / "rrls.csv")
    page = run_leaderboard(lib, methods=["topk", "fw"], submissions={"rrls": str(sub)}, results=tmp_path / "res",
                           out=tmp_path / "lb.md", log=lambda s: None)
    text = page.read_text()
    sections = {int(part.split()[0]): part for part in text.split("\n## n = ")[1:]}
    assert sorted(sections) == [9, 14]  # one table per n, never averaged over n
    assert "toy θ=0.5" in sections[14] and "toy θ=0.5" not in sections[9]
    # per n: its hit rate is the share of its sets that enumeration says are optimal
    hits = {9: 0, 14: 0}
    for row in read_submission(sub):
        inst = load_instance(lib, row.instance_id)
        hits[inst.n] += abs(inst.f([int(i) for i in row.indices]) - _brute(inst.E, inst.q, inst.k, inst.theta)[1]) <= 1e-9
    for n, part in sections.items():
        assert "| topk | 2 | 0 |" in part and f"| rrls (outside) | 2 | 0 | {hits[n] / 2:.3f} |" in part


def test_leaderboard_budget_stops_a_method_and_the_page_says_partial(lib, tmp_path):
    """A budget of 0 s: each method runs exactly one instance (the check comes before each one, so
    no clock is read against a bound), and the page names the methods as partial."""
    from divopt_rag.experiments.studies.library_leaderboard import run_leaderboard
    from helpers.library_baselines import write_submission

    sub = write_submission(lib, "rrls", tmp_path / "rrls.csv")
    page = run_leaderboard(lib, methods=["topk", "fw"], submissions={"rrls": str(sub)}, results=tmp_path / "res",
                           out=tmp_path / "lb.md", log=lambda s: None, budget=0.0)
    text = page.read_text()
    assert "| topk | 1 | 0 |" in text and "| fw | 1 | 0 |" in text and "| rrls (outside) | 2 | 0 |" in text
    assert "did not reach every instance" in text and "`topk`" in text and "--budget 0" in text
    assert len(read_submission(tmp_path / "res" / "topk.csv")) == 1


def test_committed_solutions_attach_only_on_matching_content(tmp_path):
    """The solutions file (MIPLIB's .solu): a rebuilt library gets its proven values back where the
    content hash matches; an instance whose data changed has its record refused and named."""
    from divopt_rag.experiments.studies.library_solutions import (attach_solutions, content_hash, export_solutions,
                                                                  read_solutions)

    first = tmp_path / "first"
    ids = make_library(first)
    solu = tmp_path / "solutions.jsonl"
    export_solutions(first, solu, log=lambda s: None)
    records = read_solutions(solu)
    assert sorted(records) == sorted(ids)
    for iid in ids:
        inst = load_instance(first, iid)
        assert records[iid]["content"] == content_hash(inst) == inst.card["content"]
        assert records[iid]["f"] == pytest.approx(_brute(inst.E, inst.q, inst.k, inst.theta)[1], abs=1e-12)

    # the same data rebuilt without solutions: every record comes back, checked against enumeration
    again = tmp_path / "again"
    make_library(again)
    for iid in ids:
        (again / "instances" / iid / "solution.json").unlink()
    got = attach_solutions(again, solu, log=lambda s: None)
    assert sorted(got["attached"]) == sorted(ids) and got["stale"] == [] and got["refused"] == []
    write_manifest(again)
    assert verify_library(again) == []
    for iid in ids:
        inst = load_instance(again, iid)
        assert inst.solution["best_set"] == _brute(inst.E, inst.q, inst.k, inst.theta)[0]

    # other data (seed 1) under the same ids: every record is stale, named, and none is written
    other = tmp_path / "other"
    make_library(other, seed=1)
    for iid in ids:
        (other / "instances" / iid / "solution.json").unlink()
    lines = []
    got = attach_solutions(other, solu, log=lines.append)
    assert got["attached"] == [] and sorted(i for i, _ in got["stale"]) == sorted(ids)
    for iid in ids:
        assert any(line.startswith(f"{iid}: stale") and "not reused" in line for line in lines)
        assert not (other / "instances" / iid / "solution.json").exists()

    # a record whose f the rows do not give is refused even when the hash matches
    bad = dict(records)
    iid = ids[0]
    bad[iid] = {**records[iid], "f": records[iid]["f"] + 1.0}
    from divopt_rag.experiments.studies.library_solutions import write_solutions

    write_solutions(bad, tmp_path / "bad.jsonl")
    (again / "instances" / iid / "solution.json").unlink()
    got = attach_solutions(again, tmp_path / "bad.jsonl", log=lambda s: None, only=[iid])
    assert got["refused"] and got["refused"][0][0] == iid and "f" in got["refused"][0][1]
    assert not (again / "instances" / iid / "solution.json").exists()


def test_verify_names_a_solution_for_other_content(lib):
    iid = "toy-n9-k3-t03-q00"
    path = lib / "instances" / iid / "solution.json"
    sol = json.loads(path.read_text())
    sol["content"] = "xxh3:0000000000000000"
    path.write_text(json.dumps(sol))
    write_manifest(lib)
    assert any(p.startswith(f"{iid}: the solution names content xxh3:0000000000000000") for p in verify_library(lib))


def test_second_solver_agrees_with_enumeration_and_flags_a_wrong_optimum(lib):
    """verify_one: bnb re-solves a claimed (Gurobi) optimum; the enumeration optimum is agreed with,
    a worse set labelled optimal is a disagreement (bnb finds the better set)."""
    from divopt_rag.experiments.studies.library_solve import AGREE, DISAGREE, verify_one

    iid = "toy-n14-k3-t05-q02"
    inst = load_instance(lib, iid)
    S, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    good = {"status": OPTIMAL, "best_set": S, "f": inst.f(S), "solver": "gurobi"}
    v = verify_one(inst, good, time_limit=60)
    assert v["solver"] == "bnb" and v["verdict"] == AGREE and v["f"] == pytest.approx(opt, abs=1e-9)
    worse = next(list(T) for T in itertools.combinations(range(inst.n), inst.k) if inst.f(T) < opt - 1e-3)
    v = verify_one(inst, {"status": OPTIMAL, "best_set": worse, "f": inst.f(worse), "solver": "gurobi"}, time_limit=60)
    assert v["verdict"] == DISAGREE and v["f"] == pytest.approx(opt, abs=1e-9)
    assert verify_one(inst, {**good, "status": "open"}) is None


def test_scip_checks_a_bnb_optimum_when_gurobi_cannot_take_the_screened_pool(lib):
    """verify_one on a bnb optimum whose screened pool is larger than Gurobi's licence (lowered
    here to 2 binaries, so every pool of k = 3 items exceeds it): SCIP on the screened pool proves
    enumeration's optimum (agree); a worse set labelled optimal, and the true set with a claimed f
    above the optimum, are disagreements."""
    pytest.importorskip("pyscipopt")
    from divopt_rag.experiments.studies.library_solve import AGREE, DISAGREE, verify_one

    iid = "toy-n14-k3-t05-q02"
    inst = load_instance(lib, iid)
    S, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    good = {"status": OPTIMAL, "best_set": S, "f": inst.f(S), "solver": "bnb"}
    v = verify_one(inst, good, time_limit=60, gurobi_max_n=2, compact=False)
    assert v["solver"] == "scip" and v["status"] == "optimal" and v["verdict"] == AGREE
    assert v["f"] == pytest.approx(opt, abs=1e-9) and v["bound"] >= opt - 1e-9
    assert v["warm_start"] == "the stored set" and "screened pool" in v["on"]
    worse = next(list(T) for T in itertools.combinations(range(inst.n), inst.k) if inst.f(T) < opt - 1e-3)
    v = verify_one(inst, {**good, "best_set": worse, "f": inst.f(worse)}, time_limit=60, gurobi_max_n=2, compact=False)
    assert v["solver"] == "scip" and v["verdict"] == DISAGREE and v["f"] == pytest.approx(opt, abs=1e-9)
    v = verify_one(inst, {**good, "f": opt + 1e-3}, time_limit=60, gurobi_max_n=2, compact=False)  # only SCIP's proof refutes it
    assert v["solver"] == "scip" and v["verdict"] == DISAGREE and v["bound"] < opt + 1e-3


def _stored_optimum(lib, iid, solver, verified_by):
    """Write enumeration's optimum of ``iid`` as proven by ``solver``, with that check record;
    returns (the optimum, its solution.json path)."""
    inst = load_instance(lib, iid)
    S, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    sol = solution_record(inst, S, opt, status=OPTIMAL, bound_source=solver, solver=solver, tolerance="-",
                          seconds=0.0, verified_by=verified_by)
    path = lib / "instances" / iid / "solution.json"
    path.write_text(json.dumps(sol))
    return opt, path


def test_gurobi_checks_a_bnb_optimum_beyond_its_miqp_licence_in_the_compact_milp(lib):
    """verify_one on a bnb optimum at n above the MIQP licence (lowered here to 2 binaries): Gurobi
    solves the whole instance in Glover's compact MILP first: it proves enumeration's optimum
    (agree), and refutes a worse set labelled optimal and a claimed f above the optimum."""
    pytest.importorskip("gurobipy")
    from divopt_rag.experiments.studies.library_solve import AGREE, DISAGREE, verify_one

    iid = "toy-n14-k3-t05-q02"
    inst = load_instance(lib, iid)
    S, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    good = {"status": OPTIMAL, "best_set": S, "f": inst.f(S), "solver": "bnb"}
    v = verify_one(inst, good, time_limit=60, gurobi_max_n=2)
    assert (v["solver"], v["formulation"], v["verdict"], v["status"]) == ("gurobi", "milp_compact", AGREE, "optimal")
    assert v["f"] == pytest.approx(opt, abs=1e-9) and v["bound"] >= opt - 1e-6 and v["n_solved"] == inst.n
    assert "tried" not in v
    worse = next(list(T) for T in itertools.combinations(range(inst.n), inst.k) if inst.f(T) < opt - 1e-3)
    v = verify_one(inst, {**good, "best_set": worse, "f": inst.f(worse)}, time_limit=60, gurobi_max_n=2)
    assert v["formulation"] == "milp_compact" and v["verdict"] == DISAGREE and v["f"] == pytest.approx(opt, abs=1e-9)
    v = verify_one(inst, {**good, "f": opt + 1e-3}, time_limit=60, gurobi_max_n=2)
    assert v["formulation"] == "milp_compact" and v["verdict"] == DISAGREE


def test_solve_one_proves_with_the_compact_milp_above_the_miqp_licence_and_bnb_checks_it(lib, monkeypatch):
    """Above Gurobi's MIQP licence (lowered here to 2 binaries) at k <= 5 the campaign's prover is
    Gurobi on the compact MILP: enumeration's optimum; its second solver is then bnb (agree)."""
    pytest.importorskip("gurobipy")
    import divopt_rag.experiments.studies.library_solve as LS

    monkeypatch.setattr(LS, "GUROBI_MAX_N", 2)
    inst = load_instance(lib, "toy-n14-k3-t05-q02")
    _, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    sol = LS.solve_one(inst, time_limit=60)
    assert sol["status"] == OPTIMAL and sol["solver"] == LS.COMPACT and sol["f"] == pytest.approx(opt, abs=1e-9)
    v = LS.verify_one(inst, sol, time_limit=60, gurobi_max_n=2)
    assert v["solver"] == "bnb" and v["verdict"] == LS.AGREE
    assert LS.solve_one(inst, time_limit=60, compact=False)["solver"] == "bnb"


def test_a_timed_out_compact_check_hands_over_to_the_screened_pool_and_is_kept(lib, monkeypatch):
    """When Gurobi's compact MILP times out, the screened-pool engine (SCIP here) decides and the
    compact attempt is kept under ``tried``; with SCIP skipped the compact verdict is the answer."""
    pytest.importorskip("gurobipy")
    pytest.importorskip("pyscipopt")
    import divopt_rag.solvers as solvers
    from divopt_rag.experiments.studies.library_solve import AGREE, TIMED_OUT, verify_one

    real = solvers.solve_exact

    def slow_compact(I, solver, **kw):
        r = real(I, solver, **kw)
        if kw.get("formulation") == "milp_compact":  # as if its limit had passed at the root
            r.status, r.bound = "time_limit", r.objective + 1.0
        return r

    monkeypatch.setattr(solvers, "solve_exact", slow_compact)
    iid = "toy-n14-k3-t05-q02"
    inst = load_instance(lib, iid)
    S, _ = _brute(inst.E, inst.q, inst.k, inst.theta)
    good = {"status": OPTIMAL, "best_set": S, "f": inst.f(S), "solver": "bnb"}
    v = verify_one(inst, good, time_limit=60, gurobi_max_n=2)
    assert v["solver"] == "scip" and v["verdict"] == AGREE
    assert [(t["solver"], t["formulation"], t["verdict"]) for t in v["tried"]] == [("gurobi", "milp_compact", TIMED_OUT)]
    v = verify_one(inst, good, time_limit=60, gurobi_max_n=2, skip=("gurobi", "scip"))
    assert (v["formulation"], v["verdict"]) == ("milp_compact", TIMED_OUT) and "tried" not in v
    # above COMPACT_FIRST_MAX_K the screened pool goes first: SCIP decides, the compact MILP never runs
    import divopt_rag.experiments.studies.library_solve as LS

    monkeypatch.setattr(LS, "COMPACT_FIRST_MAX_K", inst.k - 1)
    monkeypatch.setattr(LS, "_compact_check", lambda *a: pytest.fail("the compact MILP ran first"))
    v = verify_one(inst, good, time_limit=60, gurobi_max_n=2)
    assert v["solver"] == "scip" and v["verdict"] == AGREE and "tried" not in v


def test_reverify_tries_the_compact_milp_on_a_check_that_timed_out_at_this_limit(lib):
    """reverify: a bnb optimum whose SCIP check timed out at this very limit is checked again only
    because Gurobi's compact MILP applies now (SCIP is not run again); once that has run, never again."""
    pytest.importorskip("gurobipy")
    from divopt_rag.experiments.studies.library_solve import AGREE, TIMED_OUT, reverify

    iid = "toy-n14-k3-t05-q02"
    _, path = _stored_optimum(lib, iid, "bnb", {"solver": "scip", "verdict": TIMED_OUT, "seconds": 61.0,
                                                "time_limit": 60.0})
    assert reverify(lib, 60.0, log=lambda s: None, only=[iid]) == {}  # at the real licence (200): nothing new
    assert reverify(lib, 60.0, log=lambda s: None, only=[iid], gurobi_max_n=2) == {AGREE: 1}
    v = json.loads(path.read_text())["verified_by"]
    assert (v["solver"], v["formulation"], v["verdict"]) == ("gurobi", "milp_compact", AGREE)
    assert v["earlier"] == {"solver": "scip", "verdict": TIMED_OUT, "seconds": 61.0, "time_limit": 60.0}
    assert reverify(lib, 60.0, log=lambda s: None, only=[iid], gurobi_max_n=2) == {}  # agreed: done
    assert verify_library(lib) == []


def test_reverify_runs_a_not_run_check_again(lib):
    """reverify: an optimum whose check did not run (no engine took its pool then) is checked now,
    whatever the earlier limit; the new verdict replaces it."""
    from divopt_rag.experiments.studies.library_solve import AGREE, NOT_RUN, reverify

    iid = "toy-n14-k3-t05-q02"
    inst = load_instance(lib, iid)
    S, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    sol = solution_record(inst, S, opt, status=OPTIMAL, bound_source="gurobi", solver="gurobi", tolerance="-",
                          seconds=0.0, verified_by={"solver": "bnb", "verdict": NOT_RUN, "time_limit": 300.0})
    path = lib / "instances" / iid / "solution.json"
    path.write_text(json.dumps(sol))
    assert reverify(lib, 60.0, log=lambda s: None, only=[iid]) == {AGREE: 1}
    v = json.loads(path.read_text())["verified_by"]
    assert v["verdict"] == AGREE and v["earlier"]["verdict"] == NOT_RUN and v["f"] == pytest.approx(opt, abs=1e-9)
    assert verify_library(lib) == []  # the manifest was rewritten with the new solution's hash


def test_reverify_replaces_a_timed_out_check_and_keeps_the_earlier_one(lib):
    """reverify: an optimum whose second-solver check timed out is checked again with the longer
    limit; the new verdict (agree: enumeration's optimum) replaces it, the old one is kept."""
    from divopt_rag.experiments.studies.library_solve import AGREE, TIMED_OUT, reverify

    iid = "toy-n14-k3-t05-q02"
    opt, path = _stored_optimum(lib, iid, "gurobi", {"solver": "bnb", "verdict": TIMED_OUT, "seconds": 1.0,
                                                     "time_limit": 1.0})
    counts = reverify(lib, 60.0, log=lambda s: None)
    v = json.loads(path.read_text())["verified_by"]
    assert v["verdict"] == AGREE and v["solver"] == "bnb" and v["time_limit"] == 60.0
    assert v["earlier"] == {"solver": "bnb", "verdict": TIMED_OUT, "seconds": 1.0, "time_limit": 1.0}
    assert counts == {AGREE: 1}  # the other optima have no check yet: left to the campaign
    assert v["f"] == pytest.approx(opt, abs=1e-9)
    assert reverify(lib, 60.0, log=lambda s: None) == {}  # every check now ran at 60 s: none again


def test_retry_open_closes_an_open_instance_at_the_enumeration_optimum(lib):
    """retry_open: an instance left open with a loose bound is solved again; it ends optimal at
    enumeration's value, checked by the second solver, with the earlier record kept."""
    from divopt_rag.experiments.studies.library_build import solution_record
    from divopt_rag.experiments.studies.library_solve import retry_open

    iid = "toy-n14-k3-t05-q02"
    inst = load_instance(lib, iid)
    S, opt = _brute(inst.E, inst.q, inst.k, inst.theta)
    worse = next(list(T) for T in itertools.combinations(range(inst.n), inst.k) if inst.f(T) < opt - 1e-3)
    path = lib / "instances" / iid / "solution.json"
    path.write_text(json.dumps(solution_record(inst, worse, opt + 1.0, status="open", bound_source="test",
                                               solver="test", tolerance="-", seconds=0.0)))
    counts = retry_open(lib, 60.0, log=lambda s: None)
    sol = json.loads(path.read_text())
    assert counts["closed"] == 1 and sol["status"] == OPTIMAL and sol["f"] == pytest.approx(opt, abs=1e-9)
    assert sol["earlier"]["bound"] == pytest.approx(opt + 1.0) and sol["verified_by"]["verdict"] == "agree"
    assert verify_library(lib) == []  # the manifest was rewritten with the new solution's hash
