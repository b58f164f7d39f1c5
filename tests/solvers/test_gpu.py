"""Every selector on CUDA tensors (the "cuda" cases are skipped without a GPU): device and dtype
follow the input.

The truth is the same selector on the CPU copy of the pool: float32 CUDA runs must reach the CPU
objective (the picks may differ only where two candidates tie to float32 rounding), float16
storage must stay within its rounding of it, and the batched default method must equal its
single runs on the GPU too. Each method gets only the inputs it declares (its signature), the
same float64 values on both devices. The "cpu" cases run the same checks against a second CPU
instance, so the parameter plumbing and the dtype paths are tested on every machine.
"""
import inspect

import numpy as np
import pytest
import torch

from helpers.pools import planted_duplicates, unit_query
from divopt_rag.models import Instance
from divopt_rag.models.kernels import matvec
from divopt_rag.solvers import METHOD_NEEDS, METHODS, select
from divopt_rag.solvers.ws_multistart import ws_multistart_sweep

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


def _pool(seed=0, n=600, d=48):
    E = planted_duplicates(n // 6, 6, d, seed).astype(np.float32)
    return E, unit_query(d, seed).astype(np.float32)


def method_inputs(method: str, inst: Instance) -> dict:
    """The cross-encoder inputs ``method`` declares, and only those: precomputed "cross-encoder"
    scores (10 x the relevance; 10 x the cosines for passage pairs) formed once in float64 on the
    CPU and moved to the instance's device, so both devices see the same values."""
    if "cross_encoder" not in METHOD_NEEDS.get(method, ()):
        return {}
    E = inst.E.detach().cpu().double()
    scores = {"query_scores": inst.relevance.detach().cpu().double() * 10.0, "pair_scores": (E @ E.T) * 10.0}
    declared = inspect.signature(METHODS[method]).parameters
    return {name: s.to(inst.device) for name, s in scores.items() if name in declared}


def _every_selector_on(method: str, device: str) -> None:
    E, q = _pool()
    cpu = Instance(E, q, k=8, theta=0.6)
    other = cpu.to(device)
    assert other.E.device.type == device and other.relevance.device.type == device
    inputs = method_inputs(method, cpu)
    a = select(cpu, method, **inputs)
    b = select(other, method, **{name: s.to(device) for name, s in inputs.items()})
    assert len(set(b.indices.tolist())) == 8
    scale = 8 * 7
    assert b.objective == pytest.approx(a.objective, abs=1e-4 * scale), method


@CUDA
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_selector_runs_on_cuda_float32(method):
    _every_selector_on(method, "cuda")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_selector_takes_its_declared_inputs_on_a_second_cpu_instance(method):
    """What the CUDA case checks, on the CPU: each method runs with the inputs it declares."""
    _every_selector_on(method, "cpu")


def test_method_inputs_are_what_each_method_declares():
    inst = Instance(*_pool(n=60), k=4, theta=0.5)
    for method in sorted(METHODS):
        declared = inspect.signature(METHODS[method]).parameters
        given = method_inputs(method, inst)
        assert set(given) <= set(declared), method
        if "cross_encoder" in METHOD_NEEDS.get(method, ()):
            assert "query_scores" in given, method


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["fw", "fw_ws", "fw_ls", "fw_ms", "fw_ws_ms", "mmr", "mmr_lazy", "gmmr", "dpp",
                                    "dartboard", "vrsd", "topk"])
def test_half_storage(method, device):
    E, q = _pool(1)
    ref = Instance(E, q, k=8, theta=0.5)
    half = ref.to(device, torch.float16)
    assert half.E.dtype == torch.float16 and half.relevance.dtype == torch.float32
    sel = select(half, method)
    # the half-precision pool's own optimum differs from the float32 one only by its rounding
    assert abs(sel.objective - select(ref, method).objective) <= 2e-2 * 8 * 7, method


@CUDA
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("method", ["fw", "fw_topk", "fw_ws"])
def test_fw_on_cuda_half_stops_like_float32_with_the_exact_picks(method, dtype):
    """Issue 42: on one H200 the paper's FW ran to its cap on float16 pools. On the GPU's own
    GEMM it must stop within twice the float32 iterations, with the picks of float64 FW on the
    same stored values."""
    from divopt_rag.data.synthetic import narrow_cone

    E, q, _ = narrow_cone(20_000, 256, seed=1)
    for k, theta in ((25, 0.5), (50, 0.7)):
        ref = select(Instance(torch.as_tensor(E).cuda(), q, k=k, theta=theta), method)
        stored = Instance(torch.as_tensor(E).cuda().to(dtype), q, k=k, theta=theta)
        sel = select(stored, method)
        exact = select(stored.to(dtype=torch.float64), method)
        assert sel.info["converged"] and sel.iterations <= 2 * max(ref.iterations, 1), (k, theta, sel.iterations)
        assert set(sel.indices.tolist()) == set(exact.indices.tolist()), (k, theta)


