"""A reduced-precision product on the CPU: every E v rounds its sums to the storage dtype.

What a GEMM with a float16 / bfloat16 output, or with reduced-precision reductions, hands back
(issue 42: on one H200 the paper's FW ran to its cap on float16 pools). Patched wherever divopt
reaches :func:`divopt_rag.models.kernels.matmul` by name, so it applies to any version of the code
(the tests and ``benchmarks/fw_precision.py`` use it).

    with rounded_products():
        select(Instance(E.half(), q, k=20, theta=0.5), "fw")
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

import torch

from divopt_rag.models import kernels

__all__ = ["rounded_products"]


@contextmanager
def rounded_products():
    """Within the block, every low-precision product E V returns its float32 sums rounded to E's
    dtype (then widened back to float32)."""
    real = kernels.matmul

    def rounded(E, V):
        out = real(E, V)
        return out.to(E.dtype).to(out.dtype) if E.dtype in (torch.float16, torch.bfloat16) else out

    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("divopt_rag") and getattr(m, "matmul", None) is real]
    for m in holders:
        m.matmul = rounded
    try:
        yield
    finally:
        for m in holders:
            m.matmul = real
