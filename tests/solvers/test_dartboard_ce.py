"""Dartboard hybrid, D-CC and the cross-encoder baselines (KNN-CC, MMR-CC) against float64
transcriptions of the paper, with a fake cross-encoder (a callable over text pairs)."""
import numpy as np
import pytest
import torch

from helpers import dartboard_paper as paper
from helpers.pools import planted_duplicates, random_unit, unit_query
from divopt_rag.models import Instance
from divopt_rag.solvers import METHOD_NEEDS, METHODS, instance_methods, select

CE_METHODS = ("dartboard_hybrid", "dartboard_cc", "knn_cc", "mmr_cc")


class FakeCrossEncoder:
    """Scores ("query", "p<i>") -> qs[i] and ("p<i>", "p<j>") -> ps[i, j]; records what it saw."""

    def __init__(self, qs, ps):
        self.qs, self.ps = qs, ps
        self.seen: list[tuple[str, str]] = []

    def __call__(self, pairs):
        self.seen.extend(pairs)
        out = []
        for a, b in pairs:
            j = int(b[1:])
            out.append(self.qs[j] if a == "query" else self.ps[int(a[1:]), j])
        return np.array(out, dtype=np.float32)  # a model's usual output dtype


def scores(E, q, seed):
    """Logit-like cross-encoder tables correlated with the embeddings; pair scores asymmetric."""
    rng = np.random.default_rng(seed)
    E64, q64 = E.astype(np.float64), q.astype(np.float64)
    qs = (9.0 * (E64 @ q64) + 0.8 * rng.standard_normal(len(E))).astype(np.float32).astype(np.float64)
    ps = (11.0 * (E64 @ E64.T) - 2.0 + 0.5 * rng.standard_normal((len(E), len(E))))
    return qs, ps.astype(np.float32).astype(np.float64)


def cases(dtype=np.float64):
    yield "random", random_unit(150, 12, 0).astype(dtype), unit_query(12, 0).astype(dtype), 0
    for s in range(2):
        yield f"dups{s}", planted_duplicates(30, 5, 16, s).astype(dtype), unit_query(16, s).astype(dtype), 10 + s
    yield "small", planted_duplicates(8, 5, 10, 7).astype(dtype), unit_query(10, 7).astype(dtype), 20


def precomputed(method, qs, ps):
    return {"query_scores": qs, **({"pair_scores": ps} if method in ("dartboard_cc", "mmr_cc") else {})}


def run_both_ways(inst, method, qs, ps, **params):
    """The selection from a fake scorer and from the same scores precomputed; they must agree."""
    n = inst.n
    ce = FakeCrossEncoder(qs, ps)
    texts = [f"p{i}" for i in range(n)]
    a = select(inst, method, cross_encoder=ce, query="query", passages=texts, **params)
    b = select(inst, method, **precomputed(method, qs, ps), **params)
    assert a.indices.tolist() == b.indices.tolist(), method
    K = min(n, 100)
    n_pairs = K + (K * K if method in ("dartboard_cc", "mmr_cc") else 0)
    assert len(ce.seen) == n_pairs  # only the triaged pool is scored
    return a


def test_registered_with_their_needs():
    for m in CE_METHODS:
        assert m in METHODS and METHOD_NEEDS[m] == ("cross_encoder",) and m not in instance_methods()
    assert "dartboard" in instance_methods()


