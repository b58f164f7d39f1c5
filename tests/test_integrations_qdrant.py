"""divopt's mmr against Qdrant's own MMR (qdrant-client's local mode, an in-process collection):
the same candidates give the same picks in the same order, with Qdrant's diversity = 1 - theta."""
import numpy as np
import pytest

qdrant = pytest.importorskip("qdrant_client")
from qdrant_client import models

from divopt_rag.integrations import select_candidates

from conftest import planted_duplicates


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
