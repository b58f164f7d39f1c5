"""Screening by the concave relaxation's linearization against enumeration of every k-set."""
from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from divopt_rag.models import Instance
from divopt_rag.solvers import select
from divopt_rag.solvers.relaxation_screening import item_upper_bounds, relaxation_screen


def _all_sets(inst):
    """{k-set: f} by enumeration, f straight from DESIGN.md."""
    E, c = inst.E.double().numpy(), inst.relevance.double().numpy()
    k, th = inst.k, inst.theta
    return {S: th * (k - 1) * c[list(S)].sum() + (1 - th) * (k - (E[list(S)].sum(0) ** 2).sum())
            for S in itertools.combinations(range(inst.n), k)}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), theta=st.sampled_from([0.0, 0.3, 0.7, 0.9, 1.0]), k=st.integers(2, 5))
def test_item_bounds_hold_at_any_point_and_screening_keeps_every_optimal_set(seed, theta, k):
    rng = np.random.default_rng(seed)
    inst = Instance(rng.normal(size=(11, 4)), rng.normal(size=4), k=k, theta=theta, normalize=True)
    vals = _all_sets(inst)
    U = item_upper_bounds(inst, rng.uniform(-0.5, 1.5, inst.n))  # any point, feasible or not
    for i in range(inst.n):
        assert U[i] >= max(v for S, v in vals.items() if i in S) - 1e-9
    opt = max(vals.values())
    lb = select(inst, "fw_ls").objective
    keep = set(relaxation_screen(inst, lb).survivors.tolist())
    for S, v in vals.items():
        if v >= opt - 1e-12:
            assert set(S) <= keep
