"""DivoptRetriever on the vector stores users keep their vectors in (FAISS, Chroma in-process):
it reads the stored vectors without re-embedding, and with method="mmr" it returns the store's own
max_marginal_relevance_search picks (the published libraries are the truth)."""
import asyncio
import itertools
import warnings

import numpy as np
import pytest

pytest.importorskip("langchain_core")
from divopt_rag.integrations.langchain import DivoptRetriever

from divopt_rag.models import Instance
from divopt_rag.solvers import select

from helpers.integration_fakes import QUERY, corpus, hash_embed
from helpers.langchain_fakes import HashEmbedding

THETAS = [0.0, 0.3, 0.5, 0.9]
_names = (f"divopt-{i}" for i in itertools.count())


def faiss_store(seed=1):
    pytest.importorskip("faiss")
    with warnings.catch_warnings():  # langchain-community announces its own sunset on import
        warnings.simplefilter("ignore", DeprecationWarning)
        FAISS = pytest.importorskip("langchain_community.vectorstores").FAISS
    texts, meta = corpus(seed)
    emb = HashEmbedding()
    store = FAISS.from_texts(texts, emb, metadatas=meta, ids=[f"id{i}" for i in range(len(texts))])
    return store, emb, texts, meta


def chroma_store(seed=1, space="cosine"):
    chromadb = pytest.importorskip("chromadb")
    Chroma = pytest.importorskip("langchain_chroma").Chroma
    texts, meta = corpus(seed)
    emb = HashEmbedding()
    client = chromadb.EphemeralClient(chromadb.config.Settings(anonymized_telemetry=False))
    store = Chroma(collection_name=next(_names), embedding_function=emb, client=client,
                   collection_metadata={"hnsw:space": space})
    store.add_texts(texts, metadatas=meta, ids=[f"id{i}" for i in range(len(texts))])
    return store, emb, texts, meta


@pytest.mark.parametrize("theta", THETAS)
def test_faiss_mmr_equals_the_stores_own_mmr_without_reembedding(theta):
    store, emb, _, _ = faiss_store()
    emb.documents_embedded = 0
    r = DivoptRetriever(vectorstore=store, k=6, fetch_k=25, method="mmr", theta=theta)
    ours = r.invoke(QUERY)
    assert emb.documents_embedded == 0  # the vectors came from the FAISS index
    theirs = store.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=theta)
    assert [d.id for d in ours] == [d.id for d in theirs]
    assert [d.id for d in asyncio.run(r.ainvoke(QUERY))] == [d.id for d in theirs]


@pytest.mark.parametrize("theta", THETAS)
def test_chroma_mmr_equals_the_stores_own_mmr_without_reembedding(theta):
    store, emb, _, _ = chroma_store()
    emb.documents_embedded = 0
    # langchain-chroma lists its MMR picks in fetch order: the default order="auto" follows it
    r = DivoptRetriever(vectorstore=store, k=6, fetch_k=25, method="mmr", theta=theta)
    ours = r.invoke(QUERY)
    assert emb.documents_embedded == 0  # the vectors came from the collection
    theirs = store.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=theta)
    assert [d.id for d in ours] == [d.id for d in theirs]
    assert [d.id for d in asyncio.run(r.ainvoke(QUERY))] == [d.id for d in theirs]


def test_chroma_filter_reaches_the_collection_and_matches_its_mmr():
    store, _, _, meta = chroma_store(seed=2)
    where = {"topic": {"$ne": 0}}
    ours = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method="mmr", theta=0.4,
                           search_kwargs={"filter": where}).invoke(QUERY)
    theirs = store.max_marginal_relevance_search(QUERY, k=5, fetch_k=20, lambda_mult=0.4, filter=where)
    assert [d.id for d in ours] == [d.id for d in theirs]
    assert all(d.metadata["topic"] != 0 for d in ours)


@pytest.mark.parametrize("theta", [0.3, 0.7])
def test_chroma_l2_collection_matches_its_mmr_order_by_default(theta):
    store, _, _, _ = chroma_store(space="l2")  # fetch order by L2 distance, not cosine
    ours = DivoptRetriever(vectorstore=store, k=6, fetch_k=25, method="mmr", theta=theta).invoke(QUERY)
    theirs = store.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=theta)
    assert [d.id for d in ours] == [d.id for d in theirs]


@pytest.mark.parametrize("make", [faiss_store, chroma_store])
@pytest.mark.parametrize("method", ["fw_ws_ms", "dpp", "gmmr"])
def test_other_methods_on_stored_vectors_equal_select(make, method):
    store, emb, _, _ = make(seed=0)
    docs = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method=method, theta=0.5, order="selection").invoke(QUERY)
    # truth: the store's own 20 nearest (FAISS ranks by L2, Chroma here by cosine), their float64
    # vectors computed here, then select()
    fetched = store.similarity_search(QUERY, k=20)
    E = np.asarray([hash_embed(d.page_content) for d in fetched])
    want = select(Instance(E, hash_embed(QUERY), k=5, theta=0.5, normalize=True), method).indices
    assert [d.id for d in docs] == [fetched[i].id for i in want]
    stored = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method=method, theta=0.5, vectors="store")
    np.testing.assert_allclose(stored.candidate_vectors(fetched), E, rtol=1e-6)  # float32 in both stores


def test_faiss_rows_follow_deletes_and_adds():
    store, emb, texts, _ = faiss_store()
    r = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, method="fw", theta=0.5)
    first = [d.id for d in r.invoke(QUERY)]
    store.delete([first[0]])  # renumbers the FAISS rows after it
    store.add_texts(["tide moon gravity ocean w1 w2 new"], ids=["new"])
    docs = store.similarity_search(QUERY, k=20)
    np.testing.assert_allclose(r.candidate_vectors(docs), emb.embed_documents([d.page_content for d in docs]),
                               rtol=1e-6)
    assert first[0] not in [d.id for d in r.invoke(QUERY)]


def test_faiss_filter_is_applied():
    store, _, _, _ = faiss_store()
    docs = DivoptRetriever(vectorstore=store, k=5, fetch_k=10, method="fw_ws_ms",
                           search_kwargs={"filter": {"topic": 1}}).invoke(QUERY)
    assert len(docs) == 5 and {d.metadata["topic"] for d in docs} == {1}
