"""Uncertainty sets on document embeddings (the query q is fixed).

Document i has nominal embedding mu_i (row i of E) and may be replaced by any
mu~_i = mu_i + delta_i with delta_i in U_i; the perturbations of different documents are
independent. Two families:

* :class:`NormBall` ``U = {delta : ||delta||_p <= rho_vec}``, p in {1, 2, inf}, the same set
  for every document.
* :class:`KSparse` ``U_i = {delta : ||delta||_inf <= rho_vec, |supp(delta)| <= attack_budget,
  delta_j = 0 for j in P_i}``: at most ``attack_budget`` coordinates change, each by at most
  ``rho_vec``, and the protected coordinates P_i are never touched. P_i may be empty, a fixed
  coordinate set, per-document sets, or the top-m coordinates of |q * mu_i| (``protected=m``).

Every set exposes the three quantities the worst-case oracles are built from, each with its
derivation below:

* the support function ``h_i(a) = max_{delta in U_i} a^T delta`` and a maximizer;
* ``cross_bound(i, j) = sup_{delta_i in U_i, delta_j in U_j} delta_i^T delta_j``;
* ``l2_radius(i) = sup_{delta in U_i} ||delta||_2`` (U_i lies in the l2 ball of that radius).

All sets are symmetric (delta in U <=> -delta in U), so ``min_{delta} a^T delta = -h(a)``.
Computations are in float64 numpy: robust models work on small candidate pools.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from divopt_rag.models.validation import check_nonnegative, check_scalar

__all__ = ["NormBall", "KSparse", "UncertaintySet", "protect_top", "make_set"]


def _as_2d(a: Any) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a[None, :] if a.ndim == 1 else a


@dataclass(frozen=True)
class NormBall:
    """``U = {delta in R^d : ||delta||_p <= rho_vec}`` for p in {1, 2, inf}.

    Support function (Hoelder, attained): ``h(a) = rho_vec * ||a||_{p*}`` with 1/p + 1/p* = 1,
    so the worst-case linear score is ``min_{delta in U} q^T (mu + delta) = q^T mu - rho_vec ||q||_{p*}``.
    Maximizers: p = 2: rho a/||a||_2; p = 1: rho sign(a_j) e_j at j = argmax |a_j|;
    p = inf: rho sign(a).
    Cross term: ``|delta_i^T delta_j| <= ||delta_i||_p ||delta_j||_{p*}``; for p = 2 this is
    rho^2; for p = 1, ||delta_j||_inf <= ||delta_j||_1 so rho^2; for p = inf, ||delta_j||_1 <= d rho
    so d rho^2. Each is attained (delta_i = delta_j = an extreme point), so the sup is exact.
    l2 radius: p = 1, 2: rho (||.||_2 <= ||.||_1); p = inf: sqrt(d) rho (attained at rho * 1).
    """

    p: float
    rho_vec: float

    def __post_init__(self) -> None:
        p = self.p
        if isinstance(p, str):
            p = {"1": 1.0, "2": 2.0, "inf": math.inf, "linf": math.inf, "l1": 1.0, "l2": 2.0}.get(p.lower(), p)
        try:
            p = float(p)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"p must be one of 1, 2, inf, got {self.p!r}") from exc
        if p not in (1.0, 2.0, math.inf):
            raise ValueError(f"p must be one of 1, 2, inf, got {self.p!r}")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "rho_vec", check_nonnegative(self.rho_vec, "rho_vec"))

    @property
    def name(self) -> str:
        return {1.0: "l1", 2.0: "l2", math.inf: "linf"}[self.p]

    @property
    def dual_p(self) -> float:
        """p* with 1/p + 1/p* = 1."""
        return {1.0: math.inf, 2.0: 2.0, math.inf: 1.0}[self.p]

    def free_mask(self, E: np.ndarray, q: np.ndarray | None = None) -> None:
        """Every coordinate may change: no mask."""
        return None

    def support(self, A: Any, free: np.ndarray | None = None) -> np.ndarray:
        """h(a_r) = rho_vec ||a_r||_{p*} for every row a_r of A."""
        A = _as_2d(A)
        return self.rho_vec * np.linalg.norm(A, ord=self.dual_p, axis=1)

    def maximizer(self, A: Any, free: np.ndarray | None = None) -> np.ndarray:
        """A delta_r in U with a_r^T delta_r = h(a_r), one per row of A."""
        A = _as_2d(A)
        rho = self.rho_vec
        if self.p == 2.0:
            nrm = np.linalg.norm(A, axis=1, keepdims=True)
            return rho * np.divide(A, nrm, out=np.zeros_like(A), where=nrm > 0)
        if self.p == math.inf:
            return rho * np.sign(A)
        out = np.zeros_like(A)
        j = np.abs(A).argmax(axis=1)
        rows = np.arange(A.shape[0])
        out[rows, j] = rho * np.sign(A[rows, j])
        return out

    def cross_bound(self, free_i: np.ndarray | None, free_j: np.ndarray | None, d: int) -> np.ndarray | float:
        """sup delta_i^T delta_j over U x U (exact): rho^2 for p in {1, 2}, d rho^2 for p = inf."""
        return self.rho_vec ** 2 * (d if self.p == math.inf else 1.0)

    def l2_radius(self, free: np.ndarray | None, d: int) -> np.ndarray | float:
        """sup ||delta||_2 over U: rho for p in {1, 2}, sqrt(d) rho for p = inf."""
        return self.rho_vec * (math.sqrt(d) if self.p == math.inf else 1.0)

    def contains(self, delta: Any, free: np.ndarray | None = None, tol: float = 1e-9) -> np.ndarray:
        """Row-wise membership ||delta_r||_p <= rho_vec (+ tol)."""
        D = _as_2d(delta)
        return np.linalg.norm(D, ord=self.p, axis=1) <= self.rho_vec + tol

    def describe(self) -> dict:
        return {"uncertainty": self.name, "rho_vec": self.rho_vec}


def protect_top(E: Any, q: Any, m: int) -> np.ndarray:
    """Boolean (n, d) mask of the top-m coordinates of |q * mu_i| for each document i.

    These are the coordinates that carry most of document i's relevance q^T mu_i; protecting
    them models an encoder whose dominant features are trusted.
    """
    E = _as_2d(E)
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    n, d = E.shape
    m = min(check_scalar(m, "protected (top-m) m", int, min_val=0), d)
    mask = np.zeros((n, d), dtype=bool)
    if m:
        top = np.argpartition(-np.abs(E * q[None, :]), m - 1, axis=1)[:, :m]
        np.put_along_axis(mask, top, True, axis=1)
    return mask


def _top_sum(V: np.ndarray, K: int) -> np.ndarray:
    """Sum of the K largest entries of each row of a nonnegative matrix V."""
    d = V.shape[1]
    if K >= d:
        return V.sum(axis=1)
    if K == 0:
        return np.zeros(V.shape[0])
    part = np.partition(V, d - K, axis=1)[:, d - K :]
    return part.sum(axis=1)


@dataclass(frozen=True)
class KSparse:
    """k-sparse polyhedral set: ``U_i = {delta : ||delta||_inf <= rho_vec, ||delta||_0 <= attack_budget,
    delta_j = 0 for j in P_i}``.

    ``protected`` (P_i): None (nothing protected); an int m (top-m coordinates of |q * mu_i|,
    see :func:`protect_top`); a bool mask of shape (d,) (the same coordinates for every
    document) or (n, d) (per document, rows aligned with the pool it is used on).

    Support function (attained): with F_i the free coordinates,
    ``h_i(a) = max sum_{j in F_i} a_j delta_j`` over at most K = attack_budget nonzeros with
    |delta_j| <= rho is ``rho * (sum of the K largest |a_j|, j in F_i)``: for a fixed support J
    the box maximum is rho sum_{J} |a_j|, and the best J takes the K largest |a_j|. Its LP form
    (the convex hull of U_i's extreme points) is
    ``max rho sum_j |a_j| z_j  s.t. sum_j z_j <= K, 0 <= z_j <= 1, z_j = 0 (j in P_i)``, whose
    constraint matrix is totally unimodular, so the LP value equals the combinatorial one.
    Cross term: ``delta_i^T delta_j`` is a sum over supp(delta_i) ∩ supp(delta_j) ⊆ F_i ∩ F_j of
    at most min(K, |F_i ∩ F_j|) products each <= rho^2, attained by equal vectors, so
    ``sup = rho^2 min(K, |F_i ∩ F_j|)`` exactly.
    l2 radius: ``rho sqrt(min(K, |F_i|))``.
    """

    rho_vec: float
    attack_budget: int
    protected: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho_vec", check_nonnegative(self.rho_vec, "rho_vec"))
        K = self.attack_budget
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 0:
            raise ValueError(f"attack_budget must be an integer >= 0, got {K!r}")
        object.__setattr__(self, "attack_budget", int(K))
        P = self.protected
        if P is not None and not isinstance(P, (int, np.integer)):
            P = np.asarray(P)
            if P.dtype != np.bool_ or P.ndim not in (1, 2):
                raise ValueError(
                    f"protected must be None, an int m (top-m of |q*mu_i|) or a bool mask of shape (d,) "
                    f"or (n, d), got dtype {P.dtype} shape {P.shape}"
                )
            object.__setattr__(self, "protected", P)
        elif isinstance(P, (int, np.integer)) and (isinstance(P, bool) or P < 0):
            raise ValueError(f"protected (top-m) must be an integer m >= 0, got {P!r}")

    @property
    def name(self) -> str:
        return "ksparse"

    def free_mask(self, E: Any, q: Any = None) -> np.ndarray:
        """(n, d) bool: coordinates the adversary may change, for the rows of E."""
        E = _as_2d(E)
        n, d = E.shape
        P = self.protected
        if P is None:
            return np.ones((n, d), dtype=bool)
        if isinstance(P, (int, np.integer)):
            if q is None:
                raise ValueError("protected=m (top-m of |q*mu_i|) needs the query q")
            return ~protect_top(E, q, int(P))
        if P.shape == (d,):
            return np.broadcast_to(~P, (n, d)).copy()
        if P.shape == (n, d):
            return ~P
        raise ValueError(f"protected mask must have shape ({d},) or ({n}, {d}), got {P.shape}")

    def subset(self, indices: Any) -> "KSparse":
        """The same set for the sub-pool ``indices`` (a per-document mask follows the rows)."""
        P = self.protected
        if isinstance(P, np.ndarray) and P.ndim == 2:
            return KSparse(self.rho_vec, self.attack_budget, P[np.asarray(indices, dtype=np.int64)])
        return self

    def _free(self, free: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
        if free is None:
            return np.ones(shape, dtype=bool)
        free = np.asarray(free, dtype=bool)
        if free.ndim == 1:
            free = np.broadcast_to(free, shape)
        if free.shape != shape:
            raise ValueError(f"free mask must have shape {shape}, got {free.shape}")
        return free

    def support(self, A: Any, free: np.ndarray | None = None) -> np.ndarray:
        """h_i(a_r) = rho * (sum of the attack_budget largest |a_rj| over free coordinates j)."""
        A = _as_2d(A)
        F = self._free(free, A.shape)
        return self.rho_vec * _top_sum(np.where(F, np.abs(A), 0.0), self.attack_budget)

    def maximizer(self, A: Any, free: np.ndarray | None = None) -> np.ndarray:
        """delta_r = rho sign(a_rj) on the attack_budget largest free |a_rj| (zero elsewhere)."""
        A = _as_2d(A)
        F = self._free(free, A.shape)
        V = np.where(F, np.abs(A), -1.0)  # protected coordinates rank last and are never chosen
        K = min(self.attack_budget, A.shape[1])
        out = np.zeros_like(A)
        if K == 0:
            return out
        top = np.argpartition(-V, K - 1, axis=1)[:, :K]
        vals = np.take_along_axis(A, top, axis=1)
        ok = np.take_along_axis(F, top, axis=1) & (vals != 0)
        np.put_along_axis(out, top, np.where(ok, self.rho_vec * np.sign(vals), 0.0), axis=1)
        return out

    def cross_bound(self, free_i: np.ndarray | None, free_j: np.ndarray | None, d: int) -> np.ndarray | float:
        """sup delta_i^T delta_j = rho^2 min(K, |F_i ∩ F_j|) (exact); vectorized over rows."""
        if free_i is None or free_j is None:
            common = d if free_i is None and free_j is None else (
                np.asarray(free_i if free_j is None else free_j, dtype=bool).sum(axis=-1))
        else:
            common = (np.asarray(free_i, dtype=bool) & np.asarray(free_j, dtype=bool)).sum(axis=-1)
        return self.rho_vec ** 2 * np.minimum(self.attack_budget, common)

    def l2_radius(self, free: np.ndarray | None, d: int) -> np.ndarray | float:
        """sup ||delta||_2 = rho sqrt(min(K, |F_i|))."""
        nfree = d if free is None else np.asarray(free, dtype=bool).sum(axis=-1)
        return self.rho_vec * np.sqrt(np.minimum(self.attack_budget, nfree))

    def contains(self, delta: Any, free: np.ndarray | None = None, tol: float = 1e-9) -> np.ndarray:
        """Row-wise membership: box, sparsity and protected coordinates untouched."""
        D = _as_2d(delta)
        F = self._free(free, D.shape)
        box = np.abs(D).max(axis=1) <= self.rho_vec + tol
        sparse = (np.abs(D) > tol).sum(axis=1) <= self.attack_budget
        untouched = ~(((np.abs(D) > 0) & ~F).any(axis=1))
        return box & sparse & untouched

    def describe(self) -> dict:
        P = self.protected
        prot = None if P is None else (int(P) if isinstance(P, (int, np.integer)) else "mask")
        return {"uncertainty": "ksparse", "rho_vec": self.rho_vec, "attack_budget": self.attack_budget,
                "protected": prot}


UncertaintySet = NormBall | KSparse


def make_set(kind: str, rho_vec: float, attack_budget: int | None = None, protected: Any = None) -> UncertaintySet:
    """Build a set by name: "l1", "l2", "linf" (norm balls) or "ksparse"."""
    if kind in ("l1", "l2", "linf"):
        if attack_budget is not None or protected is not None:
            raise ValueError(f"attack_budget/protected apply to the ksparse set only, not {kind!r}")
        return NormBall({"l1": 1, "l2": 2, "linf": math.inf}[kind], rho_vec)
    if kind == "ksparse":
        if attack_budget is None:
            raise ValueError("the ksparse set needs attack_budget (the number of coordinates that may change)")
        return KSparse(rho_vec, attack_budget, protected)
    raise ValueError(f"unknown uncertainty set {kind!r}; expected one of ['ksparse', 'l1', 'l2', 'linf']")
