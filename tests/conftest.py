import pytest
from hypothesis import HealthCheck, settings

from helpers.pools import planted_duplicates, random_unit, unit_query

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


@pytest.fixture
def small_instances():
    """(E, q) pairs: random and planted-duplicate pools, float64."""
    out = []
    for s in range(4):
        out.append((random_unit(30, 8, s), unit_query(8, s)))
        out.append((planted_duplicates(6, 5, 12, s), unit_query(12, s)))
    return out
