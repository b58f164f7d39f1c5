import os

import pytest
from hypothesis import HealthCheck, settings

#: the thread pools one xdist worker may use: with ``-n 2`` on two cores, a worker on more threads
#: only fights the other for them (torch's intra-op pool, OpenMP, MKL and OpenBLAS)
_ONE_THREAD = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def pytest_configure(config):
    """With ``-n N`` (the README's command), the controller hands each worker one thread of each
    pool, through the environment the workers start with (read when numpy and torch load).
    A value the user set is kept, and a run without ``-n`` is left as it was."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        for name in _ONE_THREAD:
            os.environ.setdefault(name, "1")


def pytest_collection_modifyitems(config, items):
    """The tests marked ``ray`` start local Ray clusters (GCS, raylet, agents: a dozen processes
    each) and one of them counts every process of its session: under ``-n 2`` they run on one
    worker, one cluster at a time (``--dist loadgroup``, pyproject's addopts)."""
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))

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
