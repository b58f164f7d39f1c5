"""Which MIP solvers this machine has, found without divopt (issue 48, item 10): a test's skip
condition must not be computed by the code it tests, or a broken detection skips the tests
that would catch it. ``tests/models/test_exact_license.py`` checks that divopt's own detection
(``available_solvers``, ``gurobi_size_limits``) agrees with these."""
from __future__ import annotations

import functools
import importlib.util

#: The Python package each MIP solver comes with (the interfaces Pyomo drives).
PACKAGES = {"gurobi": "gurobipy", "scip": "pyscipopt", "highs": "highspy"}


@functools.lru_cache(maxsize=None)
def installed_solvers() -> tuple[str, ...]:
    """The solvers whose package is installed, in divopt's "auto" order (gurobi, scip, highs)."""
    return tuple(s for s, pkg in PACKAGES.items() if importlib.util.find_spec(pkg) is not None)


@functools.lru_cache(maxsize=None)
def gurobi_is_size_limited() -> bool:
    """Whether gurobipy is installed with the size-limited licence: it refuses to optimize an
    empty model of 2001 variables with error 10010 (the pip licence's limit is 2000)."""
    if "gurobi" not in installed_solvers():
        return False
    import gurobipy as gp

    try:
        with gp.Env(empty=True) as env:
            env.setParam("OutputFlag", 0)
            env.start()
            with gp.Model(env=env) as m:
                m.addVars(2001)
                m.optimize()
    except gp.GurobiError as exc:
        return exc.errno == 10010
    return False
