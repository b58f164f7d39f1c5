"""The compiled search kernels (divopt_rag.solvers.kernels) against brute force: every gain, move
and set is recomputed from scratch in float64 with numpy (f from models.ccbqp). The same tests
run under NUMBA_DISABLE_JIT=1 (test_tests_pass_without_jit), where numba runs the Python code."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

from divopt_rag.solvers.kernels import checks, gains, moves, ms_moves, rng
from divopt_rag.solvers.kernels.moves import start
from helpers.gram_pools import f_brute, pool, swaps


@pytest.mark.parametrize("theta", [0.0, 0.3, 0.9, 1.0])
def test_set_f_and_u_match_the_objective(theta):
    E, q, c, G, lin, one, k, th = pool(theta=theta)
    S = np.array([3, 7, 1, 20, 11], dtype=np.int64)
    assert gains.set_f(G, lin, one, S) == pytest.approx(f_brute(E, q, k, th, S), abs=1e-10)
    u, inS = start(G, S)
    np.testing.assert_allclose(u, G[:, S].sum(1), atol=1e-12)
    gains.apply_swap(G, S, u, inS, 2, 30)
    assert S.tolist() == [3, 7, 30, 20, 11] and inS.sum() == 5 and inS[30] and not inS[1]
    np.testing.assert_allclose(u, G[:, S].sum(1), atol=1e-12)


@pytest.mark.parametrize("theta", [0.2, 0.5, 0.8])
def test_best_swap_is_the_brute_force_best(theta):
    E, q, c, G, lin, one, k, th = pool(theta=theta, seed=1)
    S = np.array([0, 5, 9, 14, 33], dtype=np.int64)
    u, inS = start(G, S)
    f0 = f_brute(E, q, k, th, S)
    gain_of = {(qq, j): f_brute(E, q, k, th, T) - f0 for qq, j, T in swaps(G.shape[0], S)}
    out = np.empty(2, dtype=np.int64)
    free = np.zeros(G.shape[0], dtype=np.int64)
    GS, top = np.empty((G.shape[0], k)), np.empty(G.shape[0])
    moves.fill_columns(G, S, GS, top)
    np.testing.assert_array_equal(GS, G[:, S])
    np.testing.assert_array_equal(top, G[:, S].max(1))
    diag = np.ascontiguousarray(np.diag(G))
    g = moves.best_swap(G, lin, one, S, u, inS, GS, top, diag, np.empty(2 * k), free, free, 0, np.inf, out)
    assert g == pytest.approx(max(gain_of.values()), abs=1e-10)
    assert gain_of[(int(out[0]), int(out[1]))] == pytest.approx(g, abs=1e-10)
    # a barred row may not enter unless it beats the aspiration level
    until = free.copy()
    until[out[1]] = 5
    g2 = moves.best_swap(G, lin, one, S, u, inS, GS, top, diag, np.empty(2 * k), until, free, 1, np.inf, out)
    assert g2 == pytest.approx(max(v for (qq, j), v in gain_of.items() if until[j] == 0), abs=1e-10)


def test_greedy_matches_a_numpy_greedy():
    E, q, c, G, lin, one, k, th = pool(seed=2)
    S, u, inS = np.empty(k, dtype=np.int64), np.empty(G.shape[0]), np.empty(G.shape[0], dtype=np.bool_)
    moves.greedy(G, lin, one, S, u, inS)
    chosen: list[int] = []
    for _ in range(k):
        rest = [j for j in range(G.shape[0]) if j not in chosen]
        fs = [f_brute(E, q, len(chosen) + 1, th, chosen + [j]) * 0 + _marginal(G, lin, one, chosen, j) for j in rest]
        chosen.append(rest[int(np.argmax(fs))])
    assert S.tolist() == chosen
    np.testing.assert_allclose(u, G[:, S].sum(1), atol=1e-12)


def _marginal(G, lin, one, chosen, j):
    """f(chosen + j) - f(chosen) at the final k's lin: lin_j + one (1 - G_jj - 2 sum_chosen G_j.)."""
    return lin[j] + one * (1.0 - G[j, j] - 2.0 * G[j, chosen].sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_local_search_ends_1swap_optimal(seed):
    E, q, c, G, lin, one, k, th = pool(seed=seed, theta=0.4)
    S = np.arange(k, dtype=np.int64)
    u, inS = start(G, S)
    f0 = f_brute(E, q, k, th, S)
    moves.local_search(G, lin, one, S, u, inS, 1e-12, 10_000)
    f1 = f_brute(E, q, k, th, S)
    assert f1 >= f0
    assert all(f_brute(E, q, k, th, T) <= f1 + 1e-10 for _, _, T in swaps(G.shape[0], S))
    np.testing.assert_allclose(u, G[:, S].sum(1), atol=1e-10)
    assert sorted(np.flatnonzero(inS)) == sorted(S)


def test_swap_column_keeps_the_row_maxima():
    E, q, c, G, lin, one, k, th = pool(seed=5)
    S = np.array([0, 1, 2, 3, 4], dtype=np.int64)
    GS, top = np.empty((G.shape[0], k)), np.empty(G.shape[0])
    moves.fill_columns(G, S, GS, top)
    for pos, j in ((0, 10), (3, 11), (0, 12), (2, 0)):
        S[pos] = j
        moves.swap_column(G, GS, top, pos, j)
        np.testing.assert_array_equal(GS, G[:, S])
        np.testing.assert_array_equal(top, G[:, S].max(1))


def test_tabu_walk_reports_its_best_set():
    E, q, c, G, lin, one, k, th = pool(seed=3, theta=0.3)
    S = np.arange(k, dtype=np.int64)
    u, inS = start(G, S)
    moves.local_search(G, lin, one, S, u, inS, 1e-12, 10_000)
    f_ls = f_brute(E, q, k, th, S)
    best = np.empty(k, dtype=np.int64)
    fb = moves.tabu_walk(G, lin, one, S, u, inS, 60, 8, 4, 1e-12, best)
    assert fb == pytest.approx(f_brute(E, q, k, th, best), abs=1e-9) and fb >= f_ls - 1e-12
    assert len(set(best.tolist())) == k
    np.testing.assert_allclose(u, G[:, S].sum(1), atol=1e-9)  # u kept in step over 60 swaps


def test_two_swap_leaves_no_improving_2swap():
    E, q, c, G, lin, one, k, th = pool(p=14, k=4, seed=4, theta=0.3)
    best_f = -np.inf
    for seed in range(4):  # several starts: at least one makes a 2-swap
        S = np.random.default_rng(seed).choice(14, k, replace=False).astype(np.int64)
        u, inS = start(G, S)
        moves.local_search(G, lin, one, S, u, inS, 1e-12, 10_000)
        ms_moves.two_swaps(G, lin, one, S, u, inS, 14, k, 1e-12, 50, 1000)  # the default's 2-swaps
        f = f_brute(E, q, k, th, S)
        rest = [j for j in range(14) if j not in S]
        for q1, q2 in itertools.combinations(range(k), 2):
            for j1, j2 in itertools.permutations(rest, 2):
                T = S.copy()
                T[q1], T[q2] = j1, j2
                assert f_brute(E, q, k, th, T) <= f + 1e-10
        np.testing.assert_allclose(u, G[:, S].sum(1), atol=1e-10)
        best_f = max(best_f, f)
    assert best_f == pytest.approx(max(f_brute(E, q, k, th, list(T)) for T in itertools.combinations(range(14), k)),
                                   abs=1e-9)


def test_random_set_and_perturb_follow_the_state():
    E, q, c, G, lin, one, k, th = pool()
    S1, S2, sc = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64), np.empty(G.shape[0], dtype=np.int64)
    moves.random_set(G.shape[0], S1, sc, rng.rng_state(7))
    moves.random_set(G.shape[0], S2, sc, rng.rng_state(7))
    assert S1.tolist() == S2.tolist() and len(set(S1.tolist())) == k and 0 <= S1.min() and S1.max() < G.shape[0]
    st = rng.rng_state(8)
    draws = [rng.below(st, 10) for _ in range(2000)]
    assert set(draws) == set(range(10))
    u, inS = start(G, S1)
    moves.perturb(G, lin, one, S1, u, inS, 3, 10, st)
    assert len(set(S1.tolist())) == k and inS.sum() == k
    np.testing.assert_allclose(u, G[:, S1].sum(1), atol=1e-12)


