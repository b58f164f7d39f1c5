"""divopt's LangChain retriever and drop-in MMR against independent truths: select() on the
same vectors computed here by brute force, and LangChain's own MMR (the published library)."""
import asyncio
import warnings

import numpy as np
import pytest

pytest.importorskip("langchain_core")
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance as lc_mmr
from pydantic import ValidationError

from divopt_rag.integrations.langchain import (
    DivoptRetriever,
    ReembeddingWarning,
    maximal_marginal_relevance,
    select_documents,
)
from divopt_rag.models import Instance
from divopt_rag.solvers import select

from helpers.integration_fakes import QUERY, cosine, hash_embed
from helpers.langchain_fakes import HashEmbedding, expected_texts, make_store


@pytest.mark.parametrize("method", ["mmr", "fw", "fw_ms", "dpp", "gmmr", "dartboard", "topk"])
@pytest.mark.parametrize("theta", [0.3, 0.7])
def test_retriever_picks_equal_select_on_the_same_vectors(method, theta):
    store, texts, _ = make_store()
    r = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method=method, theta=theta)
    docs = r.invoke(QUERY)
    want, cos = expected_texts(texts, QUERY, 20, 5, method, theta)
    assert [d.page_content for d in docs] == want
    assert [d.metadata["divopt_rank"] for d in docs] == list(range(5))
    np.testing.assert_allclose([d.metadata["divopt_score"] for d in docs], cos, atol=1e-9)
    assert {d.metadata["divopt_method"] for d in docs} == {method}
    assert all("topic" in d.metadata for d in docs)  # the store's metadata is kept


@pytest.mark.parametrize("theta", [0.0, 0.5, 0.9])
def test_retriever_mmr_equals_langchain_mmr_search(theta):
    store, _, _ = make_store(seed=1)
    ours = DivoptRetriever(vectorstore=store, k=6, fetch_k=25, method="mmr", theta=theta).invoke(QUERY)
    theirs = store.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=theta)
    assert [d.id for d in ours] == [d.id for d in theirs]


def test_relevance_order_sorts_the_chosen_set():
    store, texts, _ = make_store()
    docs = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method="fw", theta=0.5, order="relevance").invoke(QUERY)
    want, cos = expected_texts(texts, QUERY, 20, 5, "fw", 0.5, order="relevance")
    assert [d.page_content for d in docs] == want
    assert np.all(np.diff(cos) <= 0)


class OpaqueStore(VectorStore):
    """A store that never hands out vectors (like most remote stores); optionally without
    similarity_search_by_vector, to exercise the text-search fallback."""

    def __init__(self, inner: InMemoryVectorStore, by_vector: bool = True):
        self.inner, self.by_vector = inner, by_vector

    @property
    def embeddings(self):
        return self.inner.embedding

    def add_texts(self, texts, metadatas=None, **kwargs):
        return self.inner.add_texts(texts, metadatas, **kwargs)

    @classmethod
    def from_texts(cls, texts, embedding, metadatas=None, **kwargs):
        raise NotImplementedError

    def similarity_search(self, query, k=4, **kwargs):
        return self.inner.similarity_search(query, k=k, **kwargs)

    def similarity_search_by_vector(self, embedding, k=4, **kwargs):
        if not self.by_vector:
            raise NotImplementedError
        return self.inner.similarity_search_by_vector(embedding, k=k, **kwargs)


@pytest.mark.parametrize("by_vector", [True, False])
def test_stores_without_vectors_are_reembedded_with_one_warning(by_vector):
    store, texts, _ = make_store()
    opaque = OpaqueStore(store, by_vector=by_vector)
    r = DivoptRetriever(vectorstore=opaque, k=5, fetch_k=20, method="fw_ms", theta=0.5)
    with pytest.warns(ReembeddingWarning) as caught:
        docs = r.invoke(QUERY)
        r.invoke(QUERY)  # once per retriever
    assert len(caught) == 1
    message = str(caught[0].message)
    # the store, the cost and the hook, named as the docs name it
    assert "OpaqueStore" in message and "fetch_k = 20" in message and "stored_vectors" in message
    assert [d.page_content for d in docs] == expected_texts(texts, QUERY, 20, 5, "fw_ms", 0.5)[0]
    with pytest.raises(ValidationError, match="override stored_vectors"):
        DivoptRetriever(vectorstore=opaque, vectors="store")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # re-embedding asked for: no warning
        DivoptRetriever(vectorstore=opaque, k=5, fetch_k=20, method="fw_ms", vectors="reembed").invoke(QUERY)


def test_an_overridden_stored_vectors_hook_is_read_and_never_reembeds():
    store, texts, _ = make_store()
    emb = store.embedding
    read = []

    class Mine(DivoptRetriever):
        def stored_vectors(self, docs):
            read.append(len(docs))
            return [self.vectorstore.inner.store[d.id]["vector"] for d in docs]

    emb.documents_embedded = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        docs = Mine(vectorstore=OpaqueStore(store), k=5, fetch_k=20, method="fw_ms", theta=0.5).invoke(QUERY)
        Mine(vectorstore=OpaqueStore(store), vectors="store")  # the hook counts as readable vectors
    assert read == [20] and emb.documents_embedded == 0
    assert [d.page_content for d in docs] == expected_texts(texts, QUERY, 20, 5, "fw_ms", 0.5)[0]


