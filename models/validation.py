"""Input validation for divopt, in the manner of scikit-learn's ``check_array``.

Every public entry point validates through these functions, so an error always names the
argument, what was expected and what was received. Nothing here copies the embedding
matrix: checks are reductions (row norms), which keeps peak memory near the size of ``E``.

Tensors that require gradients are detached here (:func:`as_tensor`, the one point every array
input passes): divopt's selectors and solvers are not differentiable, and the detached tensor
shares the caller's memory, so nothing is copied and the caller's graph is left alone.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .domains import THETA_RANGE

__all__ = [
    "as_tensor",
    "check_bool",
    "check_embeddings",
    "check_vector",
    "check_k",
    "check_theta",
    "check_nonnegative",
    "check_indices",
    "check_choice",
    "check_scalar",
    "ScalarTypeError",
    "unit_norm_tolerance",
]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Rows are processed in blocks so that low-precision inputs are upcast a block at a time.
_BLOCK_ROWS = 1 << 15


def as_tensor(a: Any, name: str) -> torch.Tensor:
    """Return ``a`` as a floating torch tensor without copying when possible.

    numpy arrays are wrapped with ``torch.from_numpy`` (shared memory); lists are converted.
    Integer inputs are converted to float32; other dtypes are refused with a clear error.
    A tensor with ``requires_grad`` is detached (same memory, no autograd history): no divopt
    method differentiates through its inputs, and in-place updates on such tensors would fail.
    """
    if isinstance(a, torch.Tensor):
        t = a.detach() if a.requires_grad else a
    elif isinstance(a, np.ndarray):
        if a.dtype == np.float16 or a.dtype == np.float32 or a.dtype == np.float64:
            t = torch.from_numpy(np.ascontiguousarray(a))
        elif np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
            t = torch.from_numpy(a.astype(np.float32))
        else:
            raise TypeError(f"{name} must be a float array, got numpy dtype {a.dtype}")
    else:
        try:
            t = torch.as_tensor(np.asarray(a, dtype=np.float64))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be array-like of floats, got {type(a).__name__}") from exc
    if t.dtype not in _FLOAT_DTYPES:
        if t.dtype.is_floating_point or t.dtype.is_complex:
            raise TypeError(f"{name} has unsupported dtype {t.dtype}")
        t = t.to(torch.float32)
    return t


def unit_norm_tolerance(dtype: torch.dtype) -> float:
    """Tolerance on | ||e_i|| - 1 | for a row stored in ``dtype``."""
    return max(1e-4, 8.0 * torch.finfo(dtype).eps)


def _safe_norm_range(acc: torch.dtype) -> tuple[float, float]:
    """(lo, hi): a plain sum of squares in ``acc`` gives a row norm in [lo, hi] to full precision.

    Below lo, squares of the row's entries may have underflowed (the entries are below
    sqrt(tiny), and a norm under sqrt(tiny / eps) can lose more than rounding to them); above
    hi the sum of squares may overflow. Rows outside are recomputed scaled (:func:`_scaled_rows`).
    """
    fi = torch.finfo(acc)
    return float(fi.tiny / fi.eps) ** 0.5, float(fi.max) ** 0.5 / 4.0


def _scaled_rows(blk: torch.Tensor, acc: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scale, u, ||u||) with u = row / scale, scale = max |row| (1 for a zero row), in ``acc``.

    Scaling before the sum of squares, as LAPACK's nrm2 and numpy/scipy's robust norms do, keeps
    every finite nonzero row's norm exact to rounding: |u_i| <= 1 with max |u_i| = 1, so
    1 <= ||u|| <= sqrt(d) neither underflows nor overflows. The norm is scale * ||u||.
    """
    b = blk.to(acc)
    scale = b.abs().amax(dim=1)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    u = b / scale.unsqueeze(1)
    return scale, u, torch.linalg.vector_norm(u, dim=1)


