"""The knobs of divopt's branch-and-bound (:class:`BnBOptions`), validated once.

The stopping rules (``time_limit``, ``mip_gap``, ``abs_gap``, ``node_limit``) and the inputs
(warm start, memory budget, clock) are :func:`~divopt_rag.solvers.bnb.branch_and_bound`'s own
arguments; how the search runs is this one object (as Pyomo gathers a solver's options in a
config), so the function keeps a short signature and the defaults are stated once.
"""
from __future__ import annotations

from dataclasses import dataclass

from divopt_rag.models.validation import check_choice, check_scalar

from ..selection import METHODS

__all__ = ["BnBOptions", "BRANCHING_RULES"]

#: How a node picks the item to branch on.
BRANCHING_RULES = ("largest_fractional", "most_fractional")


@dataclass(frozen=True)
class BnBOptions:
    """How the search runs (module docstring of :mod:`divopt_rag.solvers.bnb.tree` for the method).

    root_iterations, node_iterations : ADMM iterations of the DNN relaxation at the root and at
        every other node (each >= 1).
    chunk : ADMM iterations between two bound checks (>= 1).
    stall : a node's ADMM stops when a chunk improved its bound by less than this fraction of the
        remaining gap.
    screening, fixing, local_search, cuts : the root safe screening, reduced-cost fixing, the local
        search of rounded points, the McCormick/triangle cuts (switch off for measurements).
    node_sdp : False bounds nodes below the root with the inherited QCR function only (the
        classic QCR branch-and-bound: one SDP per instance).
    max_warm : children inherit the ADMM iterates only while fewer nodes are open (memory; 0:
        never).
    heuristic : a fast selector (``divopt_rag.solvers.METHODS``) whose set seeds the incumbent;
        None starts from the top-k by relevance (and the warm start).
    branching : :data:`BRANCHING_RULES`.
    """

    root_iterations: int = 400
    node_iterations: int = 200
    chunk: int = 50
    stall: float = 0.05
    screening: bool = True
    fixing: bool = True
    local_search: bool = True
    max_warm: int = 512
    heuristic: str | None = "fw_ms"
    cuts: bool = True
    node_sdp: bool = True
    branching: str = "largest_fractional"

    def __post_init__(self) -> None:
        for name in ("root_iterations", "node_iterations", "chunk"):
            object.__setattr__(self, name, int(check_scalar(getattr(self, name), name, int, min_val=1)))
        object.__setattr__(self, "max_warm", int(check_scalar(self.max_warm, "max_warm", int, min_val=0)))
        object.__setattr__(self, "stall", float(check_scalar(self.stall, "stall", (int, float), min_val=0)))
        if self.heuristic is not None:
            check_choice(self.heuristic, "heuristic", METHODS)
        check_choice(self.branching, "branching", BRANCHING_RULES)
