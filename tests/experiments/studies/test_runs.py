"""A query of a dataset as an Instance over its pool, against plain loops (divopt_rag.experiments.studies.runs)."""
from __future__ import annotations

import numpy as np

from divopt_rag.data import EmbeddedDataset
from divopt_rag.experiments.studies import runs


def test_query_instance_pools_and_top_pool():
    rng = np.random.default_rng(1)
    E = rng.standard_normal((12, 4)).astype(np.float32)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    Q = E[[0, 5]] + 0.1
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    ids = [f"d{i}" for i in range(12)]
    data = EmbeddedDataset("t", "", E, Q, ["a", "b"], ids, pools=[np.arange(6), np.arange(6, 12)])
    inst, rows = runs.query_instance(data, 1)
    assert rows.tolist() == list(range(6, 12)) and inst.ids.tolist() == ids[6:]
    np.testing.assert_array_equal(inst.E.numpy(), E[6:])
    inst, rows = runs.query_instance(data, 1, pool=3)
    scores = [(float(E[i] @ Q[1]), i) for i in range(6, 12)]
    assert rows.tolist() == [i for _, i in sorted(scores, key=lambda t: -t[0])[:3]]
    whole = EmbeddedDataset("t", "", E, Q, ["a", "b"], ids)
    inst, rows = runs.query_instance(whole, 0)
    assert rows.tolist() == list(range(12)) and inst.n == 12 and inst.k == 1 and inst.theta == 1.0
