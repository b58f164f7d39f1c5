"""Batched FW: every column equals the single "fw" run on that (query, theta)."""
import numpy as np
import pytest
import torch

from helpers.pools import planted_duplicates, random_unit, unit_query
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers.batched_fw import fw_batched, fw_sweep
from divopt_rag.solvers.frank_wolfe import fw_ws

THETAS = [0.0, 0.2, 0.5, 0.8, 1.0]


def queries(d, m, seed):
    return np.stack([unit_query(d, seed + 100 * i) for i in range(m)])


@pytest.mark.parametrize("maker", [lambda: random_unit(80, 10, 0), lambda: planted_duplicates(12, 6, 10, 1)])
# (1.5, uniform) stops at fractional points and exercises the round-and-resume path;
# relax_penalty 0 (concave) and max_iter 2 end at the iteration cap
@pytest.mark.parametrize(
    "init,max_iter,lam", [("topk", 1000, 2.0), ("uniform", 1000, 2.0), ("topk", 2, 2.0), ("uniform", 60, 1.5), ("topk", 30, 0.0)]
)
def test_batched_equals_single_runs(maker, init, max_iter, lam):
    E = maker()
    Q = queries(E.shape[1], 3, 5)
    base = Instance(E, Q[0], k=5, theta=0.5)
    res, qi, th = fw_sweep(base, Q, THETAS, init=init, max_iter=max_iter, relax_penalty=lam)
    assert res.indices.shape == (len(Q) * len(THETAS), 5)
    for b in range(len(qi)):
        single = Instance(E, Q[qi[b]], k=5, theta=th[b])
        idx, iters, info = fw_ws(single, init=init, max_iter=max_iter, relax_penalty=lam, working_set=0)
        assert sorted(idx.tolist()) == sorted(res.indices[b].tolist())
        assert iters == res.iterations[b]
        assert info["converged"] == bool(res.converged[b])
        assert info["roundings"] == res.roundings[b]
        assert res.objectives[b] == pytest.approx(ccbqp_objective(single, idx.numpy()), abs=1e-12)


def test_relevance_matrix_and_float32():
    E = random_unit(60, 8, 2).astype(np.float32)
    base = Instance(E, unit_query(8, 2).astype(np.float32), k=4, theta=0.3)
    rng = np.random.default_rng(0)
    C = rng.uniform(-1, 1, size=(4, 60)).astype(np.float32)
    res = fw_batched(base, C, [0.3, 0.6, 0.9, 0.1])
    for b, t in enumerate([0.3, 0.6, 0.9, 0.1]):
        single = Instance(E, relevance=C[b], k=4, theta=t)
        idx, iters, _ = fw_ws(single, working_set=0)
        assert sorted(idx.tolist()) == sorted(res.indices[b].tolist())
        assert iters == res.iterations[b]


def test_bad_shapes_are_named():
    E = random_unit(20, 4, 0)
    base = Instance(E, unit_query(4, 0), k=3, theta=0.5)
    with pytest.raises(ValueError, match="relevance must have shape"):
        fw_batched(base, np.zeros((2, 19)), [0.5, 0.5])
    with pytest.raises(ValueError, match="thetas must have shape"):
        fw_batched(base, np.zeros((2, 20)), [0.5])
    with pytest.raises(ValueError, match="theta"):
        fw_batched(base, np.zeros((1, 20)), [1.5])
    with pytest.raises(ValueError, match="queries must have"):
        fw_sweep(base, np.zeros((2, 7)), [0.5])
    with pytest.raises(ValueError, match="init"):
        fw_batched(base, np.zeros((1, 20)), [0.5], init="random")


def test_working_set_batch_is_certified_on_full_pool():
    from divopt_rag.models import relaxed_gradient
    from divopt_rag.solvers.batched_fw import fw_batched_ws

    E = planted_duplicates(40, 10, 12, 3)  # n = 400
    Q = queries(12, 2, 9)
    base = Instance(E, Q[0], k=4, theta=0.5)
    res, qi, th = fw_sweep(base, Q, [0.2, 0.5, 0.8], working_set=12)
    for b in range(len(qi)):
        inst = Instance(E, Q[qi[b]], k=4, theta=th[b])
        x = torch.zeros(inst.n, dtype=torch.float64)
        x[res.indices[b]] = 1.0
        assert torch.allclose(res.x[b], x)  # a binary point
        g = relaxed_gradient(inst, x)  # independent full-pool gradient
        gap = float(torch.topk(g, 4).values.sum() - g @ x)
        assert res.converged[b] and gap <= 1e-6 * 12
    with pytest.raises(ValueError, match="working_set"):
        fw_batched_ws(base, np.zeros((1, 400)), [0.5], working_set=2)
