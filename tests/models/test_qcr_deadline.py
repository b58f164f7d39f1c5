"""The QCR build holds its deadline (issue 39, item 5): every step of ``build_ccbqp_qcr`` checks
it, the SDP runs in chunks that end by its share of the time, and no step that cannot be
interrupted starts when its predicted time does not fit.

Every test runs the real SDP (cvxpy + SCS) and the real builder on a small instance, with an
injected clock (:class:`FakeClock`) whose time advances only where a test says a step costs
time: no wall-clock bound in a test (the under-load measurement is
``benchmarks/exact_limits.py``).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scs

from divopt_rag.models import Instance, ccbqp_objective, mip_qcr, qcr
from divopt_rag.models.mip_common import BuildClock, BuildTimeout
from divopt_rag.models.qcr import SCS_CHUNK, CardinalityQP, exact_qcr, qcr_sdp


class FakeClock:
    """A time source that moves only when told (``advance``)."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def _instance(n: int = 24, k: int = 4, seed: int = 0) -> Instance:
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, 8))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.standard_normal(8)
    return Instance(E, q / np.linalg.norm(q), k=k, theta=0.5)


@pytest.fixture
def slow_scs(monkeypatch):
    """SCS as it is, but its setup and each solve cost time on a FakeClock: (clock, costs, calls)."""
    clock = FakeClock()
    costs = {"setup": 0.1, "chunk": 0.4}
    calls = {"setup": 0, "chunk": 0}
    real = scs.SCS

    class SlowSCS(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            calls["setup"] += 1
            clock.advance(costs["setup"])

        def solve(self, *args, **kwargs):
            out = super().solve(*args, **kwargs)
            calls["chunk"] += 1
            clock.advance(costs["chunk"])
            return out

    monkeypatch.setattr(scs, "SCS", SlowSCS)
    return clock, costs, calls


def _exact_on_feasible_sets(inst: Instance, bound) -> None:
    """The reformulation equals f on every feasible binary (the QCR's exactness), whatever the
    dual: checked against the CCBQP objective by brute force."""
    const, lin, H = exact_qcr(CardinalityQP.from_instance(inst), bound)
    for S in itertools.islice(itertools.combinations(range(inst.n), inst.k), 0, None, 97):
        x = np.zeros(inst.n)
        x[list(S)] = 1.0
        assert const + lin @ x - x @ H @ x == pytest.approx(ccbqp_objective(inst, np.array(S)), abs=1e-7)


# ---- the clock -----------------------------------------------------------------------------
def test_the_build_clock_checks_predicts_and_measures_on_the_injected_time():
    fake = FakeClock()
    clock = BuildClock(fake.t + 2.0, now=fake)
    assert clock.left() == 2.0
    clock.expect(1.5, "a step")  # fits
    with pytest.raises(BuildTimeout, match="a long step would take about 2.5 s and 2 s of the time limit were left"):
        clock.expect(2.5, "a long step")
    with clock.timed("work"):
        fake.advance(0.75)
    assert clock.seconds == {"work": 0.75}
    share = clock.within(5.0)  # never later than its parent
    assert share.deadline == clock.deadline and share.now is fake
    assert clock.within(0.5).deadline == fake.t + 0.5
    clock.check("anything")
    fake.advance(1.5)
    with pytest.raises(BuildTimeout, match="passed its deadline .* before the next step"):
        clock.check("the next step")
    assert BuildClock(None, now=fake).left() == float("inf")


# ---- the SDP ends by its deadline ------------------------------------------------------------
def test_the_sdp_runs_in_chunks_that_end_by_its_deadline(slow_scs):
    fake, costs, calls = slow_scs
    inst = _instance()
    clock = BuildClock(fake.t + 1.0, now=fake)
    bound = qcr_sdp(inst, "shor", eps=1e-12, clock=clock)  # eps: it would not converge in time
    # setup at +0.1; the first chunk, predicted from the setup (0.25 s), ends at +0.5; the second
    # (predicted 0.4 s from the first) at +0.9; a third would end at +1.3, past the deadline
    assert calls == {"setup": 1, "chunk": 2}
    assert fake.t <= clock.deadline
    assert bound.info["stopped"] == "deadline" and bound.info["iterations"] == 2 * SCS_CHUNK
    assert bound.info["iteration_seconds"] == pytest.approx(costs["chunk"] / SCS_CHUNK)
    _exact_on_feasible_sets(inst, bound)  # a dual stopped early still gives an exact reformulation


def test_chunks_reach_the_same_sdp_value_as_one_solve(slow_scs):
    fake, costs, _ = slow_scs
    costs.update(setup=0.0, chunk=0.0)  # time does not pass: the chunks run until SCS converges
    inst = _instance(seed=1)
    chunked = qcr_sdp(inst, "shor", eps=1e-6, clock=BuildClock(fake.t + 1.0, now=fake))
    whole = qcr_sdp(inst, "shor", eps=1e-6)
    assert chunked.info["stopped"] == "converged"
    assert chunked.info["sdp_value"] == pytest.approx(whole.info["sdp_value"], rel=1e-4, abs=1e-4)


def test_the_first_iterations_are_refused_when_the_setup_says_they_cannot_fit(slow_scs):
    fake, costs, calls = slow_scs
    costs["setup"] = 0.5  # the first chunk is then predicted at 1.25 s; 0.5 s are left
    with pytest.raises(BuildTimeout, match="the SDP's first iterations would take about 1.25 s and 0.5 s"):
        qcr_sdp(_instance(), "shor", clock=BuildClock(fake.t + 1.0, now=fake))
    assert calls == {"setup": 1, "chunk": 0}


def test_a_compilation_predicted_too_long_does_not_start(slow_scs, monkeypatch):
    fake, _, calls = slow_scs
    monkeypatch.setattr(qcr, "pyomo_seconds_per_unit", lambda: 1.0)  # a very slow machine
    with pytest.raises(BuildTimeout, match="compiling the QCR's SDP would take about"):
        qcr_sdp(_instance(), "shor", clock=BuildClock(fake.t + 1.0, now=fake))
    assert calls == {"setup": 0, "chunk": 0}


# ---- the build: the SDP's share, then every step checked ----------------------------------------
def test_the_build_gives_the_sdp_its_share_and_builds_after_it(slow_scs, monkeypatch):
    fake, costs, calls = slow_scs
    costs["chunk"] = 1.0
    monkeypatch.setattr(mip_qcr, "_build_and_load_seconds", lambda inst, form: 2.0)
    inst = _instance()
    clock = BuildClock(fake.t + 6.0, now=fake)
    built = mip_qcr.build_ccbqp_qcr(inst, "factored", clock=clock, eps=1e-12)
    # the SDP's share: half of (6 - 2) = 2 s: setup 0.1, one chunk (predicted 0.25) to +1.1;
    # another (predicted 1 s) would end at +2.1, past +2.0
    assert calls == {"setup": 1, "chunk": 1}
    details = built.info.details
    assert details["qcr_stopped"] == "deadline" and details["qcr_iterations"] == SCS_CHUNK
    assert {"sdp_compile", "sdp_setup", "qcr_reformulation", "qcr_factor", "pyomo_build"} <= set(details["build_steps"])
    assert fake.t <= clock.deadline


def test_no_time_for_the_sdp_is_refused_before_any_of_it(slow_scs, monkeypatch):
    fake, _, calls = slow_scs
    monkeypatch.setattr(mip_qcr, "_build_and_load_seconds", lambda inst, form: 3.0)
    with pytest.raises(BuildTimeout, match="no time for the QCR's SDP: 2 s of the time limit were left and building "
                                           "and loading the model need about 3 s"):
        mip_qcr.build_ccbqp_qcr(_instance(), "gram", clock=BuildClock(fake.t + 2.0, now=fake))
    assert calls == {"setup": 0, "chunk": 0}


def test_a_deadline_passed_during_the_reformulation_stops_the_build_before_the_factor(slow_scs, monkeypatch):
    fake, _, _ = slow_scs
    monkeypatch.setattr(mip_qcr, "_build_and_load_seconds", lambda inst, form: 0.0)
    real_exact = qcr.exact_qcr

    def slow_exact(problem, bound):
        fake.advance(10.0)  # the machine stalls here
        return real_exact(problem, bound)

    factored = []
    monkeypatch.setattr(mip_qcr, "exact_qcr", slow_exact)
    monkeypatch.setattr(mip_qcr, "gram_factor", lambda H: factored.append(H))
    with pytest.raises(BuildTimeout, match="before factoring H"):
        mip_qcr.build_ccbqp_qcr(_instance(), "factored", clock=BuildClock(fake.t + 4.0, now=fake))
    assert factored == []


def test_eigendecompositions_predicted_too_long_do_not_start(slow_scs, monkeypatch):
    fake, costs, _ = slow_scs
    costs["chunk"] = 0.5  # 0.02 s per iteration: the reformulation is predicted at 0.2 s
    monkeypatch.setattr(mip_qcr, "_build_and_load_seconds", lambda inst, form: 0.0)
    started = []
    monkeypatch.setattr(mip_qcr, "exact_qcr", lambda problem, bound: started.append(1))
    inst = _instance()
    bound = qcr_sdp(inst, "shor", eps=1e-12, clock=BuildClock(fake.t + 0.9, now=fake))  # ends at about +0.6
    clock = BuildClock(fake.t + 0.1, now=fake)
    with pytest.raises(BuildTimeout, match="the QCR's eigendecompositions would take about 0.2 s"):
        mip_qcr.build_ccbqp_qcr(inst, "gram", bound, clock=clock)
    assert started == []
