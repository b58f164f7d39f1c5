"""Multi-start FW + continuation + local search ("fw_ms"): determinism, never worse, vs brute force."""
import itertools

import numpy as np
import pytest
import torch

from helpers.pools import planted_duplicates, random_unit, unit_query
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers import select
from divopt_rag.solvers.multistart import theta_continuation
from helpers.swaps import brute_best_swap


def brute_optimum(inst):
    return max(ccbqp_objective(inst, list(S)) for S in itertools.combinations(range(inst.n), inst.k))


def test_fw_ms_deterministic_by_seed():
    inst = Instance(planted_duplicates(8, 5, 10, 2), unit_query(10, 2), k=6, theta=0.4)
    a = select(inst, "fw_ms", seed=7)
    b = select(inst, "fw_ms", seed=7)
    assert np.array_equal(a.indices, b.indices)
    assert a.info["starts"] == b.info["starts"] and a.info["best_start"] == b.info["best_start"]


def test_fw_ms_never_worse_and_mostly_optimal_on_tiny_pools():
    hits, total = 0, 0
    for s in range(4):
        for E, d in ((random_unit(14, 5, s), 5), (planted_duplicates(4, 4, 6, s), 6)):
            for th in (0.2, 0.5, 0.8):
                inst = Instance(E, unit_query(d, s), k=4, theta=th)
                ms = select(inst, "fw_ms")
                assert ms.objective >= select(inst, "fw_ls").objective - 1e-12
                assert ms.objective >= select(inst, "fw").objective - 1e-12
                assert brute_best_swap(inst, ms.indices) <= 1e-9 * 12
                opt = brute_optimum(inst)
                assert ms.objective <= opt + 1e-9
                hits += ms.objective >= opt - 1e-9
                total += 1
    assert hits / total >= 0.9, f"fw_ms hit the brute-force optimum on {hits}/{total} tiny instances"


def test_fw_ms_subpool_path_is_one_swap_optimal_on_full_pool():
    E = random_unit(60, 6, 9)
    inst = Instance(E, unit_query(6, 9), k=4, theta=0.35)
    ms = select(inst, "fw_ms", pool_size=12, perturb_rounds=2)
    assert ms.info["pool"] == 12
    assert ms.objective >= select(inst, "fw_ls").objective - 1e-12
    assert brute_best_swap(inst, ms.indices) <= 1e-9 * 12


@pytest.mark.parametrize("n, k, pool_size, rows", [(60, 4, 3, 8), (80, 25, 30, 50), (40, 25, 30, 40), (30, 30, 300, 30)])
def test_fw_ms_takes_any_k_up_to_n_by_the_pool_rule(n, k, pool_size, rows):
    # the sub-pool has min(n, max(pool_size, 2k)) rows (once refused: "pool_size must be >= k")
    inst = Instance(random_unit(n, 6, n + k), unit_query(6, k), k=k, theta=0.45)
    ms = select(inst, "fw_ms", pool_size=pool_size, perturb_rounds=2)
    assert len(set(ms.indices.tolist())) == k
    assert ms.info["pool"] == (n if rows == n else rows)
    assert ms.objective >= select(inst, "fw_ls").objective - 1e-12
    assert brute_best_swap(inst, ms.indices) <= 1e-9 * 12  # the independent check: no improving swap


def test_theta_continuation_ends_at_topk_for_theta_one():
    inst = Instance(random_unit(30, 6, 5), unit_query(6, 5), k=4, theta=0.3)
    path = theta_continuation(inst, [0.3, 0.6, 1.0])
    assert len(path) == 3
    top = torch.topk(inst.relevance, 4).indices
    assert sorted(path[-1].tolist()) == sorted(top.tolist())
    for t, idx in zip([0.3, 0.6], path[:2]):
        assert brute_best_swap(inst.replace(theta=t), idx.numpy()) <= 1e-9 * 12