@CUDA
def test_fw_on_cuda_reads_the_host_once_per_iteration():
    from divopt_rag.models.ccbqp import linear_term
    from divopt_rag.solvers.fw_kernel import fw_rows
    from divopt_rag.solvers.frank_wolfe import initial_point
    from helpers.sync_count import count_host_syncs

    E, q = _pool(3, n=3000)
    inst = Instance(torch.as_tensor(E).cuda().half(), torch.as_tensor(q).cuda(), k=20, theta=0.3)
    X = initial_point(inst, "uniform")[None]
    L = linear_term(inst.relevance, 0.3, 20)[None]
    counts = {}
    for cap in (3, 13):
        with count_host_syncs() as syncs:
            res = fw_rows(inst.E, X, L, 0.3, 20, max_iter=cap)
        counts[cap] = (syncs.total, int(res.iterations.max()))
    if counts[13][1] == 13:  # both capped: the difference is ten iterations
        assert counts[13][0] - counts[3][0] <= 10, counts
    assert counts[13][0] <= counts[13][1] + 6, counts


@CUDA
def test_default_method_sweep_on_cuda_equals_single_runs():
    E, q = _pool(2, n=900)
    Q = np.stack([unit_query(E.shape[1], 70 + i) for i in range(2)]).astype(np.float32)
    base = Instance(torch.as_tensor(E).cuda(), torch.as_tensor(q).cuda(), k=6, theta=0.5)
    res, qi = ws_multistart_sweep(base, torch.as_tensor(Q).cuda(), [0.3, 0.8], pool_size=60)
    for b in range(len(qi)):
        single = select(base.replace(q=Q[qi[b]], theta=float(res.thetas[b])), "fw_ws_ms", pool_size=60)
        assert single.indices.tolist() == res.indices[b].tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_kernels_keep_the_device_and_sum_float32_products_of_the_float32_operand(device, dtype):
    g = torch.Generator().manual_seed(0)
    E = torch.randn(1000, 64, generator=g).to(device=device, dtype=dtype)
    v = torch.randn(64, generator=g).to(device)
    out = matvec(E, v)
    assert out.device.type == device and out.dtype == torch.float32
    # the operand is not rounded to the storage dtype: float32 sums of the float32 v
    ref = (E.double() @ v.double()).float()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_gpu_check_dry_run_on_the_cpu(tmp_path):
    """benchmarks/gpu_check.sh at tiny sizes on the CPU (DEVICE=cpu SMALL=1), through the namespace
    shim the device machine uses: it writes its tables (the CUDA tests, step 1, skip here)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, DEVICE="cpu", SMALL="1", GPU_CHECK_TESTS="0", GPU_CHECK_SHIM="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(["bash", str(root / "benchmarks" / "gpu_check.sh"), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = {p.name for p in tmp_path.iterdir()}
    assert {"paper_row.csv", "paper_ratios.csv", "rag_call.csv", "batched_sweep.csv", "environment.json",
            "gpu_check.log"} <= files and len(files) <= 8
    row = pd.read_csv(tmp_path / "paper_row.csv")
    assert set(row.method) == {"fw", "fw_ws_ms", "mmr", "mmr_lazy", "dpp"} and row.seconds.notna().all()
    assert (pd.read_csv(tmp_path / "batched_sweep.csv").ms_per_instance > 0).all()
    assert "== paper row" in done.stdout


def test_gpu_paths_import_without_the_packages_the_device_lacks():
    """The device image has torch, numpy, pandas and pytest but not ir_measures or pyomo (its first
    GPU check failed six CUDA tests on ``import ir_measures`` from ``divopt_rag.data``): the solvers
    and the synthetic pools must import with both blocked."""
    import subprocess
    import sys

    code = ("import sys\n"
            "for name in ('ir_measures', 'pyomo', 'pyomo.environ'):\n"
            "    sys.modules[name] = None  # import raises ModuleNotFoundError\n"
            "from divopt_rag.data.synthetic import narrow_cone\n"
            "from divopt_rag.solvers import DEFAULT_METHOD, select\n"
            "from divopt_rag.solvers.ws_multistart import ws_multistart_sweep\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