def _row_norms(E: torch.Tensor) -> torch.Tensor:
    """Euclidean row norms with float32 (or float64) accumulation, block by block.

    Plain sums of squares where they are exact (the rows of real embeddings); rows whose norm
    falls outside :func:`_safe_norm_range` (tiny, huge, zero or overflowed) are recomputed from
    the rows scaled by their largest entry, so a finite row reports its true norm whenever it is
    representable (inf only when it is not; NaN only for rows with NaN/inf entries).
    """
    acc = torch.float64 if E.dtype == torch.float64 else torch.float32
    lo, hi = _safe_norm_range(acc)
    out = torch.empty(E.shape[0], dtype=acc, device=E.device)
    for start in range(0, E.shape[0], _BLOCK_ROWS):
        blk = E[start : start + _BLOCK_ROWS]
        nrm = torch.linalg.vector_norm(blk, dim=1, dtype=acc)
        redo = ~((nrm >= lo) & (nrm <= hi))
        if bool(redo.any()):
            rows = redo.nonzero().squeeze(1)
            scale, _, unrm = _scaled_rows(blk.index_select(0, rows), acc)
            nrm[rows] = scale * unrm
        out[start : start + blk.shape[0]] = nrm
    return out


def _normalized_rows(t: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Rows of ``t`` divided by their norms (``norms`` from :func:`_row_norms`, all finite rows,
    none zero), in t's dtype. Rows in the safe range are divided directly; the others as
    (row / scale) / ||row / scale||, which needs no representable norm (a float64 row of 1e308s
    normalizes although its norm overflows)."""
    acc = norms.dtype
    lo, hi = _safe_norm_range(acc)
    out = t / norms.to(t.dtype).unsqueeze(1)
    redo = ~((norms >= lo) & (norms <= hi))
    low_precision = t.dtype in (torch.float16, torch.bfloat16)
    if low_precision:  # the norm itself may not fit the storage dtype: divide in acc
        fi = torch.finfo(t.dtype)
        redo |= (norms > fi.max) | (norms < fi.tiny / fi.eps)
    if bool(redo.any()):
        rows = redo.nonzero().squeeze(1)
        _, u, unrm = _scaled_rows(t.index_select(0, rows), acc)
        out[rows] = (u / unrm.unsqueeze(1)).to(t.dtype)
    return out.contiguous()


def _first_nonfinite(t: torch.Tensor) -> tuple[int, ...]:
    bad = (~torch.isfinite(t)).nonzero()
    return tuple(int(i) for i in bad[0])


def check_embeddings(E: Any, name: str = "E", normalize: bool = False) -> torch.Tensor:
    """Validate an (n, d) embedding matrix with unit-norm rows.

    Parameters
    ----------
    E : array-like or tensor of shape (n, d)
    normalize : if True, rows are rescaled to unit norm (a new tensor); otherwise rows must
        already have unit norm within :func:`unit_norm_tolerance` of their dtype.

    Raises
    ------
    ValueError naming the problem: wrong number of dimensions, empty pool, non-finite values
    (with the first offending row), zero rows when normalizing, rows not of unit norm.
    """
    normalize = check_bool(normalize, "normalize")
    t = as_tensor(E, name)
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D of shape (n, d), got {t.ndim}-D shape {tuple(t.shape)}")
    n, d = t.shape
    if n == 0:
        raise ValueError(f"{name} is an empty pool: shape {tuple(t.shape)}, need n >= 1")
    if d == 0:
        raise ValueError(f"{name} has zero columns: shape {tuple(t.shape)}, need d >= 1")
    norms = _row_norms(t)
    # A row with NaN or inf has a NaN norm (the scaled norm of a finite row is finite unless
    # its true norm exceeds the dtype's range: inf), so one reduction finds them all.
    bad = torch.isnan(norms)
    if bool(bad.any()):
        row = int(bad.nonzero()[0])
        col = _first_nonfinite(t[row])[0]
        raise ValueError(
            f"{name} contains non-finite values (NaN or inf): first at row {row}, column {col}"
        )
    if normalize:
        if bool((norms == 0).any()):
            row = int((norms == 0).nonzero()[0])
            raise ValueError(f"{name} row {row} is all zeros and cannot be normalized")
        return _normalized_rows(t, norms)
    tol = unit_norm_tolerance(t.dtype)
    dev = (norms - 1.0).abs()
    if bool((dev > tol).any()):
        row = int(dev.argmax())
        raise ValueError(
            f"{name} rows must have unit norm (pass normalize=True to rescale): "
            f"row {row} has norm {float(norms[row]):.6g}, tolerance {tol:.1e}"
        )
    return t.contiguous()


def check_vector(
    v: Any, name: str, length: int, what: str = "", unit_norm: bool = False, normalize: bool = False
) -> torch.Tensor:
    """Validate a finite 1-D vector of a given length (optionally unit norm)."""
    t = as_tensor(v, name)
    if t.ndim == 2 and 1 in t.shape:
        t = t.reshape(-1)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D of length {length}{what}, got shape {tuple(t.shape)}")
    if t.shape[0] != length:
        raise ValueError(f"{name} must have length {length}{what}, got length {t.shape[0]}")
    if not bool(torch.isfinite(t).all()):
        (i,) = _first_nonfinite(t)
        raise ValueError(f"{name} contains non-finite values (NaN or inf): first at index {i}")
    if unit_norm or normalize:
        nrm = float(torch.linalg.vector_norm(t, dtype=torch.float64))
        lo, hi = _safe_norm_range(torch.float64)
        u = None
        if not lo <= nrm <= hi:  # tiny, huge or zero: scale first (see _scaled_rows)
            scale, u, unrm = _scaled_rows(t.reshape(1, -1), torch.float64)
            nrm = float(scale[0] * unrm[0])
            u = u[0] / unrm[0]
        if normalize:
            if not bool((t != 0).any()):
                raise ValueError(f"{name} is the zero vector and cannot be normalized")
            if u is not None:
                return u.to(t.dtype)
            return t / nrm
        tol = unit_norm_tolerance(t.dtype)
        if abs(nrm - 1.0) > tol:
            raise ValueError(
                f"{name} must have unit norm (pass normalize=True to rescale), got norm {nrm:.6g}"
            )
    return t


def check_k(k: Any, n: int, name: str = "k") -> int:
    """k must be an integer with 1 <= k <= n."""
    k = check_scalar(k, name, int)
    if k < 1 or k > n:
        raise ValueError(f"{name} must satisfy 1 <= {name} <= n = {n}, got {name} = {k}")
    return k


def check_theta(theta: Any, name: str = "theta") -> float:
    """theta is the relevance-diversity trade-off in :data:`~divopt_rag.models.domains.THETA_RANGE`
    = [0, 1] (1 = pure relevance)."""
    lo, hi = THETA_RANGE
    _refuse_bool_and_text(theta, name, f"a number in [{lo:g}, {hi:g}]")
    try:
        th = float(theta)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number in [{lo:g}, {hi:g}], got {theta!r}") from exc
    if not np.isfinite(th) or th < lo or th > hi:
        raise ValueError(f"{name} must lie in [{lo:g}, {hi:g}], got {theta!r}")
    return th


def _refuse_bool_and_text(value: Any, name: str, expected: str) -> None:
    """A bool is not a number (``True`` ran as a 1 s time limit) and neither is a string (``"0.5"``
    is what a caller forgot to parse): TypeError naming the argument."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise ScalarTypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")


