"""Which solver may take which model: the installed solvers, the size-limited Gurobi licence, and
the refusals (:class:`SolverRefused`, :class:`ModelTooLarge`) that name the limit and the way out.

The size-limited Gurobi license shipped with gurobipy refuses models with more than 2000
variables or 2000 linear constraints, or more than 200 variables when the model is quadratic
("Model too large for size-limited license", error 10010). The runner measures every model
before solving it (:func:`model_size`): ``solver="auto"`` skips Gurobi with a warning when the
model exceeds the limits (and catches the error as a second line of defence), an explicit
``solver="gurobi"`` raises :class:`SolverRefused` naming the limit and the alternatives; HiGHS is
refused for quadratic models the same way.

What is installed and what the licence allows are facts of the machine, probed once per process
(``functools.lru_cache``): they decide which solver runs, never what a solver returns.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from typing import Any, Iterator, NamedTuple

import pyomo.environ as pe
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.core.base.constraint import Constraint
from pyomo.core.base.var import Var
from pyomo.core.expr.visitor import polynomial_degree

from .domains import SOLVERS

__all__ = ["PYOMO_NAME", "SolverRefused", "ModelTooLarge", "ModelSize", "available_solvers",
           "gurobi_size_limits", "model_size", "solver_refusal", "model_objective", "PYOMO_LOCK", "process_streams_kept"]

#: Pyomo's name of each solver's interface (``pyomo.contrib.solver``).
PYOMO_NAME = {"gurobi": "gurobi_persistent", "scip": "scip_direct", "highs": "highs"}


class SolverRefused(ValueError):
    """The named solver cannot take this model (size-limited Gurobi license, or a quadratic
    model for HiGHS); the message names the limit and the alternatives, ``reason`` the limit."""

    def __init__(self, solver: str, reason: str, hint: str) -> None:
        super().__init__(f"solver {solver!r} cannot take this model: {reason}; {hint}")
        self.solver, self.reason = solver, reason


class ModelTooLarge(SolverRefused, MemoryError):
    """The request cannot fit in the memory this process may use, judged before anything is
    built (:mod:`divopt_rag.models.mip_sizing`): one line with the estimate, the memory free and
    what to do instead. A :class:`SolverRefused` (a ValueError) and a MemoryError."""


#: One Pyomo solver call at a time in this process. Pyomo's interfaces capture the solvers' output
#: process-wide: they swap ``sys.stdout`` / ``sys.stderr`` and (HiGHS) the file descriptors 1 and
#: 2, and check on exit that nobody else swapped them, so two threads solving at once raised
#: "Captured output ... does not match sys.stdout" (Gurobi) or hung in "Deadlock closing
#: capture_output" (HiGHS) and left the process's output on pipes (issue 48, item 3). Every solve
#: of the runner, and every probe of a solver, holds this lock: concurrent threads queue (the
#: wait counts against each call's wall-clock ``time_limit``) and get the answers they would get
#: one after another. Reentrant, so a probe inside a solve does not deadlock.
PYOMO_LOCK = threading.RLock()


@contextlib.contextmanager
def process_streams_kept() -> Iterator[None]:
    """Hold :data:`PYOMO_LOCK`; on the way out, ``sys.stdout`` / ``sys.stderr`` and the file
    descriptors 1 and 2 are what they were on entry, whatever the block did or raised (a solver
    interface that fails inside its output capture can leave them redirected)."""
    with PYOMO_LOCK:
        streams = sys.stdout, sys.stderr
        saved: dict[int, tuple[int, tuple[int, int]]] = {}
        for fd in (1, 2):
            try:
                st = os.fstat(fd)
                saved[fd] = (os.dup(fd), (st.st_dev, st.st_ino))
            except OSError:  # closed on entry: nothing to restore
                pass
        try:
            yield
        finally:
            for fd, (copy, ident) in saved.items():
                try:
                    try:
                        st = os.fstat(fd)
                        same = (st.st_dev, st.st_ino) == ident
                    except OSError:
                        same = False
                    if not same:
                        os.dup2(copy, fd)
                finally:
                    os.close(copy)
            if (sys.stdout, sys.stderr) != streams:
                sys.stdout, sys.stderr = streams


# Pyomo's Gurobi interfaces share one gurobipy Env with a client count that can go negative
# (and log a warning, then reopen the Env) when short-lived solver objects are collected; one
# long-lived client keeps the Env open for the whole process.
_KEEPALIVE: dict[str, Any] = {}


@functools.lru_cache(maxsize=None)
def _is_available(name: str) -> bool:
    with process_streams_kept():
        return _probe(name)


def _probe(name: str) -> bool:
    try:
        opt = SolverFactory(PYOMO_NAME[name])
        if name == "gurobi":
            _KEEPALIVE[name] = opt
        if not bool(opt.available()):
            return False
    except Exception:  # noqa: BLE001  (a broken install counts as not available)
        return False
    return True


def available_solvers() -> list[str]:
    """The installed and working solvers among ("gurobi", "scip", "highs"), in "auto" order."""
    return [s for s in SOLVERS if _is_available(s)]


@functools.lru_cache(maxsize=None)
def gurobi_size_limits() -> dict | None:
    """Limits of the active Gurobi license, or None when it is unrestricted (or absent).

    Probed once by optimizing an empty 2001-variable model: the size-limited license refuses
    it with error 10010. The returned limits are those of the pip license:
    ``{"max_vars": 2000, "max_constraints": 2000, "max_quadratic_vars": 200}``.
    """
    try:
        import gurobipy as gp
    except ImportError:
        return None
    try:
        with gp.Env(empty=True) as env:
            env.setParam("OutputFlag", 0)
            env.start()
            with gp.Model(env=env) as m:
                m.addVars(2001)
                m.optimize()
    except gp.GurobiError as exc:
        if exc.errno == 10010 or "size-limited" in str(exc):
            return {"max_vars": 2000, "max_constraints": 2000, "max_quadratic_vars": 200}
        return None
    return None


class ModelSize(NamedTuple):
    """Counts of a built model's active components (what solver licenses and HiGHS care about)."""

    n_vars: int
    n_integer: int
    n_constraints: int
    quadratic: bool
    quadratic_objective: bool


