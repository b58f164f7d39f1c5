"""The greedy baselines under their plain names equal plain float64 transcriptions of their papers.

Each reference below is written from the paper's pseudo-code (not from divopt's code), in float64
numpy, with explicit loops and the paper's own similarity (cosine where the paper says cosine):

* MMR, Carbonell & Goldstein (SIGIR 1998), in LangChain's form (``maximal_marginal_relevance``):
  first the most similar document, then argmax_{D_i in R \\ S} [lambda Sim1(D_i, Q) -
  (1 - lambda) max_{D_j in S} Sim2(D_i, D_j)], Sim = cosine, ties to the first index.
* gMMR (DF-RAG): first the most similar chunk, then argmax lambda Sim(q, d_i) + (1 - lambda)
  dist(d_i, centroid of S), dist the Euclidean distance between the unit vectors of d_i and of
  the centroid (divopt's reading of DF-RAG's "global MMR", DESIGN.md).
* DPP greedy MAP, Chen, Zhang & Zhou (NeurIPS 2018), Algorithm 1, run on the kernel itself:
  c_i = [], d_i^2 = L_ii, j = argmax log d_i^2; repeat: for every i not selected,
  e_i = (L_ji - <c_j, c_i>) / d_j, c_i = [c_i e_i], d_i^2 = d_i^2 - e_i^2; j = argmax log d_i^2;
  with DESIGN.md's quality-diversity kernel L = diag(r) E E^T diag(r), r = exp(alpha c),
  alpha = theta / (2 (1 - theta)), stopped at k items (theta = 1 is the alpha -> inf limit:
  relevance order, divopt's convention, checked separately).
* VRSD, Gao & Zhang (arXiv 2407.04573), heuristic algorithm: first the vector most similar to
  the query, then the candidate maximizing cos(sum of the selected vectors + v, q).

Pools: random unit rows and planted near-duplicates (tests/conftest.py), theta across [0, 1],
float32 and float64 inputs (the float32 values, upcast, are what the transcription sees).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from divopt_rag.models import Instance
from divopt_rag.solvers import select

from helpers.pools import planted_duplicates, random_unit, unit_query

THETAS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
K = 7


def _cos(a, b):
    return float(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))


def paper_mmr(E, q, k, lam):
    sim_q = [_cos(E[i], q) for i in range(len(E))]
    S = [int(np.argmax(sim_q))]
    while len(S) < k:
        best, arg = -np.inf, -1
        for i in range(len(E)):
            if i in S:
                continue
            redundancy = max(_cos(E[i], E[j]) for j in S)
            score = lam * sim_q[i] - (1 - lam) * redundancy
            if score > best:
                best, arg = score, i
        S.append(arg)
    return S


def paper_gmmr(E, q, k, lam):
    sim_q = [_cos(E[i], q) for i in range(len(E))]
    S = [int(np.argmax(sim_q))]
    while len(S) < k:
        centroid = np.mean([E[j] for j in S], axis=0)
        cu = centroid / np.linalg.norm(centroid)
        best, arg = -np.inf, -1
        for i in range(len(E)):
            if i in S:
                continue
            dist = np.linalg.norm(E[i] / np.linalg.norm(E[i]) - cu)
            score = lam * sim_q[i] + (1 - lam) * dist
            if score > best:
                best, arg = score, i
        S.append(arg)
    return S


def paper_dpp(E, q, k, theta):
    """Chen et al. (2018), Algorithm 1, on L = diag(r) E E^T diag(r) with DESIGN.md's unit rows
    (float32 storage leaves ||e_i|| = 1 +- 1e-7; the kernel is defined on the unit vectors)."""
    E = E / np.linalg.norm(E, axis=1, keepdims=True)
    q = q / np.linalg.norm(q)
    n = len(E)
    c = np.array([E[i] @ q for i in range(n)])
    alpha = theta / (2 * (1 - theta))
    r = np.exp(alpha * c)
    L = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            L[i, j] = r[i] * (E[i] @ E[j]) * r[j]
    cvec = [[] for _ in range(n)]
    d2 = [L[i, i] for i in range(n)]

    def argmax_log(cands):
        # exact ties (theta = 0: every L_ii = ||e_i||^2 = 1) go to the first index; rounding of
        # ||e_i||^2 in the last bit must not decide them
        top = max(np.log(d2[i]) for i in cands)
        return next(i for i in cands if np.log(d2[i]) >= top - 1e-12)

    j = argmax_log(range(n))
    Y = [j]
    while len(Y) < k:
        dj = np.sqrt(d2[j])
        for i in range(n):
            if i in Y:
                continue
            e = (L[j, i] - float(np.dot(cvec[j], cvec[i]))) / dj
            cvec[i] = cvec[i] + [e]
            d2[i] = d2[i] - e * e
        j = argmax_log([i for i in range(n) if i not in Y])
        Y.append(j)
    return Y


def paper_vrsd(E, q, k, theta=None):
    S = [int(np.argmax([_cos(E[i], q) for i in range(len(E))]))]
    while len(S) < k:
        total = np.sum([E[j] for j in S], axis=0)
        best, arg = -np.inf, -1
        for i in range(len(E)):
            if i in S:
                continue
            score = _cos(total + E[i], q)
            if score > best:
                best, arg = score, i
        S.append(arg)
    return S


PAPERS = {"mmr": paper_mmr, "gmmr": paper_gmmr, "dpp": paper_dpp, "vrsd": paper_vrsd}


def _pools():
    for s in range(3):
        yield f"random{s}", random_unit(45, 10, s), unit_query(10, s)
        yield f"dups{s}", planted_duplicates(9, 5, 12, s), unit_query(12, s)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("method", sorted(PAPERS))
def test_plain_name_equals_the_papers_pseudo_code(method, dtype):
    thetas = THETAS if method != "dpp" else tuple(t for t in THETAS if t < 1.0) + (0.99,)
    if method == "vrsd":
        thetas = (0.5,)  # VRSD has no trade-off parameter
    for name, E64, q64 in _pools():
        E, q = E64.astype(dtype), q64.astype(dtype)
        Eref, qref = E.astype(np.float64), q.astype(np.float64)  # the values divopt receives
        for theta in thetas:
            got = select(Instance(torch.from_numpy(E), torch.from_numpy(q), k=K, theta=theta), method).indices.tolist()
            ref = PAPERS[method](Eref, qref, K, theta)
            assert got == ref, f"{method} theta={theta} {name} {np.dtype(dtype).name}: {got} != {ref}"


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_dpp_at_theta_one_is_the_relevance_order(dtype):
    """alpha = theta / (2 (1 - theta)) -> inf: the kernel's quality term dominates; divopt returns
    the k most relevant items in relevance order (the limit of Algorithm 1's picks)."""
    for name, E64, q64 in _pools():
        E, q = E64.astype(dtype), q64.astype(dtype)
        got = select(Instance(E, q, k=K, theta=1.0), "dpp").indices.tolist()
        c = E.astype(np.float64) @ q.astype(np.float64)
        assert got == np.argsort(-c, kind="stable")[:K].tolist(), name


def test_float32_near_tie_is_decided_in_float64():
    """A pool where two gMMR scores differ by 5.5e-8 (below float32 resolution at 1.18): in float32
    both round to the same value and the lower index would win; the float64 score picks the other."""
    E = planted_duplicates(12, 5, 16, 112, jitter=0.02).astype(np.float32)
    q = unit_query(16, 112).astype(np.float32)
    ref = paper_gmmr(E.astype(np.float64), q.astype(np.float64), 8, 0.2)
    assert ref[3] == 24  # the float64 winner over item 9 at the fourth pick
    assert select(Instance(E, q, k=8, theta=0.2), "gmmr").indices.tolist() == ref


def test_vrsd_uses_the_query_vector_even_beside_user_relevance():
    """The paper scores cos(sum + v, q) from the vectors; a stored cross-encoder relevance must not
    replace q^T e when the query vector is known."""
    E, q = random_unit(40, 8, 5), unit_query(8, 5)
    ext = np.random.default_rng(0).random(40)
    got = select(Instance(E, q, relevance=ext, k=6, theta=0.5), "vrsd").indices.tolist()
    assert got == paper_vrsd(E, q, 6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dpp_with_k_beyond_the_rank_fills_by_relevance_instead_of_failing(dtype):
    """rank(E E^T) <= d: after d picks every residual is 0, so the greedy stops adding by log-det
    and fills the rest by relevance (float32 rounding must not make it pick, or crash on, a
    dependent item). Duplicated rows are the same case with rank < d."""
    rng = np.random.default_rng(7)
    E = rng.standard_normal((300, 8))
    E = np.vstack([E, E[:20]])  # exact duplicates
    E = (E / np.linalg.norm(E, axis=1, keepdims=True)).astype(dtype)
    q = E[0].astype(np.float64) + 0.3
    q /= np.linalg.norm(q)
    sel = select(Instance(E, q.astype(dtype), k=30, theta=0.2), "dpp")
    assert len(set(sel.indices.tolist())) == 30
    assert sel.info["filled_by_relevance"] == 30 - 8
    assert np.linalg.matrix_rank(E[sel.indices[:8]].astype(np.float64)) == 8
