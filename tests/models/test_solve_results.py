"""Exact solves typed (issue 38, item 4): the status is an enum (as Pyomo's TerminationCondition) that
reads as the string the tables always stored, and a solve takes its options in one SolveConfig.

Truths: Pyomo's own enum (every termination condition has a status), pandas/pyarrow and json
round trips (the stored values are plain strings), and the same model solved the old way."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from pyomo.contrib.solver.common.results import TerminationCondition

from divopt_rag.models import runner
from divopt_rag.models.mip_knapsack import build_topk
from divopt_rag.models.runner import solve
from divopt_rag.models.solve_config import SolveConfig
from divopt_rag.models.solve_results import Result, SolveStatus
from divopt_rag.solvers import available_solvers

#: The statuses the tables held as free strings before the enum (issue 38).
STORED = {"optimal", "gap_limit", "time_limit", "node_limit", "iteration_limit", "objective_limit", "infeasible",
          "unbounded", "infeasible_or_unbounded", "interrupted", "empty_model", "error", "unknown"}


def test_every_pyomo_termination_condition_has_a_status():
    assert set(TerminationCondition) <= set(runner._STATUS)
    assert {s.value for s in SolveStatus} == STORED


def test_a_status_reads_as_its_stored_string(tmp_path):
    s = SolveStatus.TIME_LIMIT
    assert s == "time_limit" and str(s) == f"{s}" == "time_limit" and json.dumps({"s": s}) == '{"s": "time_limit"}'
    assert SolveStatus("time_limit") is s and {"time_limit": 1}[s] == 1
    rows = pd.DataFrame({"exact_status": [SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT, "optimal"]})
    rows.to_parquet(tmp_path / "t.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")["exact_status"]
    assert back.tolist() == ["optimal", "time_limit", "optimal"] and all(type(v) is str for v in back)
    assert rows["exact_status"].value_counts().to_dict() == {"optimal": 2, "time_limit": 1}
    with pytest.raises(ValueError, match=r"^status must be one of \['optimal', .*got 'optimum'$"):
        SolveStatus("optimum")


def test_a_result_parses_its_status():
    r = Result(indices=np.zeros(0, np.int64), objective=None, bound=None, gap=np.inf, status="time_limit",
               seconds=0.0, solver="highs")
    assert r.status is SolveStatus.TIME_LIMIT and not r.proven_optimal and r.status.limit_reached
    with pytest.raises(ValueError, match="status must be one of"):
        Result(indices=np.zeros(0, np.int64), objective=None, bound=None, gap=np.inf, status="done",
               seconds=0.0, solver="highs")


@pytest.mark.skipif("highs" not in available_solvers(), reason="needs HiGHS")
def test_one_options_object_and_the_old_keywords_refused():
    s = np.random.default_rng(0).uniform(0, 1, 12)
    new = solve(build_topk(s, 3), "highs", SolveConfig(time_limit=30, mip_gap=0.0))
    assert new.status is SolveStatus.OPTIMAL and new.status == "optimal"
    np.testing.assert_array_equal(new.indices, np.sort(np.argsort(-s)[:3]))
    with pytest.raises(TypeError, match="unexpected keyword argument 'time_limit'"):  # the options are one SolveConfig
        solve(build_topk(s, 3), "highs", time_limit=30, mip_gap=0.0)
    with pytest.raises(TypeError, match=r"^config must be a SolveConfig, got float 30.0"):
        solve(build_topk(s, 3), "highs", 30.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="unexpected keyword"):
            solve(build_topk(s, 3), "highs", time_limitt=30)
