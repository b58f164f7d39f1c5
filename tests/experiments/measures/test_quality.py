"""The gap and hit rule against brute-force optima and hand aggregates (divopt_rag.experiments.measures.quality)."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from divopt_rag.experiments.measures import quality
from divopt_rag.models import Instance, ccbqp_objective


def _instance(seed=0, n=9, d=5, k=3, theta=0.6):
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d))
    q = rng.standard_normal(d)
    return Instance(E, q, k=k, theta=theta, normalize=True)


def test_proven_gap_and_hit_against_brute_force():
    inst = _instance()
    values = sorted(ccbqp_objective(inst, list(s)) for s in itertools.combinations(range(inst.n), inst.k))
    opt, second = values[-1], values[-2]
    rec = quality.gap_record(second, optimum=opt, bound=opt, proven=True, k=3)
    assert rec["gap"] == pytest.approx((opt - second) / 6, abs=1e-15) and rec["gap_kind"] == "exact"
    assert rec["exact_hit"] is False and rec["bound_gap"] == pytest.approx(rec["gap"], abs=1e-15)
    top = quality.gap_record(opt, optimum=opt, bound=opt, proven=True, k=3)
    assert top["gap"] == 0.0 and top["exact_hit"] is True
    # within tol counts as a hit; the tolerance is on the normalized gap
    assert quality.gap_record(opt - 5e-8 * 6, optimum=opt, bound=opt, proven=True, k=3, tol=1e-7)["exact_hit"] is True


def test_a_method_beating_the_incumbent_becomes_the_reference():
    # a MIP "optimal" within its relative gap: the fast method's 10.001 is the best value known
    best = quality.best_known(10.0, [9.0, 10.001, None, float("nan")])
    assert best == 10.001
    exact_row = quality.gap_record(10.0, optimum=best, bound=10.002, proven=True, k=2)
    assert exact_row["gap"] == pytest.approx(0.001 / 2) and exact_row["exact_hit"] is False
    assert quality.gap_record(10.001, optimum=best, bound=10.002, proven=True, k=2)["gap"] == 0.0
    assert quality.best_known(None) == -np.inf


def test_unproven_gap_is_an_upper_bound_and_the_hit_unknown():
    rec = quality.gap_record(7.0, optimum=7.5, bound=8.2, proven=False, k=3)
    assert rec["gap_kind"] == "upper_bound" and rec["gap"] == pytest.approx(1.2 / 6)
    assert rec["gap"] == rec["bound_gap"] and rec["exact_hit"] is pd.NA
    meets = quality.gap_record(8.2, optimum=8.2, bound=8.2, proven=False, k=3)
    assert meets["exact_hit"] is True and meets["gap"] == 0.0
    assert quality.gap_record(8.2, optimum=8.2, bound=None, proven=False, k=3)["gap"] == np.inf
    failed = quality.gap_record(None, optimum=1.0, bound=1.0, proven=True, k=3)
    assert np.isnan(failed["gap"]) and failed["gap_kind"] == "" and failed["exact_hit"] is pd.NA


def test_quality_summary_matches_hand_aggregates():
    df = pd.DataFrame({
        "method": ["a", "a", "a", "b", "b"],
        "gap": [0.0, 0.2, 0.4, 0.1, 0.3],
        "exact_hit": pd.array([True, pd.NA, False, pd.NA, pd.NA], dtype="boolean"),
        "gap_kind": ["exact", "upper_bound", "exact", "upper_bound", "upper_bound"],
        "seconds": [1.0, 2.0, 6.0, 1.0, 1.0],
    })
    s = quality.quality_summary(df).set_index("method")
    assert s.loc["a", "hit_rate"] == 0.5  # over the rows whose hit is known
    assert np.isnan(s.loc["b", "hit_rate"])
    assert s.loc["a", "mean_gap"] == pytest.approx(0.2) and s.loc["a", "max_gap"] == pytest.approx(0.4)
    assert s.loc["a", "p95_gap"] == pytest.approx(0.2 + 0.9 * 0.2)  # linear: position 0.95 * (3 - 1) = 1.9
    assert s.loc["a", "median_seconds"] == 2.0 and s.loc["a", "mean_seconds"] == 3.0
    assert s.loc["a", "rows"] == 3 and s.loc["a", "unproven"] == 1 and s.loc["b", "unproven"] == 2
    assert "seconds" not in quality.quality_summary(df.drop(columns="seconds")).columns.str.cat()
