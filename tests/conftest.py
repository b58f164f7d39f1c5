import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# No hypothesis example is failed for wall-clock time (issue 38, item 5): the default 200 ms
# deadline and the too-slow health check measure the machine's load, not the code. A test that
# sets its own ``settings`` keeps these unless it names them.
settings.register_profile("divopt", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("divopt")


@pytest.fixture(autouse=True)
def _embedding_cache_per_test(tmp_path_factory, monkeypatch):
    """Each test's default embedding cache is a fresh folder of its own (DIVOPT_RAG_CACHE_DIR), so
    no test reads another's vectors and the suite writes nothing into the user's cache folder."""
    monkeypatch.setenv("DIVOPT_RAG_CACHE_DIR", str(tmp_path_factory.mktemp("divopt-cache")))


def random_unit(n, d, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    return E.astype(dtype)


def planted_duplicates(n_clusters, per_cluster, d, seed, jitter=0.05):
    """Clusters of near-duplicate rows (cosine ~ 1 - jitter^2/2) around random centers."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((n_clusters, d))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    E = np.repeat(centers, per_cluster, axis=0) + jitter * rng.standard_normal((n_clusters * per_cluster, d)) / np.sqrt(d)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    perm = rng.permutation(E.shape[0])
    return E[perm]


def unit_query(d, seed):
    rng = np.random.default_rng(seed + 10_000)
    q = rng.standard_normal(d)
    return q / np.linalg.norm(q)


@pytest.fixture
def small_instances():
    """(E, q) pairs: random and planted-duplicate pools, float64."""
    out = []
    for s in range(4):
        out.append((random_unit(30, 8, s), unit_query(8, s)))
        out.append((planted_duplicates(6, 5, 12, s), unit_query(12, s)))
    return out
