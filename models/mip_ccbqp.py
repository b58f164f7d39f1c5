"""Exact CCBQP as a Pyomo model: native MIQP (Gurobi, SCIP), linearized MILP with RLT (HiGHS), or
Glover's compact MILP (n products instead of n(n-1)/2; every MIP solver).

CCBQP on binary x with sum(x) = k, c = relevance, W = E E^T (pairwise cosines):
    f(x) = theta (k-1) c^T x + (1-theta) (x^T x - ||E^T x||^2)
         = theta (k-1) c^T x + (1-theta) ( sum_i (1 - W_ii) x_i - 2 sum_{i<j} W_ij x_i x_j )
(the second line uses x_i^2 = x_i; W_ii = 1 for unit rows, kept exact in float64), which is
what :func:`divopt_rag.models.ccbqp_objective` evaluates.
"""
from __future__ import annotations

import numpy as np
import pyomo.environ as pe
from pyomo.core.util import quicksum

from .ccbqp import linear_term, pair_weight
from .instance import Instance
from .mip_common import BuildClock, BuiltModel, ModelInfo, add_pair_products, as_gram, new_selection_model
from .validation import check_choice

__all__ = ["build_ccbqp", "build_ccbqp_miqp", "build_ccbqp_miqp_lowrank", "build_ccbqp_milp", "build_ccbqp_compact",
           "compact_bounds", "FORMULATIONS", "gram_factor", "diagonal_shift"]

#: Exact CCBQP formulations accepted by :func:`build_ccbqp`.
FORMULATIONS = ("miqp", "miqp_lowrank", "milp", "milp_compact")


def _check_instance(inst: Instance) -> Instance:
    if not isinstance(inst, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    return inst


def _shift(inst: Instance, W: np.ndarray, shift: bool) -> float:
    """:func:`diagonal_shift` of the Gram matrix W, without its O(n^3) eigendecomposition when
    n > d: W = E E^T then has rank <= d < n, lambda_min(W) = 0 and the shift is 0 exactly."""
    if not shift or inst.n > inst.d:
        return 0.0
    return diagonal_shift(W)


def build_ccbqp_miqp(inst: Instance, shift: bool = True, *, deadline: float | None = None) -> BuiltModel:
    """Native MIQP: max theta(k-1) c^T x + (1-theta)(sum_i x_i - x^T W x), s.t. sum(x) = k, x binary.

    x^T W x = ||E^T x||^2 is convex, so the objective is concave: a convex MIQP, solved
    natively by Gurobi and SCIP (HiGHS has no MIQP: use :func:`build_ccbqp_milp`).
    With ``shift`` (default) the model uses x^T (W - uI) x + u sum_i x_i, u = lambda_min(W)
    (:func:`diagonal_shift`): equal on binary x, still concave, and a tighter continuous
    relaxation than the relax_penalty = 0 relaxation (which is ``shift=False``); the shift is
    ``info.details["shift"]``. n binaries, 1 constraint. ``deadline``: see
    :class:`~divopt_rag.models.mip_common.BuildClock` (:class:`BuildTimeout` once it passes).
    """
    inst = _check_instance(inst)
    n, k, th = inst.n, inst.k, inst.theta
    c = inst.relevance.detach().double().cpu().numpy()
    clock = BuildClock(deadline)
    W = as_gram(inst)
    u = _shift(inst, W, shift)
    if u:
        W[np.diag_indices(n)] -= u
    m = new_selection_model(n, "ccbqp_miqp")
    m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) == k)
    lc = linear_term(c, th, k)
    lin = quicksum(float(lc[i] + (1 - th) * (1.0 - u)) * m.x[i] for i in range(n))
    if th < 1.0:
        # Keep the diagonal as x_i^2 terms: -(1-theta) x^T W x is then concave (W = E E^T is
        # PSD), a convex MIQP whose continuous relaxations are convex QPs.
        iu, ju = np.triu_indices(n, 0)
        coef = -(1 - th) * np.where(iu == ju, 1.0, 2.0) * W[iu, ju]
        del W
        with clock:
            quad = quicksum(float(a) * m.x[int(i)] * m.x[int(j)] for a, i, j in clock.items(zip(coef, iu, ju)))
        m.obj = pe.Objective(expr=lin + quad, sense=pe.maximize)
    else:
        m.obj = pe.Objective(expr=lin, sense=pe.maximize)
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, details={"shift": u}))


