"""The CCBQP as a convex MIQP in its quadratic convex reformulation (QCR), for Gurobi and SCIP.

On binary x with sum(x) = k the CCBQP objective equals (:func:`divopt_rag.models.qcr.exact_qcr`)

    f(x) = const + lin^T x - x^T H x,    H positive semidefinite on all of R^n,

where H and lin come from the Shor SDP's dual (u_i (x_i^2 - x_i), v_i x_i (1^T x - k), w (1^T x - k)
terms added to f, all zero on the feasible set). The objective stays concave, so MIQP solvers
treat the model as convex, but its continuous relaxation over [0,1]^n with sum(x) = k equals the
Shor SDP bound instead of the far weaker bound of the plain (uniformly shifted) MIQP.
"gram" form: x^T H x as n(n+1)/2 products (Gurobi); "factored": H = F F^T, v = F^T x and
||v||^2 (SCIP's outer approximation handles squares of few linear forms better).
n binaries and 1 constraint (+ r continuous v and r constraints factored), like
:func:`divopt_rag.models.mip_ccbqp.build_ccbqp_miqp`.
"""
from __future__ import annotations

import time

import numpy as np
import pyomo.environ as pe
from pyomo.core.util import quicksum

from .instance import Instance
from .mip_ccbqp import gram_factor
from .mip_common import BuildClock, BuildTimeout, BuiltModel, ModelInfo, new_selection_model
from .qcr import CardinalityQP, QCRBound, exact_qcr, qcr_sdp
from .validation import check_choice

__all__ = ["build_ccbqp_qcr", "QCR_FORMS", "QCR_FORMULATIONS"]

#: How :func:`build_ccbqp_qcr` writes x^T H x.
QCR_FORMS = ("gram", "factored")
#: Formulation names (as in ``solve_exact(..., formulation=...)``) -> form.
QCR_FORMULATIONS = {"qcr": "gram", "qcr_lowrank": "factored"}


def build_ccbqp_qcr(inst: Instance, form: str = "gram", qcr: QCRBound | None = None, *,
                    deadline: float | None = None, **sdp_options) -> BuiltModel:
    """max const + lin^T x - x^T H x  s.t.  sum(x) = k, x binary (module docstring).

    qcr : an exact (Shor) :class:`~divopt_rag.models.qcr.QCRBound` of ``inst``; by default the Shor SDP
        is solved here (cvxpy + SCS, ``sdp_options`` passed to :func:`~divopt_rag.models.qcr.qcr_sdp`).
    deadline : ``time.perf_counter()`` by which building must end (None: none); SCS gets what is
        left as its ``time_limit_secs`` (any dual it returns keeps the reformulation exact, only
        less tight) and the Pyomo terms check it (:class:`~divopt_rag.models.mip_common.BuildTimeout`).
    Returns a :class:`~divopt_rag.models.mip_common.BuiltModel`; its info's details hold
    "qcr_seconds" (SDP time) and "qcr_bound" (the SDP bound).
    """
    if not isinstance(inst, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    check_choice(form, "form", QCR_FORMS)
    clock = BuildClock(deadline)
    problem = CardinalityQP.from_instance(inst)
    if qcr is None:
        if deadline is not None and str(sdp_options.get("solver", "SCS")).upper() == "SCS":
            left = deadline - time.perf_counter()
            if left <= 0:
                raise BuildTimeout("no time left for the QCR's SDP")
            sdp_options.setdefault("time_limit_secs", left)
        qcr = qcr_sdp(problem, "shor", **sdp_options)
    clock.check()
    const, lin, H = exact_qcr(problem, qcr)
    n, k = inst.n, inst.k
    m = new_selection_model(n, f"ccbqp_qcr_{form}")
    info = ModelInfo(kind=m.name, n_items=n, details={"qcr_seconds": float(qcr.info.get("seconds", 0.0)),
                                                      "qcr_bound": float(qcr.info.get("sdp_value", np.nan))})
    m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) == k)
    linear = float(const) + quicksum(float(lin[i]) * m.x[i] for i in range(n))
    if form == "gram":
        iu, ju = np.triu_indices(n, 0)
        coef = -np.where(iu == ju, 1.0, 2.0) * H[iu, ju]
        keep = coef != 0.0
        with clock:
            quad = quicksum(float(a) * m.x[int(i)] * m.x[int(j)]
                            for a, i, j in clock.items(zip(coef[keep], iu[keep], ju[keep])))
        m.obj = pe.Objective(expr=linear + quad, sense=pe.maximize)
        return BuiltModel(m, info)
    F = gram_factor(H)
    r = F.shape[1]
    vmax = np.sort(np.abs(F), axis=0)[::-1][:k].sum(axis=0) + 1e-9
    m.v = pe.Var(range(r), bounds=lambda mm, l: (-float(vmax[l]), float(vmax[l])))
    with clock:
        m.vdef = pe.Constraint(range(r), rule=lambda mm, l: mm.v[l] == quicksum(
            float(F[i, l]) * mm.x[i] for i in clock.items(range(n)) if F[i, l] != 0.0))
    m.obj = pe.Objective(expr=linear - quicksum(m.v[l] * m.v[l] for l in range(r)), sense=pe.maximize)
    return BuiltModel(m, info)
