"""divopt_rag.models.validation.check_scalar against scikit-learn's check_scalar (an independent
implementation of the same contract), plus the points where divopt is deliberately stricter:
a bool is not a count, NaN is not a number in range."""
import math
import numbers

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from divopt_rag.models.validation import ScalarTypeError, check_k, check_scalar

sk_validation = pytest.importorskip("sklearn.utils.validation")

bounds = st.one_of(st.none(), st.integers(-5, 5))
sides = st.sampled_from(["both", "left", "right", "neither"])


def _consistent(lo, hi, side):
    """Bounds scikit-learn accepts: lo <= hi, and a side named as included has its bound."""
    if lo is not None and hi is not None and lo > hi:
        return False
    return not ((side == "left" and lo is None) or (side == "right" and hi is None)
                or (side == "neither" and (lo is None or hi is None)))


def _outcome(fn):
    try:
        return "ok", fn()
    except TypeError:
        return "type", None
    except ValueError:
        return "value", None


@settings(max_examples=300, deadline=None)
@given(x=st.one_of(st.integers(-10, 10), st.floats(-10, 10, allow_nan=False), st.text(max_size=2)),
       lo=bounds, hi=bounds, side=sides)
def test_int_checks_agree_with_scikit_learn(x, lo, hi, side):
    assume(_consistent(lo, hi, side))  # scikit-learn refuses the others itself
    ours = _outcome(lambda: check_scalar(x, "x", int, min_val=lo, max_val=hi, include_boundaries=side))
    theirs = _outcome(lambda: sk_validation.check_scalar(x, "x", numbers.Integral, min_val=lo, max_val=hi,
                                                        include_boundaries=side))
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        assert ours[1] == x and type(ours[1]) is int


@settings(max_examples=300, deadline=None)
@given(x=st.one_of(st.integers(-10, 10), st.floats(-10, 10, allow_nan=False), st.text(max_size=2)),
       lo=bounds, hi=bounds, side=sides)
def test_float_checks_agree_with_scikit_learn(x, lo, hi, side):
    assume(_consistent(lo, hi, side))
    ours = _outcome(lambda: check_scalar(x, "x", float, min_val=lo, max_val=hi, include_boundaries=side))
    theirs = _outcome(lambda: sk_validation.check_scalar(x, "x", numbers.Real, min_val=lo, max_val=hi,
                                                        include_boundaries=side))
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        assert ours[1] == x and type(ours[1]) is float


def test_stricter_than_scikit_learn_and_messages():
    # a bool is an int to Python and to scikit-learn, never a count to divopt
    sk_validation.check_scalar(True, "k", numbers.Integral)
    with pytest.raises(ScalarTypeError, match=r"k must be an integer, got bool True"):
        check_scalar(True, "k", int)
    assert isinstance(ScalarTypeError("x"), TypeError) and isinstance(ScalarTypeError("x"), ValueError)
    with pytest.raises(ValueError, match="must be a number, got nan"):
        check_scalar(math.nan, "tol", float, min_val=0)
    with pytest.raises(ValueError, match=r"max_iter must be an integer >= 1, got 0"):
        check_scalar(0, "max_iter", int, min_val=1)
    with pytest.raises(ValueError, match=r"sigma must be a number > 0, got 0.0"):
        check_scalar(0.0, "sigma", float, min_val=0, include_boundaries="right")
    assert check_scalar(np.int64(3), "k", int) == 3 and check_scalar(np.float32(0.5), "t", float) == 0.5
    assert check_scalar(None, "top", int, allow_none=True) is None
    with pytest.raises(ScalarTypeError, match="top must be an integer or None, got str 'a'"):
        check_scalar("a", "top", int, allow_none=True)
    with pytest.raises(TypeError, match="k must be an integer"):
        check_k(2.0, 5)
