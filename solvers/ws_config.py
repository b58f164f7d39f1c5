"""The knobs of divopt's default method "fw_ws_ms", each with its value and why: :class:`WsMultistartConfig`.

The search that uses them is :mod:`divopt_rag.solvers.ws_multistart` (its module docstring numbers
the steps the knobs below refer to).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from divopt_rag.models.domains import ITERATIONS_MAX, ROWS_MAX
from divopt_rag.models.parameters import SEED, Declaration, Interval, declare_dataclass

__all__ = ["WsMultistartConfig", "config_with", "declaration"]


@dataclass(frozen=True)
class WsMultistartConfig:
    """The knobs of "fw_ws_ms", divopt's default method: each one's value and why, in one place.

    ``select(inst, "fw_ws_ms", **knobs)``, :func:`ws_multistart_batch` and
    :func:`ws_multistart_sweep` take any of them by name (the last two also a whole config).
    Knobs left at None follow k (:meth:`for_k`). "Tuned" values were chosen on the development
    pools (seeds 0-3, never on a pool that is reported); their tallies are in
    docs/howto/performance.md ("Why the default's knobs have their values"). The step numbers
    refer to the module docstring.

    Candidate pools (step 1)
    ------------------------
    pool_size : int or None, default=None
        Rows of the candidate pool P where relevance ranks the promising rows. None: max(300, 3k),
        "fw_ms"'s 300 rows, grown with k so that a pool holds at least three disjoint sets. A pool
        of n rows or more is the whole pool (searched whole, no certificate pass).
    guided_pool_size : int or None, default=None
        Rows of P where relevance misleads (``info["guided"]``). None: max(800, 3k) (tuned: the
        sets that beat 300-row pools held rows outside them), or ``pool_size`` when only that is
        given.
    guide_sample : int, default=4096
        Rows of the seeded sample on which "k times the mean row" (the v of the paper's start
        x0 = (k/n) 1) and the rank test below are estimated, so that choosing P needs no pass.
    guide_correlation : float, default=0.8
        Relevance guides when the rank correlation between c and the swap score b_j at the mean
        row is at least this on the sample; below it P interleaves the best rows by b_j (one pass).
    max_phases : int, default=3
        Searches on P and on pools rebuilt around the set, before the last phase extends the pool
        at each failed certificate.

    Starts (step 2)
    ---------------
    n_random : int, default=4
        Seeded random Frank-Wolfe starts, as "fw_ms".
    continuation_steps : int, default=4
        Steps of the theta path 1 -> theta (top-k is optimal at 1): FW from the top-k vertex at
        each theta strictly between (continuation_steps - 1 starts, run in lockstep with the
        other FW starts); 0 or 1 disables.
    relax_penalty : float, default=2.0
        lambda of the relaxation the FW starts climb: 2 is the smallest that is tight (DESIGN.md).
    max_iter : int, default=10
        FW iterations per start: a start only seeds the local search (tuned: after the local
        search, 5 and 400 iterations gave the same sets on the development pools).
    fw_gap : float, default=1e-6
        A FW start stops at this normalized gap, gap / (k (k-1)) (the default of every FW in divopt).

    Perturbation (step 2)
    ---------------------
    perturb_batch : int or None, default=None
        Perturbed sets per round. None: max(1, min(8, round(80 / k))), so that a round's local
        searches cost about the same at every k.
    perturb_strength : int, default=4
        Members swapped out by one perturbation, as "fw_ms".
    perturb_entrants : int or None, default=None
        A perturbation draws its entrants among this many best rows by b_j at the set. None:
        3k + 20, as "fw_ms".
    patience : int, default=10
        Rounds in a row without a gain that stop the perturbation.
    perturb_rounds : int, default=0
        Cap on perturbation rounds ("fw_ms" runs 100); 0 (the default) disables: the tabu walks
        below found better sets on more development pools in less time (tuned).

    2-swaps (step 2)
    ----------------
    two_swap : bool, default=True
        Best-improvement 2-swaps on the best set, as "fw_ms".
    two_swap_entrants : int, default=48
        Entrants paired, those of largest 1-swap gain, as "fw_ms".
    two_swap_out : int, default=16
        Members paired, those of cheapest removal, so that the 2-swap gain array stays
        (48, 48, 16, 16) at any k instead of growing like k^2.
    two_swap_moves : int, default=50
        Cap on improving 2-swaps, as "fw_ms".

    Tabu search (step 2)
    --------------------
    tabu_iters : int or None, default=None
        Steps of each 1-swap tabu walk, run where the starts ended in different local optima
        (where they agree, the walks found nothing: tuned); 0 disables. None: 1000 / k within
        [50, 100] (a step costs O(k p) per walk; tuned: at k = 10, 100 steps left the default
        below the old search on 6 of the 576 batched development problems, 50 steps on 11).
    tabu_walks : int or None, default=None
        Tabu walks per problem, in lockstep, from its best start optima (the best set first;
        tuned: 9 walks of 50 steps reached the best known set on 188 of 192 development pools,
        one walk of 100 steps with perturbation rounds on 177). None: 9.
    tabu_tenure_in : int, default=8
        Steps during which a row that left may not re-enter.
    tabu_tenure_out : int, default=4
        Steps during which a row that entered may not leave.

    Certificate (step 3)
    --------------------
    max_passes : int, default=50
        Cap on reads of the pool (each failed certificate strictly improves f, so it is not reached
        in practice); if hit, ``info["one_swap_optimal"]`` is False.
    near_rows : int, default=100
        Compared rows of highest exact gain that each certificate keeps, improving or not: they lead
        the pool rebuilt around a set and feed the polish (tuned).
    dense_sample : int, default=1024
        Rows of the sample on which a certificate estimates the share of rows its bound keeps
        (:func:`~divopt_rag.solvers.swap_certificate.go_dense`; about +-1.4 % at the threshold 1/4).
    certificate_entrants : int or None, default=None
        Improving entrants a failed certificate returns, best first; they join the next pool.
        None: max(16, k).
    extend_rows : int or None, default=None
        Rows of best b_j at the set that join the pool, beside the entrants, when a certificate of
        the last phase fails. None: max(32, k).

    Polish (step 4)
    ---------------
    polish : bool, default=True
        Run the float64 polish of step 4.
    polish_gap : float, default=1e-9
        Its tolerance as a normalized gain, gain / (k (k-1)): far below float32's 1e-6, within
        the float64 search's reach on float32-stored rows.

    seed : int, default=0
        Seeds the random starts, the perturbations and the row samples (the same seed, the same sets).

    Every knob's type and range is declared once, in ``_parameter_constraints`` (as scikit-learn's
    estimators): counts are >= 0 where 0 switches a stage off, >= 1 where it must do something,
    and bounded above: a row count by :data:`~divopt_rag.models.domains.ROWS_MAX` (each is clipped to the pool), a count
    that sizes work per round or per start (random starts, thetas, perturbed sets, tabu steps,
    rounds) by a cap far above any useful value, so that no value starts unbounded work.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "pool_size": [Interval(int, 1, ROWS_MAX), None],
        "guided_pool_size": [Interval(int, 1, ROWS_MAX), None],
        "guide_sample": Interval(int, 1, ROWS_MAX),
        "guide_correlation": Interval(float, -1.0, 1.0),
        "max_phases": Interval(int, 1, 1000),
        "n_random": Interval(int, 0, 1000),  # (n_random + 2) x pool floats per problem
        "continuation_steps": Interval(int, 0, 1000),
        "relax_penalty": Interval(float, 0.0, None),
        "max_iter": Interval(int, 1, ITERATIONS_MAX),
        "fw_gap": Interval(float, 0.0, None),
        "perturb_batch": [Interval(int, 0, 1000), None],  # (perturb_batch, k) sets, each searched per round
        "perturb_strength": Interval(int, 0, ROWS_MAX),
        "perturb_entrants": [Interval(int, 1, ROWS_MAX), None],
        "patience": Interval(int, 0, 10_000),
        "perturb_rounds": Interval(int, 0, 10_000),
        "two_swap": bool,
        "two_swap_entrants": Interval(int, 0, ROWS_MAX),
        "two_swap_out": Interval(int, 0, ROWS_MAX),
        "two_swap_moves": Interval(int, 0, ITERATIONS_MAX),
        "tabu_iters": [Interval(int, 0, 10_000), None],  # about 0.2 ms a step on a 500-row pool
        "tabu_walks": [Interval(int, 1, 1000), None],  # (tabu_walks, k) sets walked per problem
        "tabu_tenure_in": Interval(int, 0, ITERATIONS_MAX),
        "tabu_tenure_out": Interval(int, 0, ITERATIONS_MAX),
        "max_passes": Interval(int, 1, 10_000),
        "near_rows": Interval(int, 0, ROWS_MAX),
        "dense_sample": Interval(int, 1, ROWS_MAX),
        "certificate_entrants": [Interval(int, 1, ROWS_MAX), None],
        "extend_rows": [Interval(int, 1, ROWS_MAX), None],
        "polish": bool,
        "polish_gap": Interval(float, 0.0, None),
        "seed": SEED,
    }

    pool_size: int | None = None
    guided_pool_size: int | None = None
    guide_sample: int = 4096
    guide_correlation: float = 0.8
    max_phases: int = 3
    n_random: int = 4
    continuation_steps: int = 4
    relax_penalty: float = 2.0
    max_iter: int = 10
    fw_gap: float = 1e-6
    perturb_batch: int | None = None
    perturb_strength: int = 4
    perturb_entrants: int | None = None
    patience: int = 10
    perturb_rounds: int = 0
    two_swap: bool = True
    two_swap_entrants: int = 48
    two_swap_out: int = 16
    two_swap_moves: int = 50
    tabu_iters: int | None = None
    tabu_walks: int | None = None
    tabu_tenure_in: int = 8
    tabu_tenure_out: int = 4
    max_passes: int = 50
    near_rows: int = 100
    dense_sample: int = 1024
    certificate_entrants: int | None = None
    extend_rows: int | None = None
    polish: bool = True
    polish_gap: float = 1e-9
    seed: int = 0

    def __post_init__(self) -> None:
        # the one validator (divopt_rag.models.parameters): each knob as declared, converted
        for name, value in declaration().validate({f.name: getattr(self, f.name) for f in fields(self)}).items():
            object.__setattr__(self, name, value)

    def for_k(self, k: int) -> "WsMultistartConfig":
        """The knobs at selection size k: every None replaced by its rule, pool sizes checked."""
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
        return replace(
            self, pool_size=pool, guided_pool_size=guided,
            perturb_batch=max(1, min(8, round(80 / k))) if self.perturb_batch is None else self.perturb_batch,
            perturb_entrants=3 * k + 20 if self.perturb_entrants is None else self.perturb_entrants,
            certificate_entrants=max(16, k) if self.certificate_entrants is None else self.certificate_entrants,
            extend_rows=max(32, k) if self.extend_rows is None else self.extend_rows,
            tabu_walks=9 if self.tabu_walks is None else self.tabu_walks,
            tabu_iters=min(100, max(50, 1000 // k)) if self.tabu_iters is None else self.tabu_iters)


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
