"""Cross-module contracts found while integrating the issues."""

import numpy as np

from divopt_rag.experiments.measures.metrics import selection_metrics
from divopt_rag.models import Instance
from divopt_rag.solvers import METHODS


def test_empty_selection_has_defined_metrics():
    """The sparsity model may select nothing; metrics must describe that, not raise."""
    E = np.eye(4)
    inst = Instance(E, np.array([1.0, 0, 0, 0]), k=2, theta=0.5)
    m = selection_metrics(inst, np.array([], dtype=np.int64), qrels={0: 1}, subtopics={0: "a"})
    assert m["objective"] == 0.0 and m["recall"] == 0.0 and m["s_recall"] == 0.0
    assert np.isnan(m["ilad"])
    m2 = selection_metrics(inst, np.array([], dtype=np.int64), qrels={0: 0})
    assert np.isnan(m2["recall"])  # no relevant passage: recall undefined, as for non-empty runs


def test_selectors_do_not_claim_to_accept_arbitrary_parameters():
    """Grid projection reads the declarations: no registered selector may take any name (a
    plugin's undeclared **kwargs); those with **params forward declared names only."""
    from divopt_rag.solvers.selection import METHOD_PARAMS

    for name in METHODS:
        assert not METHOD_PARAMS[name].open, name
    assert "max_iter" in METHOD_PARAMS["fw_ls"].params and "no_such" not in METHOD_PARAMS["fw_ws_ms"].params


def test_default_method_is_registered_and_used():
    from divopt_rag.solvers import DEFAULT_METHOD, select

    from helpers.pools import random_unit, unit_query

    assert DEFAULT_METHOD in METHODS
    inst = Instance(random_unit(40, 6, 0), unit_query(6, 0), k=4, theta=0.5)
    sel = select(inst)
    assert sel.method == DEFAULT_METHOD and len(sel) == 4
