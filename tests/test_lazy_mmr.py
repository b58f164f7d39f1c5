"""Lazy MMR ("mmr_lazy"): the picks of "mmr" (LangChain's picks: tests/test_mmr_langchain.py)."""
import numpy as np
import pytest
import torch

from conftest import planted_duplicates, random_unit, unit_query
from divopt.models import Instance
from divopt.solvers import select


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


@pytest.mark.parametrize("dense_share", [1 / 64, 2.0])
def test_lazy_mmr_breaks_exact_ties_like_langchain(dense_share):
    # rows repeated exactly: equal scores at every step; LangChain's strict ">" keeps the lowest index
    lc = pytest.importorskip("langchain_core.vectorstores.utils")
    base = random_unit(40, 12, 5)
    E = np.concatenate([base, base, base[:20]])[np.random.default_rng(5).permutation(100)]
    q = unit_query(12, 5)
    for theta in (0.3, 0.6, 0.9):
        ours = select(Instance(E, q, k=15, theta=theta), "mmr_lazy", block=4, dense_share=dense_share)
        theirs = lc.maximal_marginal_relevance(q, list(E), lambda_mult=theta, k=15)
        assert ours.indices.tolist() == [int(i) for i in theirs]


def test_lazy_mmr_whole_pool_and_k1():
    E, q = random_unit(9, 5, 1), unit_query(5, 1)
    assert sorted(select(Instance(E, q, k=9, theta=0.4), "mmr_lazy").indices.tolist()) == list(range(9))
    assert select(Instance(E, q, k=1, theta=0.4), "mmr_lazy").indices.tolist() == [int(np.argmax(E @ q))]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_lazy_mmr_on_cuda_half():
    E, q = random_unit(2000, 64, 3, dtype=np.float32), unit_query(64, 3).astype(np.float32)
    inst = Instance(torch.as_tensor(E).cuda().half(), torch.as_tensor(q).cuda(), k=25, theta=0.6, normalize=True)
    lazy = select(inst, "mmr_lazy")
    assert lazy.indices.tolist() == select(inst, "mmr").indices.tolist()
