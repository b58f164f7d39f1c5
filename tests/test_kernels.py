"""The shared tensor kernels on low-precision CPU storage against a float64 transcription of the
same stored values: every product is one pass with float32 sums, whatever the block boundaries."""
from __future__ import annotations

import pytest
import torch

from divopt_rag.models.kernels import matmul, matvec, rmatmul, rmatvec
from divopt_rag.solvers.frank_wolfe import rows_times_E


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
