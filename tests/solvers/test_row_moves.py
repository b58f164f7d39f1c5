"""The member-row kernels (kernels.row_moves) against the row-scan kernels (kernels.moves, a second
implementation of the same moves) and brute force (every swap's f recomputed with models.ccbqp)."""
from __future__ import annotations

import numpy as np
import pytest

from divopt_rag.solvers.kernels import moves, row_moves
from divopt_rag.solvers.kernels.moves import start

from helpers.gram_pools import f_brute, pool, swaps


@pytest.mark.parametrize("theta", [0.2, 0.5, 0.8])
def test_row_best_swap_is_the_brute_force_best(theta):
    E, q, c, G, lin, one, k, th = pool(theta=theta, seed=1)
    S = np.array([0, 5, 9, 14, 33], dtype=np.int64)
    u, inS = start(G, S)
    f0 = f_brute(E, q, k, th, S)
    gain_of = {(qq, j): f_brute(E, q, k, th, T) - f0 for qq, j, T in swaps(G.shape[0], S)}
    p = G.shape[0]
    R = np.empty((k, p))
    row_moves.fill_rows(G, S, R)
    np.testing.assert_array_equal(R, G[S])
    out, free = np.empty(2, dtype=np.int64), np.zeros(p, dtype=np.int64)
    scratch = [np.empty(2 * k), np.empty(p), np.empty(p), np.empty(p), np.empty(k, dtype=np.int64)]
    g = row_moves.row_best_swap(G, lin, one, S, u, inS, R, np.ascontiguousarray(np.diag(G)), *scratch, free, free, 0,
                                np.inf, out)
    assert g == pytest.approx(max(gain_of.values()), abs=1e-10)
    assert gain_of[(int(out[0]), int(out[1]))] == pytest.approx(g, abs=1e-10)


@pytest.mark.parametrize("seed,theta", [(0, 0.3), (1, 0.5), (2, 0.8)])
def test_walks_and_searches_match_the_row_scan_kernels(seed, theta):
    E, q, c, G, lin, one, k, th = pool(p=60, k=6, seed=seed, theta=theta)
    starts = np.stack([np.random.default_rng(seed + r).choice(60, k, replace=False) for r in range(3)]).astype(np.int64)
    # local searches: the same sets as moves.local_search
    block, f = starts.copy(), np.empty(3)
    row_moves.local_searches(G, lin, one, block, 1e-12, 10_000, f)
    for r in range(3):
        S = starts[r].copy()
        u, inS = start(G, S)
        moves.local_search(G, lin, one, S, u, inS, 1e-12, 10_000)
        assert block[r].tolist() == S.tolist()
        assert f[r] == pytest.approx(f_brute(E, q, k, th, S), abs=1e-9)
    # tabu walks: the same best sets as moves.tabu_walk, each ended by the same 1-swaps
    found, fw = np.empty_like(starts), np.empty(3)
    row_moves.tabu_walks(G, lin, one, starts, 50, 8, 4, 1e-12, 10_000, found, fw)
    for r in range(3):
        S, best = starts[r].copy(), np.empty(k, dtype=np.int64)
        u, inS = start(G, S)
        moves.tabu_walk(G, lin, one, S, u, inS, 50, 8, 4, 1e-12, best)
        u, inS = start(G, best)
        moves.local_search(G, lin, one, best, u, inS, 1e-12, 10_000)
        assert found[r].tolist() == best.tolist()
        assert fw[r] == pytest.approx(f_brute(E, q, k, th, best), abs=1e-9)
