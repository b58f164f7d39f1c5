"""Metrics against hand-computed values and plain-loop re-implementations."""
import math

import numpy as np
import pytest
import torch

from divopt_rag.experiments.measures import metrics as M
from divopt_rag.models import Instance, ccbqp_objective

S2 = 1 / math.sqrt(2)


def test_recall_and_ndcg_hand_case():
    qrels = {"a": 1, "b": 2, "z": 1}
    ranked = ["a", "c", "b"]
    assert M.recall_at_k(ranked, qrels, 3) == pytest.approx(2 / 3)
    assert M.recall_at_k(ranked, qrels, 1) == pytest.approx(1 / 3)
    dcg = 1 / math.log2(2) + 0 + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert M.ndcg_at_k(ranked, qrels, 3) == pytest.approx(dcg / idcg)
    # order matters for nDCG: b first is the ideal prefix
    dcg2 = 2 + 1 / math.log2(3)
    assert M.ndcg_at_k(["b", "a", "c"], qrels, 3) == pytest.approx(dcg2 / idcg)


def test_ir_scores_many_queries_and_unjudged_is_nan():
    out = M.ir_scores({1: [5, 6], 2: [7, 8]}, {1: {6: 1}, 2: {9: 0}}, 2)
    assert out[1]["R@2"] == pytest.approx(1.0)
    assert out[1]["nDCG@2"] == pytest.approx(1 / math.log2(3))
    assert math.isnan(out[2]["R@2"]) and math.isnan(out[2]["nDCG@2"])
    with pytest.raises(ValueError, match="unique"):
        M.recall_at_k(["a", "a"], {"a": 1})
    with pytest.raises(TypeError, match="relevance grade"):
        M.recall_at_k(["a"], {"a": "high"})


def test_ilad_ils_hand_case():
    E = np.array([[1.0, 0.0], [0.0, 1.0], [S2, S2]])
    assert M.ils(E, [0, 1, 2]) == pytest.approx((0 + S2 + S2) / 3)
    assert M.ilad(E, [0, 1, 2]) == pytest.approx(1 - 2 * S2 / 3)
    assert M.ilad(E, [0, 1]) == pytest.approx(1.0)
    assert math.isnan(M.ilad(E, [2]))


def test_alpha_ndcg_and_s_recall_hand_case():
    sub = {"a": {1, 2}, "b": {1}, "c": {3}, "d": set()}
    # ranking b, a, c with alpha = 1/2: gains 1, (1/2 + 1), 1
    dcg = 1 + 1.5 / math.log2(3) + 1 / 2
    # greedy ideal: a (gain 2), c (gain 1), b (gain 1/2)
    idcg = 2 + 1 / math.log2(3) + 0.5 / 2
    assert M.alpha_ndcg(["b", "a", "c"], sub, 3, alpha=0.5) == pytest.approx(dcg / idcg)
    assert M.alpha_ndcg(["a", "c", "b"], sub, 3, alpha=0.5) == pytest.approx(1.0)
    # alpha = 0 is plain nDCG with gain = number of subtopics covered
    assert M.alpha_ndcg(["b", "c"], sub, 2, alpha=0.0) == pytest.approx(
        (1 + 1 / math.log2(3)) / (2 + 1 / math.log2(3))
    )
    assert M.subtopic_recall(["b", "c"], sub) == pytest.approx(2 / 3)
    assert M.subtopic_recall(["a", "b", "c"], sub, k=1) == pytest.approx(2 / 3)
    assert M.subtopic_recall(["b"], {"b": 7, "e": 8}) == pytest.approx(1 / 2)  # one label per passage
    assert math.isnan(M.alpha_ndcg(["x"], {"x": set()}))
    with pytest.raises(ValueError, match="alpha"):
        M.alpha_ndcg(["a"], sub, alpha=1.5)


def test_vrsd_and_jaccard_hand_case():
    E = np.array([[1.0, 0.0], [0.0, 1.0], [S2, S2]])
    assert M.vrsd_score(E, [1.0, 0.0], [0, 1]) == pytest.approx(S2)
    assert M.vrsd_score(E, [1.0, 0.0], [0]) == pytest.approx(1.0)
    assert M.jaccard([1, 2, 3], [2, 3, 4]) == pytest.approx(0.5)
    assert M.jaccard(np.array([1, 2]), [2, 1]) == pytest.approx(1.0)
    assert M.jaccard(["x"], ["y"]) == 0.0


