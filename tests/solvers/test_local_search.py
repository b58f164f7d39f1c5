"""Local search: never lowers f, stops at a 1-swap optimum (brute force over ALL swaps)."""
import itertools

import numpy as np
import pytest
import torch

from helpers.pools import planted_duplicates, random_unit, unit_query
from helpers.swaps import brute_best_swap
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers import METHODS, select
from divopt_rag.models.ccbqp import swap_gains
from divopt_rag.solvers.gram_moves import two_swap
from divopt_rag.solvers.gram_search import GramSearch
from divopt_rag.solvers.local_search import local_search
from divopt_rag.solvers.swap_certificate import swap_certificates


def swap_certificate(inst, S, tol, **kw):
    """The certificate of one problem (a batch of one)."""
    return swap_certificates([inst], [torch.as_tensor(S)], tol, **kw)[0]




def instances():
    out = []
    for s in range(3):
        for E, d in ((random_unit(18, 6, s), 6), (planted_duplicates(5, 4, 8, s), 8)):
            for th in (0.0, 0.3, 0.7):
                out.append(Instance(E, unit_query(d, s), k=4, theta=th))
    return out


@pytest.mark.parametrize("shortlist", [None, 2])
def test_ls_monotone_and_one_swap_optimal(shortlist):
    rng = np.random.default_rng(0)
    for inst in instances():
        start = rng.choice(inst.n, inst.k, replace=False)
        res = local_search(inst, start, shortlist=shortlist)
        f_start = ccbqp_objective(inst, start)
        assert res.start_objective == pytest.approx(f_start, abs=1e-12)
        assert res.objective >= f_start - 1e-12
        assert np.all(np.diff(res.trace) > 0)
        assert res.objective == pytest.approx(ccbqp_objective(inst, res.indices.numpy()), abs=1e-10)
        assert res.one_swap_optimal
        assert brute_best_swap(inst, res.indices.numpy()) <= 1e-9 * inst.k * (inst.k - 1)


def test_shortlist_path_scans_whole_pool():
    # n > 2048 makes the default a shortlist; a tiny shortlist forces several full-pool scans
    E = random_unit(2100, 5, 3)
    inst = Instance(E, unit_query(5, 3), k=3, theta=0.4)
    start = np.arange(3)
    res = local_search(inst, start, shortlist=1)
    assert res.mode == "shortlist(1)"
    assert res.one_swap_optimal and res.objective >= ccbqp_objective(inst, start)
    D = swap_gains(inst, res.indices.numpy())
    assert float(D.max()) <= 1e-9 * 6
    # spot-check the swap-gain matrix itself against plain evaluation of f
    S = res.indices.numpy()
    for j in (0, 7, 1500, 2099):
        if j in S:
            continue
        T = S.copy()
        T[1] = j
        assert float(D[j, 1]) == pytest.approx(ccbqp_objective(inst, T) - res.objective, abs=1e-9)


def test_max_swaps_cap_and_errors():
    inst = Instance(random_unit(20, 6, 2), unit_query(6, 2), k=4, theta=0.2)
    start = np.array([0, 1, 2, 3])
    res = local_search(inst, start, max_swaps=1)
    assert res.swaps <= 1  # the cap; a capped search never claims a 1-swap optimum
    assert res.one_swap_optimal == (res.swaps == 0 and brute_best_swap(inst, start) <= 1e-9 * 12)
    with pytest.raises(ValueError, match="max_swaps must be >= 1"):  # as the "*_ls" selectors declare it
        local_search(inst, start, max_swaps=0)
    with pytest.raises(ValueError, match="exactly 4"):
        local_search(inst, [0, 1, 2])
    with pytest.raises(ValueError, match="unique"):
        local_search(inst, [0, 1, 2, 2])
    with pytest.raises(ValueError, match="shortlist"):
        local_search(inst, start, shortlist=0)


