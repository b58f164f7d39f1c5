"""Functional tensor kernels shared by every method (PyTorch functional style).

Device and dtype follow the input. Embeddings may be stored in float16/bfloat16; every
reduction accumulates in float32 (float64 when E is float64). No function here forms an
n x n matrix or an n x d temporary: low-precision CPU inputs are upcast a row block at a time,
into one reused block small enough to stay in cache (about 1 MiB: the upcast and the product
then never go through main memory, which made a float16 pass about 8x a float32 one at 64 MiB
blocks; see ``benchmarks/fp16_pass_cpu.py``).
"""
from __future__ import annotations

from collections.abc import Iterator

import torch

__all__ = ["accumulation_dtype", "matvec", "rmatvec", "matmul", "rmatmul", "gather_sum", "gather_rows", "synchronize"]

_BLOCK_BYTES = 1 << 20


def _block_rows(d: int) -> int:
    """Rows of the float32 upcast block: about ``_BLOCK_BYTES``, at least 64."""
    return max(64, _BLOCK_BYTES // (4 * max(int(d), 1)))


def _upcast_blocks(E: torch.Tensor, acc: torch.dtype, rows: int) -> Iterator[tuple[int, int, torch.Tensor]]:
    """(s, e, E[s:e] in ``acc``) for consecutive row blocks of E, every block copied into one
    reused buffer of ``rows`` rows (the block is overwritten by the next one)."""
    n, d = E.shape
    buf = torch.empty(min(rows, n), d, dtype=acc, device=E.device)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        block = buf[: e - s]
        block.copy_(E[s:e])
        yield s, e, block


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 storage, float32 for everything else."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _low_precision_cpu(E: torch.Tensor) -> bool:
    return E.device.type == "cpu" and E.dtype in (torch.float16, torch.bfloat16)


def matvec(E: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """E @ v for E of shape (n, d), v of shape (d,), result in the accumulation dtype."""
    return matmul(E, v.unsqueeze(1)).squeeze(1)


def matmul(E: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """E @ V for E (n, d) and V (d, m): one pass over E, float32 accumulation.

    On CUDA low-precision GEMM already accumulates in float32 (cuBLAS compute type 32F); on
    CPU the rows are upcast block by block into one cache-sized float32 buffer (module docstring).
    """
    acc = accumulation_dtype(E.dtype)
    if _low_precision_cpu(E):
        V32 = V.to(device=E.device, dtype=acc)
        out = torch.empty(E.shape[0], V.shape[1], dtype=acc, device=E.device)
        for s, e, block in _upcast_blocks(E, acc, _block_rows(E.shape[1])):
            torch.mm(block, V32, out=out[s:e])
        return out
    if E.dtype in (torch.float16, torch.bfloat16):
        Vh = V.to(device=E.device, dtype=E.dtype)  # the operand is rounded to the storage dtype
        try:  # CUDA: cuBLAS accumulates in float32 and, with out_dtype, also returns float32
            return torch.mm(E, Vh, out_dtype=acc)
        except (RuntimeError, NotImplementedError, TypeError):  # older torch: float32 sums, half output
            return (E @ Vh).to(acc)
    return E @ V.to(device=E.device, dtype=E.dtype)


def rmatvec(E: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """E^T x for E (n, d), x (n,): a d-vector in the accumulation dtype, one pass over E."""
    return rmatmul(E, x.unsqueeze(1)).squeeze(1)


def rmatmul(E: torch.Tensor, X: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """E^T X for E (n, d) and X (n, m): (d, m) in ``dtype`` (default the accumulation dtype),
    one pass over E; low-precision rows are upcast a block at a time (module docstring)."""
    acc = accumulation_dtype(E.dtype) if dtype is None else dtype
    X = X.to(device=E.device, dtype=acc)
    if E.dtype in (torch.float16, torch.bfloat16):
        out = torch.zeros(E.shape[1], X.shape[1], dtype=acc, device=E.device)
        # CUDA: large blocks (each is one kernel launch); CPU: cache-sized
        rows = _block_rows(E.shape[1]) if E.device.type == "cpu" else 1 << 14
        for s, e, block in _upcast_blocks(E, acc, rows):
            out.addmm_(block.T, X[s:e])
        return out
    return E.T @ X.to(E.dtype)


def gather_rows(E: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows E[idx] in the accumulation dtype (a k x d copy)."""
    return E.index_select(0, idx.to(E.device)).to(accumulation_dtype(E.dtype))


def gather_sum(E: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Sum of the rows E[idx]: E^T s for the indicator s of idx, in O(k d)."""
    return gather_rows(E, idx).sum(dim=0)


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels so wall-clock timings are honest on CUDA."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
