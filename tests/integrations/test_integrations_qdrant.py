"""divopt's mmr against Qdrant's own MMR (qdrant-client's local mode, an in-process collection):
the same candidates give the same picks in the same order, with Qdrant's diversity = 1 - theta."""
import numpy as np
import pytest

qdrant = pytest.importorskip("qdrant_client")
from qdrant_client import models

from divopt_rag.integrations import select_candidates

from helpers.pools import planted_duplicates


def collection(E, name="docs"):
    client = qdrant.QdrantClient(":memory:")
    client.create_collection(name, vectors_config=models.VectorParams(size=E.shape[1], distance=models.Distance.COSINE))
    client.upsert(name, points=[models.PointStruct(id=i, vector=v.tolist(), payload={"row": i}) for i, v in enumerate(E)])
    return client


@pytest.mark.parametrize("theta", [0.0, 0.2, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_mmr_equals_qdrant_mmr(seed, theta):
    rng = np.random.default_rng(seed)
    # clusters of near-duplicates (what MMR is for), unnormalized as users upsert them
    E = planted_duplicates(n_clusters=30, per_cluster=5, d=24, seed=seed) * rng.uniform(0.5, 2.0, size=(150, 1))
    q = E[rng.integers(150)] + 0.5 * rng.standard_normal(24)
    client = collection(E)
    k, fetch_k = 8, 40
    theirs = client.query_points(
        "docs", query=models.NearestQuery(nearest=q.tolist(), mmr=models.Mmr(diversity=1 - theta, candidates_limit=fetch_k)),
        limit=k,
    ).points
    # divopt on the same candidates: Qdrant's fetch_k nearest, with the vectors it stores
    fetched = client.query_points("docs", query=q.tolist(), limit=fetch_k, with_vectors=True).points
    picks = select_candidates(q, np.asarray([p.vector for p in fetched]), k, theta, "mmr")
    assert [fetched[i].id for i in picks.indices] == [p.id for p in theirs]


# ---- DivoptRetriever over langchain-qdrant's store (local mode): stored vectors, Qdrant's own MMR ----
def qdrant_store(seed=1, vector_name=""):
    pytest.importorskip("langchain_core")
    QdrantVectorStore = pytest.importorskip("langchain_qdrant").QdrantVectorStore
    from helpers.integration_fakes import corpus
    from helpers.langchain_fakes import HashEmbedding

    texts, meta = corpus(seed)
    emb = HashEmbedding()
    client = qdrant.QdrantClient(":memory:")
    d = len(emb.embed_query("x"))
    config = models.VectorParams(size=d, distance=models.Distance.COSINE)
    client.create_collection("docs", vectors_config={vector_name: config} if vector_name else config)
    store = QdrantVectorStore(client=client, collection_name="docs", embedding=emb, vector_name=vector_name)
    store.add_texts(texts, metadatas=meta, ids=list(range(len(texts))))
    return store, emb


@pytest.mark.parametrize("vector_name", ["", "dense"])
@pytest.mark.parametrize("theta", [0.0, 0.3, 0.5, 0.9])
def test_retriever_reads_qdrants_vectors_and_picks_what_its_mmr_picks(theta, vector_name):
    import asyncio
    import warnings

    from divopt_rag.integrations.langchain import DivoptRetriever
    from helpers.integration_fakes import QUERY

    store, emb = qdrant_store(vector_name=vector_name)
    emb.documents_embedded = 0
    r = DivoptRetriever(vectorstore=store, k=6, fetch_k=25, method="mmr", theta=theta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no re-embedding warning: the vectors are read
        ours = r.invoke(QUERY)
    assert emb.documents_embedded == 0
    # Qdrant's own MMR (diversity = 1 - theta) on the same fetch_k nearest points
    theirs = store.client.query_points(
        "docs", query=models.NearestQuery(nearest=emb.embed_query(QUERY),
                                          mmr=models.Mmr(diversity=1 - theta, candidates_limit=25)),
        limit=6, using=vector_name or None).points
    assert [d.metadata["_id"] for d in ours] == [p.id for p in theirs]
    # langchain-qdrant's MMR search hands lambda_mult to Qdrant as its diversity
    via_store = store.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=1 - theta)
    assert [d.metadata["_id"] for d in ours] == [d.metadata["_id"] for d in via_store]
    assert [d.metadata["_id"] for d in asyncio.run(r.ainvoke(QUERY))] == [p.id for p in theirs]


def test_qdrant_vectors_are_the_stored_ones():
    from divopt_rag.integrations.langchain import DivoptRetriever
    from helpers.integration_fakes import QUERY, hash_embed

    store, _ = qdrant_store(seed=0)
    fetched = store.similarity_search(QUERY, k=20)
    got = DivoptRetriever(vectorstore=store, k=5, fetch_k=20, vectors="store").candidate_vectors(fetched)
    want = np.asarray([hash_embed(d.page_content) for d in fetched])
    want /= np.linalg.norm(want, axis=1, keepdims=True)  # a cosine collection stores unit vectors
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


# ---- lambda_mult copied from QdrantVectorStore's own MMR (issue 49, item 2) -------------------
@pytest.mark.parametrize("lambda_mult", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_lambda_mult_means_what_qdrants_own_mmr_makes_of_it(lambda_mult):
    """langchain-qdrant's QdrantVectorStore hands lambda_mult to Qdrant as its diversity: the same
    number given to DivoptRetriever over that store picks what the store's own MMR picks (theta =
    1 - lambda_mult), and a LambdaMultWarning names the conversion."""
    from divopt_rag.integrations.langchain import DivoptRetriever, LambdaMultWarning
    from helpers.integration_fakes import QUERY

    store, _ = qdrant_store(seed=2)
    with pytest.warns(LambdaMultWarning, match=rf"theta={1 - lambda_mult:g} \(1 = pure relevance\)"):
        r = DivoptRetriever(vectorstore=store, k=6, fetch_k=25, method="mmr", lambda_mult=lambda_mult)
    assert r.theta == pytest.approx(1 - lambda_mult) and r.lambda_mult == pytest.approx(lambda_mult)
    theirs = store.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=lambda_mult)
    assert [d.metadata["_id"] for d in r.invoke(QUERY)] == [d.metadata["_id"] for d in theirs]


def test_theta_and_stores_that_keep_langchains_meaning_warn_nothing():
    import warnings

    from langchain_core.vectorstores import InMemoryVectorStore

    from divopt_rag.integrations.langchain import DivoptRetriever
    from helpers.integration_fakes import QUERY, corpus
    from helpers.langchain_fakes import HashEmbedding

    store, _ = qdrant_store(seed=2)
    texts, meta = corpus(2)
    memory = InMemoryVectorStore(HashEmbedding())
    memory.add_texts(texts, metadatas=meta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DivoptRetriever(vectorstore=store, method="mmr", theta=0.3).theta == 0.3
        r = DivoptRetriever(vectorstore=memory, k=6, fetch_k=25, method="mmr", lambda_mult=0.3)
    # LangChain's own MMR (langchain-core's InMemoryVectorStore): lambda_mult is theta
    assert r.theta == 0.3 and r.lambda_mult == 0.3
    theirs = memory.max_marginal_relevance_search(QUERY, k=6, fetch_k=25, lambda_mult=0.3)
    assert [d.id for d in r.invoke(QUERY)] == [d.id for d in theirs]