def test_perturbation_search_deterministic_not_worse_and_one_swap_optimal():
    # gram_moves.ils, the perturbation phase of "fw_ws_ms" and "fw_ms": each problem of a batch
    # ends where it ends alone, and each result is a 1-swap optimum (plain evaluation of f)
    from divopt_rag.solvers.gram_moves import ils
    from divopt_rag.solvers.gram_search import SearchSets

    insts = [Instance(planted_duplicates(8, 5, 10, 4), unit_query(10, 4 + i), k=6, theta=th)
             for i, th in enumerate((0.5, 0.3))]
    gs = GramSearch(np.stack([insts[0].E.numpy()] * 2), np.stack([i.relevance.numpy() for i in insts]), [0.5, 0.3],
                    6, 1e-12)
    start = gs.ls(np.stack([np.arange(6)] * 2), np.arange(2))
    run = dict(copies=2, strength=2, entrants=38, patience=3, rounds=5, seed=3)
    a, ra = ils(gs, start, **run)
    b, rb = ils(gs, start, **run)
    assert torch.equal(a.S, b.S) and torch.equal(a.f, b.f) and torch.equal(ra, rb)
    for p, inst in enumerate(insts):
        assert float(a.f[p]) >= float(start.f[p]) - 1e-12
        assert float(a.f[p]) == pytest.approx(ccbqp_objective(inst, a.S[p].numpy()), abs=1e-12)
        assert brute_best_swap(inst, a.S[p].numpy()) <= 1e-9 * 30
    one, _ = ils(gs, SearchSets(start.S[1:], start.prob[1:], start.f[1:]), **run)  # problem 1 alone
    assert one.S[0].tolist() == a.S[1].tolist() and float(one.f[0]) == float(a.f[1])


def test_polished_selectors_never_worse_than_their_base():
    for inst in instances()[:6]:
        for base, polished in (("fw_ws", "fw_ls"), ("mmr", "mmr_ls"), ("topk", "topk_ls")):
            if base not in METHODS:
                continue
            s0 = select(inst, base)
            s1 = select(inst, polished)
            assert s1.objective >= s0.objective - 1e-12
            assert s1.info["one_swap_optimal"]
            assert brute_best_swap(inst, s1.indices) <= 1e-9 * 12


def brute_best_two_swap(inst, S):
    S = [int(i) for i in S]
    f0 = ccbqp_objective(inst, S)
    out_ = [j for j in range(inst.n) if j not in S]
    best = -np.inf
    for p1, p2 in itertools.combinations(range(len(S)), 2):
        for j1, j2 in itertools.combinations(out_, 2):
            T = S.copy()
            T[p1], T[p2] = j1, j2
            best = max(best, ccbqp_objective(inst, T) - f0)
    return best


def test_two_swap_search_is_two_swap_optimal():
    for s in range(3):
        inst = Instance(planted_duplicates(4, 4, 6, s), unit_query(6, s), k=4, theta=0.3 + 0.2 * s)
        start = np.arange(4)
        gs = GramSearch.from_instance(inst, 1e-9)
        res = two_swap(gs, gs.ls(start[None]), entrants=inst.n, max_out=None, max_moves=50)
        S, f = res.S[0].numpy(), float(res.f[0])
        assert f >= local_search(inst, start).objective - 1e-12
        assert f == pytest.approx(ccbqp_objective(inst, S), abs=1e-9)
        assert brute_best_two_swap(inst, S) <= 1e-9 * 12
        assert brute_best_swap(inst, S) <= 1e-9 * 12


def _certificate_cases(n, d, k, thetas, seed, query_seed):
    """Per theta, one query's problem twice: at a random k-set and at a 1-swap optimum."""
    E = random_unit(n, d, seed)
    rng = np.random.default_rng(seed)
    probs, sets = [], []
    for s, th in enumerate(thetas):
        inst = Instance(E, unit_query(d, query_seed + s), k=k, theta=th)
        probs += [inst, inst]
        sets += [rng.choice(n, k, replace=False), local_search(inst, list(range(k))).indices.numpy()]
    return E, probs, sets