def diagonal_shift(W: np.ndarray) -> float:
    """u = lambda_min(W) (shrunk by 1e-6 relative, clipped at 0): the largest uniform diagonal
    shift keeping W - u I positive semidefinite.

    On binary x, x_i^2 = x_i gives x^T W x = x^T (W - u I) x + u sum_i x_i, so the MIQPs may
    use the right-hand side; on fractional x in [0,1] it is >= x^T W x (sum x_i >= sum x_i^2),
    so the continuous relaxation, and with it every branch-and-bound bound, gets tighter while
    the objective stays concave (quadratic convex reformulation with a uniform shift).
    """
    lam = np.linalg.eigvalsh(W)
    u = float(lam[0]) - 1e-6 * max(1.0, float(lam[-1]))
    return max(u, 0.0)


def gram_factor(W: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """F (n x r) with F F^T = W, r = numerical rank of the PSD Gram matrix W (eigh, float64).

    Eigenvalues below tol * max(1, lambda_max) are dropped (W = E E^T has rank <= min(n, d)).
    """
    lam, U = np.linalg.eigh(W)
    keep = lam > tol * max(1.0, float(lam[-1]))
    return U[:, keep] * np.sqrt(lam[keep])


def _shifted_factor(inst: Instance, shift: bool) -> tuple[float, np.ndarray]:
    """(u, F) with F F^T = W - u I (:func:`diagonal_shift`, :func:`gram_factor`). For n > d the
    shift is 0 and F comes from the d x d matrix E^T E = V L V^T: F = E V (the same eigenvalue
    rule), O(n d^2) time and O(n d) memory instead of two O(n^3) eigendecompositions of the
    n x n Gram matrix (37 s and 0.2 GB at n = 3000)."""
    if inst.n > inst.d:
        E = inst.E.detach().double().cpu().numpy()
        lam, V = np.linalg.eigh(E.T @ E)
        keep = lam > 1e-12 * max(1.0, float(lam[-1]))
        return 0.0, E @ V[:, keep]
    W = as_gram(inst)
    u = diagonal_shift(W) if shift else 0.0
    return u, gram_factor(W - u * np.eye(inst.n))


def build_ccbqp_miqp_lowrank(inst: Instance, shift: bool = True, *, deadline: float | None = None) -> BuiltModel:
    """Factored convex MIQP: with W - uI = F F^T (F: n x r, r = rank <= min(n, d)), v = F^T x,
    max theta(k-1) c^T x + (1-theta)((1-u) sum_i x_i - ||v||^2), s.t. sum(x) = k, v = F^T x, x binary
    (u = :func:`diagonal_shift` of W, or 0 with ``shift=False``).

    Same optimum and the same continuous relaxation as :func:`build_ccbqp_miqp`, but the
    quadratic is a diagonal sum of r squares instead of n(n+1)/2 products, which SCIP's
    outer approximation handles far better. n binaries, r continuous v, r + 1 constraints;
    |v_l| <= sum of the k largest |F_il| bounds every v. ``info.details``: "shift" u, "rank" r.
    ``deadline``: see :class:`~divopt_rag.models.mip_common.BuildClock`.
    """
    inst = _check_instance(inst)
    n, k, th = inst.n, inst.k, inst.theta
    c = inst.relevance.detach().double().cpu().numpy()
    clock = BuildClock(deadline)
    u, F = _shifted_factor(inst, shift)
    r = F.shape[1]
    vmax = np.sort(np.abs(F), axis=0)[::-1][:k].sum(axis=0) + 1e-9
    m = new_selection_model(n, "ccbqp_miqp_lowrank")
    m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) == k)
    m.v = pe.Var(range(r), bounds=lambda m, l: (-float(vmax[l]), float(vmax[l])))
    with clock:
        m.vdef = pe.Constraint(range(r), rule=lambda m, l: m.v[l] == quicksum(
            float(F[i, l]) * m.x[i] for i in clock.items(range(n)) if F[i, l] != 0.0))
    lc = linear_term(c, th, k)
    lin = quicksum(float(lc[i] + (1 - th) * (1.0 - u)) * m.x[i] for i in range(n))
    if th < 1.0:
        m.obj = pe.Objective(expr=lin - (1 - th) * quicksum(m.v[l] * m.v[l] for l in range(r)), sense=pe.maximize)
    else:
        m.obj = pe.Objective(expr=lin, sense=pe.maximize)
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, details={"shift": u, "rank": r}))