def test_dartboard_score_matches_plain_loop():
    rng = np.random.default_rng(0)
    E = rng.normal(size=(12, 5))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = rng.normal(size=5)
    q /= np.linalg.norm(q)
    S, sigma = [3, 7, 1], 0.2

    def N(dist):
        return math.exp(-dist * dist / (2 * sigma * sigma)) / (sigma * math.sqrt(2 * math.pi))

    P = [N((1 - E[t] @ q) / 2) for t in range(12)]
    Z = sum(P)
    total = sum(P[t] / Z * max(N((1 - E[t] @ E[g]) / 2) for g in S) for t in range(12))
    assert M.dartboard_score(E, q, S, sigma) == pytest.approx(math.log(total), rel=1e-9)
    # adding an item never lowers the score (max over a larger set)
    assert M.dartboard_score(E, q, S + [0], sigma) >= M.dartboard_score(E, q, S, sigma)
    with pytest.raises(ValueError, match="sigma"):
        M.dartboard_score(E, q, S, 0.0)


def test_selection_metrics_row():
    rng = np.random.default_rng(1)
    E = rng.normal(size=(10, 4))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    q = E[0]
    ids = np.array([f"p{i}" for i in range(10)])
    inst = Instance(torch.as_tensor(E), torch.as_tensor(q), k=3, theta=0.6, ids=ids)
    sel = [0, 4, 2]
    row = M.selection_metrics(inst, sel, qrels={"p0": 1, "p9": 1}, subtopics={"p0": 0, "p4": 1, "p9": 2},
                              sigma=0.3)
    assert row["objective"] == pytest.approx(ccbqp_objective(inst, sel))
    assert row["relevance_sum"] == pytest.approx(sum(float(E[i] @ q) for i in sel))
    assert row["recall"] == pytest.approx(0.5)
    assert row["s_recall"] == pytest.approx(2 / 3)
    assert row["ilad"] == pytest.approx(M.ilad(E, sel))
    assert row["vrsd"] == pytest.approx(M.vrsd_score(E, q, sel))
    assert set(row) >= {"ndcg", "alpha_ndcg", "dartboard", "ils"}
    with pytest.raises(ValueError, match="indices"):
        M.selection_metrics(inst, [0, 0, 1])


def test_alpha_ndcg_matches_plain_loop_on_random_single_label_cases():
    rng = np.random.default_rng(4)
    for _ in range(20):
        n, k, alpha = int(rng.integers(3, 30)), int(rng.integers(1, 8)), float(rng.uniform(0, 1))
        sub = {f"d{i}": int(rng.integers(0, 5)) for i in range(n)}
        ranked = [f"d{i}" for i in rng.permutation(n)[:k]]

        def dcg(labels):
            seen, total = {}, 0.0
            for r, lab in enumerate(labels[:k]):
                total += (1 - alpha) ** seen.get(lab, 0) / math.log2(r + 2)
                seen[lab] = seen.get(lab, 0) + 1
            return total

        # plain greedy over passages for the ideal ranking
        left, seen, ideal = list(sub.values()), {}, []
        for _ in range(min(k, n)):
            j = max(range(len(left)), key=lambda t: (1 - alpha) ** seen.get(left[t], 0))
            lab = left.pop(j)
            ideal.append(lab)
            seen[lab] = seen.get(lab, 0) + 1
        want = dcg([sub[d] for d in ranked]) / dcg(ideal)
        assert M.alpha_ndcg(ranked, sub, k, alpha) == pytest.approx(want)


def test_consistency_between_two_runs():
    import pandas as pd

    a = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "theta": [0.5, 0.9, 0.5], "method": ["fw"] * 3,
                      "selected": [["a", "b"], ["a", "c"], ["x", "y"]]})
    b = pd.DataFrame({"query_id": ["q1", "q1", "q3"], "theta": [0.5, 0.9, 0.5], "method": ["fw"] * 3,
                      "selected": [["b", "a"], ["a", "d"], ["x", "y"]]})
    out = M.consistency(a, b)
    assert out.sort_values("theta").jaccard.tolist() == pytest.approx([1.0, 1 / 3])
    assert len(out) == 2  # q2 / q3 are in one table only
    with pytest.raises(ValueError, match="several rows"):
        M.consistency(pd.concat([a, a]), b)


