"""divopt's LlamaIndex postprocessor against independent truths: select() on the same vectors
computed here, LangChain's published MMR, and a real VectorStoreIndex pipeline."""
import numpy as np
import pytest

pytest.importorskip("llama_index.core")
from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from pydantic import ValidationError

from divopt_rag.integrations.llamaindex import DivoptPostprocessor
from divopt_rag.models import Instance
from divopt_rag.solvers import select

from helpers.integration_fakes import QUERY, corpus, cosine, hash_embed


class HashEmbedding(BaseEmbedding):
    """LlamaIndex face of the deterministic fake embedding; counts the texts it embeds."""

    calls: int = 0

    def _get_query_embedding(self, query):
        return hash_embed(query)

    async def _aget_query_embedding(self, query):
        return hash_embed(query)

    def _get_text_embedding(self, text):
        self.calls += 1
        return hash_embed(text)


def nodes_with_embeddings(seed=0, fetch_k=20, with_vectors=True):
    """The fetch_k most similar nodes of the corpus to QUERY, as a retriever would hand them."""
    texts, meta = corpus(seed)
    E = np.asarray([hash_embed(t) for t in texts])
    cos = cosine(E, hash_embed(QUERY))
    top = np.argsort(-cos)[:fetch_k]
    nodes = [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=texts[i], metadata=meta[i],
                                    embedding=E[i].tolist() if with_vectors else None), score=float(cos[i]))
        for i in top
    ]
    return nodes, E[top], cos[top]


