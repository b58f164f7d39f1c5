"""divopt's MMR, eager and lazy, equals LangChain's published maximal_marginal_relevance."""
import pytest

from divopt_rag.models import Instance
from divopt_rag.solvers import select

from helpers.pools import random_unit, unit_query

lc = pytest.importorskip("langchain_core.vectorstores.utils")


@pytest.mark.parametrize("method", ["mmr", "mmr_lazy"])
@pytest.mark.parametrize("n, k", [(60, 8), (300, 12)])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("theta", [0.0, 0.25, 0.3, 0.5, 0.8, 1.0])
def test_mmr_equals_langchain(method, n, k, seed, theta):
    E, q = random_unit(n, 16, seed), unit_query(16, seed)
    ours = select(Instance(E, q, k=k, theta=theta), method).indices.tolist()
    theirs = lc.maximal_marginal_relevance(q, list(E), lambda_mult=theta, k=k)
    assert ours == [int(i) for i in theirs]
