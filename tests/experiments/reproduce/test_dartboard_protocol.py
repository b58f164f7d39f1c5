"""The Dartboard paper's Table 2 protocol pieces (experiments.reproduce.dartboard) against
plain transcriptions of the authors' retrieval code (EmergenceAI/dartboard: dartboard.py,
end2end/do_eval.py), written here in float64 numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from divopt_rag.experiments.reproduce.dartboard import mmr_cosine, paper_ndcg, random_rankings
from divopt_rag.models import Instance


def _authors_mmr_cos(E, q, k, diversity, triage):
    """get_knn + get_dists_cossim + get_mmr_crosscoder2, transcribed (cosine distances (1 - cos)/2)."""
    sims = E @ q
    top = sorted(range(len(E)), key=lambda i: -sims[i])[:triage]  # Python's sort is stable
    F = E[top]
    qd = np.clip(1 - (F @ q + 1) / 2, 0, 1)
    D = np.clip(1 - (F @ F.T + 1) / 2, 0, 1)
    picks = [int(np.argmin(qd))]
    dist_sum, pair_sum = qd[picks[0]], 0.0
    while len(picks) < k:
        tot = dist_sum + qd
        pair = pair_sum + D[picks, :].sum(axis=0)
        m = len(picks) + 1
        score = (1 - diversity) * tot / m - diversity * pair / m ** 2
        score[picks] = np.inf
        b = int(np.argmin(score))
        dist_sum, pair_sum = tot[b], pair[b]
        picks.append(b)
    return [top[i] for i in picks]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("diversity", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_mmr_cosine_is_the_authors_set_average_mmr(seed, diversity):
    rng = np.random.default_rng(seed)
    n, d, k = 150, 12, 6
    E = rng.normal(size=(n, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.normal(size=d)
    q /= np.linalg.norm(q)
    inst = Instance(torch.from_numpy(E), torch.from_numpy(q), k=k, theta=1.0)
    got = [int(i) for i in mmr_cosine(inst, k, theta=1.0 - diversity, triage=100)]
    assert got == _authors_mmr_cos(E, q, k, diversity, 100)


def test_paper_ndcg_is_the_first_positive_discount():
    assert paper_ndcg(["a", "b", "c"], {"a", "c"}) == 1.0
    assert paper_ndcg(["x", "y", "c"], {"a", "c"}) == pytest.approx(1 / math.log2(4))  # rank 3: 1/log2(4) = 0.5
    assert paper_ndcg(["x", "y"], {"a"}) == 0.0 and paper_ndcg([], {"a"}) == 0.0


def test_random_rankings_are_seeded_draws_without_repeats():
    ids = [f"p{i}" for i in range(50)]
    a, b = random_rankings(ids, 5, seed=3), random_rankings(ids, 5, seed=3)
    assert a == b and len(a) == 10 and all(len(set(r)) == 5 and set(r) <= set(ids) for r in a)
    assert random_rankings(ids, 5, seed=4) != a and random_rankings(ids[:3], 5, seed=0)[0].__len__() == 3
