"""alpha-nDCG and subtopic recall come from ir_measures (its pyndeval provider, TREC's ndeval)
where it is installed; divopt's own transcription, kept for the core install, gives the same
numbers, on one subtopic per passage (clusters, word senses) and on several (the greedy ideal
breaks ties as ndeval does), so a table never depends on which of the two computed it."""
import random
import sys

import pytest

from divopt_rag.experiments.measures import metrics

ir_measures = pytest.importorskip("ir_measures")
pytest.importorskip("pyndeval")


def cases(seed, multi):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(30)]
    for _ in range(15):
        if multi:
            subs = {d: {f"s{rng.randrange(6)}" for _ in range(rng.randrange(1, 3))} for d in docs if rng.random() < .7}
        else:
            subs = {d: f"s{rng.randrange(6)}" for d in docs if rng.random() < .7}
        yield rng.sample(docs, 12), subs


def ndeval(measure, ranked, subs):
    labels = {d: ({ls} if isinstance(ls, str) else ls) for d, ls in subs.items()}
    qrels = [ir_measures.Qrel("q", d, 1, s) for d, ls in labels.items() for s in ls]
    run = [ir_measures.ScoredDoc("q", d, float(len(ranked) - r)) for r, d in enumerate(ranked)]
    return next(ir_measures.pyndeval.iter_calc([measure], qrels, run)).value


@pytest.mark.parametrize("k", [1, 5, 10])
def test_measures_are_ir_measures_own(k):
    for ranked, subs in cases(k, multi=True):
        assert metrics.alpha_ndcg(ranked, subs, k, alpha=0.3) == ndeval(ir_measures.alpha_nDCG(alpha=0.3) @ k, ranked, subs)
        assert metrics.subtopic_recall(ranked, subs, k) == ndeval(ir_measures.StRecall @ k, ranked, subs)


@pytest.mark.parametrize("multi", [False, True])
@pytest.mark.parametrize("k", [1, 5, 12])
def test_the_core_installs_transcription_equals_ndeval(k, multi, monkeypatch):
    for ranked, subs in cases(100 + k, multi=multi):
        lib = metrics.alpha_ndcg(ranked, subs, k), metrics.subtopic_recall(ranked, subs, k)
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "pyndeval", None)  # as in the core install: no provider
            own = metrics.alpha_ndcg(ranked, subs, k), metrics.subtopic_recall(ranked, subs, k)
        assert own == pytest.approx(lib, abs=1e-12)


# --------------------------------------------------------------------------------------------
# deeper than ndeval evaluates (issue 48, item 1): a self-sized robust set of 60 passages is
# scored at k = 60, where pyndeval asserts "ndeval only supports cutoffs up to 20"
# --------------------------------------------------------------------------------------------
def _distinct_truth(ranked, labelled):
    """alpha-nDCG@len(ranked) by hand when every labelled passage has a subtopic of its own: no
    label repeats, so a gain is 1 at a labelled rank and 0 elsewhere, and the ideal ranks the m
    labelled passages first (float64, any alpha)."""
    import math

    dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(ranked) if d in labelled)
    idcg = sum(1 / math.log2(r + 2) for r in range(min(len(ranked), len(labelled))))
    return dcg / idcg


@pytest.mark.parametrize("k", [21, 40, 60])
def test_alpha_ndcg_beyond_ndevals_cutoff_is_divopts_own_never_an_error(k, monkeypatch):
    assert metrics.NDEVAL_CUTOFF_MAX == 20  # pyndeval's own assertion, named once
    rng = random.Random(k)
    docs = [f"d{i}" for i in range(60)]
    labelled = set(rng.sample(docs, 35))
    subs = {d: f"s{i}" for i, d in enumerate(sorted(labelled))}
    ranked = rng.sample(docs, k)
    value = metrics.alpha_ndcg(ranked, subs, k)
    assert value == pytest.approx(_distinct_truth(ranked, labelled), abs=1e-12)
    assert metrics.subtopic_recall(ranked, subs, k) == pytest.approx(len(labelled & set(ranked)) / len(labelled))
    with monkeypatch.context() as m:  # the same number the core install (no pyndeval) gives
        m.setitem(sys.modules, "pyndeval", None)
        assert metrics.alpha_ndcg(ranked, subs, k) == value


def test_a_robust_rows_whole_set_measures_with_pyndeval_installed():
    """The measures of a whole self-sized set (no cutoff: k = its size, here 60) are computed, as
    in the sweep of issue 48 item 1, where 4 of 8 runs raised ndeval's AssertionError."""
    import numpy as np

    from divopt_rag.models import Instance

    rng = np.random.default_rng(0)
    E = rng.normal(size=(60, 8))
    inst = Instance(E=E / np.linalg.norm(E, axis=1, keepdims=True), q=rng.normal(size=8), k=60, theta=0.5, normalize=True,
                    ids=[f"p{i}" for i in range(60)])
    subs = {f"p{i}": i % 7 for i in range(60)}
    out = metrics.selection_metrics(inst, list(range(60)), subtopics=subs)
    assert out["s_recall"] == 1.0 and 0 < out["alpha_ndcg"] <= 1 + 1e-12