def test_bad_arrays_are_one_clear_error():
    E, q, c, G, lin, one, k, th = pool()
    with pytest.raises(ValueError, match="G must be a C-contiguous float64 array of 2 dimensions, got float32"):
        checks.check_pool(G.astype(np.float32), lin, th)
    with pytest.raises(ValueError, match="non-contiguous"):
        checks.check_pool(np.asfortranarray(G[:, :30]), lin, th)
    bad = lin.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="lin must have finite values, got 1 non-finite"):
        checks.check_pool(G, bad, th)
    with pytest.raises(ValueError, match=r"S must hold distinct positions in \[0, 40\)"):
        checks.check_set(np.array([1, 1, 2], dtype=np.int64), 40)
    with pytest.raises(ValueError, match="theta must be in"):
        checks.check_pool(G, lin, 1.5)


def test_import_compiles_nothing():
    code = ("import sys, divopt_rag.solvers; from divopt_rag.solvers.kernels import jit; "
            "print(jit.compiled(), 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")[-2]
    assert out.startswith("[]")


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="already the no-JIT run")
def test_tests_pass_without_jit():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                          "-k", "not without_jit and not import_compiles"], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_member_sums_max_is_the_column_sums_and_the_best_member_term(dtype):
    rng = np.random.default_rng(3)
    W = rng.uniform(-1, 1, (7, 53)).astype(dtype)
    a = rng.normal(size=7)
    u, h = np.empty(53), np.empty(53)
    gains.member_sums_max(W, a, 1.4, u, h)
    W64 = W.astype(np.float64)
    np.testing.assert_allclose(u, W64.sum(0), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(h, (a[:, None] + 1.4 * W64).max(0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums_are_numpys_float64_sums(dtype):
    X = np.random.default_rng(4).standard_normal((300, 17)).astype(dtype)
    out = np.empty(17)
    gains.column_sums(X, out)
    np.testing.assert_allclose(out, X.sum(0, dtype=np.float64), rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 63, 64, 130])
def test_symmetric_from_lower_mirrors_the_lower_triangle(dtype, n):
    L = np.tril(np.random.default_rng(n).standard_normal((n, n))).astype(dtype)
    L += np.triu(np.full((n, n), np.nan, dtype=dtype), 1)  # the upper part is never read
    G = np.empty((n, n))
    gains.symmetric_from_lower(np.ascontiguousarray(L), G)
    low = np.tril(np.nan_to_num(L)).astype(np.float64)
    np.testing.assert_array_equal(G, low + np.tril(low, -1).T)


def test_gather_block_is_numpys_ix_gather_in_the_leading_block():
    G = np.random.default_rng(6).standard_normal((40, 40))
    idx = np.array([7, 3, 39, 0, 12], dtype=np.int64)
    out = np.full((8, 8), np.nan)
    gains.gather_block(G, idx, out)
    np.testing.assert_array_equal(out[:5, :5], G[np.ix_(idx, idx)])
    assert np.isnan(out[5:, :]).all() and np.isnan(out[:, 5:]).all()
