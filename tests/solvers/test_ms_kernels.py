"""fw_ms's kernels (divopt_rag.solvers.kernels.ms_moves) against brute force and the selectors they
transcribe: every gain and set is recomputed from scratch in float64 (f from models.ccbqp), MMR and
gMMR against the registered selectors, and the host search against the lockstep one."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import objective
from divopt_rag.solvers import get_selector, multistart, select
from divopt_rag.solvers.greedy import TIE_EPS
from divopt_rag.solvers.kernels import ms_moves
from divopt_rag.solvers.kernels.moves import search_scratch, start
from divopt_rag.solvers.local_search import ls_tolerance


def pool(p=30, d=6, k=4, theta=0.5, seed=0):
    r = np.random.default_rng(seed)
    q = r.standard_normal(d)
    q /= np.linalg.norm(q)
    E = r.standard_normal((p, d)) + 0.7 * q
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    inst = Instance(torch.from_numpy(E), torch.from_numpy(q), k=k, theta=theta)  # float64: float64 sums
    c = inst.relevance.numpy().copy()
    return inst, np.ascontiguousarray(E @ E.T), c, theta * (k - 1) * c, 1.0 - theta


def f(inst, S):
    return objective(inst, np.asarray(S))


def best_swap_brute(inst, S):
    """(gain, T) of the best 1-swap of S by plain evaluation of f."""
    f0, best = f(inst, S), (-np.inf, None)
    for q, j in itertools.product(range(len(S)), range(inst.n)):
        if j not in S:
            T = S.copy()
            T[q] = j
            best = max(best, (f(inst, T) - f0, T), key=lambda t: t[0])
    return best


@pytest.mark.parametrize("name, kern", [("mmr", ms_moves.mmr_greedy), ("gmmr", ms_moves.gmmr_greedy)])
@pytest.mark.parametrize("theta", [0.0, 0.3, 0.7, 1.0])
def test_greedy_starts_pick_as_their_selectors(name, kern, theta):
    for seed in range(3):
        inst, G, c, _, _ = pool(p=40, k=7, theta=theta, seed=seed)
        S = np.empty(7, dtype=np.int64)
        kern(G, c, theta, TIE_EPS, S)
        assert S.tolist() == get_selector(name)(inst)[0].tolist()


def test_nth_best_is_the_rank_in_value_then_index_order():
    r = np.random.default_rng(1)
    v = np.round(r.standard_normal(50), 1)  # many ties
    rows = np.flatnonzero(r.random(50) < 0.7).astype(np.int64)
    order = sorted(rows.tolist(), key=lambda j: (-v[j], j))
    idx = np.zeros(50, dtype=np.int64)
    idx[: rows.size] = rows
    for t in r.permutation(rows.size):
        assert ms_moves.nth_best(v, idx, rows.size, int(t)) == order[t]
    assert sorted(idx[: rows.size].tolist()) == sorted(rows.tolist())


@pytest.mark.parametrize("theta", [0.1, 0.4, 0.8])
def test_best_pair_is_the_brute_force_best_2swap(theta):
    inst, G, _, lin, one = pool(p=11, k=4, theta=theta, seed=int(10 * theta))
    S = np.array([0, 3, 6, 9], dtype=np.int64)
    u, _ = start(G, S)
    _, GS, _, _ = search_scratch(G, S)
    a = np.array([-lin[i] + one * (2 * u[i] - G[i, i] - 1) for i in S])
    J = np.array([j for j in range(11) if j not in S][::-1], dtype=np.int64)  # any order of the entrants
    Q = np.arange(4, dtype=np.int64)
    m, r = J.size, Q.size
    scratch = (np.empty((m, r)), np.empty((m, r)), np.empty((r, r)), np.empty(r), np.empty(r))
    f0 = f(inst, S)
    gains = {}
    for (y1, y2), (x1, x2) in itertools.product(itertools.permutations(range(r), 2), itertools.combinations(range(m), 2)):
        T = S.copy()
        T[Q[y1]], T[Q[y2]] = J[x1], J[x2]
        gains[(x1, x2, y1, y2)] = f(inst, T) - f0
    top = max(gains.values())
    out = np.empty(4, dtype=np.int64)
    g = ms_moves.best_pair(G, lin, one, S, u, GS, a, J, Q, top - 0.5, *scratch, out)
    assert g == pytest.approx(top, abs=1e-10)
    assert gains[tuple(int(x) for x in out)] == pytest.approx(top, abs=1e-10)
    # nothing beats a threshold above the best: the threshold comes back, no pair
    assert ms_moves.best_pair(G, lin, one, S, u, GS, a, J, Q, top + 1e-6, *scratch, out) == top + 1e-6
    assert out[0] == -1


@pytest.mark.parametrize("members", [4, 2])
def test_two_swaps_keep_the_state_and_end_1swap_optimal(members):
    for seed in range(4):
        inst, G, _, lin, one = pool(p=14, k=4, theta=0.3, seed=seed + 20)
        S = np.random.default_rng(seed).choice(14, 4, replace=False).astype(np.int64)
        u, inS = start(G, S)
        f0 = f(inst, S)
        ms_moves.two_swaps(G, lin, one, S, u, inS, 14, members, 1e-12, 50, 1000)
        assert f(inst, S) >= f0 - 1e-12
        assert best_swap_brute(inst, S)[0] <= 1e-10
        np.testing.assert_allclose(u, G[:, S].sum(1), atol=1e-10)
        assert sorted(np.flatnonzero(inS).tolist()) == sorted(S.tolist())
        if members == 4:  # every member paired, every entrant: no improving 2-swap is left
            rest = [j for j in range(14) if j not in S]
            for (q1, q2), (j1, j2) in itertools.product(itertools.combinations(range(4), 2),
                                                       itertools.combinations(rest, 2)):
                T = S.copy()
                T[q1], T[q2] = j1, j2
                assert f(inst, T) <= f(inst, S) + 1e-10


def ils_brute(inst, lin, one, G, S, out_pos, into_rank, tol):
    """The perturbation rounds by plain evaluation: entrants ranked by b_j at the best set, the swaps,
    brute-force best-improvement 1-swaps, kept when f rose by more than tol."""
    best, fb = S.copy(), f(inst, S)
    for r in range(out_pos.shape[0]):
        u = G[:, best].sum(1)
        rest = [j for j in range(inst.n) if j not in best]
        order = sorted(rest, key=lambda j: (-(lin[j] - one * (2 * u[j] + G[j, j] - 1)), j))
        T = best.copy()
        for pos, rank in zip(out_pos[r], into_rank[r]):
            T[pos] = order[rank]
        while True:
            g, T2 = best_swap_brute(inst, T)
            if not g > tol:
                break
            T = T2
        if f(inst, T) > fb + tol:
            best, fb = T, f(inst, T)
    return best, fb


@pytest.mark.parametrize("theta", [0.2, 0.5])
def test_perturb_rounds_follow_a_brute_force_transcription(theta):
    inst, G, _, lin, one = pool(p=16, k=5, theta=theta, seed=7)
    S = np.arange(5, dtype=np.int64)
    u, inS = start(G, S)
    while True:  # a 1-swap optimum to start from
        g, T = best_swap_brute(inst, S)
        if not g > 1e-12:
            break
        S = T
    r = np.random.default_rng(3)
    out_pos = np.stack([r.choice(5, 2, replace=False) for _ in range(12)]).astype(np.int64)
    into_rank = np.stack([r.choice(8, 2, replace=False) for _ in range(12)]).astype(np.int64)
    out_pos, into_rank = ms_moves.check_draws(out_pos, into_rank, 5, 8)
    ref, f_ref = ils_brute(inst, lin, one, G, S, out_pos, into_rank, 1e-12)
    K = S.copy()
    u, inS = start(G, K)
    ms_moves.perturb_rounds(G, lin, one, K, u, inS, out_pos, into_rank, 1e-12, 1000)
    assert f(inst, K) == pytest.approx(f_ref, abs=1e-10) and f(inst, K) >= f(inst, S) - 1e-12
    assert sorted(K.tolist()) == sorted(ref.tolist())
    np.testing.assert_allclose(u, G[:, K].sum(1), atol=1e-10)  # u back at the best set after the undone rounds


def test_check_draws_refuses_bad_draws():
    ok = np.array([[0, 1]], dtype=np.int64)
    with pytest.raises(ValueError, match="out_pos must hold distinct values in"):
        ms_moves.check_draws(np.array([[1, 1]], dtype=np.int64), ok, 4, 6)
    with pytest.raises(ValueError, match="into_rank must hold distinct values in"):
        ms_moves.check_draws(ok, np.array([[0, 6]], dtype=np.int64), 4, 6)
    with pytest.raises(ValueError, match="out_pos must be a C-contiguous int64"):
        ms_moves.check_draws(ok.astype(np.int32), ok, 4, 6)
    with pytest.raises(ValueError, match="s <= k"):
        ms_moves.check_draws(np.zeros((1, 5), dtype=np.int64), np.zeros((1, 5), dtype=np.int64), 4, 6)


def _instance(seed):
    r = np.random.default_rng(500 + seed)
    n, d, k = int(r.choice([24, 60, 120])), int(r.choice([4, 8])), int(r.integers(2, 9))
    q = r.standard_normal(d)
    q /= np.linalg.norm(q)
    E = r.standard_normal((n, d)) * float(r.choice([0.5, 2.0])) + q
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    dt = np.float32 if seed % 2 else np.float64
    return Instance(E.astype(dt), q.astype(dt), k=k, theta=float(r.choice([0.2, 0.5, 0.8])))


def test_fw_ms_host_search_is_never_below_the_lockstep_search(monkeypatch):
    # the same starts, draws and moves in float64 kernels: on these seeded instances never lower f
    for seed in range(12):
        inst = _instance(seed)
        pool_size = 16 if seed % 3 == 0 else 300  # sub-pool path on some
        monkeypatch.setattr(multistart, "use_kernels", lambda i, b: True)
        host = select(inst, "fw_ms", seed=seed, pool_size=pool_size, perturb_rounds=20)
        monkeypatch.setattr(multistart, "use_kernels", lambda i, b: False)
        lock = select(inst, "fw_ms", seed=seed, pool_size=pool_size, perturb_rounds=20)
        assert (host.info["search"], lock.info["search"]) == ("host kernels", "lockstep")
        assert host.objective >= lock.objective - ls_tolerance(inst), seed
        assert best_swap_brute(inst, np.array(host.indices))[0] <= ls_tolerance(inst)


def test_fw_ms_searches_on_the_host_kernels_on_a_cpu():
    assert select(_instance(1), "fw_ms").info["search"] == "host kernels"
    half = _instance(1)
    assert select(Instance(half.E.half(), half.q.half(), k=half.k, theta=half.theta), "fw_ms").info["search"] == "lockstep"