def test_vrsd_win_matches_plain_loops():
    rng = np.random.default_rng(7)
    for _ in range(10):
        E = rng.normal(size=(15, 6))
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        q = rng.normal(size=6)
        A = rng.choice(15, size=int(rng.integers(1, 6)), replace=False).tolist()
        B = rng.choice(15, size=int(rng.integers(2, 6)), replace=False).tolist()

        def sim(S):  # cos(sum of the selected vectors, q), written out
            v = [sum(E[i][t] for i in S) for t in range(6)]
            return sum(v[t] * q[t] for t in range(6)) / (math.sqrt(sum(x * x for x in v)) * math.sqrt(sum(x * x for x in q)))

        def div(S):  # mean over unordered pairs of 1 - cosine
            pairs = [(i, j) for i in S for j in S if i < j]
            if not pairs:
                return float("nan")
            return sum(1 - float(E[i] @ E[j]) for i, j in pairs) / len(pairs)

        out = M.vrsd_win(E, q, A, B)
        assert out["similarity_a"] == pytest.approx(sim(A)) and out["similarity_b"] == pytest.approx(sim(B))
        assert out["similarity_win"] == float(sim(A) > sim(B))
        if len(A) < 2:
            assert math.isnan(out["diversity_a"]) and math.isnan(out["diversity_win"])
        else:
            assert out["diversity_a"] == pytest.approx(div(A))
            assert out["diversity_win"] == float(div(A) > div(B))
    same = M.vrsd_win(E, q, [0, 1], [1, 0])  # the same set: a tie on both, no win
    assert same["similarity_win"] == 0.0 and same["similarity_tie"] == 1.0 and same["diversity_tie"] == 1.0


def test_win_rates_match_plain_loops_on_a_tidy_table():
    import pandas as pd

    rng = np.random.default_rng(8)
    rows = []
    for theta in (0.3, 0.7):
        for qi in range(25):
            for m in ("vrsd", "mmr", "fw"):
                if m == "mmr" and qi == 3:
                    continue  # a query the baseline lacks: left out of the comparison
                sim = float(np.round(rng.random(), 1))  # coarse values make ties happen
                div = float("nan") if (m == "vrsd" and qi == 5) else float(np.round(rng.random(), 1))
                rows.append({"query_id": f"q{qi}", "theta": theta, "method": m, "vrsd": sim, "ilad": div})
    table = pd.DataFrame(rows)
    out = M.win_rates(table, "vrsd", "mmr", by=("theta",))
    assert list(out.columns[:3]) == ["theta", "a", "b"] and len(out) == 2
    for theta in (0.3, 0.7):
        wins_s = wins_d = ties_s = n_s = n_d = 0
        for qi in range(25):
            ra = [r for r in rows if r["theta"] == theta and r["query_id"] == f"q{qi}" and r["method"] == "vrsd"]
            rb = [r for r in rows if r["theta"] == theta and r["query_id"] == f"q{qi}" and r["method"] == "mmr"]
            if not ra or not rb:
                continue
            n_s += 1
            wins_s += ra[0]["vrsd"] > rb[0]["vrsd"]
            ties_s += ra[0]["vrsd"] == rb[0]["vrsd"]
            if not (math.isnan(ra[0]["ilad"]) or math.isnan(rb[0]["ilad"])):
                n_d += 1
                wins_d += ra[0]["ilad"] > rb[0]["ilad"]
        row = out[out["theta"] == theta].iloc[0]
        assert row["n_queries"] == n_s == 24
        assert row["similarity_win_rate"] == pytest.approx(wins_s / n_s)
        assert row["similarity_tie_rate"] == pytest.approx(ties_s / n_s)
        assert row["diversity_win_rate"] == pytest.approx(wins_d / n_d)
    per_q = M.win_rates(table, "vrsd", "mmr", by=("theta",), per_query=True)
    assert len(per_q) == 48 and {"similarity_win", "diversity_tie", "similarity_a", "diversity_b"} <= set(per_q.columns)
    one = M.win_rates(table[table["theta"] == 0.3], "vrsd", "mmr")  # no grouping: one row
    assert len(one) == 1 and one["n_queries"].iloc[0] == 24
    assert one["similarity_win_rate"].iloc[0] == pytest.approx(out["similarity_win_rate"].iloc[0])
    with pytest.raises(ValueError, match="several rows"):
        M.win_rates(table, "vrsd", "mmr")  # two thetas per query and no `by`
    with pytest.raises(ValueError, match="no row"):
        M.win_rates(table, "vrsd", "dpp", by=("theta",))
    with pytest.raises(ValueError, match="lacks column"):
        M.win_rates(table.drop(columns="ilad"), "vrsd", "mmr", by=("theta",))