def _check_storage_order(cert, gain_j, tol, n, check):
    """A dense comparison reads rows in storage order and stops at the first multiple of ``check``
    rows after an improving one: it compared the first ``compared`` rows, found every improving
    row among them (by decreasing gain) and had found none before its last check block."""
    m = cert.compared
    assert m == n or (m % check == 0 and cert.best_gain > tol)
    seen = [j for j in range(m) if j in gain_j]
    assert cert.entrants.tolist() == sorted((j for j in seen if gain_j[j] > tol), key=lambda j: -gain_j[j])
    assert cert.best_gain == pytest.approx(max(gain_j[j] for j in seen), abs=1e-5)
    assert all(gain_j[j] <= tol for j in seen if j < m - check)


def _gain_by_entrant(inst, S):
    """max over i in S of f(S - i + j) - f(S) for every j not in S, by plain evaluation of f."""
    f0 = ccbqp_objective(inst, list(S))
    return {j: max(ccbqp_objective(inst, [j if x == i else x for x in S]) - f0 for i in S)
            for j in range(inst.n) if j not in S}


def test_swap_certificates_batch_equals_single_and_brute_force():
    """The batched certificate (dense comparisons of all problems sharing one GEMM) gives each
    problem the certificate it gets alone, and both agree with plain evaluation of f: the best
    gain when every row is compared, the improving entrants, and 'holds' iff no swap improves."""
    from divopt_rag.solvers.local_search import ls_tolerance

    E, probs, sets = _certificate_cases(120, 6, 3, (0.3, 0.6, 0.9), seed=3, query_seed=10)
    tol = ls_tolerance(probs[0])
    batch = swap_certificates(probs, [torch.as_tensor(S) for S in sets], tol, block=8)
    dense = 0
    for inst, S, cert in zip(probs, sets, batch):
        single = swap_certificate(inst, torch.as_tensor(S), tol, block=8)
        assert cert.entrants.tolist() == single.entrants.tolist()
        assert cert.best_gain == pytest.approx(single.best_gain, abs=1e-12)
        brute = brute_best_swap(inst, S)
        assert (cert.best_gain <= tol) == (brute <= tol)
        gain_j = _gain_by_entrant(inst, S)
        assert set(cert.entrants.tolist()) <= {j for j, g in gain_j.items() if g > tol}
        if cert.compared >= inst.n:  # went dense and held, or failed only in the last check block
            dense += 1
            assert cert.best_gain == pytest.approx(brute, abs=1e-5)
            assert set(cert.entrants.tolist()) == {j for j, g in gain_j.items() if g > tol}
    assert dense >= 2  # the shared-GEMM path ran


def test_dense_certificates_compare_every_row_and_match_brute_force():
    """``dense``: no GEMV and no bound, u from the row sums of the shared GEMM; every improving
    entrant is found (plain evaluation of f) and the certificate holds iff no swap improves, for
    problems mixed with ones that take the bound path in the same call."""
    from divopt_rag.solvers.local_search import ls_tolerance

    E, probs, sets = _certificate_cases(90, 5, 4, (0.1, 0.5, 0.95), seed=7, query_seed=20)
    tol = ls_tolerance(probs[0])
    dense = [True, False] * 3
    certs = swap_certificates(probs, [torch.as_tensor(S) for S in sets], tol, block=8, dense=dense)
    for inst, S, cert, de in zip(probs, sets, certs, dense):
        gain_j = _gain_by_entrant(inst, S)
        brute = max(gain_j.values())
        assert (cert.best_gain <= tol) == (brute <= tol)
        v = E[list(S)].astype(np.float64).sum(0)
        np.testing.assert_allclose(cert.u.double().numpy(), E.astype(np.float64) @ v, atol=1e-5)  # every row
        if de:
            _check_storage_order(cert, gain_j, tol, inst.n, 4 * 8)
        else:
            single = swap_certificate(inst, torch.as_tensor(S), tol, block=8)
            assert cert.entrants.tolist() == single.entrants.tolist()
    with pytest.raises(ValueError, match="dense must have one entry per problem"):
        swap_certificates(probs, sets, tol, dense=[True])


