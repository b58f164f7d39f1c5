import pytest
from hypothesis import HealthCheck, settings

from helpers.pools import planted_duplicates, random_unit, unit_query

# No hypothesis example is failed for wall-clock time (issue 38, item 5): the default 200 ms
# deadline and the too-slow health check measure the machine's load, not the code. A test that
# sets its own ``settings`` keeps these unless it names them.
settings.register_profile("divopt", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("divopt")


@pytest.fixture
def small_instances():
    """(E, q) pairs: random and planted-duplicate pools, float64."""
    out = []
    for s in range(4):
        out.append((random_unit(30, 8, s), unit_query(8, s)))
        out.append((planted_duplicates(6, 5, 12, s), unit_query(12, s)))
    return out
