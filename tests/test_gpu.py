"""Every selector on CUDA tensors (skipped without a GPU): device and dtype follow the input.

The truth is the same selector on the CPU copy of the pool: float32 CUDA runs must reach the CPU
objective (the picks may differ only where two candidates tie to float32 rounding), float16
storage must stay within its rounding of it, and the batched default method must equal its
single runs on the GPU too.
"""
import numpy as np
import pytest
import torch

from conftest import planted_duplicates, unit_query
from divopt_rag.models import Instance
from divopt_rag.models.kernels import matvec
from divopt_rag.solvers import METHOD_NEEDS, METHODS, select
from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _pool(seed=0, n=600, d=48):
    E = planted_duplicates(n // 6, 6, d, seed).astype(np.float32)
    return E, unit_query(d, seed).astype(np.float32)


def _params(method, inst):
    if "cross_encoder" not in METHOD_NEEDS.get(method, ()):
        return {}
    # precomputed "cross-encoder" scores on the instance's device: the relevance and the cosines
    E = inst.E.float()
    return {"query_scores": inst.relevance * 10.0, "pair_scores": (E @ E.T) * 10.0}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_selector_runs_on_cuda_float32(method):
    E, q = _pool()
    cpu = Instance(E, q, k=8, theta=0.6)
    gpu = cpu.to("cuda")
    assert gpu.E.is_cuda and gpu.relevance.is_cuda
    a, b = select(cpu, method, **_params(method, cpu)), select(gpu, method, **_params(method, gpu))
    assert len(set(b.indices.tolist())) == 8
    scale = 8 * 7
    assert b.objective == pytest.approx(a.objective, abs=1e-4 * scale), method


@pytest.mark.parametrize("method", ["fw", "fw_ws", "fw_ls", "fw_ms", "fw_ws_ms", "mmr", "mmr_lazy", "gmmr", "dpp",
                                    "dartboard", "vrsd", "topk"])
def test_half_storage_on_cuda(method):
    E, q = _pool(1)
    ref = Instance(E, q, k=8, theta=0.5)
    half = ref.to("cuda", torch.float16)
    assert half.E.dtype == torch.float16 and half.relevance.dtype == torch.float32
    sel = select(half, method)
    # the half-precision pool's own optimum differs from the float32 one only by its rounding
    assert abs(sel.objective - select(ref, method).objective) <= 2e-2 * 8 * 7, method


def test_default_method_sweep_on_cuda_equals_single_runs():
    E, q = _pool(2, n=900)
    Q = np.stack([unit_query(E.shape[1], 70 + i) for i in range(2)]).astype(np.float32)
    base = Instance(torch.as_tensor(E).cuda(), torch.as_tensor(q).cuda(), k=6, theta=0.5)
    res, qi = ws_multistart_sweep(base, torch.as_tensor(Q).cuda(), [0.3, 0.8], pool_size=60)
    for b in range(len(qi)):
        single = select(base.replace(q=Q[qi[b]], theta=float(res.thetas[b])), "fw_ws_ms", pool_size=60)
        assert single.indices.tolist() == res.indices[b].tolist()


def test_kernels_keep_the_device_and_accumulate_half_in_float32():
    E = torch.randn(1000, 64, device="cuda", dtype=torch.float16)
    v = torch.randn(64, device="cuda")
    out = matvec(E, v)
    assert out.is_cuda and out.dtype == torch.float32
    torch.testing.assert_close(out, E.float() @ v.half().float(), rtol=1e-3, atol=1e-2)
