"""The checks every registered selector passes (issue 38, item 2): ``check_selector`` over the
registry, so a new method gets them with nothing to add (:mod:`divopt_rag.solvers.checks`)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from divopt_rag.models import Instance
from divopt_rag.models.parameters import Interval
from divopt_rag.solvers import METHODS, register
from divopt_rag.solvers.checks import CHECKS, check_selector, parametrize_with_checks
from divopt_rag.solvers.selection import METHOD_PARAMS, unregister


@parametrize_with_checks()
def test_every_registered_selector(name, check):
    check(name)


def _least_relevant(inst: Instance, *, count: int = 1):
    """A correct throwaway selector: the k least relevant rows, ties to the lower index."""
    c = inst.relevance.double().cpu().numpy()
    return torch.as_tensor(np.argsort(c, kind="stable")[: inst.k], device=inst.device), count, {}


def test_a_new_selector_gets_the_checks_for_free_and_unregister_removes_it():
    name = "_checked_throwaway"
    register(name, params={"count": Interval(int, 0, 5)})(_least_relevant)
    try:
        check_selector(name)  # every check, nothing written for it
    finally:
        fn = unregister(name)
    assert fn is _least_relevant and name not in METHODS and name not in METHOD_PARAMS
    with pytest.raises(KeyError, match="no selector '_checked_throwaway'"):
        unregister(name)
    with pytest.raises(ValueError, match="unknown method"):
        check_selector(name)


def _broken(kind: str):
    def selector(inst: Instance, *, count: int = 1):
        c = inst.relevance.double().cpu().numpy()
        order = np.argsort(-c, kind="stable")
        if kind == "random":  # not deterministic
            order = np.random.default_rng().permutation(inst.n)
        elif kind == "host":  # indices on the host whatever the input's device
            return torch.as_tensor(order[: inst.k]), 0, {}
        elif kind == "mutates":  # writes into the caller's rows
            inst.E.mul_(1.0 - 1e-3)
        elif kind == "duplicates":  # the same row twice
            order = np.repeat(order, 2)
        return order[: inst.k], 0, {}

    return selector


@pytest.mark.parametrize("kind,check,match", [
    ("random", "check_deterministic", "differ"),
    ("mutates", "check_storage_dtypes", "changed the instance's rows"),
    ("duplicates", "check_k_distinct_indices", "must be unique"),
])
def test_the_checks_catch_a_broken_selector(kind, check, match):
    name = f"_broken_{kind}"
    register(name, params={"count": Interval(int, 0, 5)})(_broken(kind))
    try:
        fn = next(c for c in CHECKS if c.__name__ == check)
        with pytest.raises((AssertionError, ValueError), match=match):
            for _ in range(3):  # a random order can repeat by chance once, not three times
                fn(name)
    finally:
        unregister(name)


def test_an_undeclared_range_is_caught():
    """A parameter declared as "any value" refuses nothing: the bad-input check says so."""
    from divopt_rag.models.parameters import AnyValue, Param

    name = "_broken_unchecked"
    register(name, params={"count": Param((AnyValue(),))})(_broken("plain"))
    try:
        with pytest.raises(AssertionError, match="refuses none of the probes"):
            next(c for c in CHECKS if c.__name__ == "check_bad_inputs_refused")(name)
    finally:
        unregister(name)
