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

__all__ = ["accumulation_dtype", "matvec", "rmatvec", "matmul", "rmatmul", "gather_sum", "gather_rows", "synchronize",
           "split_operand", "split_product"]

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


def matvec(E: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """E @ v for E of shape (n, d), v of shape (d,), result in the accumulation dtype."""
    return matmul(E, v.unsqueeze(1)).squeeze(1)


def matmul(E: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """E @ V for E (n, d) and V (d, m): one pass over E, float32 sums of the float32 operand.

    On the CPU low-precision rows are upcast block by block into one cache-sized float32 buffer
    (module docstring). On CUDA, V is not rounded to the storage dtype (as ``E @ V.half()``
    would): it is split into three float16 / bfloat16 parts whose sum is V to float32 precision
    (:func:`split_operand`), and ONE GEMM with a float32 output multiplies E by all of them
    (cuBLAS compute type 32F; the reduced-precision reductions that
    ``torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction`` allows apply only to
    outputs narrower than the compute type, so none here; the flag is left as it is). So E v,
    E^T x (:func:`rmatmul`, float32 operand) and E^T s (:func:`gather_sum`) all sum float32
    products of the stored rows. Where torch has no float32-output half GEMM (or refuses it,
    e.g. with fp16 accumulation allowed globally), the rows are upcast a block at a time.
    """
    acc = accumulation_dtype(E.dtype)
    if E.dtype not in (torch.float16, torch.bfloat16):
        return E @ V.to(device=E.device, dtype=E.dtype)
    V32 = V.to(device=E.device, dtype=acc)
    if E.device.type == "cpu":
        return _blocked_matmul(E, V32, _block_rows(E.shape[1]))
    try:  # CUDA: one GEMM over E for the three parts, float32 output
        return split_product(E, V32, lambda A, B: torch.mm(A, B, out_dtype=acc))
    except (RuntimeError, NotImplementedError, TypeError):  # no float32-output half GEMM here
        return _blocked_matmul(E, V32, 1 << 14)


def _blocked_matmul(E: torch.Tensor, V32: torch.Tensor, rows: int) -> torch.Tensor:
    out = torch.empty(E.shape[0], V32.shape[1], dtype=V32.dtype, device=E.device)
    for s, e, block in _upcast_blocks(E, V32.dtype, rows):
        torch.mm(block, V32, out=out[s:e])
    return out


def split_operand(V: torch.Tensor, dtype: torch.dtype, parts: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, scale): V (d, m, float32) as ``parts`` float16 / bfloat16 column blocks P (d, parts m)
    with V = scale * (P_1 + P_2 + P_3), per column.

    scale is the power of two that puts each column's largest |entry| in [1/2, 1) (exact), and
    each part is the rounding of what the previous ones left: three float16 parts carry 33
    significant bits (the float32 value, up to float16's subnormal floor, 2^-25 of the column's
    largest entry), three bfloat16 parts 24 bits (exact float32).
    """
    amax = V.abs().amax(0)
    _, e = torch.frexp(amax)
    scale = torch.ldexp(torch.ones_like(amax), e)
    R = V / scale
    out = []
    for _ in range(parts):
        h = R.to(dtype)
        out.append(h)
        R = R - h.to(R.dtype)
    return torch.cat(out, 1), scale


def split_product(E: torch.Tensor, V32: torch.Tensor, mm) -> torch.Tensor:
    """E @ V32 through :func:`split_operand`: ``mm(E, P)`` (one GEMM, float32 output), the parts
    summed and rescaled (float32)."""
    P, scale = split_operand(V32, E.dtype)
    m = V32.shape[1]
    out = mm(E, P)
    return out.view(out.shape[0], -1, m).sum(1) * scale

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
