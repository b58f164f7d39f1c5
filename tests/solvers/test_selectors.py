"""Every selector equals a slow, plainly written reference loop (numpy, explicit W = E E^T).

The Dartboard family is checked against transcriptions of its paper in tests/test_dartboard*.py.
"""
import numpy as np
import pytest

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers import select

from helpers.pools import planted_duplicates, random_unit, unit_query

THETAS = (0.0, 0.3, 0.7, 1.0)


def ref_topk(E, q, c, k, theta):
    return sorted(np.argsort(-c, kind="stable")[:k].tolist())


def ref_mmr(E, q, c, k, theta):
    W = E @ E.T
    S = [int(np.argmax(c))]
    while len(S) < k:
        best, arg = -np.inf, None
        for i in range(len(c)):
            if i in S:
                continue
            val = theta * c[i] - (1 - theta) * max(W[i, j] for j in S)
            if val > best:
                best, arg = val, i
        S.append(arg)
    return S


def ref_gmmr(E, q, c, k, theta):
    S = [int(np.argmax(c))]
    while len(S) < k:
        m = E[S].mean(0)
        best, arg = -np.inf, None
        for i in range(len(c)):
            if i in S:
                continue
            cos = E[i] @ m / np.linalg.norm(m)
            val = theta * c[i] + (1 - theta) * np.sqrt(max(2 - 2 * cos, 0.0))
            if val > best:
                best, arg = val, i
        S.append(arg)
    return S


def ref_vrsd(E, q, c, k, theta):
    S = [int(np.argmax(c))]
    while len(S) < k:
        best, arg = -np.inf, None
        for i in range(len(c)):
            if i in S:
                continue
            s = E[S].sum(0) + E[i]
            val = s @ q / np.linalg.norm(s)
            if val > best:
                best, arg = val, i
        S.append(arg)
    return S


def ref_dpp(E, q, c, k, theta):
    """Greedy MAP: add the item maximizing log det L_{S+i}, L = diag(r) W diag(r)."""
    if theta == 1.0:  # alpha = inf: pure relevance, picked in relevance order
        return np.argsort(-c, kind="stable")[:k].tolist()
    r = np.exp(theta / (2 * (1 - theta)) * c)
    L = r[:, None] * (E @ E.T) * r[None, :]
    S = []
    while len(S) < k:
        best, arg = -np.inf, None
        for i in range(len(c)):
            if i in S:
                continue
            T = S + [i]
            sign, logdet = np.linalg.slogdet(L[np.ix_(T, T)])
            val = logdet if sign > 0 else -np.inf
            if val > best + 1e-12:  # exact ties (e.g. theta = 0, all L_ii = 1) go to the lowest index
                best, arg = val, i
        S.append(arg)
    return S


REFS = {
    "topk": ref_topk,
    "mmr": ref_mmr,
    "gmmr": ref_gmmr,
    "vrsd": ref_vrsd,
    "dpp": ref_dpp,
}


def _instances():
    for s in range(3):
        yield f"random{s}", random_unit(40, 8, s), unit_query(8, s)
        yield f"dups{s}", planted_duplicates(8, 5, 12, s), unit_query(12, s)


@pytest.mark.parametrize("method", sorted(REFS))
@pytest.mark.parametrize("theta", THETAS)
def test_selector_equals_reference_loop(method, theta):
    for name, E, q in _instances():
        inst = Instance(E, q, k=6, theta=theta)
        sel = select(inst, method)
        ref = REFS[method](E, q, E @ q, 6, theta)
        got = sel.indices.tolist()
        if method == "topk":
            got = sorted(got)
        assert got == list(ref), f"{method} theta={theta} on {name}: {got} != {ref}"
        assert abs(sel.objective - ccbqp_objective(inst, ref)) < 1e-9


# every selector in float32, float16 and bfloat16 storage: tests/solvers/test_check_selector.py (check_storage_dtypes)


def test_selectors_reduce_redundancy_on_planted_duplicates():
    """Sanity of purpose: diversity methods cover more clusters than top-k."""
    from divopt_rag.data.synthetic import narrow_cone

    E, q, labels = narrow_cone(3000, 48, seed=2)
    inst = Instance(E, q, k=10, theta=0.5)
    covered = {m: len(set(labels[select(inst, m).indices])) for m in ("topk", "mmr", "fw", "dpp")}
    assert covered["topk"] < min(covered["mmr"], covered["fw"], covered["dpp"])
