"""The Dataset shape: validation with named errors, look-ups, restriction to a pool, and
embedding a dataset with a fake encoder."""
from __future__ import annotations

import numpy as np
import pytest

from divopt_rag.data import Dataset, embed_dataset


def small() -> Dataset:
    return Dataset(
        name="small",
        passage_ids=["a", "b", "c", "d"],
        texts=["alpha text", "beta text", "gamma text", "delta text"],
        titles=["A", "B", "", "D"],
        query_ids=["q1", "q2"],
        queries=["first query", "second query"],
        qrels={"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"d": 1}},
        query_subtopics={"q1": {"a": "s1", "c": "s2"}},
        subtopics={"a": "g1", "d": "g2"},
    )


def test_lookups_and_subtopics():
    ds = small()
    assert ds.n_passages == 4 and ds.n_queries == 2 and len(ds) == 4
    assert ds.passage_index("c") == 2 and ds.passage_indices(["d", "a"]).tolist() == [3, 0]
    assert ds.query_text("q2") == "second query"
    assert ds.relevant("q1") == {"a": 2, "c": 1} and ds.relevant("q1", min_grade=2) == {"a": 2}
    assert ds.subtopics_for("q1") == {"a": "s1", "c": "s2"}  # query-specific labels win
    assert ds.subtopics_for("q2") == {"a": "g1", "d": "g2"}  # else the global ones
    assert ds.subtopic_array("q1", [0, 1, 2]) == ["s1", None, "s2"]
    assert ds.passage_texts([0, 2], with_titles=True) == ["A: alpha text", "gamma text"]
    assert "4 passages, 2 queries, 4 judgments" in repr(ds)


def test_validation_names_the_problem():
    base = dict(name="x", passage_ids=["a", "b"], texts=["t", "u"], query_ids=["q"], queries=["?"])
    with pytest.raises(ValueError, match="passage_ids must be unique: 'a'"):
        Dataset(**{**base, "passage_ids": ["a", "a"]})
    with pytest.raises(ValueError, match="texts must have one entry per passage id: expected 2, got 1"):
        Dataset(**{**base, "texts": ["t"]})
    with pytest.raises(ValueError, match=r"qrels\['q'\] refers to unknown passage id 'zz'"):
        Dataset(**base, qrels={"q": {"zz": 1}})
    with pytest.raises(ValueError, match="qrels refers to unknown query id 'nope'"):
        Dataset(**base, qrels={"nope": {"a": 1}})
    with pytest.raises(ValueError, match="subtopics refers to unknown passage id 'zz'"):
        Dataset(**base, subtopics={"zz": "s"})
    ds = Dataset(**base)
    with pytest.raises(KeyError, match="unknown passage id 'zz'"):
        ds.passage_index("zz")
    with pytest.raises(KeyError, match="unknown query id 'zz'"):
        ds.relevant("zz")


def test_restrict_to_pool_matches_filtering_loop():
    ds = small()
    sub = ds.restrict([2, 0])
    assert sub.passage_ids == ["c", "a"] and sub.texts == ["gamma text", "alpha text"] and sub.titles == ["", "A"]
    # plain loop: keep judgments and labels whose passage survives
    kept = {"c", "a"}
    assert sub.qrels == {q: {p: g for p, g in j.items() if p in kept} for q, j in ds.qrels.items()}
    assert sub.subtopics_for("q1") == {"a": "s1", "c": "s2"} and sub.subtopics == {"a": "g1"}
    assert sub.query_ids == ds.query_ids and sub.meta["restricted_from"] == "small"


def test_embed_dataset_rows_follow_ids(tmp_path):
    ds = small()
    calls = []

    def enc(batch):
        calls.append(list(batch))
        return np.array([[len(t), t.count("a") + 1.0, 1.0] for t in batch], dtype=np.float32)

    enc.model_id = "test/len"
    E, Q = embed_dataset(ds, enc, tmp_path)
    for i, t in enumerate(ds.texts):
        v = enc([t])[0]
        np.testing.assert_allclose(E[i], v / np.linalg.norm(v), rtol=1e-6)
    assert Q.shape == (2, 3)
    Et, _ = embed_dataset(ds, enc, tmp_path, with_titles=True)
    v = enc(["A: alpha text"])[0]
    np.testing.assert_allclose(Et[0], v / np.linalg.norm(v), rtol=1e-6)