def test_dense_certificates_of_problems_sharing_rows_equal_their_single_ones():
    """Problems whose sets share rows (a sweep: one query, several thetas) run the shared GEMM over
    the union of their rows; each gets the certificate it gets alone, checked against plain f."""
    from divopt_rag.solvers.local_search import ls_tolerance

    E = random_unit(80, 5, 11)
    q = unit_query(5, 12)
    S = local_search(Instance(E, q, k=4, theta=0.5), list(range(4))).indices.numpy()
    probs = [Instance(E, q, k=4, theta=th) for th in (0.2, 0.5, 0.8)]
    sets = [S, S[::-1].copy(), np.r_[S[:2], [j for j in range(80) if j not in S][:2]]]  # all share rows
    tol = ls_tolerance(probs[0])
    certs = swap_certificates(probs, [torch.as_tensor(x) for x in sets], tol, block=8, dense=[True] * 3)
    for inst, x, cert in zip(probs, sets, certs):
        single = swap_certificate(inst, x, tol, block=8, dense=[True])
        gain_j = _gain_by_entrant(inst, x)
        _check_storage_order(cert, gain_j, tol, inst.n, 4 * 8)
        assert cert.entrants.tolist() == single.entrants.tolist() and cert.compared == single.compared
        v = E[list(x)].astype(np.float64).sum(0)
        np.testing.assert_allclose(cert.u.double().numpy(), E.astype(np.float64) @ v, atol=1e-5)
    assert {c.compared for c in certs} != {inst.n}  # a comparison stopped early
    full = swap_certificates(probs, [torch.as_tensor(x) for x in sets], tol, block=8, dense=[True] * 3,
                             stop_early=False)
    for inst, x, cert in zip(probs, sets, full):  # every row compared, every improving entrant
        gain_j = _gain_by_entrant(inst, x)
        assert cert.compared == inst.n and cert.best_gain == pytest.approx(max(gain_j.values()), abs=1e-5)
        assert cert.entrants.tolist() == sorted((j for j, g in gain_j.items() if g > tol), key=lambda j: -gain_j[j])


def test_sample_estimate_is_the_share_of_rows_the_bound_keeps():
    """On the whole pool as the sample, the estimate equals the share of rows j not in S with
    b_j + max_i a_i + 2 (1-theta) > tol, written out in float64 from u = E v."""
    from divopt_rag.solvers.local_search import ls_tolerance
    from divopt_rag.solvers.swap_certificate import sample_estimate

    E = random_unit(200, 6, 4)
    E64 = E.astype(np.float64)
    probs, sets, want = [], [], []
    for s, th in enumerate((0.1, 0.4, 0.8)):
        q = unit_query(6, 30 + s)
        inst = Instance(E, q, k=5, theta=th)
        S = np.arange(5 * s, 5 * s + 5)
        lin = th * 4 * (E64 @ q.astype(np.float64))
        u = E64 @ E64[S].sum(0)
        b, a = lin - 2 * (1 - th) * u, -lin + 2 * (1 - th) * (u - 1)
        keep = b > ls_tolerance(inst) - (a[S].max() + 2 * (1 - th))
        keep[S] = False
        probs.append(inst), sets.append(torch.as_tensor(S)), want.append(keep.mean())
    got = sample_estimate(probs, sets, ls_tolerance(probs[0]), torch.arange(200))[0]
    np.testing.assert_allclose(got, want, atol=1.5 / 200)  # a row at the bound's edge may flip in float32
    assert 0 < min(want) and max(want) < 1  # the cases are not trivial