@pytest.mark.parametrize("method", ["mmr", "fw", "fw_ms", "dpp", "vrsd"])
@pytest.mark.parametrize("theta", [0.3, 0.8])
def test_postprocessor_picks_equal_select_on_the_same_vectors(method, theta):
    nodes, E, cos = nodes_with_embeddings()
    post = DivoptPostprocessor(top_n=5, theta=theta, method=method, order="selection")
    out = post.postprocess_nodes(nodes, query_bundle=QueryBundle(QUERY, embedding=hash_embed(QUERY)))
    want = select(Instance(E, hash_embed(QUERY), k=5, theta=theta, normalize=True), method).indices
    assert [n.node.node_id for n in out] == [nodes[i].node.node_id for i in want]
    np.testing.assert_allclose([n.score for n in out], cos[want], atol=1e-9)
    assert [n.node.metadata["divopt_rank"] for n in out] == list(range(5))
    # divopt's keys stay out of the LLM prompt, and the retrieved nodes are unchanged
    assert "divopt_rank" not in out[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "topic" in out[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert all("divopt_rank" not in n.node.metadata for n in nodes)
    assert all(n.node.metadata["divopt_score"] == n.score for n in out)


@pytest.mark.parametrize("theta", [0.0, 0.5, 0.9])
def test_postprocessor_mmr_equals_langchain_mmr(theta):
    lc = pytest.importorskip("langchain_core.vectorstores.utils")
    nodes, E, _ = nodes_with_embeddings(seed=2, fetch_k=25)
    q = np.asarray(hash_embed(QUERY))
    out = DivoptPostprocessor(top_n=6, theta=theta, method="mmr", order="selection").postprocess_nodes(
        nodes, query_bundle=QueryBundle(QUERY, embedding=q.tolist()))
    assert [n.node.node_id for n in out] == [nodes[i].node.node_id for i in lc.maximal_marginal_relevance(q, list(E), theta, 6)]


def test_nodes_without_vectors_are_embedded_with_the_model():
    with_vec, _, _ = nodes_with_embeddings()
    without, _, _ = nodes_with_embeddings(with_vectors=False)
    model = HashEmbedding()
    a = DivoptPostprocessor(top_n=5, method="fw_ms").postprocess_nodes(
        with_vec, query_bundle=QueryBundle(QUERY, embedding=hash_embed(QUERY)))
    # no metadata on the nodes' embed text would change the vectors: embed text = the text here
    for n in without:
        n.node.excluded_embed_metadata_keys = list(n.node.metadata)
    b = DivoptPostprocessor(top_n=5, method="fw_ms", embed_model=model).postprocess_nodes(without, query_str=QUERY)
    assert [n.node.node_id for n in a] == [n.node.node_id for n in b]
    assert model.calls == len(without)


def test_in_a_vector_store_index_pipeline():
    texts, meta = corpus(1)
    model = HashEmbedding()
    index = VectorStoreIndex([TextNode(id_=f"n{i}", text=t, metadata=m, excluded_embed_metadata_keys=["topic", "j"])
                              for i, (t, m) in enumerate(zip(texts, meta))], embed_model=model)
    retrieved = index.as_retriever(similarity_top_k=20).retrieve(QUERY)
    assert all(n.node.embedding is None for n in retrieved)  # SimpleVectorStore: nodes come without vectors
    ids = [n.node.node_id for n in retrieved]
    E = np.asarray([hash_embed(texts[int(i[1:])]) for i in ids])
    want = select(Instance(E, hash_embed(QUERY), k=5, theta=0.6, normalize=True), "dpp").indices
    for source in ({"index": index}, {"vector_store": index.vector_store}):
        post = DivoptPostprocessor(top_n=5, theta=0.6, method="dpp", embed_model=model, order="selection", **source)
        calls = model.calls
        out = post.postprocess_nodes(retrieved, query_str=QUERY)
        assert model.calls == calls  # vectors came from the store, not from re-embedding
        assert [n.node.node_id for n in out] == [ids[i] for i in want]


def test_in_a_query_engine_with_the_index_vectors(recwarn):
    from llama_index.core.llms import MockLLM

    texts, meta = corpus(3)
    model = HashEmbedding()
    index = VectorStoreIndex([TextNode(id_=f"n{i}", text=t, metadata=m, excluded_embed_metadata_keys=["topic", "j"])
                              for i, (t, m) in enumerate(zip(texts, meta))], embed_model=model)
    calls = model.calls
    post = DivoptPostprocessor(index=index, top_n=5, theta=0.4)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=40, node_postprocessors=[post])
    out = engine.query(QUERY).source_nodes
    assert model.calls == calls and not recwarn.list  # only the query was embedded
    # truth: the index's 40 nearest, their vectors computed here, select() with the default method
    fetched = [n.node.node_id for n in index.as_retriever(similarity_top_k=40).retrieve(QUERY)]
    E = np.asarray([hash_embed(texts[int(i[1:])]) for i in fetched])
    want = select(Instance(E, hash_embed(QUERY), k=5, theta=0.4, normalize=True)).indices
    assert [n.node.node_id for n in out] == [fetched[i] for i in want]


def test_reembedding_without_a_store_says_so(monkeypatch):
    texts, meta = corpus(1)
    model = HashEmbedding()
    index = VectorStoreIndex([TextNode(id_=f"n{i}", text=t) for i, t in enumerate(texts)], embed_model=model)
    retrieved = index.as_retriever(similarity_top_k=20).retrieve(QUERY)
    from llama_index.core import Settings

    # the global default model, restored afterwards (reading Settings.embed_model would load OpenAI's)
    monkeypatch.setattr(Settings, "_embed_model", model)
    with pytest.warns(UserWarning, match="embedding 20 retrieved nodes again.*pass index="):
        out = DivoptPostprocessor(top_n=5).postprocess_nodes(retrieved, query_str=QUERY)
    stored = DivoptPostprocessor(index=index, top_n=5).postprocess_nodes(retrieved, query_str=QUERY)
    assert [n.node.node_id for n in out] == [n.node.node_id for n in stored]


def test_edge_cases_and_bad_configuration():
    nodes, _, _ = nodes_with_embeddings(fetch_k=3)
    post = DivoptPostprocessor(top_n=5, method="fw")
    assert len(post.postprocess_nodes(nodes, query_bundle=QueryBundle(QUERY, embedding=hash_embed(QUERY)))) == 3
    assert post.postprocess_nodes([], query_str=QUERY) == []
    with pytest.raises(ValueError, match="needs the query"):
        post.postprocess_nodes(nodes)
    for kwargs, msg in [({"method": "nope"}, "unknown method"), ({"theta": -0.1}, r"theta must lie in \[0, 1\]"),
                        ({"method": "dpp", "method_params": {"bogus": 1}}, "dpp has no parameter 'bogus'"),
                        ({"top_n": 0}, "top_n"),
                        ({"thetaa": 0.2}, "unknown argument 'thetaa'; did you mean 'theta'"),
                        ({"top_k": 5}, "unknown argument 'top_k'; the number of nodes kept is top_n="),
                        ({"lambda_mult": 0.3}, "that is LangChain's name; write theta="),
                        ({"theta": 0.3, "mmr_threshold": 0.3}, "give theta or mmr_threshold, not both"),
                        ({"index": object()}, "index= must be a LlamaIndex vector index")]:
        with pytest.raises(ValidationError, match=msg):
            DivoptPostprocessor(**kwargs)


# ---- LlamaIndex's conventions (issue 49, item 5) --------------------------------------------------
@pytest.mark.parametrize("method", ["mmr", "dpp", None])
def test_nodes_come_sorted_by_score_as_llamaindexs_rerankers_return_them(method):
    """The default order: the chosen set by decreasing score (the cosine to the query), as
    LlamaIndex's rerankers sort theirs; divopt_rank keeps the pick order."""
    nodes, E, cos = nodes_with_embeddings(seed=1)
    bundle = QueryBundle(QUERY, embedding=hash_embed(QUERY))
    out = DivoptPostprocessor(top_n=6, theta=0.4, method=method).postprocess_nodes(nodes, query_bundle=bundle)
    picked = DivoptPostprocessor(top_n=6, theta=0.4, method=method, order="selection").postprocess_nodes(
        nodes, query_bundle=bundle)
    scores = [n.score for n in out]
    assert scores == sorted(scores, reverse=True)
    assert sorted(n.node.node_id for n in out) == sorted(n.node.node_id for n in picked)
    by_rank = sorted(out, key=lambda n: n.node.metadata["divopt_rank"])
    assert [n.node.node_id for n in by_rank] == [n.node.node_id for n in picked]
    cos_of = dict(zip([n.node.node_id for n in nodes], cos))  # the score: cosine to the query
    np.testing.assert_allclose(scores, [cos_of[n.node.node_id] for n in out], atol=1e-9)


@pytest.mark.parametrize("threshold", [0.2, 0.5, 0.8, 1.0])
def test_mmr_threshold_means_what_llamaindexs_mmr_makes_of_it(threshold):
    """LlamaIndex's mmr_threshold is accepted for theta with its meaning (1 = pure relevance). Its
    MMR (get_top_k_mmr_embeddings) penalizes the similarity to the latest pick only, which for two
    picks is the published MMR's penalty: the first two picks must agree."""
    from llama_index.core.indices.query.embedding_utils import get_top_k_mmr_embeddings

    nodes, E, _ = nodes_with_embeddings(seed=3, fetch_k=25)
    q = hash_embed(QUERY)
    post = DivoptPostprocessor(top_n=2, mmr_threshold=threshold, method="mmr", order="selection")
    assert post.theta == threshold == post.mmr_threshold
    ours = [n.node.node_id for n in post.postprocess_nodes(nodes, query_bundle=QueryBundle(QUERY, embedding=q))]
    _, ids = get_top_k_mmr_embeddings(q, E.tolist(), similarity_top_k=2, embedding_ids=[n.node.node_id for n in nodes],
                                      mmr_threshold=threshold)
    assert ours == ids


def test_async_postprocess_uses_the_models_async_api_and_equals_the_sync_one():
    import asyncio

    class AsyncCounting(HashEmbedding):
        async_texts: int = 0
        async_queries: int = 0

        async def _aget_query_embedding(self, query):
            self.async_queries += 1
            return hash_embed(query)

        async def _aget_text_embedding(self, text):
            self.async_texts += 1
            return hash_embed(text)

    without, _, _ = nodes_with_embeddings(with_vectors=False)
    for n in without:
        n.node.excluded_embed_metadata_keys = list(n.node.metadata)
    model = AsyncCounting()
    post = DivoptPostprocessor(top_n=5, theta=0.3, method="mmr", embed_model=model)
    got = asyncio.run(post.apostprocess_nodes(without, query_str=QUERY))
    assert model.async_queries == 1 and model.async_texts == len(without) and model.calls == 0
    want = post.postprocess_nodes(without, query_str=QUERY)
    assert [(n.node.node_id, n.score) for n in got] == [(n.node.node_id, n.score) for n in want]
