"""The problem instance: a pool of unit-norm embeddings, relevance scores, k and theta."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .kernels import accumulation_dtype, matvec
from .validation import check_bool, check_embeddings, check_indices, check_k, check_theta, check_vector

__all__ = ["Instance"]


@dataclass(frozen=True, eq=False)
class Instance:
    """A diversity-aware retrieval problem: choose k of the n rows of E.

    Parameters
    ----------
    E : (n, d) array or tensor with unit-norm rows (float16/bfloat16/float32/float64; numpy
        arrays are wrapped without a copy; device and dtype are kept). Tensors that require
        gradients are detached (no copy): divopt's methods are not differentiable, and the
        caller's tensor and graph are left as they were. The same holds for q and relevance.
    q : (d,) unit-norm query; the relevance is then c = E q.
    relevance : (n,) user-supplied relevance scores c (e.g. a cross-encoder or BM25); may be
        given together with q (q is then used only by methods that need the query vector).
    k : selection size, 1 <= k <= n.
    theta : relevance-diversity trade-off in [0, 1]; 1 = pure relevance.
    normalize : rescale rows of E (and q) to unit norm instead of refusing them; any finite
        nonzero row is rescaled correctly whatever its scale (1e-300 or 1e300 in float64: rows
        are scaled by their largest entry before the norm), and only a zero or non-finite row is
        refused.
    ids : optional passage ids, one per row (kept for tables).

    Notes
    -----
    The CCBQP objective on a binary x with sum(x) = k is
    ``f(x) = theta (k-1) c^T x + (1-theta) x^T (I - E E^T) x``.
    """

    E: torch.Tensor
    q: torch.Tensor | None
    relevance: torch.Tensor
    k: int
    theta: float
    ids: np.ndarray | None = field(default=None, repr=False)

    def __init__(
        self,
        E: Any,
        q: Any = None,
        *,
        relevance: Any = None,
        k: int,
        theta: float,
        normalize: bool = False,
        ids: Any = None,
    ) -> None:
        normalize = check_bool(normalize, "normalize")
        E_t = check_embeddings(E, "E", normalize=normalize)
        n, d = E_t.shape
        acc = accumulation_dtype(E_t.dtype)
        q_t = None
        if q is not None:
            q_t = check_vector(q, "q", d, " (the embedding dimension d)", unit_norm=not normalize,
                               normalize=normalize)
            q_t = q_t.to(device=E_t.device, dtype=acc)
        if relevance is not None:
            c = check_vector(relevance, "relevance", n, " (the pool size n)").to(device=E_t.device, dtype=acc)
        elif q_t is not None:
            c = matvec(E_t, q_t)
        else:
            raise ValueError("Instance needs a query q or user-supplied relevance scores")
        if ids is not None:
            ids = np.asarray(ids)
            if ids.shape != (n,):
                raise ValueError(f"ids must have shape ({n},), got {ids.shape}")
        object.__setattr__(self, "E", E_t)
        object.__setattr__(self, "q", q_t)
        object.__setattr__(self, "relevance", c)
        object.__setattr__(self, "k", check_k(k, n))
        object.__setattr__(self, "theta", check_theta(theta))
        object.__setattr__(self, "ids", ids)

    # --- shape -----------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self.E.shape[0])

    @property
    def d(self) -> int:
        return int(self.E.shape[1])

    @property
    def device(self) -> torch.device:
        return self.E.device

    @property
    def acc_dtype(self) -> torch.dtype:
        """Dtype of relevance and of every accumulation (float32 unless E is float64)."""
        return accumulation_dtype(self.E.dtype)

    # --- derived instances (no re-validation of E) ------------------------------------------
    def _derived(self, **fields: Any) -> "Instance":
        """A new Instance with these fields replaced and the others shared (already validated)."""
        new = object.__new__(Instance)
        for f in dataclasses.fields(self):
            object.__setattr__(new, f.name, fields.get(f.name, getattr(self, f.name)))
        return new

    def replace(self, **changes: Any) -> "Instance":
        """A copy with new ``k``, ``theta``, ``relevance`` and/or ``q`` (validated); E is shared.

        A new ``q`` recomputes the relevance c = E q unless ``relevance`` is also given.
        """
        unknown = set(changes) - {"k", "theta", "relevance", "q"}
        if unknown:
            raise TypeError(f"Instance.replace accepts k, theta, relevance and q, got {sorted(unknown)}")
        fields: dict[str, Any] = {}
        if "k" in changes:
            fields["k"] = check_k(changes["k"], self.n)
        if "theta" in changes:
            fields["theta"] = check_theta(changes["theta"])
        acc = self.acc_dtype
        if changes.get("q") is not None:
            q = check_vector(changes["q"], "q", self.d, " (the embedding dimension d)", unit_norm=True)
            fields["q"] = q.to(device=self.device, dtype=acc)
            if changes.get("relevance") is None:
                fields["relevance"] = matvec(self.E, fields["q"])
        if changes.get("relevance") is not None:
            c = check_vector(changes["relevance"], "relevance", self.n, " (the pool size n)")
            fields["relevance"] = c.to(device=self.device, dtype=acc)
        return self._derived(**fields)

    def subset(self, indices: Any, k: int | None = None) -> "Instance":
        """The sub-pool E[indices] with its relevance (e.g. the top-n of a query's relevance).

        Row ``r`` of the result is row ``indices[r]`` of this instance; ``ids`` follow the rows.
        """
        rows = check_indices(indices, self.n, "indices", unique=False)
        idx = torch.as_tensor(rows, device=self.device)
        return self._derived(
            E=self.E.index_select(0, idx).contiguous(),
            relevance=self.relevance.index_select(0, idx),
            k=check_k(self.k if k is None else k, rows.size),
            ids=None if self.ids is None else self.ids[rows],
        )

    def top_n(self, n: int) -> tuple["Instance", np.ndarray]:
        """The sub-pool of the n most relevant rows and their original indices."""
        n = check_k(n, self.n, "n")
        order = torch.topk(self.relevance, n).indices.cpu().numpy()
        return self.subset(order), order

    def to(self, device: Any = None, dtype: torch.dtype | None = None) -> "Instance":
        """Move E (and q, relevance) to a device and/or storage dtype."""
        E = self.E.to(device=device or self.device, dtype=dtype or self.E.dtype)
        acc = accumulation_dtype(E.dtype)
        return self._derived(
            E=E,
            q=None if self.q is None else self.q.to(E.device, acc),
            relevance=self.relevance.to(E.device, acc),
        )

    def __repr__(self) -> str:
        return (
            f"Instance(n={self.n}, d={self.d}, k={self.k}, theta={self.theta:g}, "
            f"dtype={self.E.dtype}, device={self.device}, query={'yes' if self.q is not None else 'no'})"
        )
