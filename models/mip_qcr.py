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

import numpy as np
import pyomo.environ as pe
from pyomo.core.util import quicksum

from .instance import Instance
from .mip_ccbqp import gram_factor
from .mip_common import BuildClock, BuildTimeout, BuiltModel, ModelInfo, new_selection_model
from .mip_sizing import estimate_ccbqp, pyomo_seconds_per_unit
from .qcr import CardinalityQP, QCRBound, exact_qcr, qcr_sdp
from .validation import check_choice

__all__ = ["build_ccbqp_qcr", "QCR_FORMS", "QCR_FORMULATIONS", "SDP_SHARE"]

#: How :func:`build_ccbqp_qcr` writes x^T H x.
QCR_FORMS = ("gram", "factored")
#: Formulation names (as in ``solve_exact(..., formulation=...)``) -> form.
QCR_FORMULATIONS = {"qcr": "gram", "qcr_lowrank": "factored"}
#: Share of a time-limited build's time that the SDP may use, of what is left once the Pyomo build
#: and the solver's load are set aside; the other share is the solver's.
SDP_SHARE = 0.5
# The reformulation after the SDP (two eigvalsh of p x p, one eigh for the factored form, a few
# matrix products), in SCS iterations (each one eigendecomposition of (p+1) x (p+1) and a sparse
# solve), rounded up generously: the steps are refused before they start if this does not fit.
_POST_SDP_ITERATIONS = 10


def build_ccbqp_qcr(inst: Instance, form: str = "gram", qcr: QCRBound | None = None, *,
                    deadline: float | None = None, clock: BuildClock | None = None, **sdp_options) -> BuiltModel:
    """max const + lin^T x - x^T H x  s.t.  sum(x) = k, x binary (module docstring).

    qcr : an exact (Shor) :class:`~divopt_rag.models.qcr.QCRBound` of ``inst``; by default the Shor SDP
        is solved here (cvxpy + SCS, ``sdp_options`` passed to :func:`~divopt_rag.models.qcr.qcr_sdp`).
    deadline : ``time.perf_counter()`` by which building must end (None: none), or ``clock``, a
        :class:`~divopt_rag.models.mip_common.BuildClock` (tests inject one with their own time).
        Every step checks it, and none that cannot be interrupted starts when its predicted time
        does not fit (:class:`~divopt_rag.models.mip_common.BuildTimeout`):

        1. the SDP gets :data:`SDP_SHARE` of what is left once the Pyomo build and the solver's
           load are set aside (predicted as :func:`~divopt_rag.models.mip_sizing.estimate_ccbqp`
           does, at the speed Pyomo runs now); the rest is the solver's. Stopped early, its dual
           keeps the reformulation exact, only less tight;
        2. the reformulation's eigendecompositions (about :data:`_POST_SDP_ITERATIONS` SCS
           iterations' worth, timed by the SDP) start only if they fit;
        3. the Pyomo terms check the deadline as they are added.
    Returns a :class:`~divopt_rag.models.mip_common.BuiltModel`; its info's details hold
    "qcr_seconds" (SDP time), "qcr_bound" (the SDP bound), "qcr_status" / "qcr_stopped" /
    "qcr_iterations" (how the SDP ended: a deadline is never reported as converged) and
    "build_steps" (seconds of each timed step).
    """
    if not isinstance(inst, Instance):
        raise TypeError(f"instance must be a divopt_rag.models.Instance, got {type(inst).__name__}")
    check_choice(form, "form", QCR_FORMS)
    clock = clock if clock is not None else BuildClock(deadline)
    problem = CardinalityQP.from_instance(inst)
    if qcr is None:
        sdp_clock = None
        if clock.deadline is not None:
            reserve = _build_and_load_seconds(inst, form)
            left = clock.left()
            if left - reserve <= 0:
                raise BuildTimeout(f"no time for the QCR's SDP: {max(left, 0.0):.3g} s of the time limit were left and "
                                   f"building and loading the model need about {reserve:.3g} s")
            sdp_clock = clock.within(SDP_SHARE * (left - reserve))
        try:
            qcr = qcr_sdp(problem, "shor", clock=sdp_clock, eigen_bound=False, **sdp_options)
        finally:
            if sdp_clock is not None:
                clock.seconds.update(sdp_clock.seconds)
    clock.check("the QCR's reformulation")
    per_iteration = qcr.info.get("iteration_seconds")
    if per_iteration is not None:
        clock.expect(_POST_SDP_ITERATIONS * per_iteration, "the QCR's eigendecompositions")
    with clock.timed("qcr_reformulation"):
        const, lin, H = exact_qcr(problem, qcr)
    n, k = inst.n, inst.k
    m = new_selection_model(n, f"ccbqp_qcr_{form}")
    details = {"qcr_seconds": float(qcr.info.get("seconds", 0.0)), "qcr_bound": float(qcr.info.get("sdp_value", np.nan)),
               "qcr_status": str(qcr.info.get("status", "")), "qcr_stopped": str(qcr.info.get("stopped", "")),
               "qcr_iterations": int(qcr.info.get("iterations", -1))}
    m.card = pe.Constraint(expr=quicksum(m.x[i] for i in range(n)) == k)
    linear = float(const) + quicksum(float(lin[i]) * m.x[i] for i in range(n))
    if form == "gram":
        iu, ju = np.triu_indices(n, 0)
        coef = -np.where(iu == ju, 1.0, 2.0) * H[iu, ju]
        keep = coef != 0.0
        with clock, clock.timed("pyomo_build"):
            quad = quicksum(float(a) * m.x[int(i)] * m.x[int(j)]
                            for a, i, j in clock.items(zip(coef[keep], iu[keep], ju[keep])))
        m.obj = pe.Objective(expr=linear + quad, sense=pe.maximize)
        return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, details={**details, "build_steps": dict(clock.seconds)}))
    clock.check("factoring H")
    with clock.timed("qcr_factor"):
        F = gram_factor(H)
    r = F.shape[1]
    vmax = np.sort(np.abs(F), axis=0)[::-1][:k].sum(axis=0) + 1e-9
    m.v = pe.Var(range(r), bounds=lambda mm, l: (-float(vmax[l]), float(vmax[l])))
    with clock, clock.timed("pyomo_build"):
        m.vdef = pe.Constraint(range(r), rule=lambda mm, l: mm.v[l] == quicksum(
            float(F[i, l]) * mm.x[i] for i in clock.items(range(n)) if F[i, l] != 0.0))
    m.obj = pe.Objective(expr=linear - quicksum(m.v[l] * m.v[l] for l in range(r)), sense=pe.maximize)
    return BuiltModel(m, ModelInfo(kind=m.name, n_items=n, details={**details, "build_steps": dict(clock.seconds)}))


def _build_and_load_seconds(inst: Instance, form: str) -> float:
    """Predicted seconds of the Pyomo build and of loading the model into its solver (the gram
    form is Gurobi's, the factored one SCIP's), at the speed Pyomo runs now."""
    formulation, solver = ("qcr", "gurobi") if form == "gram" else ("qcr_lowrank", "scip")
    est = estimate_ccbqp(inst.n, inst.d, inst.theta, formulation, solver)
    return est.seconds(pyomo_seconds_per_unit())
