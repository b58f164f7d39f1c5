"""DF-RAG as published (divopt_rag.experiments.rag.dfrag) against independent truths: plain transcriptions
written here (gMMR formula, upper-median gate, binary search, answer F1), and a fake
OpenAI-compatible server on 127.0.0.1 whose replies follow rules this file states."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import planted_duplicates, random_unit, unit_query
from fake_llm import FakeChat
from divopt_rag.experiments.rag.dfrag import (
    DFRAG,
    DFRAG_THETAS,
    Planner,
    StepEvaluator,
    StepScores,
    binary_search_sampling,
    dfrag_oracle,
    dfrag_select,
    parse_plan,
    parse_step_scores,
    uniform_sampling,
    upper_median_gate,
)
from divopt_rag.experiments.rag.evaluator import QueryContext, make_evaluator
from divopt_rag.experiments.rag.generation import Generator
from divopt_rag.experiments.rag.prompts import get_template
from divopt_rag.experiments.rag.llm import LLMError, OpenAIChat
from divopt_rag.models import Instance
from divopt_rag.solvers import select


# --------------------------------------------------------------------------------------------
# A fake chat server: replies come from a rule (a function of the request), requests are kept
# --------------------------------------------------------------------------------------------
_Chat = FakeChat(rule=lambda body: "")


@pytest.fixture
def chat():
    with _Chat.running() as url:
        yield OpenAIChat(url, "m", timeout=5, retries=0)


def _replies(*texts):
    """A rule answering the given texts in turn."""
    queue = list(texts)
    return lambda body: queue.pop(0)


# --------------------------------------------------------------------------------------------
# gMMR: divopt's selector against a plain float64 transcription of the paper's formula
# --------------------------------------------------------------------------------------------
def _gmmr_plain(E, q, k, lam):
    """DF-RAG Sec. 3.2: first pick argmax cos(q, c); then argmax over the rest of
    lam cos(q, c) + (1 - lam) sqrt(2 - 2 cos(c, centroid(S))), centroid = mean of S."""
    rel = E @ q
    S = [int(np.argmax(rel))]
    while len(S) < k:
        m = E[S].mean(axis=0)
        best, arg = -np.inf, -1
        for i in range(len(E)):
            if i in S:
                continue
            cos = float(E[i] @ m) / float(np.linalg.norm(m))
            v = lam * rel[i] + (1 - lam) * np.sqrt(max(2 - 2 * cos, 0.0))
            if v > best:
                best, arg = v, i
        S.append(arg)
    return S


@pytest.mark.parametrize("seed", range(3))
def test_gmmr_is_the_papers_formula(seed):
    for E, q in ((random_unit(40, 8, seed), unit_query(8, seed)), (planted_duplicates(8, 5, 12, seed), unit_query(12, seed))):
        for lam in DFRAG_THETAS:
            got = select(Instance(E, q, k=6, theta=lam), "gmmr").indices.tolist()
            assert got == _gmmr_plain(E, q, 6, lam), lam


# --------------------------------------------------------------------------------------------
# Gate and sampling against plain transcriptions
# --------------------------------------------------------------------------------------------
def _upper_median_plain(thetas, scores):
    best = max(scores)
    tied = sorted(t for t, s in zip(thetas, scores) if s == best)
    return tied[len(tied) // 2]  # even count: the upper of the two middle values


def test_upper_median_gate_by_hand():
    grid = list(DFRAG_THETAS)
    assert upper_median_gate(grid, [3, 9, 9, 1, 1, 1, 1, 1, 1, 1]) == 0.3  # two tied: the upper
    assert upper_median_gate(grid, [9, 9, 9, 1, 1, 1, 1, 1, 1, 1]) == 0.2  # three tied: the middle
    assert upper_median_gate(grid, [9] * 10) == 0.6  # all ten tied: the upper middle of 0.5 / 0.6
    assert upper_median_gate([0.4, 1.0, 0.7, 0.1], [2, 2, 2, 2]) == 0.7  # input order does not matter
    assert upper_median_gate(grid, [0, 0, 0, 0, 0, 0, 0, 0, 0, 4]) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 15), min_size=10, max_size=10))
def test_upper_median_gate_against_plain_loop(rs):
    assert upper_median_gate(DFRAG_THETAS, rs) == _upper_median_plain(DFRAG_THETAS, rs)


def _binary_search_plain(grid, rs):
    """Appendix B.3 as read here: score both ends; bisect toward the better end (ties: upper)."""
    g = sorted(grid)
    order = [0, len(g) - 1] if len(g) > 1 else [0]
    lo, hi = 0, len(g) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid not in order:
            order.append(mid)
        if rs[g[lo]] > rs[g[hi]]:
            hi = mid
        else:
            lo = mid
    return [g[i] for i in order]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 15), min_size=10, max_size=10), st.integers(1, 10))
def test_binary_search_visits_the_transcribed_lambdas(values, n):
    grid = list(DFRAG_THETAS[-n:])
    rs = dict(zip(grid, values))
    calls = []
    visited = binary_search_sampling(grid, lambda t: calls.append(t) or rs[t])
    assert visited == _binary_search_plain(grid, rs) == calls  # each lambda scored once, in this order
    assert len(visited) <= 2 + int(np.ceil(np.log2(max(n - 1, 1))))
    assert uniform_sampling(grid, lambda t: rs[t]) == sorted(grid)


def test_binary_search_by_hand():
    rs = dict(zip(DFRAG_THETAS, [1, 1, 2, 3, 8, 9, 6, 5, 4, 2]))
    # ends 0.1 (1) < 1.0 (2): keep [0.5, 1]; then 0.5 (8) > 1.0 (2): keep [0.5, 0.7]; 0.5 (8) > 0.7 (6): [0.5, 0.6]
    assert binary_search_sampling(DFRAG_THETAS, rs.get) == [0.1, 1.0, 0.5, 0.7, 0.6]
    rs = dict(zip(DFRAG_THETAS, [9, 1, 2, 3, 8, 9, 6, 5, 4, 2]))
    assert binary_search_sampling(DFRAG_THETAS, rs.get) == [0.1, 1.0, 0.5, 0.3, 0.2]


# --------------------------------------------------------------------------------------------
# Parsing: malformed replies are errors, never a silent 0
# --------------------------------------------------------------------------------------------
def test_parse_plan_and_scores():
    assert parse_plan("Output Planner :\n1) Identify the author\n2. Identify the birthplace\nStep 3: Identify the river") == [
        "Identify the author", "Identify the birthplace", "Identify the river"]
    with pytest.raises(LLMError, match="no steps"):
        parse_plan("I think the question is about rivers.")
    with pytest.raises(LLMError, match="no steps"):
        parse_plan("")
    r = parse_step_scores("1. Score: 5. Short Explanation: Ann wrote it.\n2. Score: 3/5 - Short Explanation: near Oslo\n"
                          "**3. Score:** 0. Short Explanation: not stated\nTotal Score: 9", 3)
    assert r.scores == (5, 3, 0) and r.support == 8 and r.reported_total == 9  # RS is the sum, not the model's total
    assert r.notes == ("Ann wrote it.", "near Oslo", "not stated")
    for bad, match in [("1. Score: six. x\n2. Score: 1", "'six'"), ("1. Score: 7\n2. Score: 1", "'7'"),
                       ("1. Score: 4.5\n2. Score: 1", "'4.5'"), ("1. Score: -1\n2. Score: 1", "'-1'"),
                       ("1. Score: 4", r"no score for step\(s\) \[2\]"), ("Total Score: 10", r"\[1, 2\]"),
                       ("1. Score: 4\n1. Score: 5\n2. Score: 1", "twice"), ("1. Score: 4\n2. Score: 1\n3. Score: 2", "steps 1..2")]:
        with pytest.raises(LLMError, match=match):
            parse_step_scores(bad, 2)


def test_malformed_replies_are_reasked_then_raise(chat):
    ev = StepEvaluator(chat)
    _Chat.rule = _replies("1. Score: six. Short Explanation: x\n2. Score: 2. Short Explanation: y",
                          "1. Score: 4. Short Explanation: x\n2. Score: 2. Short Explanation: y\nTotal Score: 6")
    assert ev(["a", "b"], ["p1", "p2"]).scores == (4, 2)
    second = _Chat.requests[1]["messages"]
    assert second[:2] == _Chat.requests[0]["messages"]  # the same conversation, continued
    assert second[2] == {"role": "assistant", "content": "1. Score: six. Short Explanation: x\n2. Score: 2. Short Explanation: y"}
    assert "could not be used" in second[3]["content"] and "'six'" in second[3]["content"]
    _Chat.rule = _replies("1. Score: 7\n2. Score: 1", "1. Score: 7\n2. Score: 1")
    with pytest.raises(LLMError, match=r"Evaluator's scores: .*'7'.*after 2 replies"):
        ev(["a", "b"], ["p1"])
    _Chat.rule = _replies("no plan today", "still no plan")
    with pytest.raises(LLMError, match="Planner's plan: the plan has no steps"):
        Planner(chat)("who?")
    _Chat.rule = _replies("nothing numbered")
    with pytest.raises(LLMError, match="after 1 replies"):
        Planner(chat, format_retries=0)("who?")
    with pytest.raises(ValueError, match="format_retries"):
        StepEvaluator(chat, format_retries=-1)


# --------------------------------------------------------------------------------------------
# The pipeline on a fake server: prompts, Retrieval Support, gate, +IC, sampling
# --------------------------------------------------------------------------------------------
N, D, K = 14, 8, 4
STEPS = ["Find the first fact", "Find the second fact", "Find the third fact"]
# the fake Evaluator's rule: step s is fully supported (5) by passage SUPPORT[s][0], partly (2)
# by SUPPORT[s][1], else 0
SUPPORT = {1: (0, 5), 2: (7, 3), 3: (11, 9)}


def _context(seed=0):
    E, q = planted_duplicates(7, 2, D, seed), unit_query(D, seed)
    inst = Instance(E, q, k=K, theta=1.0, ids=[f"d{i}" for i in range(N)])
    return QueryContext("q1", inst, query_text="Which fact links the three?", passages=[f"passage {i}" for i in range(N)],
                        answers=["passage 3"])


def _final_chunks(user):
    """The chunk ids of the task part of an Evaluator prompt (after the last 'Chunks:')."""
    part = user[user.rindex("\nChunks:\n") + len("\nChunks:\n"):].split("\n\n")[0]
    return [int(m) for m in re.findall(r"^- passage (\d+)$", part, re.MULTILINE)]


def _step_scores(ids):
    return [5 if SUPPORT[s][0] in ids else 2 if SUPPORT[s][1] in ids else 0 for s in (1, 2, 3)]


def _server_rule(body):
    msgs = body["messages"]
    if "planner" in msgs[0]["content"]:
        return "Plan:\n" + "\n".join(f"{i}) {s}" for i, s in enumerate(STEPS, 1))
    if "judge" in msgs[0]["content"]:
        sc = _step_scores(_final_chunks(msgs[-1]["content"]))
        lines = [f"{i}. Score: {s}. Short Explanation: note {i} score {s}" for i, s in enumerate(sc, 1)]
        return "\n".join(lines) + "\nTotal Score: 99"  # a wrong total: RS must be the sum of the steps
    return "an answer"


def test_dfrag_pipeline_on_a_fake_server(chat):
    _Chat.rule = staticmethod(_server_rule)
    ctx = _context()
    pipe = DFRAG.from_chat(chat)
    res = pipe.answer(ctx)
    # independent truth: candidate sets by the plain gMMR transcription, RS by the server's rule, plain gate
    E, q = ctx.instance.E.double().numpy(), ctx.instance.q.double().numpy()
    sets = {t: _gmmr_plain(E, q, K, t) for t in DFRAG_THETAS}
    rs = {t: sum(_step_scores(sets[t])) for t in DFRAG_THETAS}
    assert res.plan == STEPS and res.visited == list(DFRAG_THETAS) and res.support == rs
    assert len(set(rs.values())) > 1  # the pool makes the candidate sets differ in support
    theta = _upper_median_plain(list(rs), list(rs.values()))
    assert res.theta == theta and res.indices.tolist() == sets[theta]
    assert res.tied == sorted(t for t in rs if rs[t] == max(rs.values()))
    rel = E @ q
    assert res.passages == [f"passage {i}" for i in sorted(sets[theta], key=lambda i: -rel[i])]  # relevance order
    assert res.extra_context is None and res.answer == "an answer"
    # requests: one plan, one Evaluator call per distinct candidate set, one generation
    reqs = _Chat.requests
    n_sets = len({tuple(s) for s in sets.values()})
    assert len(reqs) == 1 + n_sets + 1
    plan_req = reqs[0]["messages"]
    assert plan_req[0]["role"] == "system" and "minimal ordered list of sub-questions" in plan_req[0]["content"]
    assert plan_req[1] == {"role": "user", "content": "QUESTION:\nWhich fact links the three?"}
    ev_user = reqs[1]["messages"][-1]["content"]
    assert "1) Find the first fact\n2) Find the second fact\n3) Find the third fact" in ev_user
    assert _final_chunks(ev_user) == sets[0.1]  # chunks in gMMR pick order
    assert "Which fact links" not in ev_user  # the Evaluator sees the plan, not the question
    assert "5: an explicit answer" in ev_user and "0: no relevant information" in ev_user
    gen = reqs[-1]["messages"]
    assert gen == get_template("dfrag").render(ctx.query_text, res.passages)
    assert reqs[-1]["max_tokens"] == 50 and reqs[0]["temperature"] == 0.0


def test_dfrag_in_context_and_binary_sampling(chat):
    _Chat.rule = staticmethod(_server_rule)
    ctx = _context(seed=1)
    sent = {}

    def generator(question, passages, extra_context):
        sent.update(question=question, passages=list(passages), extra=extra_context)
        return "ok"

    res = DFRAG(Planner(chat), StepEvaluator(chat), generator=generator, in_context=True).answer(ctx)
    ev = res.evaluations[res.theta]
    assert sent["extra"] == res.extra_context
    for i, step in enumerate(STEPS, 1):  # +IC: the plan and the Evaluator's short answer of every step
        assert f"{i}) {step}" in res.extra_context and f"{i}) {ev.notes[i - 1]}" in res.extra_context
    assert f"note 1 score {ev.scores[0]}" in res.extra_context
    # the generator prompt places the extra context after the passages
    prompt = get_template("dfrag").render("Q", ["p a", "p b"], "EXTRA")[-1]["content"]
    assert prompt.index("p a") < prompt.index("p b") < prompt.index("EXTRA") < prompt.index("Question: Q")
    # binary sampling: the lambdas scored are the transcription's, the gate runs over them
    _Chat.requests = []
    res_b = dfrag_select(ctx, Planner(chat), StepEvaluator(chat), sampling="binary")
    E, q = ctx.instance.E.double().numpy(), ctx.instance.q.double().numpy()
    rs = {t: sum(_step_scores(_gmmr_plain(E, q, K, t))) for t in DFRAG_THETAS}
    assert res_b.visited == _binary_search_plain(DFRAG_THETAS, rs)
    assert res_b.theta == _upper_median_plain(res_b.visited, [rs[t] for t in res_b.visited])
    assert len(res_b.visited) < len(DFRAG_THETAS)
    with pytest.raises(ValueError, match="sampling"):
        DFRAG(Planner(chat), StepEvaluator(chat), sampling="random")


def test_chat_generator_and_input_errors(chat):
    _Chat.rule = _replies("  Oslo \n")
    assert Generator(chat, template="dfrag")("Where?", ["p1", "p2"], "extra") == "Oslo"
    sent = _Chat.requests[0]["messages"][-1]["content"]
    assert sent.startswith("You are a question answering assistant.") and "p1\n\np2\n\nextra" in sent
    assert "Question: Where?\nAnswer:" in sent and _Chat.requests[0]["max_tokens"] == 50
    ctx = _context()
    ctx.query_text = None
    with pytest.raises(ValueError, match="query_text"):
        DFRAG(Planner(chat), StepEvaluator(chat)).select(ctx)
    with pytest.raises(ValueError, match="needs a generator"):
        DFRAG(Planner(chat), StepEvaluator(chat)).answer(_context())


# --------------------------------------------------------------------------------------------
# The Oracle
# --------------------------------------------------------------------------------------------
def _f1_plain(pred, gold):
    """DF-RAG's public script's F1, transcribed: \\w+ tokens of the lower-cased strings, multiset
    overlap (articles kept)."""
    p, g = re.findall(r"\w+", pred.lower()), re.findall(r"\w+", gold.lower())
    if not p and not g:
        return 1.0
    same = sum((Counter(p) & Counter(g)).values())
    return 0.0 if same == 0 else 2 * (same / len(p)) * (same / len(g)) / (same / len(p) + same / len(g))


def test_oracle_picks_the_f1_best_lambda():
    ctx = _context(seed=2)
    words = ["red apple", "the red apple tree", "green pear", "red", "apple pie", "stone"]

    def generator(question, passages, extra_context):  # answer = words of the passage with the smallest id
        assert extra_context is None
        return words[min(int(p.split()[1]) for p in passages) % len(words)]

    golds = ["Red apple!", "an apple"]
    orc = dfrag_oracle(ctx, generator, answers=golds)
    E, q = ctx.instance.E.double().numpy(), ctx.instance.q.double().numpy()
    f1 = {}
    for t in DFRAG_THETAS:
        ans = words[min(_gmmr_plain(E, q, K, t)) % len(words)]
        f1[t] = _f1_plain(ans, golds[0])  # the script scores against the first gold answer
    assert orc.values == pytest.approx(f1)
    assert orc.theta == _upper_median_plain(list(f1), list(f1.values())) and orc.value == pytest.approx(max(f1.values()))
    # the gold answers default to context.answers; a custom answer metric plugs in
    assert dfrag_oracle(ctx, generator, metric=lambda a, g: float(len(a))).theta == _upper_median_plain(
        list(f1), [len(words[min(_gmmr_plain(E, q, K, t)) % len(words)]) for t in DFRAG_THETAS])
    with pytest.raises(ValueError, match="gold answers"):
        dfrag_oracle(QueryContext("x", ctx.instance, query_text="q", passages=ctx.passages), generator)
    with pytest.raises(ValueError, match="needs a generator"):
        dfrag_oracle(ctx)


def test_oracle_by_a_retrieval_metric_without_answers():
    E, labels = planted_duplicates(6, 4, 10, 5), None
    inst = Instance(E, unit_query(10, 5), k=4, theta=1.0, ids=[f"d{i}" for i in range(24)])
    labels = {f"d{i}": i % 6 for i in range(24)}
    ctx = QueryContext("q", inst, subtopics=labels)
    orc = dfrag_oracle(ctx, metric="s_recall")
    truth = {t: len({labels[f"d{i}"] for i in select(inst.replace(theta=t), "gmmr").indices}) / 6 for t in DFRAG_THETAS}
    assert orc.values == pytest.approx(truth) and orc.answers == {}
    assert orc.theta == _upper_median_plain(list(truth), list(truth.values()))


# --------------------------------------------------------------------------------------------
# DF-RAG's Evaluator inside sweeps
# --------------------------------------------------------------------------------------------
def test_dfrag_sweep_evaluator(chat):
    _Chat.rule = staticmethod(_server_rule)
    ev = make_evaluator({"name": "dfrag", "base_url": chat.base_url, "model": "m", "timeout": 5})
    ctx = _context()
    sel = [0, 7, 9, 2]
    assert ev.score(ctx, sel) == sum(_step_scores(sel)) == 12
    assert ev.score(ctx, [1, 2, 4, 6]) == sum(_step_scores([1, 2, 4, 6])) == 0.0
    assert len(_Chat.requests) == 3  # one plan for the question, then one Evaluator call per set
    with pytest.raises(ValueError, match="base_url and model"):
        make_evaluator("dfrag")
    assert isinstance(StepScores((1, 2), ("a", "b")).support, int)
