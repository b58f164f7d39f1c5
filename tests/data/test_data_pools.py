"""Candidate pools against plain loops: a hand-written Lucene BM25, a full sort of E q, a
Python set union."""
from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest

from divopt_rag.data import BM25Index, Dataset, bm25_pool, ccbqp_pool, dense_pool, union_pool

WORDS = ["river", "bank", "money", "loan", "water", "fish", "boat", "credit", "shore", "deposit", "stream", "account"]


def random_dataset(seed: int, n_passages: int = 60, n_queries: int = 6) -> Dataset:
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 12))) for _ in range(n_passages)]
    queries = [" ".join(rng.choice(WORDS, size=rng.integers(1, 4), replace=False)) for _ in range(n_queries)]
    return Dataset("rand", [f"p{i}" for i in range(n_passages)], texts, [f"q{j}" for j in range(n_queries)], queries)


def plain_bm25(texts, query, k1=1.5, b=0.75):
    """Lucene BM25 in a plain loop (the formula in BM25Index's docstring)."""
    tok = lambda s: re.findall(r"\b\w\w+\b", s.lower())
    docs = [Counter(tok(t)) for t in texts]
    N = len(docs)
    avgdl = sum(sum(d.values()) for d in docs) / N
    scores = []
    for d in docs:
        dl = sum(d.values())
        s = 0.0
        for t in set(tok(query)):
            df = sum(1 for x in docs if t in x)
            if df == 0 or t not in d:
                continue
            idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
            s += idf * d[t] / (d[t] + k1 * (1 - b + b * dl / avgdl))
        scores.append(s)
    return np.array(scores)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bm25_pool_matches_plain_loop(seed):
    ds = random_dataset(seed)
    index = BM25Index(ds, stopwords=None)
    pools = bm25_pool(ds, n=10, index=index)
    _, scores = index.search(ds.queries, 10)
    for j, qid in enumerate(ds.query_ids):
        ref = plain_bm25(ds.texts, ds.queries[j])
        np.testing.assert_allclose(scores[j], np.sort(ref)[::-1][:10], rtol=1e-4, atol=1e-5)
        # the pool's passages carry the top-10 reference scores (ties may swap equal items)
        np.testing.assert_allclose(ref[pools[qid]], np.sort(ref)[::-1][:10], rtol=1e-4, atol=1e-5)
        assert len(set(pools[qid].tolist())) == 10


def test_bm25_pool_subset_and_errors():
    ds = random_dataset(3)
    pools = bm25_pool(ds, ["q1", "q4"], n=500)  # n capped at the corpus size
    assert list(pools) == ["q1", "q4"] and len(pools["q1"]) == ds.n_passages
    with pytest.raises(KeyError, match="unknown query id 'nope'"):
        bm25_pool(ds, ["nope"], n=5)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        bm25_pool(ds, n=0)


@pytest.mark.parametrize("block_rows", [7, 1 << 16])
def test_dense_pool_matches_full_sort(block_rows):
    rng = np.random.default_rng(5)
    E = rng.standard_normal((103, 8)).astype(np.float32)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    Q = rng.standard_normal((4, 8)).astype(np.float32)
    pools = dense_pool(E, Q, 9, query_ids=["a", "b", "c", "d"], block_rows=block_rows)
    for r, key in enumerate("abcd"):
        ref = np.argsort(-(E @ Q[r]), kind="stable")[:9]
        np.testing.assert_array_equal(pools[key], ref)
    single = dense_pool(E, Q[0], 3)
    np.testing.assert_array_equal(single[0], pools["a"][:3])
    with pytest.raises(ValueError, match="same d"):
        dense_pool(E, np.ones((1, 5)), 3)


def test_union_pool_is_sorted_set_union():
    pools = {"a": np.array([5, 1, 9]), "b": np.array([9, 2]), "c": np.array([], dtype=np.int64)}
    expected = sorted(set().union(*[set(v.tolist()) for v in pools.values()]))
    np.testing.assert_array_equal(union_pool(pools), expected)
    np.testing.assert_array_equal(union_pool(list(pools.values())), expected)
    assert union_pool([]).shape == (0,)


def test_ccbqp_pool_protocol_with_fake_encoder(tmp_path):
    ds = random_dataset(4)

    def encoder(batch):  # bag-of-words counts: deterministic, nonzero for these texts
        return np.array([[t.split().count(w) + 0.01 for w in WORDS] for t in batch], dtype=np.float32)

    encoder.model_id = "test/bow"
    pool = ccbqp_pool(ds, ["q0", "q2"], n=8, model=encoder, cache_dir=tmp_path)
    bm = bm25_pool(ds, ["q0", "q2"], n=8)
    np.testing.assert_array_equal(pool.indices, sorted(set(bm["q0"].tolist()) | set(bm["q2"].tolist())))
    assert pool.E.shape == (len(pool.indices), len(WORDS))
    row = pool.local([pool.indices[3]])[0]
    v = encoder([ds.texts[pool.indices[3]]])[0]
    np.testing.assert_allclose(pool.E[row], v / np.linalg.norm(v), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(pool.Q["q2"]), 1.0, atol=1e-6)
    with pytest.raises(KeyError, match="not in the pool"):
        pool.local([10_000])
