"""The knobs of divopt's default method "fw_ws_ms" (:class:`WsMultistartConfig`) and every value derived from them.

The search that uses them is :mod:`divopt_rag.solvers.ws_multistart` (its module docstring numbers
the steps referred to below) and, on a CPU, :mod:`divopt_rag.solvers.pool_search`. A researcher
turns the twelve knobs of :class:`WsMultistartConfig`; every other value the search reads is
either a rule in k (and the knobs) or a module constant below, each stated with its reason in
:class:`WsSettings`. :meth:`WsMultistartConfig.for_k` resolves the knobs at one k into a
:class:`WsSettings`, the one object the search reads. Values marked "tuned" were chosen on the
development pools only; the measurements behind them are in docs/howto/performance.md ("Why
the default's knobs have their values").
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from divopt_rag.models.domains import ITERATIONS_MAX, ROWS_MAX
from divopt_rag.models.parameters import SEED, Declaration, Interval, declare_dataclass

__all__ = ["WsMultistartConfig", "WsSettings", "config_with", "declaration", "HOST_RANDOM_STARTS", "HOST_RANDOM_MAX_K",
           "GUIDE_SAMPLE", "GUIDE_CORRELATION", "CONTINUATION_STEPS", "FW_GAP", "PERTURB_STRENGTH", "PATIENCE", "TWO_SWAP_ENTRANTS", "TWO_SWAP_OUT",
           "TWO_SWAP_MOVES", "TABU_TENURE_IN", "TABU_TENURE_OUT", "MAX_PASSES", "NEAR_ROWS", "DENSE_SAMPLE",
           "POLISH_GAP"]

# The constants of the search (each one's reason: WsSettings' docstring).
GUIDE_SAMPLE = 4096
HOST_RANDOM_STARTS = 8  # n_random's rule on the host at k <= HOST_RANDOM_MAX_K (WsMultistartConfig)
HOST_RANDOM_MAX_K = 50
GUIDE_CORRELATION = 0.8
CONTINUATION_STEPS = 4
FW_GAP = 1e-6
PERTURB_STRENGTH = 4
PATIENCE = 10
TWO_SWAP_ENTRANTS = 48
TWO_SWAP_OUT = 16
TWO_SWAP_MOVES = 50
TABU_TENURE_IN = 8
TABU_TENURE_OUT = 4
MAX_PASSES = 50
NEAR_ROWS = 100
DENSE_SAMPLE = 1024
POLISH_GAP = 1e-9

#: The knobs that were public before issue 46 (item 3), each with what it became: an error that
#: names one of them says so.
_RETIRED = {
    "guide_sample": f"a constant: GUIDE_SAMPLE = {GUIDE_SAMPLE}",
    "guide_correlation": f"a constant: GUIDE_CORRELATION = {GUIDE_CORRELATION}",
    "continuation_steps": f"a constant: CONTINUATION_STEPS = {CONTINUATION_STEPS}",
    "fw_gap": f"a constant: FW_GAP = {FW_GAP}",
    "perturb_batch": "derived: max(1, min(8, round(80 / k)))",
    "perturb_strength": f"a constant: PERTURB_STRENGTH = {PERTURB_STRENGTH}",
    "perturb_entrants": "derived: 3k + 20",
    "patience": f"a constant: PATIENCE = {PATIENCE}",
    "two_swap_entrants": f"a constant: TWO_SWAP_ENTRANTS = {TWO_SWAP_ENTRANTS}",
    "two_swap_out": f"a constant: TWO_SWAP_OUT = {TWO_SWAP_OUT}",
    "two_swap_moves": f"a constant: TWO_SWAP_MOVES = {TWO_SWAP_MOVES}",
    "tabu_tenure_in": f"a constant: TABU_TENURE_IN = {TABU_TENURE_IN}",
    "tabu_tenure_out": f"a constant: TABU_TENURE_OUT = {TABU_TENURE_OUT}",
    "max_passes": f"a constant: MAX_PASSES = {MAX_PASSES}",
    "near_rows": f"a constant: NEAR_ROWS = {NEAR_ROWS}",
    "dense_sample": f"a constant: DENSE_SAMPLE = {DENSE_SAMPLE}",
    "certificate_entrants": "derived: max(16, k)",
    "extend_rows": "derived: max(32, k)",
    "polish_gap": f"a constant: POLISH_GAP = {POLISH_GAP}",
}


@dataclass(frozen=True)
class WsMultistartConfig:
    """The twelve knobs of "fw_ws_ms", divopt's default method: the ones a researcher turns.

    ``select(inst, "fw_ws_ms", **knobs)``, :func:`ws_multistart_batch` and
    :func:`ws_multistart_sweep` take any of them by name (the last two also a whole config);
    any other name is an error of one line that names the knobs (and, for a value that was a
    knob once, what it became). Knobs left at None follow k (:meth:`for_k`). The step numbers
    refer to the module docstring of :mod:`divopt_rag.solvers.ws_multistart`.

    Why these twelve: they size the work (the pools, the starts, the FW steps, the tabu walks,
    the phases), switch a stage on or off (2-swaps, perturbation rounds, polish), set the
    relaxation the FW starts climb (as "fw" and "fw_ms" take it), or seed the run. Everything
    else is a cap that is not reached in practice, a tolerance tied to the precision, a
    sample size set by its statistical error, or a count that was tuned once and measured flat
    around its value (:class:`WsSettings` gives each its rule).

    Candidate pools (step 1)
    ------------------------
    pool_size : int or None, default=None
        Rows of the candidate pool P where relevance ranks the promising rows. None: max(300, 3k),
        "fw_ms"'s 300 rows, grown with k so that a pool holds at least three disjoint sets. A pool
        of n rows or more is the whole pool (searched whole, no certificate pass).
    guided_pool_size : int or None, default=None
        Rows of P where relevance misleads (``info["guided"]``). None: max(800, 3k) (tuned: the
        sets that beat smaller pools held rows outside them), or ``pool_size`` when only that is
        given.
    max_phases : int, default=3
        Searches on P and on pools rebuilt around the set, before the last phase extends the pool
        at each failed certificate (fewer: faster, lower f on some problems; tuned).

    Starts (step 2)
    ---------------
    n_random : int or None, default=None
        Seeded random starts (Frank-Wolfe from random points in the lockstep search, random sets
        on the host). None: 4, as "fw_ms", in the lockstep search and on the host above k = 50;
        8 on the host at k <= 50 (tuned: on the 512 development calls, k 5-50, 4 random sets left
        8 calls below d1cdffb's default, 6 left 3, 8 left 2; more starts end in more distinct
        optima, so more of the ``tabu_walks`` run).
    max_iter : int, default=10
        FW iterations per start (lockstep search): a start only seeds the local search (tuned:
        more iterations gave the same sets after it).
    relax_penalty : float, default=2.0
        lambda of the relaxation the FW starts climb (lockstep search): 2 is the smallest that is
        tight (DESIGN.md).

    Moves (step 2)
    --------------
    tabu_iters : int or None, default=None
        Steps of each 1-swap tabu walk, run where the starts ended in different local optima
        (where they agree, the walks found nothing: tuned); 0 disables. None: 1000 / k within
        [50, 100] in the lockstep search, 3000 / k within [100, 300] on the host kernels (a walk
        step costs less there; tuned on the development RAG calls), a step costing O(k p).
    tabu_walks : int, default=9
        Tabu walks per problem, from its best start optima (the best set first; tuned). On the
        host, the first search of a guided pool runs one (pool_search.GUIDED_FIRST_WALKS).
    two_swap : bool, default=True
        Best-improvement 2-swaps on the best set, as "fw_ms".
    perturb_rounds : int, default=0
        Cap on perturbation rounds ("fw_ms" runs 100); 0 (the default) disables: the tabu walks
        found better sets on more development pools in less time (tuned).

    Certificate and polish (steps 3, 4)
    -----------------------------------
    polish : bool, default=True
        Run the float64 polish of step 4.

    seed : int, default=0
        Seeds the random starts, the perturbations and the row samples (the same seed, the same sets).

    Every knob's type and range is declared once, in ``_parameter_constraints`` (as scikit-learn's
    estimators): counts are >= 0 where 0 switches a stage off, >= 1 where it must do something,
    and bounded above: a row count by :data:`~divopt_rag.models.domains.ROWS_MAX` (clipped to the
    pool), a count that sizes work per start or per round by a cap far above any useful value,
    so that no value starts unbounded work.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "pool_size": [Interval(int, 1, ROWS_MAX), None],
        "guided_pool_size": [Interval(int, 1, ROWS_MAX), None],
        "max_phases": Interval(int, 1, 1000),
        "n_random": [Interval(int, 0, 1000), None],  # (n_random + 2) x pool floats per problem
        "max_iter": Interval(int, 1, ITERATIONS_MAX),
        "relax_penalty": Interval(float, 0.0, None),
        "tabu_iters": [Interval(int, 0, 10_000), None],  # about 0.2 ms a step on a 500-row pool
        "tabu_walks": Interval(int, 1, 1000),  # (tabu_walks, k) sets walked per problem
        "two_swap": bool,
        "perturb_rounds": Interval(int, 0, 10_000),
        "polish": bool,
        "seed": SEED,
    }
    #: Former knobs -> what they became (named by the error a caller who passes one gets).
    _retired_knobs: ClassVar[dict[str, str]] = _RETIRED

    pool_size: int | None = None
    guided_pool_size: int | None = None
    max_phases: int = 3
    n_random: int | None = None
    max_iter: int = 10
    relax_penalty: float = 2.0
    tabu_iters: int | None = None
    tabu_walks: int = 9
    two_swap: bool = True
    perturb_rounds: int = 0
    polish: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        # the one validator (divopt_rag.models.parameters): each knob as declared, converted
        for name, value in declaration().validate({f.name: getattr(self, f.name) for f in fields(self)}).items():
            object.__setattr__(self, name, value)

    def for_k(self, k: int, *, host: bool = False) -> "WsSettings":
        """Every value the search reads at selection size k (:class:`WsSettings`): the knobs with
        each None replaced by its rule, the derived values and the constants; pool sizes
        checked. ``host``: the search runs on the host kernels (its tabu rule)."""
        k = int(k)
        pool = max(300, 3 * k) if self.pool_size is None else self.pool_size
        if self.guided_pool_size is not None:
            guided = self.guided_pool_size
        else:
            guided = max(800, 3 * k) if self.pool_size is None else pool
        for name, value, given in (("pool_size", pool, self.pool_size), ("guided_pool_size", guided,
                                                                          self.guided_pool_size)):
            if value < k:
                raise ValueError(f"{name} must be an int >= k = {k}, got {given!r}")
        if self.n_random is not None:
            n_random = self.n_random
        else:
            n_random = HOST_RANDOM_STARTS if host and k <= HOST_RANDOM_MAX_K else 4
        if self.tabu_iters is not None:
            tabu_iters = self.tabu_iters
        else:
            tabu_iters = min(300, max(100, 3000 // k)) if host else min(100, max(50, 1000 // k))
        return WsSettings(
            pool_size=pool, guided_pool_size=guided, max_phases=self.max_phases, n_random=n_random,
            max_iter=self.max_iter, relax_penalty=self.relax_penalty, tabu_iters=tabu_iters,
            tabu_walks=self.tabu_walks, two_swap=self.two_swap, perturb_rounds=self.perturb_rounds,
            polish=self.polish, seed=self.seed,
            perturb_batch=max(1, min(8, round(80 / k))), perturb_entrants=3 * k + 20,
            certificate_entrants=max(16, k), extend_rows=max(32, k))


@dataclass(frozen=True)
class WsSettings:
    """Every value "fw_ws_ms"'s search reads at one k: :meth:`WsMultistartConfig.for_k` makes it.

    The twelve knobs, resolved (:class:`WsMultistartConfig`), then the values derived from k
    and the module constants, each with its rule and reason. They are not knobs: passing one by
    name is an error. To study one, build a ``WsSettings`` with ``dataclasses.replace`` and call
    the stages of :mod:`divopt_rag.solvers.pool_search` with it.

    Derived from k
    --------------
    perturb_batch : max(1, min(8, round(80 / k)))
        Perturbed sets per round (with ``perturb_rounds`` > 0), so that a round's local searches
        cost about the same at every k (tuned).
    perturb_entrants : 3k + 20
        A perturbation draws its entrants among this many best rows by b_j at the set, as "fw_ms".
    certificate_entrants : max(16, k)
        Improving entrants a failed certificate returns, best first; they join the next pool:
        enough to replace every member.
    extend_rows : max(32, k)
        Rows of best b_j at the set that join the pool, beside the entrants, when a certificate of
        the last phase fails.

    Constants
    ---------
    guide_sample : GUIDE_SAMPLE = 4096
        Rows of the seeded sample on which "k times the mean row" (the v of the paper's start
        x0 = (k/n) 1) and the rank test below are estimated, so that choosing P needs no pass.
    guide_correlation : GUIDE_CORRELATION = 0.8
        Relevance guides when the rank correlation between c and the swap score b_j at the mean
        row is at least this on the sample; below it P interleaves the best rows by b_j (one pass).
    continuation_steps : CONTINUATION_STEPS = 4
        Steps of the theta path 1 -> theta of the lockstep search (top-k is optimal at 1): FW from
        the top-k vertex at each of the 3 thetas strictly between, in the one lockstep FW call.
    fw_gap : FW_GAP = 1e-6
        A FW start stops at this normalized gap, gap / (k (k-1)) (the default of every FW in divopt).
    perturb_strength : PERTURB_STRENGTH = 4
        Members swapped out by one perturbation, as "fw_ms".
    patience : PATIENCE = 10
        Perturbation rounds in a row without a gain that stop them (tuned).
    two_swap_entrants : TWO_SWAP_ENTRANTS = 48
        Entrants a 2-swap pairs, those of largest 1-swap gain, as "fw_ms".
    two_swap_out : TWO_SWAP_OUT = 16
        Members a 2-swap pairs, those of cheapest removal, so that the 2-swap gain array stays
        (48, 48, 16, 16) at any k instead of growing like k^2 (tuned).
    two_swap_moves : TWO_SWAP_MOVES = 50
        Cap on improving 2-swaps, as "fw_ms".
    tabu_tenure_in, tabu_tenure_out : TABU_TENURE_IN = 8, TABU_TENURE_OUT = 4
        Steps during which a row that left may not re-enter / a row that entered may not leave.
    max_passes : MAX_PASSES = 50
        Cap on reads of the pool: each failed certificate strictly improves f, so it is not
        reached in practice; if hit, ``info["one_swap_optimal"]`` is False.
    near_rows : NEAR_ROWS = 100
        Compared rows of highest exact gain that each certificate keeps, improving or not: they
        lead the pool rebuilt around a set and feed the polish (tuned).
    dense_sample : DENSE_SAMPLE = 1024
        Rows of the sample on which a certificate estimates the share of rows its bound keeps
        (:func:`~divopt_rag.solvers.swap_certificate.go_dense`): within about +-1.4 % at the
        threshold 1/4 (binomial spread).
    polish_gap : POLISH_GAP = 1e-9
        The polish's tolerance as a normalized gain, gain / (k (k-1)): far below float32's 1e-6,
        within the float64 search's reach on float32-stored rows.
    """

    pool_size: int
    guided_pool_size: int
    max_phases: int
    n_random: int
    max_iter: int
    relax_penalty: float
    tabu_iters: int
    tabu_walks: int
    two_swap: bool
    perturb_rounds: int
    polish: bool
    seed: int
    perturb_batch: int
    perturb_entrants: int
    certificate_entrants: int
    extend_rows: int
    guide_sample: int = GUIDE_SAMPLE
    guide_correlation: float = GUIDE_CORRELATION
    continuation_steps: int = CONTINUATION_STEPS
    fw_gap: float = FW_GAP
    perturb_strength: int = PERTURB_STRENGTH
    patience: int = PATIENCE
    two_swap_entrants: int = TWO_SWAP_ENTRANTS
    two_swap_out: int = TWO_SWAP_OUT
    two_swap_moves: int = TWO_SWAP_MOVES
    tabu_tenure_in: int = TABU_TENURE_IN
    tabu_tenure_out: int = TABU_TENURE_OUT
    max_passes: int = MAX_PASSES
    near_rows: int = NEAR_ROWS
    dense_sample: int = DENSE_SAMPLE
    polish_gap: float = POLISH_GAP


_DECLARATION = declare_dataclass("fw_ws_ms", WsMultistartConfig)


def declaration() -> Declaration:
    """The declaration of "fw_ws_ms"'s parameters: the knobs of :class:`WsMultistartConfig`."""
    return _DECLARATION


def config_with(config: "WsMultistartConfig | None", params: dict) -> WsMultistartConfig:
    """``config`` (default: the defaults) with the knobs in ``params`` replaced (what every entry point of "fw_ws_ms" calls)."""
    base = WsMultistartConfig() if config is None else config
    if not isinstance(base, WsMultistartConfig):
        raise TypeError(f"config must be a WsMultistartConfig, got {type(base).__name__}")
    params = declaration().validate(params)  # an unknown knob is named here, with the valid ones
    return replace(base, **params) if params else base