def test_go_dense_only_where_the_bound_is_loose_and_no_sample_row_improves():
    """``go_dense`` on a sample of rows: True iff the bound keeps more than DENSE_SHARE of it
    (sample_estimate) and no sample row j improves S, checked by plain evaluation of f; a random set
    (improvable) never goes dense, a 1-swap optimum with a loose bound does."""
    from divopt_rag.solvers.local_search import ls_tolerance
    from divopt_rag.solvers.swap_certificate import DENSE_SHARE, go_dense, sample_estimate

    E, probs, sets = _certificate_cases(90, 5, 4, (0.1, 0.3, 0.95), seed=7, query_seed=20)
    tol = ls_tolerance(probs[0])
    rows = torch.arange(0, 90, 2)
    got = go_dense(probs, [torch.as_tensor(S) for S in sets], tol, rows)
    share, improving = sample_estimate(probs, [torch.as_tensor(S) for S in sets], tol, rows)
    for inst, S, g, sh, imp in zip(probs, sets, got, share, improving):
        gain_j = _gain_by_entrant(inst, S)
        improves = any(gain_j[j] > tol for j in rows.tolist() if j in gain_j)
        assert imp == improves
        assert g == (sh > DENSE_SHARE and not improves)
    assert not got[0::2].any()  # the random sets: a sample row improves each of them
    assert got[1::2].any() and share[0::2].max() > DENSE_SHARE  # both branches are reached


def test_certificate_near_rows_are_the_compared_rows_of_highest_gain():
    """``near``: the compared rows of highest gain max_i Delta(i, j), improving or not, by
    decreasing gain; when every row is compared (dense), exactly the brute-force top rows."""
    from divopt_rag.solvers.local_search import ls_tolerance

    E, probs, sets = _certificate_cases(90, 5, 4, (0.1, 0.5, 0.95), seed=7, query_seed=20)
    tol = ls_tolerance(probs[0])
    dense = [True, False] * 3
    certs = swap_certificates(probs, [torch.as_tensor(S) for S in sets], tol, block=8, dense=dense, near=7,
                              stop_early=False)
    for inst, S, cert, de in zip(probs, sets, certs, dense):
        gain_j = _gain_by_entrant(inst, S)
        got = [gain_j[j] for j in cert.near.tolist()]
        assert not set(cert.near.tolist()) & set(int(i) for i in S)
        assert got == sorted(got, reverse=True)
        if de:  # every row compared: the 7 best rows of the whole pool
            assert len(got) == 7
            np.testing.assert_allclose(got, sorted(gain_j.values(), reverse=True)[:7], atol=1e-9)
        else:
            assert len(got) == min(7, cert.compared)
            assert cert.near.tolist() == swap_certificate(inst, torch.as_tensor(S), tol, block=8, near=7).near.tolist()
    assert swap_certificate(probs[0], torch.as_tensor(sets[0]), tol).near.numel() == 0  # not asked for
    with pytest.raises(ValueError, match="near must be an int >= 0"):
        swap_certificate(probs[0], torch.as_tensor(sets[0]), tol, near=-1)


def brute_best_improvement(inst, S, tol):
    """Best-improvement 1-swap search transcribed: every swap (position p out, j in) scored by
    f(S - S_p + j) - f(S) evaluated from scratch, the best applied while it gains more than tol."""
    S = [int(i) for i in S]
    trace = [ccbqp_objective(inst, S)]
    while True:
        best, move = -np.inf, None
        for p, j in itertools.product(range(len(S)), range(inst.n)):
            if j in S:
                continue
            T = S.copy()
            T[p] = j
            gain = ccbqp_objective(inst, T) - trace[-1]
            if gain > best:
                best, move = gain, T
        if best <= tol:
            return S, trace
        S = move
        trace.append(ccbqp_objective(inst, S))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [3, 9, 20])
def test_ls_takes_the_brute_force_best_swap_at_every_step(seed, k):
    """The search without the full gain table (row bounds) makes the transcription's moves, one
    by one, from a poor start (the k least relevant rows), at small and large k."""
    E, q = random_unit(40, 7, seed), unit_query(7, seed)
    for theta in (0.2, 0.6):
        inst = Instance(E, q, k=k, theta=theta)
        start = np.argsort(inst.relevance.numpy())[:k]
        res = local_search(inst, start, tol=1e-9)
        S, trace = brute_best_improvement(inst, start, 1e-9)
        assert res.indices.tolist() == S and res.swaps == len(trace) - 1
        assert np.allclose(res.trace, trace, rtol=0, atol=1e-9)
