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
