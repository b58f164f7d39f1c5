"""The same list on ties: exact duplicate rows (duplicate chunks) resolve to the lowest index in
every MMR path, as LangChain's maximal_marginal_relevance (a strict ">" scan) and Haystack's
diversity ranker do; the published libraries are the truth."""
import numpy as np
import pytest
import torch

from divopt_rag.models import Instance
from divopt_rag.solvers import select

lc = pytest.importorskip("langchain_core.vectorstores.utils")


def with_duplicates(n, d, seed, dtype, copies=40):
    """Random rows with ``copies`` exact copies planted at random positions, the query's nearest
    row among the copied ones (so the first pick is a tie), and the query."""
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d)).astype(dtype)
    src, dst = rng.choice(n, size=(2, copies), replace=False)
    E[dst] = E[src]
    q = (E[src[0]] + 0.2 * rng.standard_normal(d)).astype(dtype)
    return E, q


PATHS = [("mmr", {}), ("mmr_lazy", {}), ("mmr_lazy", {"block": 1}), ("mmr_lazy", {"dense_share": 0.001})]


@pytest.mark.parametrize("method, params", PATHS, ids=["mmr", "lazy", "lazy-block1", "lazy-dense"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [64, 97])
def test_duplicates_resolve_like_langchain(method, params, dtype, d):
    # (the rule before this test took the later copy on 8 of these 16 cells: mmr and lazy-block1)
    for seed in range(3):
        E, q = with_duplicates(160, d, seed, dtype)
        for theta in (0.0, 0.5, 0.7):
            theirs = [int(i) for i in lc.maximal_marginal_relevance(q, E, lambda_mult=theta, k=12)]
            ours = select(Instance(E, q, k=12, theta=theta, normalize=True), method, **params).indices.tolist()
            assert ours == theirs, (seed, theta)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_copy_of_the_best_row_loses_to_the_first(dtype):
    E, q = with_duplicates(120, 33, 5, dtype)
    E[[7, 50, 90]] = q  # three exact copies of the query: scores 1 up to rounding
    for method in ("mmr", "mmr_lazy"):
        assert select(Instance(E, q, k=3, theta=0.5, normalize=True), method).indices[0] == 7


@pytest.mark.parametrize("theta", [0.0, 0.3, 0.5, 1.0])
def test_duplicates_resolve_like_haystacks_diversity_ranker(theta):
    pytest.importorskip("haystack")
    try:  # haystack-ai 3.x: sentence-transformers-haystack; 2.x: haystack itself
        from haystack_integrations.components.rankers import sentence_transformers as rankers
    except ImportError:
        rankers = pytest.importorskip("haystack.components.rankers")
    from haystack import Document

    from haystack_integrations.components.rankers.divopt.ranker import DivoptRanker

    E, q = with_duplicates(60, 48, 3, np.float32, copies=20)
    texts = [f"passage {i}" for i in range(len(E))]
    vectors = {**dict(zip(texts, E)), "query": q}

    class Model:  # a sentence-transformers stand-in: the planted vectors, for both rankers
        def encode(self, batch, convert_to_tensor=False, **kwargs):
            out = np.stack([vectors[t] for t in batch])
            return torch.from_numpy(out) if convert_to_tensor else out

    docs = [Document(id=f"d{i}", content=t) for i, t in enumerate(texts)]
    theirs = rankers.SentenceTransformersDiversityRanker(strategy="maximum_margin_relevance", top_k=10,
                                                         lambda_threshold=theta)
    ours = DivoptRanker(model="stand-in", method="mmr", top_k=10, theta=theta)
    theirs.model = ours.model = Model()
    want = [d.id for d in theirs.run(query="query", documents=docs)["documents"]]
    assert [d.id for d in ours.run(query="query", documents=docs)["documents"]] == want


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA"))])
@pytest.mark.parametrize("method", ["mmr", "mmr_lazy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_duplicates_resolve_like_langchain_in_every_storage(method, dtype, device):
    """In every storage dtype, on the CPU and the GPU, against LangChain on the stored rows. Stored
    in float16, normalized rows are unit only to about 5e-4: the float64 re-scoring of near-ties
    must still see that the stored relevance is E q (found on the H200: seed 1 picked row 10 before
    row 120, 1e-5 lower in cosine, because the stored relevance was taken for a user's)."""
    for seed in range(3):
        E, q = with_duplicates(300, 97, seed, np.float32)
        inst = Instance(torch.from_numpy(E).to(device, dtype), torch.from_numpy(q).to(device, dtype), k=12,
                        theta=0.5, normalize=True)
        stored, q64 = inst.E.double().cpu().numpy(), inst.q.double().cpu().numpy()  # what the device holds
        theirs = [int(i) for i in lc.maximal_marginal_relevance(q64, stored, 0.5, 12)]
        assert np.asarray(select(inst, method).indices).tolist() == theirs, seed
