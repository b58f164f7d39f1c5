"""Build the instance library (issue 50): pools, subsets, cards, manifest; and rewrite the manifest.

``build_library(root, cache)`` writes the grid (every corpus x n x k x theta, one query per
(n, k) cell) and the extra queries (n in {100, 300}, a second query per cell); the solutions come
from :mod:`divopt_rag.experiments.studies.library_solve` (resumable), which calls
:func:`write_manifest` as it goes. Building again keeps every solution whose instance's files did
not change.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from divopt_rag.experiments.studies.library_corpora import CORPORA, LICENCES, MODEL, POOL_SIZE, embedded_corpus
from divopt_rag.experiments.studies.library_format import (FORMAT, OBJECTIVE, OPEN, file_hash, objective, read_json,
                                                           write_json)

__all__ = ["GRID_N", "GRID_K", "GRID_THETA", "LIBRARY_NAME", "VERSION", "plan", "build_library", "write_manifest",
           "instance_id", "write_instances", "solution_record"]

LIBRARY_NAME = "divopt-ccbqp-lib"
VERSION = "0.1.0"
GRID_N = (100, 300, 1000, 10_000)
GRID_K = (5, 10, 25, 50)
GRID_THETA = (0.3, 0.5, 0.7, 0.9)
EXTRA_N = (100, 300)


def instance_id(corpus: str, n: int, k: int, theta: float, query: int) -> str:
    return f"{corpus}-n{n}-k{k}-t{int(round(theta * 10)):02d}-q{query:02d}"


def plan(pool_sizes: dict[str, int]) -> list[dict]:
    """The instances: dicts of corpus, n, k, theta, query (row of the corpus' queries)."""
    out = []
    for corpus in CORPORA:
        for ni, n in enumerate(GRID_N):
            if n > pool_sizes[corpus]:
                continue
            for ki, k in enumerate(GRID_K):
                queries = [ni * 4 + ki] + ([16 + ni * 4 + ki] if n in EXTRA_N else [])
                for j in queries:
                    for theta in GRID_THETA:
                        out.append({"corpus": corpus, "n": n, "k": k, "theta": theta, "query": j})
    return out


def _write_pool(root: Path, name: str, corpus, E: np.ndarray, Q: np.ndarray) -> dict:
    folder = root / "pools" / name
    folder.mkdir(parents=True, exist_ok=True)
    for fname, arr in (("rows.npy", E), ("queries.npy", Q)):
        path = folder / fname
        if not path.exists() or not np.array_equal(np.load(path), arr):
            np.save(path, np.ascontiguousarray(arr, dtype=np.float32))
    files = {"rows": f"pools/{name}/rows.npy", "queries": f"pools/{name}/queries.npy"}
    if corpus.texts:
        lines = "".join(json.dumps({"id": p, "text": t}, ensure_ascii=False) + "\n"
                        for p, t in zip(corpus.passage_ids, corpus.texts))
        (folder / "passages.jsonl").write_text(lines, encoding="utf-8")
        qlines = "".join(json.dumps({"id": p, "text": t}, ensure_ascii=False) + "\n"
                         for p, t in zip(corpus.query_ids, corpus.queries))
        (folder / "queries.jsonl").write_text(qlines, encoding="utf-8")
        files.update(passages=f"pools/{name}/passages.jsonl", query_texts=f"pools/{name}/queries.jsonl")
    return files


def build_library(root: str | Path, cache: str | Path, *, corpora=CORPORA, seed: int = 0, rgb_path=None,
                  limit: int | None = None, solutions: str | Path | None = "committed", log=print) -> list[str]:
    """Write the library's data files and cards under ``root``; returns the instance ids.
    ``limit`` keeps only the first instances of each corpus (tests, samples). ``solutions``: the
    proven values to attach where the content hashes match
    (:func:`~divopt_rag.experiments.studies.library_solutions.attach_solutions`): "committed" (the
    file in git, :data:`~divopt_rag.experiments.studies.library_solutions.SOLUTIONS_FILE`), a path,
    or None (attach nothing)."""
    ids = []
    for name in corpora:
        corpus, E, Q = embedded_corpus(name, cache, seed=seed, rgb_path=rgb_path)
        todo = [p for p in plan({c: (E.shape[0] if c == name else 0) for c in CORPORA}) if p["corpus"] == name]
        ids += write_instances(root, corpus, E, Q, todo[:limit], LICENCES[name],
                               embedding=None if name == "cone" else MODEL)
    if solutions is not None:
        from divopt_rag.experiments.studies.library_solutions import SOLUTIONS_FILE, attach_solutions

        attach_solutions(root, SOLUTIONS_FILE if solutions == "committed" else solutions, log=log, only=ids)
    write_manifest(root)
    return ids


def write_instances(root: str | Path, corpus, E: np.ndarray, Q: np.ndarray, specs: list[dict], licence: dict,
                    embedding: str | None = None) -> list[str]:
    """Write corpus ``corpus`` (rows E, queries Q) and the instances ``specs`` (dicts n, k, theta,
    query) with their cards; a solution whose instance's files changed is removed."""
    root = Path(root)
    name = corpus.name
    (root / "instances").mkdir(parents=True, exist_ok=True)
    pool_files = _write_pool(root, name, corpus, E, Q)
    hashes = {p: file_hash(root / p) for p in pool_files.values()}
    Q64, E64 = Q.astype(np.float64), E.astype(np.float64)
    ids = []
    for p in specs:
        n, k, theta, j = p["n"], p["k"], p["theta"], p["query"]
        iid = instance_id(name, n, k, theta, j)
        rows: dict = {"pool": pool_files["rows"], "subset": None}
        files = {pool_files["rows"]: hashes[pool_files["rows"]], pool_files["queries"]: hashes[pool_files["queries"]]}
        if n < E.shape[0]:
            rel = E64 @ Q64[j]
            sub = np.sort(np.argsort(-rel, kind="stable")[:n]).astype(np.int32)
            spath = f"subsets/{name}-q{j:02d}-n{n}.npy"
            (root / "subsets").mkdir(exist_ok=True)
            if not (root / spath).exists() or not np.array_equal(np.load(root / spath), sub):
                np.save(root / spath, sub)
            rows["subset"] = spath
            files[spath] = file_hash(root / spath)
        card = {
            "format": FORMAT, "id": iid, "family": name, "corpus": name, "n": n, "k": k, "theta": theta,
            "d": int(E.shape[1]), "rows": rows, "query": {"file": pool_files["queries"], "row": j,
                                                           "id": corpus.query_ids[j],
                                                           "text": corpus.queries[j] if corpus.queries else None},
            "source": licence["source"], "licence": licence["licence"],
            "recipe": {"corpus": corpus.recipe, "embedding": embedding,
                       "pool": f"the top {n} rows of the corpus pool by c = E q (float64), in pool order"
                       if rows["subset"] else "the whole corpus pool", "objective": OBJECTIVE},
            "files": files,
        }
        card["content"] = _content(root, card, E, Q)
        folder = root / "instances" / iid
        old = read_json(folder / "card.json") if (folder / "card.json").exists() else None
        if old != card:
            write_json(folder / "card.json", card)
        sol_path = folder / "solution.json"
        if sol_path.exists():
            sol_content = read_json(sol_path).get("content")
            if (sol_content is not None and sol_content != card["content"]) or (
                    sol_content is None and (old is None or old.get("files") != files)):
                sol_path.unlink()  # the data changed: its solution no longer holds
        ids.append(iid)
    return ids


def _content(root: Path, card: dict, E: np.ndarray, Q: np.ndarray) -> str:
    """The card's ``content``: the hash of what a solver reads (library_solutions.content_hash)."""
    from divopt_rag.experiments.studies.library_format import LibraryInstance
    from divopt_rag.experiments.studies.library_solutions import content_hash

    rows = E if not card["rows"]["subset"] else E[np.load(root / card["rows"]["subset"]).astype(np.int64)]
    q = Q[int(card["query"]["row"])]
    inst = LibraryInstance(card["id"], root, card, None, rows.astype(np.float64), q.astype(np.float64))
    return content_hash(inst)


def _licences_md() -> str:
    lines = ["# Licences", "", "Each instance is licensed as its corpus is (its card's `licence`).", ""]
    for name, lic in LICENCES.items():
        lines += [f"## {name}", "", f"- licence: {lic['licence']}", f"- source: {lic['source']}",
                  f"- full text: {lic['text']}", "", lic["notice"], ""]
    lines += ["The library's code (divopt-rag) is separate; this folder holds data only.", ""]
    return "\n".join(lines)


def write_manifest(root: str | Path, *, note: str | None = None) -> dict:
    """Rewrite ``manifest.json`` (every instance's summary, every file's xxh3) and LICENCES.md;
    CHANGELOG.md is created when missing."""
    root = Path(root)
    (root / "LICENCES.md").write_text(_licences_md(), encoding="utf-8")
    if not (root / "CHANGELOG.md").exists():
        (root / "CHANGELOG.md").write_text(
            f"# Changelog of {LIBRARY_NAME}\n\n## {VERSION}\n\n- first release: instances from WordNet glosses, GCIDE, "
            "RGB en_fact and the synthetic cone; solutions from divopt's branch-and-bound, Gurobi (n <= 200) and the "
            "full-scale certificate (n = 10^4).\n", encoding="utf-8")
    instances = {}
    for folder in sorted((root / "instances").iterdir()):
        if not (folder / "card.json").exists():
            continue
        card = read_json(folder / "card.json")
        sol = read_json(folder / "solution.json") if (folder / "solution.json").exists() else None
        instances[card["id"]] = {
            "family": card["family"], "n": card["n"], "k": card["k"], "theta": card["theta"],
            "status": sol["status"] if sol else OPEN, "f": sol["f"] if sol else None,
            "bound": sol.get("bound") if sol else None, "gap": sol.get("gap") if sol else None,
            "bound_source": sol.get("bound_source") if sol else None,
            "verified_by": sol.get("verified_by") if sol else None}
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel not in ("manifest.json",) and not rel.startswith("."):
            files[rel] = file_hash(path)
    counts = {s: sum(1 for v in instances.values() if v["status"] == s) for s in ("optimal", "open")}
    manifest = {"name": LIBRARY_NAME, "version": VERSION, "format": FORMAT, "objective": OBJECTIVE,
                "written": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "counts": counts,
                "n_instances": len(instances), "instances": instances, "files": files}
    if note:
        manifest["note"] = note
    write_json(root / "manifest.json", manifest)
    return manifest


#: An open instance whose proven bound is within this times k(k-1) of its set's f is optimal.
BOUND_MEETS_F = 1e-9


def solution_record(inst, S, bound: float | None, *, status: str, bound_source: str, solver: str, tolerance: str,
                    seconds: float, verified_by=None, extra: dict | None = None) -> dict:
    """A solution.json body: the set's f recomputed in float64 from the stored rows."""
    from divopt_rag.experiments.studies.library_format import normalized_gap

    S = sorted(int(i) for i in S)
    f = objective(inst.E, inst.q, inst.theta, S)
    if status != "optimal" and bound is not None and bound - f <= BOUND_MEETS_F * max(1, inst.k * (inst.k - 1)):
        # the engine stopped at its limit, but its proven bound meets the set: that is a proof
        status, tolerance = "optimal", f"proven bound - f <= {BOUND_MEETS_F:g} k(k-1) ({bound_source}'s bound)"
    if bound is not None and status == "optimal":
        bound = max(bound, f)
    from divopt_rag.experiments.studies.library_solutions import content_hash

    return {"instance": inst.id, "content": content_hash(inst), "status": status, "best_set": S, "f": f,
            "bound": bound, "bound_source": bound_source,
            "gap": None if bound is None else normalized_gap(bound, f, inst.k),
            "tolerance": tolerance, "solver": solver, "seconds": round(float(seconds), 3),
            "verified_by": verified_by, **(extra or {})}


if __name__ == "__main__":  # python -m ...library_build attach LIB [FILE]: the committed solutions onto LIB, manifest rewritten
    from divopt_rag.experiments.studies.library_solutions import SOLUTIONS_FILE, attach_solutions

    if len(sys.argv) < 3 or sys.argv[1] != "attach":
        raise SystemExit("usage: python -m divopt_rag.experiments.studies.library_build attach LIB [FILE]")
    attach_solutions(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else SOLUTIONS_FILE)
    write_manifest(sys.argv[2])
