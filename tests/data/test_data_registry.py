"""divopt_rag.data.load: one entry point for every dataset, checked against the loaders called
directly, plain numpy loops and hand-written files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from divopt_rag.data import (
    DataFormatError,
    Dataset,
    EmbeddedDataset,
    load,
    load_asqa,
    load_sciq,
    parse_spec,
    register_dataset,
    stable_hash,
    synthetic_dataset,
    unit_rows,
)


def test_synthetic_pools_are_the_generated_pools_bit_for_bit():
    data = load({"name": "synthetic", "n": 50, "d": 8, "n_queries": 3, "seed": 4})
    # the documented recipe (dataset_key), transcribed: a pure generator is keyed by its options
    recipe = {"recipe": 1, "dataset": "synthetic", "version": "1", "options": {"n": 50, "d": 8, "n_queries": 3, "seed": 4},
              "content": {"files": {}}, "embedding": None, "storage": "float32"}
    assert data.key == stable_hash(recipe, 16)
    assert data.query_ids == ["q0", "q1", "q2"] and data.E.shape == (150, 8)
    for j in range(3):
        ds, E, q = synthetic_dataset(50, 8, seed=4 + j)
        rows = data.pools[j]
        assert rows.tolist() == list(range(50 * j, 50 * (j + 1)))
        np.testing.assert_array_equal(data.E[rows], E)  # already unit: not renormalized
        np.testing.assert_array_equal(data.Q[j], q)
        assert data.doc_ids[rows].tolist() == [f"q{j}-d{i}" for i in range(50)]
        relevant = {f"q{j}-d{i}" for i, p in enumerate(ds.passage_ids) if ds.qrels["q0"].get(p, 0) > 0}
        assert set(data.qrels[f"q{j}"]) == relevant
        assert set(data.subtopics[f"q{j}"]) == relevant  # default: labels of the relevant passages only
    everything = load("synthetic", n=50, d=8, n_queries=1, seed=4, subtopics="all")
    assert len(everything.subtopics["q0"]) == 50


def test_npz_with_trec_qrels_normalizes_rows_and_caches(tmp_path):
    rng = np.random.default_rng(0)
    E, Q = rng.standard_normal((6, 3)) * 3, rng.standard_normal((2, 3))
    np.savez(tmp_path / "mine.npz", E=E, Q=Q, doc_ids=np.array([f"d{i}" for i in range(6)]))
    (tmp_path / "qrels.txt").write_text("0 0 d1 2\n0 0 d4 0\n\n1 0 d2 1\n")
    spec = f"npz:{tmp_path / 'mine.npz'}"
    assert parse_spec(spec) == {"name": "npz", "path": str(tmp_path / "mine.npz")}
    data = load(spec, qrels=str(tmp_path / "qrels.txt"))
    for i in range(6):  # plain loop: row / its Euclidean norm
        np.testing.assert_allclose(data.E[i], E[i] / np.sqrt(sum(x * x for x in E[i])), rtol=1e-6)
    assert data.qrels == {"0": {"d1": 2, "d4": 0}, "1": {"d2": 1}} and data.query_ids == ["0", "1"]
    cached = load(spec, qrels=str(tmp_path / "qrels.txt"), cache_dir=tmp_path / "cache")
    assert isinstance(cached.E, np.memmap) and (tmp_path / "cache" / data.key / "meta.json").exists()
    np.testing.assert_array_equal(np.asarray(cached.E), data.E)
    assert cached.key == data.key and cached.qrels == data.qrels
    assert load({"name": "npz", "path": str(tmp_path / "mine.npz")}).key != data.key  # another spec
    (tmp_path / "bad.txt").write_text("0 0 d1 2\n0 0 d4\n")
    with pytest.raises(DataFormatError, match=r"bad.txt:2: a TREC qrels line has 4 fields"):
        load(spec, qrels=str(tmp_path / "bad.txt"))


def test_text_loader_is_embedded_with_the_given_encoder(tmp_path):
    ds = Dataset("tiny", ["a", "b", "c"], ["alpha text", "beta", "gamma words"], ["q"], ["query"],
                 qrels={"q": {"b": 1}}, titles=["A", "B", "C"], subtopics={"a": "s1", "b": "s2"})

    def encoder(texts):  # deterministic fake: (length, vowels, 1)
        return np.array([[len(t), sum(ch in "aeiou" for ch in t), 1.0] for t in texts])

    @register_dataset("_tiny_text_test", with_titles=True)
    def tiny():
        return ds

    data = load("_tiny_text_test", model=encoder, embed_cache=str(tmp_path))
    titled = ["A: alpha text", "B: beta", "C: gamma words"]  # the registered default: with titles
    raw = encoder(titled)
    np.testing.assert_allclose(data.E, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)
    assert data.doc_texts == ds.texts and data.query_texts == ["query"] and data.qrels == {"q": {"b": 1}}
    assert data.subtopics == {"q": {"a": "s1", "b": "s2"}} and data.pools is None
    plain = load("_tiny_text_test", model=encoder, with_titles=False)
    raw = encoder(ds.texts)
    np.testing.assert_allclose(plain.E, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)


def test_bad_specs_name_the_problem():
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load("nope")
    with pytest.raises(ValueError, match="unknown dataset 'nope:x'"):
        load("nope:x")
    with pytest.raises(ValueError, match="dataset 'beir' needs a path: use beir:PATH"):
        load("beir")
    with pytest.raises(ValueError, match="n_words must be int"):
        load("wordnet:many")
    with pytest.raises(ValueError, match=r"embedded already: options \['model'\]"):
        load("synthetic", n=20, d=4, n_queries=1, model="x")
    with pytest.raises(TypeError, match=r"dataset 'synthetic' has no option 'size'; its options: \['d', 'n', "):
        load("synthetic", size=3)
    with pytest.raises(ValueError, match="mapping with a 'name'"):
        load({"n": 3})
    assert parse_spec("mini-wikipedia:/x") == {"name": "mini_wikipedia", "path": "/x"}


def test_unit_rows_keeps_unit_arrays_and_refuses_zero_rows():
    u = np.eye(3, dtype=np.float32)
    assert unit_rows(u, "u") is u
    v = unit_rows([[3.0, 4.0]], "v")
    assert v.dtype == np.float32 and v.tolist() == [[0.6000000238418579, 0.800000011920929]]
    with pytest.raises(ValueError, match="w must have finite, non-zero rows"):
        unit_rows([[0.0, 0.0]], "w")


def test_embedded_dataset_validation_and_round_trip(tmp_path):
    E = np.eye(4, dtype=np.float32)[:, :3][:3]
    data = EmbeddedDataset("x", "k", E, E[:1], ["q"], ["a", "b", "c"], pools=[[0, 2]], subtopics={"q": {"a": "s"}})
    data.save(tmp_path / "x")
    back = EmbeddedDataset.load(tmp_path / "x", mmap=False)
    np.testing.assert_array_equal(back.E, E)
    assert back.pools[0].tolist() == [0, 2] and back.subtopics == {"q": {"a": "s"}} and back.key == "k"
    with pytest.raises(ValueError, match="doc_ids must have 3 entries"):
        EmbeddedDataset("x", "", E, E[:1], ["q"], ["a"])
    with pytest.raises(ValueError, match="pool of query 'q' must be non-empty rows of E"):
        EmbeddedDataset("x", "", E, E[:1], ["q"], ["a", "b", "c"], pools=[[5]])


QA = Path(__file__).parents[1] / "helpers" / "fixtures" / "qa"


@pytest.mark.parametrize("name, path, loader", [("asqa", QA / "ASQA.json", load_asqa), ("sciq", QA / "sciq", load_sciq)])
def test_qa_loaders_are_reachable_through_load(name, path, loader):
    def encoder(texts):
        return np.array([[len(t) + 1.0, t.count("a") + 1.0, 1.0] for t in texts])

    data = load(f"{name}:{path}", model=encoder)
    ds = loader(path)  # the loader called directly
    assert data.query_ids == ds.query_ids and data.doc_ids.tolist() == ds.passage_ids
    raw = encoder(ds.texts)
    np.testing.assert_allclose(data.E, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)
