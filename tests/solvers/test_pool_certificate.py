"""The host certificate (solvers.pool_search.certify) against brute force, on both of its paths.

The truth is plain evaluation of f at every 1-swap (helpers.swaps) and a float64 GEMV for u; the
dense path (one blocked GEMM gives u and every gain) and the sparse path (GEMV, then the rows the
bound keeps) must give the same certificate.
"""
import dataclasses
import itertools

import numpy as np
import pytest
import torch

from divopt_rag.data import narrow_cone
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.ccbqp import linear_term
from divopt_rag.solvers import pool_search as ps
from divopt_rag.solvers.ws_config import WsMultistartConfig
from helpers.pools import random_unit, unit_query


def _state(E, q, k, theta, S, **cfg):
    E = np.ascontiguousarray(E)
    c = (E.astype(np.float64) @ np.asarray(q, dtype=np.float64))
    settings = dataclasses.replace(WsMultistartConfig().for_k(k, host=True), **cfg)
    st = ps.PoolState(E, c, k, theta, 1e-9 * k * (k - 1), settings)
    st.lin_all = linear_term(c, theta, k)
    st.P = np.asarray(S, dtype=np.int64)
    st.S = np.arange(k, dtype=np.int64)
    return st


def _brute(E, q, k, theta, S):
    """Every 1-swap gain f(S - i + j) - f(S), by plain evaluation: {(i, j): gain}."""
    inst = Instance(torch.from_numpy(E.astype(np.float64)), torch.from_numpy(np.asarray(q, np.float64)), k=k,
                    theta=theta, normalize=False)
    S = [int(i) for i in S]
    f0 = ccbqp_objective(inst, S)
    gains = {}
    for p, j in itertools.product(range(k), range(E.shape[0])):
        if j not in S:
            T = S.copy()
            T[p] = j
            gains[S[p], j] = ccbqp_objective(inst, T) - f0
    return gains


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("theta", [0.3, 0.6, 0.9])
def test_certificate_is_the_brute_force_best_swap_and_its_entrants(dense, theta, monkeypatch):
    n, d, k = 150, 12, 5
    E, q = random_unit(n, d, seed=7), unit_query(d, seed=8)
    S = np.random.default_rng(3).choice(n, k, replace=False)
    st = _state(E, q, k, theta, S, certificate_entrants=8, near_rows=12)
    monkeypatch.setattr(ps, "_dense", lambda *a: dense)
    monkeypatch.setattr(ps, "CERT_BLOCK", 32)  # several blocks on the dense path
    cert = ps.certify(st)
    gains = _brute(E, q, k, theta, S)
    per_row = {}
    for (_, j), g in gains.items():
        per_row[j] = max(per_row.get(j, -np.inf), g)
    assert cert.best_gain == pytest.approx(max(per_row.values()), abs=1e-9)
    improving = sorted((j for j, g in per_row.items() if g > st.tol), key=lambda j: -per_row[j])[:8]
    assert sorted(cert.entrants.tolist()) == sorted(improving)
    np.testing.assert_allclose([per_row[j] for j in cert.near], sorted(per_row.values(), reverse=True)[:12], atol=1e-9)
    np.testing.assert_allclose(cert.u, E @ E[S].sum(0), atol=1e-9)  # u = E v_S on every row
    assert np.array_equal(cert.rows, np.sort(S))


def test_dense_and_sparse_paths_agree_where_the_estimate_chooses_dense():
    """A low-theta cone at small k: the bound keeps most rows, the estimate takes the one-pass
    path, and the certificate equals the sparse path's on the same set."""
    n, k, theta = 6000, 4, 0.3
    E, q, _ = narrow_cone(n, 16, seed=5, dtype=np.float64)
    S = np.argsort(-(E @ q))[:k]
    st = _state(E, q, k, theta, S, dense_sample=256)
    v = E[S].sum(0)
    a = ps.swap_terms(st.lin_all[S], E[S] @ v, theta)[1]
    reach = a.max() + 2 * (1 - theta) - st.tol
    assert ps._dense(st, v, reach)
    b = st.lin_all - 2 * (1 - theta) * (E @ v)
    assert np.mean(b > -reach) > ps.DENSE_SHARE  # the estimate's choice is the truth on the whole pool
    dense = ps.certify(st)
    st2 = _state(E, q, k, theta, S, dense_sample=10 ** 6)  # a sample too large for the pool: the sparse path
    assert not ps._dense(st2, v, reach)
    sparse = ps.certify(st2)
    assert dense.best_gain == pytest.approx(sparse.best_gain, abs=1e-9)
    assert np.array_equal(np.sort(dense.entrants), np.sort(sparse.entrants))
    assert dense.compared == sparse.compared
    np.testing.assert_allclose(dense.u, sparse.u, atol=1e-9)


def test_a_holding_certificate_is_not_computed_again_for_the_same_set(monkeypatch):
    """The rugged guided case: the pool is rebuilt around a certified set and searched again;
    where that search returns the same set, its certificate is not recomputed."""
    E, q, _ = narrow_cone(20000, 24, seed=2)
    inst = Instance(torch.from_numpy(E), torch.from_numpy(q), k=6, theta=0.5)
    calls = []
    real = ps.certify

    def counting(st, *a, **kw):
        cert = real(st, *a, **kw)
        calls.append((tuple(cert.rows.tolist()), cert.best_gain <= st.tol))
        return cert

    monkeypatch.setattr(ps, "certify", counting)
    settings = WsMultistartConfig().for_k(6, host=True)
    c = E.astype(np.float64) @ q.astype(np.float64)
    st = ps.pool_search(E, c, 6, 0.5, 1e-6 * 30, settings)
    assert st.guided and st.rugged  # the case under test: a second phase runs after a holding certificate
    held = [rows for rows, ok in calls if ok]
    assert len(held) == len(set(held)), calls
    assert st.optimal and calls[-1][1]
    assert np.array_equal(np.sort(st.rows), np.array(calls[-1][0]))


def test_cert_holds_for_needs_the_same_rows_and_a_holding_gain():
    cert = ps.Certificate(-1e-3, np.empty(0, np.int64), np.empty(0, np.int64), 0, np.zeros(3), np.array([0, 2]))
    assert cert.holds_for(np.array([2, 0]), 1e-9)
    assert not cert.holds_for(np.array([0, 1]), 1e-9)
    assert not dataclasses.replace(cert, best_gain=1e-3).holds_for(np.array([0, 2]), 1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_pool_gram_matrix_is_the_symmetric_product(dtype):
    E = np.ascontiguousarray(random_unit(70, 12, seed=5).astype(dtype))
    G = ps._syrk(E)
    E64 = E.astype(np.float64)
    np.testing.assert_allclose(G, E64 @ E64.T, rtol=0, atol=1e-6 if dtype == np.float32 else 1e-13)
    np.testing.assert_array_equal(G, G.T)
