"""The checks an array passes before it reaches a kernel: dtype, shape, C order, finite values,
positions in range. A bad array is one ``ValueError`` naming the argument, what was expected and
what was received, raised in Python, never a crash in compiled code."""
from __future__ import annotations

import numpy as np

__all__ = ["check_array", "check_pool", "check_set"]


def check_array(name: str, x: object, dtype: type, ndim: int, *, finite: bool = True) -> np.ndarray:
    """``x`` itself if it is a C-contiguous ``dtype`` array of ``ndim`` dimensions (with finite
    values if ``finite``); else ValueError."""
    want = f"a C-contiguous {np.dtype(dtype).name} array of {ndim} dimension{'s' if ndim != 1 else ''}"
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be {want}, got {type(x).__name__}")
    if x.dtype != dtype or x.ndim != ndim or not x.flags.c_contiguous:
        order = "C" if x.flags.c_contiguous else "non-contiguous"
        raise ValueError(f"{name} must be {want}, got {x.dtype} of shape {x.shape} ({order})")
    if finite and x.dtype.kind == "f" and not np.isfinite(x).all():
        raise ValueError(f"{name} must have finite values, got {int((~np.isfinite(x)).sum())} non-finite")
    return x


def check_pool(G: object, lin: object, theta: float, *, finite: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """(G, lin, one = 1 - theta) checked: G (p, p) float64 C order, lin (p,) float64, theta in [0, 1].
    ``finite=False`` skips G's O(p^2) scan where G is the product of rows already checked finite."""
    G = check_array("G", G, np.float64, 2, finite=finite)
    lin = check_array("lin", lin, np.float64, 1)
    if G.shape[0] != G.shape[1] or lin.shape[0] != G.shape[0]:
        raise ValueError(f"G must be (p, p) and lin (p,), got G {G.shape} and lin {lin.shape}")
    th = float(theta)
    if not 0.0 <= th <= 1.0:
        raise ValueError(f"theta must be in [0, 1], got {theta!r}")
    return G, lin, 1.0 - th


def check_set(S: object, p: int, k: int | None = None) -> np.ndarray:
    """S checked: (k,) int64 C order, distinct positions in [0, p)."""
    S = check_array("S", S, np.int64, 1)
    if k is not None and S.shape[0] != k:
        raise ValueError(f"S must have k = {k} positions, got {S.shape[0]}")
    if S.size and (S.min() < 0 or S.max() >= p or np.unique(S).size != S.size):
        raise ValueError(f"S must hold distinct positions in [0, {p}), got {S.tolist()}")
    return S
