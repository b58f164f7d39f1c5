"""The shared tensor kernels on low-precision CPU storage against a float64 transcription of the
same stored values: every product is one pass with float32 sums, whatever the block boundaries."""
from __future__ import annotations

import pytest
import torch

from divopt_rag.models.kernels import matmul, matvec, rmatmul, rmatvec
from divopt_rag.solvers.fw_arrays import rows_times_E


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n, d", [(0, 8), (1, 8), (255, 1024), (256, 1024), (257, 1024), (3001, 384), (5000, 3)])
def test_low_precision_products_equal_float64_of_the_stored_values(dtype, n, d):
    g = torch.Generator().manual_seed(n * 7 + d)
    E = torch.randn(n, d, generator=g).to(dtype)
    Ed = E.double()
    v, V = torch.randn(d, generator=g), torch.randn(d, 3, generator=g)
    x, X = torch.rand(n, generator=g), torch.rand(4, n, generator=g)
    tol = dict(rtol=1e-5, atol=1e-4 * max(1.0, n) ** 0.5)  # float32 sums over n (or d) terms
    for got, ref in [(matvec(E, v), Ed @ v.double()), (matmul(E, V), Ed @ V.double()),
                     (rmatvec(E, x), Ed.T @ x.double()), (rmatmul(E, X.T), Ed.T @ X.double().T),
                     (rows_times_E(X, E), X.double() @ Ed)]:
        assert got.dtype == torch.float32 and got.shape == ref.shape
        torch.testing.assert_close(got.double(), ref, **tol)
    assert rows_times_E(X, E).is_contiguous()
    assert rmatmul(E, X.T.double(), dtype=torch.float64).dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_split_operand_carries_the_float32_operand(dtype):
    """CUDA's half GEMM takes the operand in the storage dtype: three parts of it (after a
    power-of-two scale per column) must sum to the float32 value, for columns of any scale."""
    from divopt_rag.models.kernels import split_operand

    g = torch.Generator().manual_seed(1)
    V = torch.randn(300, 4, generator=g) * torch.tensor([1e-6, 1e-2, 1.0, 3e4])
    V[:, 0] = 0.0
    V[0, 0] = 1e-6  # a column with one nonzero
    P, scale = split_operand(V, dtype)
    assert P.dtype == dtype and P.shape == (300, 12)
    back = P.double().view(300, 3, 4).sum(1) * scale.double()
    err = (back - V.double()).abs().amax(0) / V.double().abs().amax(0).clamp_min(1e-300)
    assert (err <= 2.0 ** -24).all(), err


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_split_product_sums_float32_products_like_the_cpu_kernel(dtype):
    """The CUDA path's arithmetic (one GEMM over the parts, float32 output), run here with an
    exact float32 GEMM of the half inputs, against the float64 product of the stored values."""
    from divopt_rag.models.kernels import split_product

    g = torch.Generator().manual_seed(2)
    E = torch.nn.functional.normalize(torch.randn(2000, 96, generator=g), dim=1).to(dtype)
    V = torch.randn(96, 3, generator=g) * 40.0
    got = split_product(E, V, lambda A, B: A.float() @ B.float())
    ref = E.double() @ V.double()
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), ref, rtol=1e-6, atol=1e-5 * float(ref.abs().max()))
    rounded = E.float() @ V.to(dtype).float()  # what E @ V.half() gives: the operand rounded
    assert float((rounded.double() - ref).abs().max()) > 100 * float((got.double() - ref).abs().max())
