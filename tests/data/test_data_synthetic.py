"""Synthetic generators: deterministic by seed at any chunking, near-duplicate clusters with
the cosines the model formula predicts, the toy corpus as a Dataset."""
from __future__ import annotations

import numpy as np
import pytest

from divopt_rag.data import narrow_cone, toy_corpus
from divopt_rag.data.synthetic import narrow_cone_npy, synthetic_dataset, toy_dataset


def test_same_seed_same_matrix_at_any_chunking(tmp_path):
    # 40 000 rows span three internal generation chunks of 2^14 rows
    a = narrow_cone(40_000, 6, seed=11)
    b = narrow_cone(40_000, 6, seed=11, out=np.empty((40_000, 6), np.float32))  # filled in place
    mm, q, labels = narrow_cone_npy(tmp_path / "E.npy", 40_000, 6, seed=11)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(np.asarray(mm), a[0])
    np.testing.assert_array_equal(q, a[1])
    np.testing.assert_array_equal(labels, a[2])
    assert isinstance(mm, np.memmap) and mm.dtype == np.float32
    c = narrow_cone(40_000, 6, seed=12)
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[2], c[2])
    # a prefix of a larger pool is not promised, but the same call twice is
    np.testing.assert_array_equal(narrow_cone(50, 3, seed=0)[0], narrow_cone(50, 3, seed=0)[0])


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float16, 2e-3), (np.float64, 1e-12)])
def test_unit_rows_and_query(dtype, tol):
    E, q, labels = narrow_cone(500, 32, seed=1, dtype=dtype)
    assert E.dtype == dtype and E.shape == (500, 32) and labels.shape == (500,)
    np.testing.assert_allclose(np.linalg.norm(E.astype(np.float64), axis=1), 1.0, atol=tol)
    np.testing.assert_allclose(np.linalg.norm(q), 1.0, atol=1e-6)
    assert labels.min() >= 0 and labels.max() < 500 // 20


def test_cluster_cosines_match_the_model():
    cone, spread, noise, d = 1.0, 1.0, 0.35, 512
    E, q, labels = narrow_cone(600, d, n_clusters=12, seed=4, cone=cone, spread=spread, noise=noise, dtype=np.float64)
    S = E @ E.T
    same = labels[:, None] == labels[None, :]
    off_diag = ~np.eye(len(E), dtype=bool)
    within = S[same & off_diag].mean()
    across = S[~same].mean()
    # plain expectation of the generative formula, up to O(1/sqrt(d)) cross terms
    total = cone**2 + spread**2 + noise**2
    assert within == pytest.approx((cone**2 + spread**2) / total, abs=0.03)
    assert across == pytest.approx(cone**2 / total, abs=0.05)  # the "narrow cone": far above 0


def test_synthetic_dataset_planted_relevance():
    ds, E, q = synthetic_dataset(2000, 64, seed=1)
    labels = np.array([int(ds.subtopics[p][1:]) for p in ds.passage_ids])
    rel = E @ q
    planted = ds.meta["relevant_clusters"]
    assert len(planted) == 5
    in_planted = np.isin(labels, planted)
    assert rel[in_planted].mean() > rel[~in_planted].mean() + 0.1
    judged = {ds.passage_index(p) for p in ds.relevant("q0")}
    assert judged == set(np.flatnonzero(in_planted).tolist())


def test_toy_corpus_and_dataset():
    texts, labels, query = toy_corpus()
    assert len(texts) == len(labels) and "Python" in query
    ds = toy_dataset()
    assert ds.texts == texts and ds.query_text("q0") == query
    on_topic = [ds.passage_ids[i] for i, l in enumerate(labels) if l != "off-topic"]
    assert set(ds.relevant("q0")) == set(on_topic)
    assert len(set(ds.subtopics_for("q0").values())) == len(set(labels) - {"off-topic"})


def test_bad_sizes():
    with pytest.raises(ValueError, match="n >= 1 and d >= 1"):
        narrow_cone(0, 3)
    with pytest.raises(ValueError, match=r"out must have shape \(10, 3\)"):
        narrow_cone(10, 3, out=np.empty((10, 4), np.float32))