def model_objective(model: Any):
    """The model's objective: ``model.obj``, else its first active Objective (None if none)."""
    obj = getattr(model, "obj", None)
    if obj is not None:
        return obj
    objs = list(model.component_data_objects(pe.Objective, active=True))
    return objs[0] if objs else None


def model_size(model: Any) -> ModelSize:
    """Measure a built model: variables, binaries/integers, active constraints, quadratic terms."""
    n_vars = n_int = 0
    for v in model.component_data_objects(Var, descend_into=True):
        n_vars += 1
        if v.is_integer() or v.is_binary():
            n_int += 1
    n_cons = 0
    quadratic = False
    for c in model.component_data_objects(Constraint, active=True, descend_into=True):
        n_cons += 1
        if not quadratic:
            deg = polynomial_degree(c.body)
            quadratic = deg is None or deg > 1
    obj = model_objective(model)
    deg = polynomial_degree(obj.expr) if obj is not None else 1
    obj_quadratic = deg is None or deg > 1
    return ModelSize(n_vars, n_int, n_cons, bool(quadratic or obj_quadratic), bool(obj_quadratic))


def solver_refusal(solver: str, size: ModelSize) -> str | None:
    """Why ``solver`` cannot take a model of this :func:`model_size` (None when it can).

    HiGHS solves MILPs only; the size-limited Gurobi license (:func:`gurobi_size_limits`)
    refuses more than 2000 variables or constraints, or 200 variables in a quadratic model.
    """
    if solver == "highs" and size.quadratic:
        return "HiGHS has no MIQP (it solves MILPs only) and the model is quadratic"
    if solver != "gurobi":
        return None
    lim = gurobi_size_limits()
    if lim is None:
        return None
    if size.n_vars > lim["max_vars"]:
        why = f"{size.n_vars} variables > {lim['max_vars']}"
    elif size.n_constraints > lim["max_constraints"]:
        why = f"{size.n_constraints} constraints > {lim['max_constraints']}"
    elif size.quadratic and size.n_vars > lim["max_quadratic_vars"]:
        why = f"{size.n_vars} variables > {lim['max_quadratic_vars']} in a quadratic model"
    else:
        return None
    return (f"model too large for the size-limited Gurobi license ({why}; the limit is 2000 variables "
            f"and 2000 constraints, 200 variables for quadratic models)")