def test_reembed_equals_stored_vectors_for_a_deterministic_model():
    store, _, _ = make_store()
    a = DivoptRetriever(vectorstore=store, k=5, method="dpp", vectors="store").invoke(QUERY)
    b = DivoptRetriever(vectorstore=store, k=5, method="dpp", vectors="reembed").invoke(QUERY)
    assert [d.id for d in a] == [d.id for d in b]


def test_precomputed_candidates_equal_the_store():
    store, texts, meta = make_store()
    docs = [Document(id=f"id{i}", page_content=t, metadata=m) for i, (t, m) in enumerate(zip(texts, meta))]
    E = np.asarray(HashEmbedding().embed_documents(texts))
    pre = DivoptRetriever(documents=docs, document_embeddings=E, embedding=HashEmbedding(), k=5, fetch_k=20,
                          method="gmmr", theta=0.6)
    via_store = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method="gmmr", theta=0.6)
    assert [d.id for d in pre.invoke(QUERY)] == [d.id for d in via_store.invoke(QUERY)]
    # select_documents on the fetched candidates: same documents, store documents untouched
    q = HashEmbedding().embed_query(QUERY)
    picked = select_documents(q, docs, E, k=3, theta=0.6, method="mmr")
    assert [d.page_content for d in picked] == [texts[i] for i in lc_mmr(np.array(q), list(E), 0.6, 3)]
    assert "score" not in docs[0].metadata and "score" not in store.store["id0"]["metadata"]


def test_search_kwargs_reach_the_store():
    store, texts, meta = make_store()
    keep = lambda doc: doc.metadata["topic"] != 0
    docs = DivoptRetriever(vectorstore=store, k=5, fetch_k=15, method="fw", theta=0.4,
                           search_kwargs={"filter": keep}).invoke(QUERY)
    assert all(d.metadata["topic"] != 0 for d in docs)
    want = expected_texts(texts, QUERY, 15, 5, "fw", 0.4, keep=lambda i: meta[i]["topic"] != 0)[0]
    assert [d.page_content for d in docs] == want


def test_fewer_candidates_than_k_and_async():
    store = InMemoryVectorStore(embedding=HashEmbedding())
    store.add_texts(["alpha beta", "gamma delta", "alpha gamma"])
    r = DivoptRetriever(vectorstore=store, k=5, fetch_k=10, method="fw_ms")
    assert sorted(d.page_content for d in r.invoke("alpha")) == ["alpha beta", "alpha gamma", "gamma delta"]
    assert len(asyncio.run(r.ainvoke("alpha"))) == 3
    assert DivoptRetriever(vectorstore=InMemoryVectorStore(embedding=HashEmbedding())).invoke("x") == []


def test_bad_configuration_is_one_clear_error():
    store, _, _ = make_store()
    cases = [
        ({"method": "nope"}, "unknown method 'nope'"),
        ({"method": "mmr", "method_params": {"max_iter": 3}}, "mmr has no parameter 'max_iter'"),
        ({"theta": 1.5}, r"theta must lie in \[0, 1\]"),
        ({"k": 5, "fetch_k": 3}, "fetch_k must be >= k = 5"),
        ({"order": "random"}, "order"),
        ({"fetch_kk": 3}, "fetch_kk"),  # typos are refused, not ignored
    ]
    for kwargs, msg in cases:
        with pytest.raises(ValidationError, match=msg):
            DivoptRetriever(vectorstore=store, **kwargs)
    with pytest.raises(ValidationError, match="exactly one of vectorstore"):
        DivoptRetriever()
    with pytest.raises(ValidationError, match=r"document_embeddings must have shape \(2, d\)"):
        DivoptRetriever(documents=[Document(page_content="a"), Document(page_content="b")],
                        document_embeddings=np.ones((3, 4)), embedding=HashEmbedding())
    with pytest.raises(ValidationError, match="no model to embed the query"):
        DivoptRetriever(documents=[Document(page_content="a")], document_embeddings=np.ones((1, 4)))


# --- the drop-in maximal_marginal_relevance ----------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_drop_in_equals_langchain_mmr_on_random_cases(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 40)), int(rng.integers(2, 24))
    k = int(rng.integers(0, n + 3))  # includes k = 0 and k > n
    lam = float(rng.choice([0.0, 1.0, rng.uniform()]))
    # unnormalized vectors with spread norms, as stores hand them over; lists as LangChain takes them
    E = (rng.standard_normal((n, d)) * rng.uniform(0.1, 5, size=(n, 1))).tolist()
    q = rng.standard_normal(d) * 3
    q_arg = q[None, :] if seed % 2 else q  # LangChain accepts (d,) and (1, d)
    assert maximal_marginal_relevance(q_arg, E, lambda_mult=lam, k=k) == lc_mmr(q_arg, E, lambda_mult=lam, k=k)


