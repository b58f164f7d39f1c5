"""Lazy MMR ("mmr_lazy"): the picks of "mmr" (LangChain's picks: tests/solvers/test_mmr_langchain.py)."""
import numpy as np
import pytest
import torch

from helpers.pools import planted_duplicates, random_unit, unit_query
from divopt_rag.models import Instance
from divopt_rag.solvers import select


@pytest.mark.parametrize("dense_share", [1 / 64, 0.3, 2.0])  # default, some rounds dense, never dense
@pytest.mark.parametrize("block", [1, 7, 64])
def test_lazy_mmr_equals_eager_on_near_duplicates(block, dense_share):
    # clusters of near-duplicates make most bounds stale after each pick
    for seed in range(3):
        E = planted_duplicates(30, 8, 24, seed)
        for theta in (0.2, 0.6, 0.9):
            inst = Instance(E.astype(np.float32), unit_query(24, seed).astype(np.float32), k=20, theta=theta,
                            normalize=True)
            lazy = select(inst, "mmr_lazy", block=block, dense_share=dense_share)
            assert lazy.indices.tolist() == select(inst, "mmr").indices.tolist()
            assert lazy.info["refreshed"] >= inst.k - 1


def test_lazy_mmr_reads_few_rows_and_validates_block():
    E, q = random_unit(4000, 32, 0), unit_query(32, 0)
    inst = Instance(E, q, k=30, theta=0.7)
    eager = select(inst, "mmr").indices.tolist()
    sel = select(inst, "mmr_lazy", dense_share=2.0)  # bounds only, no whole-pool refresh
    assert sel.indices.tolist() == eager
    assert sel.info["refreshed"] < (inst.k - 1) * inst.n / 4  # the eager method reads (k-1) n rows
    every = select(inst, "mmr_lazy", dense_share=1e-9)  # every step refreshes the whole pool
    assert every.indices.tolist() == eager and every.info["rounds"] == inst.k - 1
    with pytest.raises(ValueError, match="block"):
        select(inst, "mmr_lazy", block=0)
    for bad in (0, -0.5, True, "1/64"):
        with pytest.raises(ValueError, match="dense_share"):
            select(inst, "mmr_lazy", dense_share=bad)


def _exact_tie_pool(n, d, seed):
    """Unit rows and query with four entries of +-1/2: every product is a sum of +-1/4, exact in
    any summation order, so scores tie exactly (many equal rows and equal relevance)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n + 1, d))
    for row in X:
        row[rng.choice(d, 4, replace=False)] = rng.choice([-0.5, 0.5], 4)
    X[rng.integers(1, n + 1, n // 3)] = X[rng.integers(1, n + 1, n // 3)]  # exact duplicates
    return X[1:], X[0]


@pytest.mark.parametrize("block, dense_share", [(4, 1 / 64), (4, 2.0), (1, 0.9), (1, 2.0), (7, 0.3)])
def test_lazy_mmr_breaks_exact_ties_like_langchain(block, dense_share):
    # products exact in any order: equal scores at every step, in whatever round or block a row is
    # refreshed; LangChain's strict ">" (and argmax) keep the lowest index
    lc = pytest.importorskip("langchain_core.vectorstores.utils")
    for seed in range(3):
        E, q = _exact_tie_pool(100, 12, seed)
        for theta in (0.3, 0.6, 0.9):
            inst = Instance(E, q, k=15, theta=theta)
            ours = select(inst, "mmr_lazy", block=block, dense_share=dense_share).indices.tolist()
            assert ours == [int(i) for i in lc.maximal_marginal_relevance(q, list(E), lambda_mult=theta, k=15)]
            assert ours == select(inst, "mmr").indices.tolist()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_lazy_mmr_on_cuda_half():
    E, q = random_unit(2000, 64, 3, dtype=np.float32), unit_query(64, 3).astype(np.float32)
    inst = Instance(torch.as_tensor(E).cuda().half(), torch.as_tensor(q).cuda(), k=25, theta=0.6, normalize=True)
    lazy = select(inst, "mmr_lazy")
    assert lazy.indices.tolist() == select(inst, "mmr").indices.tolist()
