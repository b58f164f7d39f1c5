"""Host-sync budget of Frank-Wolfe (issue 42, item 3): at most one host sync per iteration, on any
device. Counted on the CPU with ``sync_count.count_host_syncs`` (the same calls a CUDA run makes):
the runs are capped at 3 and at 13 iterations, so the difference is the cost of 10 iterations,
whatever the call costs once (setup, rounding the result, the selector's objective)."""
import numpy as np
import pytest
import torch

from helpers.pools import random_unit, unit_query
from divopt_rag.models import Instance
from divopt_rag.models.ccbqp import linear_term
from divopt_rag.solvers import select
from helpers.sync_count import count_host_syncs

K, THETA = 20, 0.3


def _inst():
    return Instance(random_unit(400, 8, 0), unit_query(8, 0), k=K, theta=THETA)


def _syncs(run):
    with count_host_syncs() as syncs:
        iterations = run()
    return syncs.total, iterations


@pytest.mark.parametrize("rows, record", [(1, False), (1, True), (4, False)])
def test_fw_rows_reads_the_host_once_per_iteration(rows, record):
    from divopt_rag.solvers.fw_kernel import fw_rows
    from divopt_rag.solvers.frank_wolfe import initial_point

    inst = _inst()
    X = initial_point(inst, "uniform")[None].repeat(rows, 1)
    L = linear_term(inst.relevance, THETA, K)[None].repeat(rows, 1)
    counts = {}
    for cap in (3, 13):
        counts[cap] = _syncs(lambda cap=cap: int(fw_rows(inst.E, X, L, THETA, K, max_iter=cap,
                                                          record=record).iterations.max()))
    assert counts[3][1] == 3 and counts[13][1] == 13  # both runs end at their cap
    assert counts[13][0] - counts[3][0] <= 10, counts
    assert counts[13][0] <= 13 + 6, counts  # and a few more per call, not per iteration


@pytest.mark.parametrize("method", ["fw", "fw_topk"])
def test_fw_selectors_read_the_host_once_per_iteration(method):
    inst = _inst()
    counts = {cap: _syncs(lambda cap=cap: select(inst, method, init="uniform", max_iter=cap).iterations)
              for cap in (3, 13)}
    assert counts[3][1] == 3 and counts[13][1] == 13
    assert counts[13][0] - counts[3][0] <= 10, counts


def test_batched_fw_reads_the_host_once_per_iteration():
    from divopt_rag.solvers.batched_fw import fw_batched

    inst = _inst()
    C = torch.as_tensor(np.stack([unit_query(8, s) for s in range(4)]), dtype=torch.float64) @ inst.E.T
    def run(cap):
        return int(fw_batched(inst, C, [THETA] * 4, init="uniform", max_iter=cap).iterations.max())

    counts = {cap: _syncs(lambda cap=cap: run(cap)) for cap in (3, 13)}
    assert counts[3][1] == 3 and counts[13][1] == 13
    assert counts[13][0] - counts[3][0] <= 10, counts


def test_the_counter_sees_every_kind_of_host_sync():
    """The helper against a hand-made list of syncs (one of each kind, and pairs that are one)."""
    x = torch.arange(6.0)
    with count_host_syncs() as syncs:
        float(x[0])                    # scalar
        bool(x[1] > 0)                 # scalar
        x[x > 2]                       # nonzero
        x.cpu().numpy()                # d2h, once
        x.tolist()                     # d2h
        np.asarray(x)                  # d2h
        torch.as_tensor(np.ones(3))    # h2d
        torch.as_tensor(x)             # a tensor already: nothing
        x.sum(dtype=torch.float64)     # nothing
    assert dict(syncs.by_kind) == {"scalar": 2, "nonzero": 1, "d2h": 3, "h2d": 1}
    assert syncs.total == 7