def test_drop_in_defaults_and_other_methods():
    rng = np.random.default_rng(7)
    E, q = rng.standard_normal((30, 8)), rng.standard_normal(8)
    assert maximal_marginal_relevance(q, list(E)) == lc_mmr(q, list(E))  # lambda 0.5, k 4
    for method in ["fw", "dpp", "vrsd"]:
        want = select(Instance(E, q, k=4, theta=0.5, normalize=True), method).indices.tolist()
        assert maximal_marginal_relevance(q, list(E), 0.5, 4, method=method) == want
    with pytest.raises(ValueError, match="row 2 is all zeros"):
        maximal_marginal_relevance(q, [E[0], E[1], np.zeros(8)], 0.5, 2)


# --- LangChain's names, the user's metadata, native async ---------------------------------------
def test_lambda_mult_is_theta_and_misplaced_names_are_refused_with_a_hint():
    store, _, _ = make_store(seed=1)
    by_lambda = DivoptRetriever(vectorstore=store, k=6, fetch_k=25, method="mmr", lambda_mult=0.3)
    assert by_lambda.theta == by_lambda.lambda_mult == 0.3
    theirs = store.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=0.3)
    assert [d.id for d in by_lambda.invoke(QUERY)] == [d.id for d in theirs]
    cases = [
        ({"theta": 0.3, "lambda_mult": 0.3}, "give theta or lambda_mult, not both"),
        ({"lambda_mult": 2.0}, r"theta must lie in \[0, 1\]"),
        ({"search_kwargs": {"k": 5}}, r"search_kwargs\['k'\]: pass k= to DivoptRetriever"),
        ({"search_kwargs": {"lambda_mult": 0.2}}, r"pass lambda_mult= to DivoptRetriever"),
        ({"top_k": 5}, "unknown argument 'top_k'; the number of documents returned is k="),
        ({"search_type": "mmr"}, "always selects with method="),
        ({"thetaa": 0.2}, "unknown argument 'thetaa'; did you mean 'theta'"),
    ]
    for kwargs, msg in cases:
        with pytest.raises(ValidationError, match=msg):
            DivoptRetriever(vectorstore=store, **kwargs)


def test_user_metadata_is_kept_whole(recwarn):
    store = InMemoryVectorStore(embedding=HashEmbedding())
    texts = ["tide moon ocean", "lava volcano magma", "bread oven yeast", "tide ocean gravity"]
    meta = [{"score": f"user {i}", "rank": i, "method": "editor"} for i in range(4)]
    store.add_texts(texts, metadatas=meta, ids=[f"id{i}" for i in range(4)])
    docs = DivoptRetriever(vectorstore=store, k=3, fetch_k=4, method="mmr").invoke("tide lava")
    assert len(docs) == 3 and not recwarn.list
    for rank, d in enumerate(docs):
        i = int(d.id[2:])
        assert {key: d.metadata[key] for key in ("score", "rank", "method")} == meta[i]
        assert d.metadata["divopt_rank"] == rank and d.metadata["divopt_method"] == "mmr"
        np.testing.assert_allclose(d.metadata["divopt_score"], cosine([hash_embed(texts[i])], hash_embed("tide lava"))[0])
    assert store.store["id0"]["metadata"] == meta[0]  # the stored documents are untouched


class AsyncOnlyStore(InMemoryVectorStore):
    """An in-memory store with a native async search (it yields to the event loop, as a network
    client would) whose sync search fails: only a native async path can use it."""

    def similarity_search_by_vector(self, embedding, k=4, **kwargs):
        raise AssertionError("the async path called the sync search")

    async def asimilarity_search_by_vector(self, embedding, k=4, **kwargs):
        await asyncio.sleep(0)
        return InMemoryVectorStore.similarity_search_by_vector(self, embedding, k=k, **kwargs)

    def similarity_search(self, query, k=4, **kwargs):
        raise AssertionError("the async path called the sync search")


class AsyncEmbedding(HashEmbedding):
    def embed_query(self, text):
        raise AssertionError("the async path called the sync embedding")

    async def aembed_query(self, text):
        return hash_embed(text)


@pytest.mark.parametrize("vectors", ["store", "reembed"])
def test_async_uses_the_stores_async_search(vectors):
    store, texts, meta = make_store()
    want = [d.id for d in DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method="dpp", theta=0.6).invoke(QUERY)]
    async_store = AsyncOnlyStore(embedding=AsyncEmbedding())
    async_store.add_texts(texts, metadatas=meta, ids=[f"id{i}" for i in range(len(texts))])
    r = DivoptRetriever(vectorstore=async_store, k=5, fetch_k=20, method="dpp", theta=0.6, vectors=vectors)

    async def both():
        return await asyncio.gather(r.ainvoke(QUERY), r.ainvoke(QUERY))

    for docs in asyncio.run(both()):
        assert [d.id for d in docs] == want
    with pytest.raises(AssertionError, match="sync"):
        r.invoke(QUERY)
