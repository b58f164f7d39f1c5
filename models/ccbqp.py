"""The CCBQP, written once: every solver, bound, metric and oracle composes these functionals.

Problem (DESIGN.md). Choose a k-set S of the n unit rows e_i of E, relevance c (c = E q):

    f(x) = theta (k-1) c^T x + (1-theta)(x^T x - ||E^T x||^2),      x in {0,1}^n, sum x = k
         = theta (k-1) sum_{i in S} c_i - (1-theta) sum_{i != j in S} w_ij,   w_ij = e_i^T e_j

(x^T x = k on binaries; the pair sum is over ordered pairs). The terms, each one function here:

* :func:`linear_term`          l = theta (k-1) c (the relevance part of f and of its gradient)
* :func:`objective`            f on a binary selection (float64; ``ccbqp_objective`` is its name
  in the public API); :func:`gram_objective` the same from a formed Gram matrix (small pools),
  :func:`set_value` from its two sums
* :func:`relaxed_objective`    f_lambda(x) = f(x) + (1-theta) lambda (||x||^2 - k)
                               = l^T x + (1-theta)(k + lambda (||x||^2 - k) - ||E^T x||^2)
  over {0 <= x <= 1, sum x = k}; equal to f on binaries. (DESIGN.md writes
  l^T x + (1-theta)(lambda ||x||^2 - ||E^T x||^2): the two differ by the constant
  (1-theta)(lambda - 1) k, so gradients, FW steps and maximizers coincide.) Along e_i - e_j the
  second derivative is 2(1-theta)(2 lambda - 2 + 2 w_ij) >= 0 for lambda >= 2 (w_ij >= -1): moving
  mass between two fractional coordinates never lowers f_lambda, so the relaxation is tight.
  With lambda = 0 it is concave and its maximum bounds the binary optimum from above.
  :func:`relaxed_value` is the same from its scalars l^T x, ||x||^2 and ||v||^2 (v = E^T x).
* :func:`relaxed_gradient`     grad f_lambda(x) = l + 2 (1-theta)(lambda x - E v),  v = E^T x;
  :func:`relaxed_grad` the same from E v (the one pass over the pool), and
  :func:`relaxed_grad_dot_x` its inner product with x from the scalars (x^T E v = ||v||^2).
* :func:`pair_weight`          2 (1-theta): the weight of one pair's similarity w_ij in every change
  of f (the pair sum in f runs over ordered pairs): the coefficient of E v in the gradient, of
  ||E^T d||^2 in the curvature and of w_ij in a swap gain.
* :func:`line_search`          along a FW direction d = s - x, f_lambda(x + gamma d) =
  f_lambda(x) + gamma g + gamma^2 C / 2 with g = grad^T d (the FW gap) and curvature
  C = 2 (1-theta)(lambda ||d||^2 - ||E^T d||^2) (:func:`curvature`); the exact step is
  gamma = 1 if C >= 0 else min(1, -g / C).
* :func:`swap_terms` / :func:`swap_gains`   the 1-swap gain, i in S out, j not in S in, u = E v:
      Delta(i, j) = f(S - i + j) - f(S) = theta (k-1)(c_j - c_i) - 2 (1-theta)(u_j - u_i + 1 - w_ij)
                  = b_j + a_i + 2 (1-theta) w_ij,
      b_j = l_j - 2 (1-theta) u_j,   a_i = -l_i + 2 (1-theta)(u_i - 1)      (unit rows)
  (||v - e_i + e_j||^2 = ||v||^2 + 2 - 2 w_ij + 2 u_j - 2 u_i). For rows of any norm the squared
  norms replace the 1s: b_j = l_j - (1-theta)(2 u_j + ||e_j||^2 - 1), a_i = -l_i + (1-theta)(2 u_i - ||e_i||^2 - 1).
* :func:`mean_pairwise` / :func:`mean_pairwise_cosine`  the mean of w_ij over the m (m-1) / 2
  unordered pairs (ILS; ILAD = 1 - ILS). Convention: NaN when m < 2 (no pairs, so undefined).
* :func:`objective_scale`, :func:`normalized_gap`, :func:`exact_hit`  gaps are reported as
  (OPT - f) / (k (k-1)); a selection is an exact hit when that gap is <= 1e-9.

Device and dtype follow the inputs (PyTorch functional style); values that decide picks or
certificates (objective, relaxed objective) are returned in float64. Tensors passed to the
low-level functions are not validated (solvers call them in their inner loops); the functions
taking an :class:`~divopt_rag.models.Instance` validate user-facing arguments. One argument
order throughout: the data (tensors or their scalars) first, then theta, k, relax_penalty; a
batch of problems passes theta as a column (B, 1) beside (B, n) data.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .instance import Instance
from .kernels import gather_rows, matmul, matvec, rmatvec
from .validation import check_indices, check_nonnegative, check_vector

__all__ = [
    "linear_term",
    "objective",
    "ccbqp_objective",
    "gram_objective",
    "set_value",
    "relaxed_objective",
    "relaxed_value",
    "relaxed_gradient",
    "relaxed_grad",
    "relaxed_grad_dot_x",
    "pair_weight",
    "line_search",
    "curvature",
    "swap_terms",
    "swap_gains",
    "mean_pairwise",
    "mean_pairwise_cosine",
    "objective_scale",
    "normalized_gap",
    "exact_hit",
    "EXACT_HIT_TOL",
]

#: A selection is an exact hit when (OPT - f) / (k (k-1)) <= EXACT_HIT_TOL.
EXACT_HIT_TOL = 1e-9


def linear_term(relevance: Any, theta: Any, k: int) -> Any:
    """l = theta (k-1) c: the linear part of f (and of the relaxation's gradient).

    Shape: relevance (n,) with a scalar theta, or (B, n) with theta of shape (B, 1) (batched
    problems); works on tensors and numpy arrays alike.
    """
    return relevance * (theta * (k - 1))


def pair_weight(theta: Any) -> Any:
    """2 (1-theta): the weight of one pair's similarity w_ij in every change of f.

    f = theta (k-1) sum_S c_i - (1-theta) sum_{i != j in S} w_ij counts each unordered pair twice,
    so moving a row changes f by 2 (1-theta) per pair: the coefficient of E v in
    :func:`relaxed_gradient`, of the curvature (:func:`curvature`) and of w_ij in a swap gain
    (:func:`swap_terms`). A float, a numpy array or a tensor of thetas.
    """
    return 2.0 * (1.0 - theta)


def objective(inst: Instance, indices: Any, *, check: bool = True, any_size: bool = False) -> float:
    """f(S) = theta (k-1) sum_{i in S} c_i + (1-theta)(|S| - ||sum_{i in S} e_i||^2), float64.

    O(|S| d): only the selected rows are read; k is ``inst.k``. ``indices`` must be k unique
    rows (a ValueError names the size otherwise); ``any_size=True`` scores a set of any size by
    the same formula (the robust sparsity models choose their size). ``check=False`` skips
    validation for callers that pass a tensor of unique in-range indices (inner loops).
    """
    if check:
        size = None if any_size else inst.k
        idx = torch.as_tensor(check_indices(indices, inst.n, size=size), device=inst.device)
    else:
        idx = torch.as_tensor(indices, device=inst.device)
    if idx.numel() == 0:
        return 0.0
    v = gather_rows(inst.E, idx).double().sum(0)
    rel = float(inst.relevance.index_select(0, idx).double().sum())
    th = inst.theta
    return th * (inst.k - 1) * rel + (1.0 - th) * (idx.numel() - float(v @ v))


#: The public name of :func:`objective` (DESIGN.md's API contract).
ccbqp_objective = objective


def gram_objective(lin: Any, G: Any, S: Any, theta: float) -> Any:
    """f(S) = sum_{i in S} l_i + (1-theta)(|S| - sum_{i, j in S} G_ij) from a Gram matrix G = E E^T.

    For small pools whose Gram matrix is already formed (multistart's sub-pool, brute force);
    ``lin`` is :func:`linear_term`, S integer positions (a float), or with numpy a (B, m) array
    of B sets of m positions each (a (B,) array of their values). numpy or torch.
    """
    if isinstance(G, torch.Tensor):
        S = torch.as_tensor(S, device=G.device)
        return float(set_value(lin[S].double().sum(), G[S][:, S].double().sum(), theta, S.numel()))
    S = np.asarray(S)
    if S.ndim == 2:
        return set_value(lin[S].sum(1), G[S[:, :, None], S[:, None, :]].sum((1, 2)), theta, S.shape[1])
    return float(set_value(lin[S].sum(), G[np.ix_(S, S)].sum(), theta, S.size))


def set_value(lin_sum: Any, gram_sum: Any, theta: Any, size: int) -> Any:
    """f(S) = sum_{i in S} l_i + (1-theta)(|S| - sum_{i, j in S} G_ij) from its two sums (floats,
    arrays or tensors): what :func:`gram_objective` evaluates, for callers that form the sums
    of many sets at once."""
    return lin_sum + (1 - theta) * (size - gram_sum)


def _as_x(inst: Instance, x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor) and x.dtype == inst.acc_dtype and x.device == inst.device and x.shape == (inst.n,):
        return x
    xt = check_vector(x, "x", inst.n, " (the pool size n)")
    return xt.to(device=inst.device, dtype=inst.acc_dtype)


def relaxed_objective(inst: Instance, x: Any, *, relax_penalty: float = 2.0, v: torch.Tensor | None = None) -> float:
    """f_lambda(x) = l^T x + (1-theta)(k + lambda (||x||^2 - k) - ||E^T x||^2), float64.

    One pass over E for v = E^T x unless ``v`` is given; no n x n matrix. Equals :func:`objective`
    on binary x.
    """
    lam = check_nonnegative(relax_penalty, "relax_penalty")
    xt = _as_x(inst, x)
    if v is None:
        v = rmatvec(inst.E, xt)
    th, k = inst.theta, inst.k
    xd, vd = xt.double(), v.double()
    lin_x = float(linear_term(inst.relevance.double(), th, k) @ xd)
    return relaxed_value(lin_x, float(xd @ xd), float(vd @ vd), th, k, lam)


def relaxed_value(lin_x: Any, x_sq: Any, v_sq: Any, theta: Any, k: int, relax_penalty: float) -> Any:
    """f_lambda(x) = l^T x + (1-theta)(k + lambda (||x||^2 - k) - ||v||^2) from its scalars.

    lin_x = l^T x, x_sq = ||x||^2, v_sq = ||E^T x||^2: floats or (B,) arrays (one per point), so
    a Frank-Wolfe loop that keeps the three up to date evaluates f_lambda in O(1).
    """
    return lin_x + (1 - theta) * (k + relax_penalty * (x_sq - k) - v_sq)


def relaxed_grad_dot_x(lin_x: Any, x_sq: Any, v_sq: Any, theta: Any, relax_penalty: float) -> Any:
    """grad f_lambda(x)^T x = l^T x - 2 (1-theta)(||v||^2 - lambda ||x||^2) from the scalars of
    :func:`relaxed_value` (x^T E v = ||E^T x||^2): the FW gap is grad^T s minus this."""
    return lin_x - pair_weight(theta) * (v_sq - relax_penalty * x_sq)


def relaxed_grad(lin: Any, Ev: Any, x: Any, theta: Any, relax_penalty: float) -> Any:
    """grad f_lambda(x) = l - 2 (1-theta)(E v - lambda x) from E v (v = E^T x; the one pass over E).

    Shape: lin, Ev, x (n,) with a float theta, or (B, n) with theta of shape (B, 1) (one problem
    per row). Tensors: each entry is rounded once (a fused multiply-add, the same for one row as
    for a batch); numpy arrays (float64) work too.
    """
    if isinstance(lin, np.ndarray):
        return lin - pair_weight(theta) * (Ev - relax_penalty * x)
    T = torch.sub(Ev, x, alpha=relax_penalty)
    if isinstance(theta, torch.Tensor):  # the weight formed in float64, as a Python float would be
        return torch.addcmul(lin, T, (-pair_weight(theta.double())).to(lin.dtype))
    return torch.add(lin, T, alpha=-pair_weight(theta))


def relaxed_gradient(
    inst: Instance,
    x: Any,
    *,
    relax_penalty: float = 2.0,
    v: torch.Tensor | None = None,
    lin: torch.Tensor | None = None,
) -> torch.Tensor:
    """grad f_lambda(x) = l + 2 (1-theta)(lambda x - E v), v = E^T x: one GEMV (E v).

    ``v`` (= E^T x) and ``lin`` (= :func:`linear_term`) may be passed when already known.
    Shape: x (n,) -> (n,) in the accumulation dtype, on the instance's device.
    """
    xt = _as_x(inst, x)
    if v is None:
        v = rmatvec(inst.E, xt)
    if lin is None:
        lin = linear_term(inst.relevance, inst.theta, inst.k)
    return relaxed_grad(lin, matvec(inst.E, v), xt, inst.theta, relax_penalty)


def line_search(gap: Any, C: Any) -> Any:
    """Exact FW step on f_lambda(x + gamma d) = f_lambda(x) + gamma gap + gamma^2 C / 2.

    gamma = 1 where the curvature C >= 0 (f_lambda is convex along d, so the endpoint is best),
    else min(1, -gap / C). Scalars, numpy arrays or tensors (batched FW; a tensor stays on its
    device).
    """
    if isinstance(C, torch.Tensor):  # -gap / C is only read where C < 0
        return torch.where(C >= 0, 1.0, (gap / C).neg_().clamp_(max=1.0))
    if np.ndim(C) == 0:
        return 1.0 if C >= 0 else min(1.0, -gap / C)
    C = np.asarray(C, dtype=np.float64)
    safe = np.where(C < 0, C, -1.0)
    return np.where(C >= 0, 1.0, np.minimum(1.0, -np.asarray(gap) / safe))


def curvature(d_sq: Any, Ed_sq: Any, theta: Any, relax_penalty: float) -> Any:
    """C = 2 (1-theta)(lambda ||d||^2 - ||E^T d||^2), the second derivative of f_lambda along d."""
    return pair_weight(theta) * (relax_penalty * d_sq - Ed_sq)


def swap_terms(lin: Any, u: Any, theta: Any, *, sq_norms: Any = 1.0) -> tuple[Any, Any]:
    """(b, a) with Delta(i, j) = b_j + a_i + 2 (1-theta) w_ij for i in S, j not in S.

    b = l - (1-theta)(2 u + ||e||^2 - 1) and a = -l + (1-theta)(2 u - ||e||^2 - 1) for every item
    (index a by S); u = E v with v the sum of the selected rows. For unit rows (sq_norms = 1)
    b_j = l_j - 2 (1-theta) u_j is the FW gradient at S minus 2 (1-theta) lambda x_j, and
    a_i = -l_i + 2 (1-theta)(u_i - 1). Tensors or numpy arrays; ``sq_norms`` a scalar or per item.
    """
    one = 1.0 - theta
    b = lin - one * (2 * u + (sq_norms - 1.0))
    a = -lin + one * (2 * u - (sq_norms + 1.0))
    return b, a


def swap_gains(inst: Instance, indices: Any) -> torch.Tensor:
    """Delta(i, j) for every i in S (columns, in the order of ``indices``) and every j (rows).

    (n, k) float64 tensor; rows j in S are -inf. O(n k d) time, O(n k) memory (W = E E_S^T; no
    n x n matrix): for tests and small pools. Delta(i, j) = f(S - i + j) - f(S).
    """
    idx = torch.as_tensor(check_indices(indices, inst.n, "indices", size=inst.k), device=inst.device)
    W = matmul(inst.E, gather_rows(inst.E, idx).T).double()
    sq = gather_rows(inst.E, torch.arange(inst.n, device=inst.device)).double().pow(2).sum(1)
    lin = linear_term(inst.relevance.double(), inst.theta, inst.k)
    b, a = swap_terms(lin, W.sum(1), inst.theta, sq_norms=sq)
    D = b[:, None] + a[idx][None, :] + pair_weight(inst.theta) * W
    D[idx] = -torch.inf
    return D


def mean_pairwise(W: Any) -> float:
    """Mean of the off-diagonal entries of a symmetric m x m matrix (Gram matrix, or bounds on
    its entries): (sum W - trace W) / (m (m-1)). NaN when m < 2 (no pairs)."""
    m = int(W.shape[0])
    if m < 2:
        return float("nan")
    if isinstance(W, torch.Tensor):
        W = W.double()
        return float((W.sum() - W.diagonal().sum()) / (m * (m - 1)))
    W = np.asarray(W, dtype=np.float64)
    return float((W.sum() - np.trace(W)) / (m * (m - 1)))


def mean_pairwise_cosine(rows: Any, *, normalize: bool = True) -> float:
    """ILS: mean cosine over the m (m-1) / 2 unordered pairs of the rows (float64), NaN if m < 2.

    ``normalize=False`` averages inner products instead (rows taken as they are). Tensor or
    numpy (m, d) rows; O(m^2 d).
    """
    R = rows.double() if isinstance(rows, torch.Tensor) else torch.as_tensor(np.asarray(rows, dtype=np.float64))
    if normalize and R.shape[0]:
        R = R / torch.linalg.vector_norm(R, dim=1, keepdim=True).clamp_min(1e-300)
    return mean_pairwise(R @ R.T)


def objective_scale(k: int) -> float:
    """k (k-1): the scale by which optimality gaps are normalized (1 when k = 1)."""
    return float(max(k * (k - 1), 1))


def normalized_gap(optimum: float, value: float, k: int) -> float:
    """(OPT - f) / (k (k-1)), the gap reported everywhere in divopt."""
    return (float(optimum) - float(value)) / objective_scale(k)


def exact_hit(optimum: float, value: float, k: int, tol: float = EXACT_HIT_TOL) -> bool:
    """True when f reaches OPT up to a normalized gap of ``tol`` (the one definition of a hit)."""
    return normalized_gap(optimum, value, k) <= tol
