"""Frank-Wolfe in every storage precision (issue 42): float16 / bfloat16 pools whose products round
their sums to the storage dtype (``reduced_precision.rounded_products``, what a reduced-precision
GEMM returns) must stop within twice the float32 iteration count, with the picks of FW run in
float64 on the same stored values (the truth: no rounding anywhere). Before the fix these runs
went to the iteration cap (200 for ``fw``, 1000 for ``fw_topk`` / ``fw_ws``)."""
import numpy as np
import pytest
import torch

from divopt_rag.data.synthetic import narrow_cone
from divopt_rag.models import Instance
from divopt_rag.solvers import select
from helpers.reduced_precision import rounded_products

_POOL = {}


def _pool(n=2000, d=64):
    if (n, d) not in _POOL:
        E, q, _ = narrow_cone(n, d, seed=0)
        _POOL[n, d] = torch.from_numpy(E), q
    return _POOL[n, d]


# cells where the code before the fix ran to its cap under rounding products
@pytest.mark.parametrize("dtype, k, theta, method", [
    (torch.float16, 20, 0.7, "fw"), (torch.float16, 40, 0.7, "fw"), (torch.bfloat16, 40, 0.3, "fw"),
    (torch.float16, 20, 0.3, "fw_topk"), (torch.float16, 40, 0.5, "fw_topk"), (torch.bfloat16, 20, 0.5, "fw_topk"),
    (torch.float16, 20, 0.5, "fw_ws"),
])
def test_reduced_precision_fw_stops_like_float32_with_the_exact_picks(dtype, k, theta, method):
    E32, q = _pool()
    ref = select(Instance(E32, q, k=k, theta=theta), method)
    stored = Instance(E32.to(dtype), q, k=k, theta=theta)
    exact = select(stored.to(dtype=torch.float64), method)  # the stored values, no rounding
    with rounded_products():
        sel = select(stored, method)
    assert sel.info["converged"], (sel.iterations, sel.info["gap"])
    assert sel.iterations <= 2 * max(ref.iterations, 1), (sel.iterations, ref.iterations)
    assert set(sel.indices.tolist()) == set(exact.indices.tolist())


def test_batched_fw_on_rounding_products_converges_like_the_single_runs():
    from divopt_rag.models.kernels import matmul
    from divopt_rag.solvers.batched_fw import fw_sweep

    E32, q = _pool(1000, 32)
    Q = np.stack([q, -q + 0.1 * np.ones_like(q)])
    Q = torch.as_tensor(Q / np.linalg.norm(Q, axis=1, keepdims=True), dtype=torch.float32)
    base32 = Instance(E32, q, k=15, theta=0.5)
    base16 = Instance(E32.half(), q, k=15, theta=0.5)
    ref, _, _ = fw_sweep(base32, Q, [0.3, 0.7])
    C16 = matmul(base16.E, Q.T).T  # the relevance each single instance has (outside the rounding)
    with rounded_products():
        res, qi, th = fw_sweep(base16, C16, [0.3, 0.7])
    assert res.converged.all()
    assert (res.iterations <= 2 * np.maximum(ref.iterations, 1)).all(), (res.iterations, ref.iterations)
    for b in range(len(qi)):  # each problem: the picks of float64 FW on the stored values
        exact = select(base16.replace(q=Q[qi[b]], theta=float(th[b])).to(dtype=torch.float64), "fw_topk")
        assert set(res.indices[b].tolist()) == set(exact.indices.tolist())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_oracle_reranks_rounded_gradients_exactly(dtype):
    """exact_top_k against a float64 brute-force top-k of the exact gradient of the stored rows."""
    from divopt_rag.solvers.fw_arrays import exact_top_k, refine_extra

    g = torch.Generator().manual_seed(3)
    E = torch.nn.functional.normalize(torch.randn(500, 32, generator=g), dim=1).to(dtype)
    X = torch.rand(3, 500, generator=g)
    X = X / X.sum(1, keepdim=True) * 10
    L = torch.randn(3, 500, generator=g)
    V64 = (X.double() @ E.double())
    pw = torch.tensor([1.4, 1.0, 0.2], dtype=torch.float64)
    exact = L.double() + pw[:, None] * (2.0 * X.double() - V64 @ E.double().T)
    noisy = exact + 0.05 * torch.randn(exact.shape, generator=g, dtype=torch.float64)  # a rounding product
    cand = torch.topk(noisy, 10 + refine_extra(10), dim=1).indices
    got = exact_top_k(cand, 10, E, X, L, V64, pw, 2.0)
    for m in range(3):
        assert set(got[m].tolist()) == set(torch.topk(exact[m], 10).indices.tolist())


def test_gap_rounding_bound_keeps_the_default_tolerance_in_float32_and_float64():
    from divopt_rag.solvers.fw_kernel import gap_rounding_bound

    for k in (2, 3, 10, 100, 1000):
        for theta in (0.0, 0.3, 1.0):
            for acc in (torch.float32, torch.float64):
                lin_inf = theta * (k - 1) * 1.0  # relevance |c| <= 1 (unit rows and query)
                B = gap_rounding_bound(k, theta, 2.0, lin_inf, acc, 10_000_000, 1024)
                assert B < 1e-6 * k * (k - 1), (k, theta, acc, B)


@pytest.mark.parametrize("seed", range(4))
def test_the_computed_gap_is_within_its_rounding_bound(seed):
    """The kernel's gap at float32 points against the gap of the same stored values in float64
    (the truth: grad^T (s - x) from scratch), within gap_rounding_bound."""
    from divopt_rag.models.ccbqp import linear_term
    from divopt_rag.solvers.fw_kernel import fw_gap_at, gap_rounding_bound

    rng = np.random.default_rng(seed)
    n, d, k, theta = 3000, 48, 25, float(rng.uniform(0.1, 0.9))
    E, q, _ = narrow_cone(n, d, seed=seed)
    inst = Instance(torch.from_numpy(E).half(), q, k=k, theta=theta)
    x = torch.as_tensor(rng.dirichlet(np.ones(n)) * k, dtype=torch.float32).clamp(max=1.0)
    x = x * (k / x.sum())
    lin = linear_term(inst.relevance, theta, k)[None]
    v = (x.double() @ inst.E.double()).float()[None]
    S = torch.as_tensor(rng.choice(n, size=(1, k), replace=False))
    gap, _ = fw_gap_at(inst.E, x[None], lin, v, S, theta, k, 2.0)
    Ed, xd, ld, vd = inst.E.double(), x.double(), lin[0].double(), v[0].double()
    s = torch.zeros(n, dtype=torch.float64)
    s[S[0]] = 1.0
    true = (ld + 2 * (1 - theta) * (2.0 * xd - Ed @ vd)) @ (s - xd)  # the state's gap, in float64
    B = gap_rounding_bound(k, theta, 2.0, float(ld.abs().max()), torch.float32, n, d)
    assert abs(float(gap[0]) - float(true)) <= B, (float(gap[0]), float(true), B)