@pytest.mark.parametrize("sigma", [0.05, 0.1, 0.3, 1.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dartboard_cc_equals_paper(sigma, dtype):
    for name, E, q, seed in cases(dtype):
        qs, ps = scores(E, q, seed)
        inst = Instance(E, q, k=7, theta=0.5)
        if sigma == 0.05:  # the scorer path once per pool; the precomputed path for every sigma
            got = run_both_ways(inst, "dartboard_cc", qs, ps, sigma=sigma).indices.tolist()
        else:
            got = select(inst, "dartboard_cc", sigma=sigma, **precomputed("dartboard_cc", qs, ps)).indices.tolist()
        ref = paper.dartboard_cc(E.astype(np.float64), q.astype(np.float64), qs, ps, 7, sigma)
        assert got == ref, f"sigma={sigma} {name}: {got} != {ref}"


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0, 5.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dartboard_hybrid_equals_paper(sigma, dtype):
    for name, E, q, seed in cases(dtype):
        qs, ps = scores(E, q, seed)
        inst = Instance(E, q, k=7, theta=0.5)
        if sigma == 0.05:
            got = run_both_ways(inst, "dartboard_hybrid", qs, ps, sigma=sigma).indices.tolist()
        else:
            got = select(inst, "dartboard_hybrid", sigma=sigma, query_scores=qs).indices.tolist()
        ref = paper.dartboard_hybrid(E.astype(np.float64), q.astype(np.float64), qs, 7, sigma)
        assert got == ref, f"sigma={sigma} {name}: {got} != {ref}"


def test_knn_cc_equals_paper():
    for name, E, q, seed in cases(np.float32):
        qs, ps = scores(E, q, seed)
        got = run_both_ways(Instance(E, q, k=7, theta=0.5), "knn_cc", qs, ps).indices.tolist()
        assert got == paper.knn_cc(E.astype(np.float64), q.astype(np.float64), qs, 7), name


@pytest.mark.parametrize("theta", [0.0, 0.3, 0.7, 1.0])
def test_mmr_cc_equals_paper(theta):
    for name, E, q, seed in cases():
        qs, ps = scores(E, q, seed)
        inst = Instance(E, q, k=7, theta=theta)
        got = (run_both_ways(inst, "mmr_cc", qs, ps) if theta == 0.3 else
               select(inst, "mmr_cc", **precomputed("mmr_cc", qs, ps))).indices.tolist()
        ref = paper.mmr_cc(E, q, qs, ps, 7, diversity=1 - theta)
        assert got == ref, f"theta={theta} {name}: {got} != {ref}"


def test_hybrid_takes_cross_encoder_relevance_from_the_instance():
    """The usual divopt idiom: an Instance built with relevance = cross-encoder scores."""
    E, q = planted_duplicates(30, 5, 16, 4), unit_query(16, 4)
    qs, _ = scores(E, q, 4)
    inst = Instance(E, q, relevance=qs, k=6, theta=0.5)
    got = select(inst, "dartboard_hybrid", query_scores=inst.relevance).indices.tolist()
    assert got == paper.dartboard_hybrid(E, q, qs, 6, 0.096)


def test_triage_parameter_and_k_above_100():
    E, q = random_unit(120, 8, 1), unit_query(8, 1)
    qs, ps = scores(E, q, 1)
    sel = select(Instance(E, q, k=3, theta=0.5), "dartboard_cc", query_scores=qs, pair_scores=ps, triage=40)
    assert sel.info["triage"] == 40
    assert sel.indices.tolist() == paper.dartboard_cc(E, q, qs, ps, 3, 0.096, K=40)
    sel = select(Instance(E, q, k=101, theta=0.5), "knn_cc", query_scores=qs)
    assert sel.info["triage"] == 101 and sel.indices.tolist() == paper.knn_cc(E, q, qs, 101, K=101)


def test_low_precision_storage():
    E, q = planted_duplicates(30, 5, 16, 5).astype(np.float32), unit_query(16, 5).astype(np.float32)
    qs, ps = scores(E, q, 5)
    for dt in (torch.float16, torch.bfloat16):
        inst = Instance(torch.from_numpy(E).to(dt), q, k=6, theta=0.5, normalize=True)
        for m in CE_METHODS:
            sel = select(inst, m, **precomputed(m, qs, ps))
            assert len(set(sel.indices.tolist())) == 6 and np.isfinite(sel.objective), (m, dt)


def test_clear_errors():
    E, q = random_unit(30, 6, 0), unit_query(6, 0)
    inst = Instance(E, q, k=4, theta=0.5)
    qs, ps = scores(E, q, 0)
    texts = [f"p{i}" for i in range(30)]
    for m in CE_METHODS:
        with pytest.raises(ValueError, match="cross_encoder="):
            select(inst, m)
    with pytest.raises(ValueError, match="pair_scores="):
        select(inst, "dartboard_cc", query_scores=qs)  # relevance given, passage pairs missing
    with pytest.raises(TypeError, match="load_cross_encoder"):
        select(inst, "dartboard_hybrid", cross_encoder="/models/ms-marco", query="query", passages=texts)
    with pytest.raises(ValueError, match="passages must hold n = 30"):
        select(inst, "knn_cc", cross_encoder=FakeCrossEncoder(qs, ps), query="query", passages=texts[:5])
    with pytest.raises(ValueError, match="query"):
        select(inst, "knn_cc", cross_encoder=FakeCrossEncoder(qs, ps), passages=texts)
    with pytest.raises(ValueError, match="returned 2 scores for 30 pairs"):
        select(inst, "knn_cc", cross_encoder=lambda pairs: [0.0, 1.0], query="query", passages=texts)
    with pytest.raises(ValueError, match="non-finite"):
        select(inst, "knn_cc", cross_encoder=lambda pairs: [np.nan] * len(pairs), query="query", passages=texts)
    with pytest.raises(ValueError, match=r"pair_scores must have shape \(30, 30\)"):
        select(inst, "mmr_cc", query_scores=qs, pair_scores=ps[:10])
    with pytest.raises(ValueError, match="query_scores must have length 30"):
        select(inst, "knn_cc", query_scores=qs[:5])
    with pytest.raises(ValueError, match="ce_range"):
        select(inst, "dartboard_cc", query_scores=qs, pair_scores=ps, ce_range=(1.0, -1.0))
    with pytest.raises(ValueError, match="sigma"):
        select(inst, "dartboard_hybrid", query_scores=qs, sigma=-1)
    with pytest.raises(ValueError, match="triage"):
        select(inst, "mmr_cc", query_scores=qs, pair_scores=ps, triage=2)
