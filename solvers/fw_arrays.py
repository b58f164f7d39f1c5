"""The array operations of :func:`divopt_rag.solvers.fw_kernel.fw_rows`, on tensors or on numpy.

:class:`TorchRows`: tensors on any device and dtype (float16 / bfloat16 storage upcast to the
accumulation dtype of X); every per-row scalar is a float64 tensor on the device (float32 on
MPS, which has no float64), and :meth:`TorchRows.host` is the one read per iteration.
:class:`NumpyRows`: host float64 numpy arrays (a candidate pool of a few hundred rows, where one
torch call costs more than its work); the products run on torch's BLAS through zero-copy views
(numpy's may start a thread pool). Both give every scalar of a step from the k rows at s and
sums over x: the sums of stored values that the gap's rounding bound counts (fw_kernel).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from divopt_rag.models import kernels

__all__ = ["TorchRows", "NumpyRows", "rows_times_E", "V_times_Et", "exact_top_k", "refine_extra"]


def rows_times_E(X: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """X E for X (M, n): row m is E^T x_m (one pass over E for all rows), in X's dtype."""
    if E.dtype in (torch.float16, torch.bfloat16):  # upcast a row block of E at a time
        return kernels.rmatmul(E, X.T, dtype=X.dtype).T.contiguous()
    return X.to(E.dtype) @ E