def _linearized_start(inst: Instance, name: str):
    """What both MILPs share: the model with x and the cardinality row sum(x) = k, the float64 Gram
    matrix W and the linear part theta(k-1) c^T x + (1-theta) sum_i (1 - W_ii) x_i."""
    inst = _check_instance(inst)
    n, k, th = inst.n, inst.k, inst.theta
    c = inst.relevance.detach().double().cpu().numpy()
    W = as_gram(inst)
    m = new_selection_model(n, name)
    m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) == k)
    lc = linear_term(c, th, k)
    return m, W, quicksum(float(lc[i] + (1 - th) * (1.0 - W[i, i])) * m.x[i] for i in range(n))


def build_ccbqp_milp(inst: Instance, rlt: bool = True, *, deadline: float | None = None) -> BuiltModel:
    """Linearized MILP: y_ij stands for x_i x_j (i < j),
    max theta(k-1) c^T x + (1-theta)(sum_i (1-W_ii) x_i - 2 sum_{i<j} W_ij y_ij)
    s.t. sum(x) = k, McCormick y_ij <= x_i, y_ij <= x_j, y_ij >= x_i + x_j - 1, y >= 0,
    and (``rlt=True``) the RLT equalities sum_{j != i} y_ij = (k-1) x_i.

    With the RLT equalities the lower McCormick inequality is implied on binary x (see
    :func:`divopt_rag.models.mip_common.add_pair_products`) and is dropped, which keeps the model at
    n(n-1)/2 continuous variables, n(n-1) + n + 1 constraints. Exact on binary x either way.
    ``deadline``: see :class:`~divopt_rag.models.mip_common.BuildClock`.
    """
    m, W, lin = _linearized_start(inst, "ccbqp_milp")
    n, k, th = inst.n, inst.k, inst.theta
    with BuildClock(deadline) as clock:
        add_pair_products(m, n, mccormick="upper" if rlt else "full", rlt_k=k if rlt else None, clock=clock)
        quad = quicksum(float(-pair_weight(th) * W[i, j]) * m.y[i, j] for i, j in clock.items(m.P))
    m.obj = pe.Objective(expr=lin + quad, sense=pe.maximize)
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, details={"rlt": bool(rlt)}))


