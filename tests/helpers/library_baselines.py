"""Two outside baselines for the instance library's leaderboard (issue 50, item 4), written
without divopt's solvers: they read the library's files themselves (numpy only) and write an
ordinary submission CSV (``instance_id,indices,seconds``) that ``divopt-rag lib score`` scores.

* :func:`random_restart_ls`: a plain random-restart 1-swap local search (first improvement,
  ``restarts`` random starts, best of them), in float64 on the library's f.
* :func:`langchain_mmr`: LangChain's ``maximal_marginal_relevance`` (langchain_core) with its
  default ``lambda_mult`` 0.5 on the instance's rows and query (LangChain's own MMR, not the CCBQP).

Run: ``python tests/helpers/library_baselines.py LIBRARY rrls|langchain_mmr OUT.csv [MAX_N]``.
"""
from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import numpy as np


def read_instance(root: Path, iid: str) -> tuple[np.ndarray, np.ndarray, int, float]:
    """(E float64, q float64, k, theta) straight from the files (the format of docs/library.md)."""
    card = json.loads((root / "instances" / iid / "card.json").read_text())
    rows = np.load(root / card["rows"]["pool"])
    if card["rows"]["subset"]:
        rows = rows[np.load(root / card["rows"]["subset"]).astype(np.int64)]
    q = np.load(root / card["query"]["file"])[card["query"]["row"]]
    return rows.astype(np.float64), q.astype(np.float64), int(card["k"]), float(card["theta"])


def f_value(E: np.ndarray, q: np.ndarray, k: int, theta: float, S) -> float:
    X = E[np.asarray(S)]
    G = X @ X.T
    return float(theta * (k - 1) * (X @ q).sum() - (1 - theta) * (G.sum() - np.trace(G)))


def random_restart_ls(E, q, k, theta, *, restarts: int = 5, seed: int = 0, max_passes: int = 50) -> np.ndarray:
    """Best of ``restarts`` 1-swap local searches from random k-sets. A swap i -> j changes f by
    theta (k-1)(c_j - c_i) - 2 (1-theta)(u_j - w_ij - u_i + |e_i|^2), u = E (sum of the set's rows)."""
    rng = np.random.default_rng(seed)
    n = E.shape[0]
    c = E @ q
    sq = (E * E).sum(1)
    best, best_f = None, -np.inf
    for _ in range(restarts):
        S = rng.choice(n, size=k, replace=False)
        inside = np.zeros(n, dtype=bool)
        inside[S] = True
        for _ in range(max_passes):
            u = E @ E[S].sum(0)
            improved = False
            for pos in rng.permutation(k):
                i = S[pos]
                w = E @ E[i]
                gain = theta * (k - 1) * (c - c[i]) - 2 * (1 - theta) * (u - w - u[i] + sq[i])
                gain[inside] = -np.inf
                j = int(np.argmax(gain))
                if gain[j] > 1e-12:
                    inside[i], inside[j] = False, True
                    S[pos] = j
                    u = u - E @ E[i] + E @ E[j]
                    improved = True
            if not improved:
                break
        f = f_value(E, q, k, theta, S)
        if f > best_f:
            best, best_f = np.sort(S), f
    return best


def langchain_mmr(E, q, k, theta) -> np.ndarray:
    from langchain_core.vectorstores.utils import maximal_marginal_relevance

    return np.asarray(maximal_marginal_relevance(q, list(E), k=k), dtype=np.int64)


def write_submission(root: Path, method: str, out: Path, max_n: int = 10**9) -> Path:
    manifest = json.loads((root / "manifest.json").read_text())
    fn = {"rrls": random_restart_ls, "langchain_mmr": langchain_mmr}[method]
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["instance_id", "indices", "seconds"])
        for iid, s in manifest["instances"].items():
            if s["n"] > max_n:
                continue
            E, q, k, theta = read_instance(root, iid)
            t0 = time.perf_counter()
            S = fn(E, q, k, theta)
            w.writerow([iid, " ".join(str(int(i)) for i in S), f"{time.perf_counter() - t0:.6f}"])
    return out


if __name__ == "__main__":
    write_submission(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 10**9)
