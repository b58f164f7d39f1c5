"""Query-adaptive theta (DF-RAG): the median gate, Oracle, report, evaluators (LLM judge on a
fake local OpenAI-compatible server only: no external network)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.fake_llm import FakeChat, chat_reply

from divopt_rag.data.synthetic import narrow_cone
from divopt_rag.experiments.rag.adaptive import (
    adaptive_report,
    adaptive_select,
    dfrag_delta,
    gated_theta,
    median_gate,
    oracle_theta,
    theta_sweep,
)
from divopt_rag.experiments.rag.evaluator import (
    CallableEvaluator,
    CoverageEvaluator,
    DeltaPlanner,
    EvaluatorError,
    MetricEvaluator,
    OpenAIEvaluator,
    OpenAIJudge,
    OpenAIPlanner,
    QueryContext,
    make_evaluator,
)
from divopt_rag.models import Instance
from divopt_rag.solvers import select


# --------------------------------------------------------------------------------------------
# The median tie-breaking gate
# --------------------------------------------------------------------------------------------
def test_median_gate_hand_cases():
    th = [0.0, 0.25, 0.5, 0.75, 1.0]
    assert median_gate(th, [1, 3, 3, 3, 2]) == 0.5  # three tied: the middle one
    assert median_gate(th, [3, 3, 1, 1, 1]) == 0.25  # two tied: the upper middle (DF-RAG's rule)
    assert median_gate(th, [3, 3, 1, 1, 1], even="lower") == 0.0
    assert median_gate(th, [1, 2, 5, 2, 1]) == 0.5  # a unique best
    assert median_gate(th, [2.95, 3.0, 1, 2.99, 1], atol=0.06) == 0.25  # {0, 0.25, 0.75} within atol
    assert median_gate(th, [np.nan, 1, np.nan, 1, 1]) == 0.75  # NaN scores are not candidates
    assert median_gate([0.9, 0.1, 0.5], [1, 1, 1]) == 0.5  # order of the input does not matter
    with pytest.raises(ValueError, match="all scores are NaN"):
        median_gate([0.1, 0.2], [np.nan, np.nan])
    with pytest.raises(ValueError, match="equal length"):
        median_gate([0.1, 0.2], [1.0])
    with pytest.raises(ValueError, match="even"):
        median_gate([0.1], [1.0], even="middle")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]), st.integers(0, 3)), min_size=1, max_size=7,
                unique_by=lambda t: t[0]))
def test_median_gate_against_plain_loop(pairs):
    thetas = [p[0] for p in pairs]
    scores = [float(p[1]) for p in pairs]
    best = max(scores)
    tied = []
    for t, s in zip(thetas, scores):  # plain loop: collect, sort, take the lower middle
        if s == best:
            tied.append(t)
    tied.sort()
    assert median_gate(thetas, scores, even="lower") == tied[(len(tied) - 1) // 2]
    assert median_gate(thetas, scores) == median_gate(thetas, scores, even="upper") == tied[len(tied) // 2]


# --------------------------------------------------------------------------------------------
# Oracle, gate and report on a sweep-shaped table
# --------------------------------------------------------------------------------------------
def _table() -> pd.DataFrame:
    # two queries, thetas 0 / 0.5 / 1; metric m (ground truth) and eval_score (the evaluator)
    rows = [
        ("q1", 0.0, 0.6, 0.9), ("q1", 0.5, 0.6, 0.9), ("q1", 1.0, 0.2, 0.1),
        ("q2", 0.0, 0.1, 0.5), ("q2", 0.5, 0.3, 0.2), ("q2", 1.0, 0.5, 0.8),
    ]
    return pd.DataFrame(
        [{"dataset": "d", "query_id": q, "method": "mmr", "theta": t, "m": m, "eval_score": s, "status": "ok",
          "params": json.dumps({"k": 3, "theta": t}, sort_keys=True)} for q, t, m, s in rows]
        + [{"dataset": "d", "query_id": "q1", "method": "mmr", "theta": 0.25, "m": 99.0, "eval_score": 99.0,
            "status": "error", "params": json.dumps({"k": 3, "theta": 0.25})}]  # error rows are ignored
    )


def test_oracle_gate_and_report_by_hand():
    t = _table()
    orc = oracle_theta(t, "m").set_index("query_id")
    assert orc.loc["q1", "theta_oracle"] == 0.5 and orc.loc["q1", "n_tied_oracle"] == 2  # tie 0 / 0.5: upper middle
    assert orc.loc["q2", "theta_oracle"] == 1.0 and orc.loc["q2", "m_oracle"] == 0.5
    assert oracle_theta(t, "m", even="lower").set_index("query_id").loc["q1", "theta_oracle"] == 0.0
    gate = gated_theta(t, "m").set_index("query_id")
    assert gate.loc["q1", "theta_gate"] == 0.5 and gate.loc["q1", "m_gate"] == 0.6
    assert gate.loc["q2", "theta_gate"] == 1.0 and gate.loc["q2", "m_gate"] == 0.5
    per_query, pol = adaptive_report(t, "m")
    pol = pol.set_index("policy")
    assert pol.loc["oracle", "m"] == pytest.approx((0.6 + 0.5) / 2)
    assert pol.loc["theta=1", "m"] == pytest.approx((0.2 + 0.5) / 2)
    assert pol.loc["theta=0", "m"] == pytest.approx((0.6 + 0.1) / 2)
    assert pol.loc["best fixed (in-sample)", "m"] == pytest.approx(0.45)  # theta 0.5: (0.6 + 0.3) / 2
    assert pol.loc["gate(eval_score)", "m"] == pytest.approx(0.55)
    # captured = (policy - baseline) / (oracle - baseline), baseline theta = 1
    assert pol.loc["gate(eval_score)", "captured"] == pytest.approx((0.55 - 0.35) / (0.55 - 0.35))
    assert pol.loc["theta=0", "captured"] == pytest.approx((0.35 - 0.35) / 0.2)
    assert pol.loc["best fixed (in-sample)", "captured"] == pytest.approx((0.45 - 0.35) / 0.2)
    assert set(per_query["query_id"]) == {"q1", "q2"} and per_query["m_baseline"].tolist() == [0.2, 0.5]
    with pytest.raises(ValueError, match="lacks columns"):
        oracle_theta(t.drop(columns="theta"), "m")


# --------------------------------------------------------------------------------------------
# On one query: theta sweep and the gated choice
# --------------------------------------------------------------------------------------------
def _context(n=80, d=16, k=5, seed=3) -> QueryContext:
    E, q, labels = narrow_cone(n, d, seed=seed)
    inst = Instance(E, q, k=k, theta=1.0, ids=[f"d{i}" for i in range(n)])
    return QueryContext("q", inst, subtopics={f"d{i}": int(l) for i, l in enumerate(labels)})


def test_adaptive_select_equals_a_plain_loop():
    ctx = _context()
    thetas = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    ev = CoverageEvaluator(top=30)
    choice = adaptive_select(ctx, thetas, ev, "mmr")
    scores = {}
    for t in thetas:  # independent: select directly, score directly
        sel = select(ctx.instance.replace(theta=t), "mmr")
        scores[t] = ev.score(ctx, sel.indices)
        np.testing.assert_array_equal(choice.selections[t], sel.indices)
    assert choice.scores == pytest.approx(scores)
    best = max(scores.values())
    tied = sorted(t for t, s in scores.items() if s == best)
    assert choice.theta == tied[len(tied) // 2] and choice.tied == tied
    np.testing.assert_array_equal(choice.indices, select(ctx.instance.replace(theta=choice.theta), "mmr").indices)
    # a planner narrows the candidates; it must return a subset
    low = adaptive_select(ctx, thetas, ev, "mmr", planner=lambda c, th: [t for t in th if t <= 0.4])
    assert set(low.scores) == {0.0, 0.2, 0.4}
    with pytest.raises(ValueError, match="planner must return"):
        adaptive_select(ctx, thetas, ev, "mmr", planner=lambda c, th: [0.33])
    tab = theta_sweep(ctx, thetas, "mmr", metric="s_recall")
    assert tab["metric"].between(0, 1).all() and len(tab) == len(thetas)


# --------------------------------------------------------------------------------------------
# Evaluators
# --------------------------------------------------------------------------------------------
def test_coverage_and_metric_evaluators_by_plain_loops():
    ctx = _context(n=30, d=8, k=4)
    E = ctx.instance.E.double().numpy()
    c = ctx.instance.relevance.double().numpy()
    S = [1, 5, 7, 20]
    num = den = 0.0
    for i in range(30):
        w = max(c[i], 0.0)
        num += w * max(float(E[i] @ E[s]) for s in S)
        den += w
    assert CoverageEvaluator().score(ctx, S) == pytest.approx(num / den, rel=1e-9)
    labels = {ctx.subtopics[f"d{i}"] for i in range(30)}
    covered = {ctx.subtopics[f"d{s}"] for s in S}
    assert MetricEvaluator("s_recall").score(ctx, S) == pytest.approx(len(covered) / len(labels))
    with pytest.raises(EvaluatorError, match="recall"):
        MetricEvaluator("recall").score(ctx, S)  # no qrels for this query
    assert CallableEvaluator(lambda cx, idx: len(idx)).score(ctx, S) == 4.0


def test_evaluators_are_off_by_default_and_validated():
    assert make_evaluator(None) is None
    assert isinstance(make_evaluator("coverage"), CoverageEvaluator)
    assert make_evaluator("metric:alpha_ndcg").metric == "alpha_ndcg"
    with pytest.raises(ValueError, match="unknown evaluator"):
        make_evaluator({"name": "gpt"})
    with pytest.raises(ValueError, match="base_url"):
        OpenAIJudge("localhost:8000", "m")
    with pytest.raises(ValueError, match="base_url"):
        make_evaluator("judge_0_10")
    # the earlier names still work and mean the same variants
    assert OpenAIEvaluator is OpenAIJudge and OpenAIPlanner is DeltaPlanner
    assert make_evaluator({"name": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}).name == "judge_0_10:m"
    with pytest.raises(ValueError, match="top"):
        CoverageEvaluator(top=0)


_FakeChat = FakeChat()  # answers what the test queues; .calls records path, auth and body


@pytest.fixture
def fake_server():
    with _FakeChat.running() as url:
        yield url


_chat = chat_reply


def test_openai_evaluator_against_a_fake_local_server(fake_server):
    ctx = _context(n=12, d=8, k=3)
    ctx.query_text = "what is up?"
    ctx.passages = [f"passage number {i}" for i in range(12)]
    ev = OpenAIJudge(fake_server, "judge-1", api_key="sk-test", timeout=5, retries=0)
    _FakeChat.replies = [(200, _chat("7")), (200, _chat("Score: 10/10")), (500, "overloaded"),
                         (200, _chat("no idea")), (200, _chat("42")), (200, "not json")]
    assert ev.score(ctx, [2, 0, 5]) == pytest.approx(0.7)
    req = _FakeChat.calls[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "judge-1" and req["body"]["temperature"] == 0.0
    user = req["body"]["messages"][-1]["content"]
    assert "what is up?" in user and "[1] passage number 2" in user and "[3] passage number 5" in user
    assert "passage number 1\n" not in user
    assert ev.score(ctx, [1, 2, 3]) == pytest.approx(1.0)
    with pytest.raises(EvaluatorError, match="HTTP 500"):
        ev.score(ctx, [1, 2, 3])
    with pytest.raises(EvaluatorError, match="no number"):
        ev.score(ctx, [1, 2, 3])
    with pytest.raises(EvaluatorError, match="outside"):
        ev.score(ctx, [1, 2, 3])
    with pytest.raises(EvaluatorError, match="invalid JSON"):
        ev.score(ctx, [1, 2, 3])
    # the LLM judge drives the gate like any evaluator: it prefers the theta it scores highest
    _FakeChat.replies = [(200, _chat(s)) for s in ("3", "9", "9", "9", "4")]
    choice = adaptive_select(ctx, [0.0, 0.25, 0.5, 0.75, 1.0], ev, "mmr")
    assert choice.theta == 0.5 and choice.tied == [0.25, 0.5, 0.75]


def test_openai_evaluator_needs_texts_and_a_reachable_endpoint():
    ctx = _context(n=12, d=8, k=3)
    ev = OpenAIJudge("http://127.0.0.1:9/v1", "m", timeout=2, retries=0)
    with pytest.raises(EvaluatorError, match="needs the query text"):
        ev.score(ctx, [0, 1, 2])
    ctx.query_text, ctx.passages = "q", ["p"] * 12
    with pytest.raises(EvaluatorError, match="unreachable"):
        ev.score(ctx, [0, 1, 2])


def test_openai_planner_narrows_thetas_on_a_fake_local_server(fake_server):
    ctx = _context(n=12, d=8, k=3)
    planner = DeltaPlanner(fake_server, "planner-1", window=0.25, timeout=5)
    with pytest.raises(EvaluatorError, match="query text"):
        planner(ctx, [0.0, 1.0])
    ctx.query_text, ctx.passages = "what does 'bank' mean?", [f"p{i}" for i in range(12)]
    thetas = [0.0, 0.25, 0.5, 0.75, 1.0]
    _FakeChat.replies = [(200, _chat("0.8")), (200, _chat("0")), (200, _chat("1.7")), (200, _chat("0.4"))]
    assert planner(ctx, thetas) == [0.0, 0.25]  # diversity 0.8: theta near 1 - 0.8 = 0.2
    assert planner(ctx, thetas) == [0.75, 1.0]  # diversity 0: theta near 1
    with pytest.raises(EvaluatorError, match="outside"):
        planner(ctx, thetas)
    assert DeltaPlanner(fake_server, "p", window=0.0)(ctx, thetas) == [0.5]  # none within 0 of 0.6: nearest
    body = _FakeChat.calls[0]["body"]
    assert body["model"] == "planner-1" and "bank" in body["messages"][-1]["content"]
    # planner and judge together (dfrag_delta, divopt's earlier variant): plan, score only the
    # planned thetas, gate by the lower median, MMR as the base
    judge = OpenAIJudge(fake_server, "judge-1", timeout=5)
    _FakeChat.replies = [(200, _chat("0.8")), (200, _chat("6")), (200, _chat("6"))]
    choice = dfrag_delta(ctx, thetas, planner, judge)
    assert set(choice.scores) == {0.0, 0.25} and choice.theta == 0.0 and choice.tied == [0.0, 0.25]
    for t in (0.0, 0.25):
        np.testing.assert_array_equal(choice.selections[t], select(ctx.instance.replace(theta=t), "mmr").indices)
