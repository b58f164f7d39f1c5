"""divopt_rag.solvers.bnb: divopt's own exact engine for the CCBQP (branch-and-bound on DNN/QCR bounds).

``branch_and_bound(inst, time_limit=...)`` returns a :class:`BnBOutcome`; ``solve_exact(inst,
solver="bnb")`` wraps it in the common :class:`divopt_rag.models.solve_results.Result`.
Modules: :mod:`.tree` (search), :mod:`.options` (its knobs, :class:`BnBOptions`), :mod:`.sdp` (node DNN relaxation by ADMM), :mod:`.bound` (certified
node QP), :mod:`.fixing` (reduced-cost fixing, safe screening). The bounding functions themselves
(the convexification) are :mod:`divopt_rag.models.qcr`.
"""
from .options import BnBOptions
from .tree import LOG_COLUMNS, BnBOutcome, branch_and_bound

__all__ = ["branch_and_bound", "BnBOptions", "BnBOutcome", "LOG_COLUMNS"]