def V_times_Et(V: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """V E^T for V (M, d): row m is E v_m (one pass over E for all rows), float32 sums on
    low-precision storage (:func:`divopt_rag.models.kernels.matmul`)."""
    if E.dtype in (torch.float16, torch.bfloat16):
        return kernels.matmul(E, V.T).T.contiguous()
    return V.to(E.dtype) @ E.T


def refine_extra(k: int) -> int:
    """Candidates beyond k that the oracle re-ranks on low-precision storage: max(k, 32)."""
    return max(int(k), 32)


def exact_top_k(cand: torch.Tensor, k: int, E, X, L, V64, pw, lam) -> torch.Tensor:
    """The k of the candidates ``cand`` (M, K) with the largest exact gradient
    l_i + 2 (1-theta)(lambda x_i - e_i^T v) (float64 from the stored rows; ``pw`` = 2 (1-theta),
    a float or (M,) tensor)."""
    f64 = V64.dtype
    M, K = cand.shape
    rows = E.index_select(0, cand.reshape(-1)).view(M, K, E.shape[1]).to(f64)
    u = torch.bmm(rows, V64.unsqueeze(2)).squeeze(2)
    pw = pw.unsqueeze(1) if isinstance(pw, torch.Tensor) else pw
    g = L.gather(1, cand).to(f64) + pw * (lam * X.gather(1, cand).to(f64) - u)
    return cand.gather(1, torch.topk(g, k, dim=1).indices)


class TorchRows:
    """:func:`fw_rows`'s array operations on tensors of X's device; scalars in float64 there."""

    compacts = True

    def __init__(self, X: torch.Tensor):
        self.device, self.acc = X.device, X.dtype
        self.f64 = torch.float32 if X.device.type == "mps" else torch.float64

    copy = staticmethod(torch.clone)
    rows_times = staticmethod(rows_times_E)

    @staticmethod
    def product(E: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        """V -> V E^T (row m: E v_m), one pass over E."""
        if E.dtype in (torch.float16, torch.bfloat16):
            return lambda V: V_times_Et(V, E)
        Et = E.T
        return lambda V: torch.mm(V, Et)

    def vertices(self, G, k, E, X, L, V, pw, lam):
        """The linear oracle: the top-k of each row of the gradient G (M, n). On float16 /
        bfloat16 storage the product behind G may round (float16 operands or outputs,
        reduced-precision reductions), so the best ``k + refine_extra(k)`` candidates of G are
        re-ranked by their exact gradient l_i + 2 (1-theta)(lambda x_i - e_i^T v), formed in
        float64 from their stored rows: the oracle is then exact unless an item outside those
        candidates belongs to the exact top k."""
        if E.dtype not in (torch.float16, torch.bfloat16) or k + refine_extra(k) >= G.shape[1]:
            return torch.topk(G, k, dim=1).indices
        return exact_top_k(torch.topk(G, k + refine_extra(k), dim=1).indices, k, E, X, L, self.widen(V),
                           pw, lam)

    def vector(self, a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=self.f64, device=self.device)

    def column(self, a: np.ndarray) -> torch.Tensor:
        return self.vector(a)[:, None]

    def full(self, m: int, value: float) -> torch.Tensor:
        return torch.full((m,), value, dtype=self.f64, device=self.device)

    def full_bool(self, m: int, value: bool) -> torch.Tensor:
        return torch.full((m,), value, dtype=torch.bool, device=self.device)

    def abs_max(self, L: torch.Tensor) -> torch.Tensor:
        return L.abs().amax(1).to(self.f64)

    @staticmethod
    def maximum(a: torch.Tensor, b: float) -> torch.Tensor:
        return a.clamp_min(b)

    @staticmethod
    def where(mask: torch.Tensor, a: Any, b: Any) -> torch.Tensor:
        return torch.where(mask, a, b)

    def at_vertices(self, X, L, E, S, V):
        """x^T s, l^T s (float64), v and E^T s - v (float64, (M, d)) per row, s = the rows S."""
        f64 = self.f64
        xs = X.gather(1, S).sum(1, dtype=f64)
        lin_s = L.gather(1, S).sum(1, dtype=f64)
        rows = E.index_select(0, S.view(-1)).view(S.shape[0], S.shape[1], E.shape[1])
        V64 = self.widen(V)
        return xs, lin_s, V64, rows.sum(1, dtype=f64).sub_(V64)

    def widen(self, t: torch.Tensor) -> torch.Tensor:
        """t in the scalars' dtype (float64)."""
        return t if t.dtype == self.f64 else t.to(self.f64)

    def dots(self, X, L):
        """(l^T x, ||x||^2) per row: float64 sums of products rounded once in X's dtype."""
        if X.dtype == self.f64 and L.dtype == self.f64:
            return torch.linalg.vecdot(L, X), torch.linalg.vecdot(X, X)
        return (L * X).sum(1, dtype=self.f64), (X * X).sum(1, dtype=self.f64)

    @staticmethod
    def dots2(V64, Ed):
        """(v^T Ed, ||Ed||^2) per row, float64."""
        return torch.linalg.vecdot(V64, Ed), torch.linalg.vecdot(Ed, Ed)

    @staticmethod
    def sq_norm(V64):
        return torch.linalg.vecdot(V64, V64)

    @staticmethod
    def step(X, V64, S, Ed, gamma):
        """x = (1 - gamma) x + gamma s in place; returns v + gamma E^T d in float64 (rounded once
        to the dtype of v by the caller)."""
        g = gamma.unsqueeze(1)
        keep, gx = 1.0 - g, g
        if X.dtype != g.dtype:
            keep, gx = keep.to(X.dtype), g.to(X.dtype)
        X.mul_(keep).scatter_add_(1, S, gx.expand(-1, S.shape[1]))
        return torch.addcmul(V64, Ed, g)

    @staticmethod
    def flags(stop: torch.Tensor, at_vertex: torch.Tensor) -> torch.Tensor:
        return torch.stack((stop, at_vertex))

    @staticmethod
    def host(t: torch.Tensor) -> np.ndarray:
        """The one host read of an iteration."""
        return t.cpu().numpy()

    @staticmethod
    def integral(x: torch.Tensor, eps: float) -> bool:
        return bool(((x < eps) | (x > 1 - eps)).all())

    def rows(self, r: np.ndarray) -> torch.Tensor:
        """Working-row indices on the device (host-to-device; pinned and asynchronous on CUDA)."""
        t = torch.as_tensor(np.asarray(r, dtype=np.int64))
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def set_rows(self, mask: torch.Tensor, r: np.ndarray, value: bool) -> torch.Tensor:
        return mask.index_fill(0, self.rows(r), value)

    def read_all(self, arrays, log) -> tuple:
        """Every float64 vector of the result and of the log, in one host read."""
        parts = list(arrays) + ([] if log is None else [entry[2] for entry in log])
        flat = torch.cat([p.reshape(-1).to(self.f64) for p in parts]).cpu().numpy().astype(np.float64)
        out, at = [], 0
        for p in parts:
            out.append(flat[at: at + p.numel()])
            at += p.numel()
        return out[0], out[1], out[2], out[3:]


class NumpyRows:
    """:func:`fw_rows`'s array operations on host float64 numpy arrays."""

    compacts = False
    acc = np.float64

    copy = staticmethod(np.copy)

    @staticmethod
    def rows_times(X: np.ndarray, E: np.ndarray) -> np.ndarray:
        return torch.mm(torch.from_numpy(X), torch.from_numpy(E)).numpy()

    @staticmethod
    def product(E: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        Et = torch.from_numpy(E).T
        return lambda V: torch.mm(torch.from_numpy(V), Et).numpy()

    @staticmethod
    def vertices(G, k, E, X, L, V, pw, lam) -> np.ndarray:
        return np.argpartition(-G, k - 1, axis=1)[:, :k]

    @staticmethod
    def vector(a: np.ndarray) -> np.ndarray:
        return np.asarray(a, dtype=np.float64)

    @staticmethod
    def column(a: np.ndarray) -> np.ndarray:
        return np.asarray(a, dtype=np.float64)[:, None]

    @staticmethod
    def full(m: int, value: float) -> np.ndarray:
        return np.full(m, value)

    @staticmethod
    def full_bool(m: int, value: bool) -> np.ndarray:
        return np.full(m, value, dtype=bool)

    @staticmethod
    def abs_max(L: np.ndarray) -> np.ndarray:
        return np.abs(L).max(1)

    maximum = staticmethod(np.maximum)
    where = staticmethod(np.where)

    @staticmethod
    def at_vertices(X, L, E, S, V):
        at = np.arange(S.shape[0])[:, None], S
        return X[at].sum(1), L[at].sum(1), V, E[S].sum(1) - V

    @staticmethod
    def widen(a: np.ndarray) -> np.ndarray:
        return a

    @staticmethod
    def dots(X, L):
        return (L * X).sum(1), (X * X).sum(1)

    @staticmethod
    def dots2(V, Ed):
        return (V * Ed).sum(1), (Ed * Ed).sum(1)

    @staticmethod
    def sq_norm(V):
        return (V * V).sum(1)

    @staticmethod
    def step(X, V, S, Ed, gamma):
        X *= (1.0 - gamma)[:, None]
        X[np.arange(S.shape[0])[:, None], S] += gamma[:, None]
        return V + gamma[:, None] * Ed

    @staticmethod
    def flags(stop: np.ndarray, at_vertex: np.ndarray) -> np.ndarray:
        return np.stack((stop, at_vertex))

    @staticmethod
    def host(a: np.ndarray) -> np.ndarray:
        return a

    @staticmethod
    def integral(x: np.ndarray, eps: float) -> bool:
        return bool(((x < eps) | (x > 1 - eps)).all())

    @staticmethod
    def set_rows(mask: np.ndarray, r: np.ndarray, value: bool) -> np.ndarray:
        mask[r] = value
        return mask

    @staticmethod
    def read_all(arrays, log) -> tuple:
        logged = [] if log is None else [np.asarray(entry[2], dtype=np.float64).reshape(-1) for entry in log]
        gap, value, tol = (np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays)
        return gap, value, tol, logged