def check_bool(value: Any, name: str) -> bool:
    """True or False (numpy's bools too), never a truthy stand-in: ``normalize="no"`` counted as
    true. TypeError naming the argument otherwise."""
    if not isinstance(value, (bool, np.bool_)):
        raise ScalarTypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_nonnegative(value: Any, name: str, allow_zero: bool = True) -> float:
    _refuse_bool_and_text(value, name, "a number")
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number, got {value!r}") from exc
    if not np.isfinite(v) or v < 0.0 or (v == 0.0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def check_indices(indices: Any, n: int, name: str = "indices", size: int | None = None,
                  size_what: str = "", *, unique: bool = True) -> np.ndarray:
    """A selection: unique integer indices in [0, n), optionally of a given size (``size_what``
    names it in the message, e.g. " (k)"); ``unique=False`` lets an index repeat."""
    idx = np.asarray(indices.cpu() if isinstance(indices, torch.Tensor) else indices)
    if idx.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {idx.shape}")
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64, copy=False)
    if size is not None and idx.size != size:
        raise ValueError(f"{name} must hold exactly {size} items{size_what}, got {idx.size}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise ValueError(f"{name} must lie in [0, {n}), got {int(bad)}")
    if not unique:
        return idx
    uniq, counts = np.unique(idx, return_counts=True)
    if uniq.size != idx.size:
        raise ValueError(f"{name} must be unique, got duplicates (e.g. {int(uniq[counts > 1][0])})")
    return idx


def check_choice(value: Any, name: str, choices) -> str:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {sorted(choices)}")
    return value


_TYPE_WORDS = {int: "an integer", np.integer: "an integer", float: "a number", np.floating: "a number",
               str: "a string", bool: "a bool"}


class ScalarTypeError(TypeError, ValueError):
    """A scalar of the wrong type (:func:`check_scalar`). A TypeError, as in scikit-learn, and a
    ValueError too, so callers of the older hand-written checks (which raised ValueError) keep
    working (numpy's AxisError is both a ValueError and an IndexError for the same reason)."""


def check_scalar(
    x: Any,
    name: str,
    target_type: type | tuple[type, ...],
    *,
    min_val: float | None = None,
    max_val: float | None = None,
    include_boundaries: str = "both",
    allow_none: bool = False,
) -> Any:
    """Validate a scalar parameter's type and range, in the manner of scikit-learn's ``check_scalar``.

    Parameters
    ----------
    x : the value.
    name : the argument's name, used in the messages ("max_iter must be >= 1, got 0").
    target_type : ``int``, ``float``, ``(int, float)``, ... ``bool`` is never taken for an int
        (``True`` is not a count); numpy integers count as ``int``, numpy floats as ``float``, and
        an ``int`` is accepted (and converted) where ``float`` is wanted.
    min_val, max_val : bounds (None: unbounded); NaN is always refused for reals.
    include_boundaries : "both", "left", "right" or "neither": which bounds are allowed values.
    allow_none : None passes through unchanged.

    Returns
    -------
    The value as a Python ``int`` or ``float`` (others unchanged).

    Raises
    ------
    ScalarTypeError (a TypeError and a ValueError) for the wrong type; ValueError out of range.
    """
    if x is None and allow_none:
        return None
    types = target_type if isinstance(target_type, tuple) else (target_type,)
    want_int = int in types or np.integer in types
    want_float = float in types or np.floating in types
    expected = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in types) + (" or None" if allow_none else "")
    if isinstance(x, (bool, np.bool_)) and bool not in types:
        raise ScalarTypeError(f"{name} must be {expected}, got bool {x!r}")
    if want_int and isinstance(x, (int, np.integer)):
        x = int(x)
    elif want_float and isinstance(x, (int, float, np.integer, np.floating)):
        x = float(x)
        if np.isnan(x):
            raise ValueError(f"{name} must be a number, got nan")
    elif not isinstance(x, types):
        raise ScalarTypeError(f"{name} must be {expected}, got {type(x).__name__} {x!r}")
    if include_boundaries not in ("both", "left", "right", "neither"):
        raise ValueError(f"include_boundaries must be 'both', 'left', 'right' or 'neither', got {include_boundaries!r}")
    low_ok = include_boundaries in ("both", "left")
    high_ok = include_boundaries in ("both", "right")
    word = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in types)
    if min_val is not None and (x < min_val or (x == min_val and not low_ok)):
        raise ValueError(f"{name} must be {word} {'>=' if low_ok else '>'} {min_val}, got {x!r}")
    if max_val is not None and (x > max_val or (x == max_val and not high_ok)):
        raise ValueError(f"{name} must be {word} {'<=' if high_ok else '<'} {max_val}, got {x!r}")
    return x