def compact_bounds(W: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(L, U) of Glover's linearization: with s_i(x) = sum_{j != i} W_ij x_j over k-sets x,
    L_i = the sum of the k-1 smallest W_ij (j != i) bounds s_i from below on the sets that hold i,
    U_i = the sum of the k largest W_ij (j != i) bounds it from above on the sets that do not
    (k - 1 resp. k other items are selected then)."""
    n = W.shape[0]
    off = W[~np.eye(n, dtype=bool)].reshape(n, n - 1)  # row i without W_ii
    srt = np.sort(off, axis=1)
    U = srt[:, n - 1 - k:].sum(axis=1) if k <= n - 1 else srt.sum(axis=1)  # k = n: no set leaves i out
    return srt[:, :k - 1].sum(axis=1), U


def build_ccbqp_compact(inst: Instance, *, deadline: float | None = None) -> BuiltModel:
    """Glover's compact linearization (F. Glover, Management Science 22(4), 1975, 455-460): one
    continuous z_i per item stands for x_i s_i(x), s_i(x) = sum_{j != i} W_ij x_j, so that
    sum_i z_i = 2 sum_{i<j} W_ij x_i x_j:

        max  theta(k-1) c^T x + (1-theta)(sum_i (1 - W_ii) x_i - sum_i z_i)
        s.t. sum(x) = k,   z_i >= s_i(x) - U_i (1 - x_i),   z_i >= L_i x_i,   x binary

    with L, U from :func:`compact_bounds`. Exact: z has the objective coefficient -(1-theta) < 0,
    so at a binary x the smallest feasible z_i is taken, and it is x_i s_i(x): s_i(x) >= L_i when
    x_i = 1 (the first row then reads z_i >= s_i(x)); when x_i = 0 the first row's right side
    s_i(x) - U_i is <= 0 and the second reads z_i >= 0. (Upper rows on z are not needed for that
    direction.) 2n variables (n binary), 2n + 1 rows, about n^2 nonzeros: a MILP that Gurobi's
    size-limited licence takes up to n = 999 and HiGHS at any n, where the McCormick MILP
    (:func:`build_ccbqp_milp`) has n(n-1)/2 products. Its LP relaxation is weaker than the RLT
    MILP's, so it pays at small k (the instance library's n = 300, k = 5 checks,
    docs/library.md). At theta = 1 there are no pair terms and no z.
    ``deadline``: see :class:`~divopt_rag.models.mip_common.BuildClock`.
    """
    m, W, lin = _linearized_start(inst, "ccbqp_milp_compact")
    n, k, th = inst.n, inst.k, inst.theta
    if th >= 1.0:
        m.obj = pe.Objective(expr=lin, sense=pe.maximize)
        return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, details={}))
    L, U = compact_bounds(W, k)
    m.z = pe.Var(range(n))
    with BuildClock(deadline) as clock:
        def row(m, i):
            clock.check()  # a row is n terms: the deadline is read once per row
            s = quicksum(float(W[i, j]) * m.x[j] for j in range(n) if j != i and W[i, j] != 0.0)
            return m.z[i] >= s - float(U[i]) * (1 - m.x[i])
        m.z_link = pe.Constraint(range(n), rule=row)
    m.z_floor = pe.Constraint(range(n), rule=lambda m, i: m.z[i] >= float(L[i]) * m.x[i])
    m.obj = pe.Objective(expr=lin - (1 - th) * quicksum(m.z[i] for i in range(n)), sense=pe.maximize)
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, details={"linearization": "glover"}))


def build_ccbqp(inst: Instance, formulation: str = "miqp", rlt: bool = True, *,
                deadline: float | None = None) -> BuiltModel:
    """The exact CCBQP in the chosen ``formulation``: "miqp", "miqp_lowrank", "milp" or "milp_compact".

    deadline : ``time.perf_counter()`` by which building must end, or None; past it the builder
        raises :class:`~divopt_rag.models.mip_common.BuildTimeout` (what it has built is dropped).
    """
    check_choice(formulation, "formulation", FORMULATIONS)
    if formulation == "miqp":
        return build_ccbqp_miqp(inst, deadline=deadline)
    if formulation == "miqp_lowrank":
        return build_ccbqp_miqp_lowrank(inst, deadline=deadline)
    if formulation == "milp_compact":
        return build_ccbqp_compact(inst, deadline=deadline)
    return build_ccbqp_milp(inst, rlt=rlt, deadline=deadline)
