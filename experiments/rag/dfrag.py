"""DF-RAG as published (Khan et al., "DF-RAG: Query-Aware Diversity for Retrieval-Augmented
Generation", Findings of EACL 2026, arXiv:2601.17212).

The pipeline, per question q with passage pool P (a :class:`~divopt_rag.experiments.rag.evaluator.QueryContext`):

1. **Candidate sets.** For every lambda of the grid Lambda = {0.1, 0.2, ..., 1.0} (lambda = 0 is
   not a candidate), S_lambda = gMMR_k(q, P; lambda), the greedy
       argmax_c  lambda cos(q, c) + (1 - lambda) sqrt(2 - 2 cos(c, centroid(S))),
   first pick by relevance: ``select(instance.replace(theta=lambda), "gmmr")``. divopt's theta
   is DF-RAG's lambda (1 = pure relevance; S_1 is the cosine top-k).
2. **Planner.** An LLM writes plan steps p_1..p_m, the minimal ordered sub-questions that must
   all be answered (:class:`Planner`).
3. **Evaluator.** An LLM scores each step against a candidate set, r_lambda(p_i) in {0, ..., 5}
   (5: stated explicitly ... 0: absent or only by inference), and the **Retrieval Support** is
   RS(lambda) = sum_i r_lambda(p_i) (:class:`StepEvaluator`).
4. **Gate.** lambda* = the **upper** median of argmax_lambda RS(lambda): sort the tied lambdas
   t_1 < ... < t_n and take t_(floor(n/2)+1) (the median for odd n, the upper middle for even n).
5. **Sampling** of Lambda: ``"uniform"`` scores every lambda of the grid; ``"binary"`` scores
   fewer (:func:`binary_search_sampling`); the gate then runs over the lambdas scored.
6. **Generation.** ``generate(question, passages, extra_context) -> str`` answers from
   S_lambda*, passages in decreasing relevance (as in the authors' public code). DF-RAG+IC
   (``in_context=True``) passes the plan and the Evaluator's short answers for S_lambda* as
   ``extra_context`` (:func:`in_context_block`); plain DF-RAG passes none.
7. **Oracle** (:func:`dfrag_oracle`): lambda chosen per question by answer F1 of the generated
   answer against the gold answers (max over golds), the same upper-median tie rule; any other
   ground-truth metric plugs in.

Sources and choices. Only the paper's abstract could be read from the stored copy available to
this project; the method above follows the issue's summary of the paper (Section 3, Appendix
B.3, Table 4) and the authors' public repository (SaadatKhan/DF-RAG: gMMR, Planner, Evaluator,
generator prompt, upper-median tie rule), read but not copied. The prompts
(:mod:`divopt_rag.experiments.rag.dfrag_prompts`) keep the structure, rubric and reply formats of the
authors' public prompts in divopt's own words and examples; the paper's text was not readable.
Differences from the authors' code: a reply that cannot be parsed is re-asked once and then
raises (the code scores it 0); RS is the sum of the per-step scores (the code reads the model's
own "Total Score" line, kept here as ``reported_total``); identical candidate sets of one
question are scored once (the same prompt at temperature 0); +IC passes the plan and the
per-step short answers (the code appends the Evaluator's whole reply as one more passage); the
code's gMMR centroid is a running pairwise mean, normalize((m + e_new) / 2), where divopt's
``gmmr`` uses the centroid (mean) of S, as the paper's Section 3.2 formula is transcribed (the
two differ from the third pick on). Binary search is Appendix B.3 as
read by this module (:func:`binary_search_sampling`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from divopt_rag.models.validation import check_choice, check_indices, check_scalar, check_theta
from divopt_rag.solvers import select

from .adaptive import median_gate
from .answers import token_f1
from .dfrag_prompts import (
    EVALUATOR_EXAMPLES,
    EVALUATOR_SYSTEM_PROMPT,
    EVALUATOR_USER_TEMPLATE,
    PLANNER_SYSTEM_PROMPT,
    PLANNER_USER_TEMPLATE,
    REASK_TEMPLATE,
)
from .generation import Generator
from .llm import LLMError, OpenAIChat
from divopt_rag.experiments.metrics import selection_metrics

__all__ = [
    "DFRAG_THETAS", "PLANNER_SYSTEM_PROMPT", "PLANNER_USER_TEMPLATE", "EVALUATOR_SYSTEM_PROMPT",
    "EVALUATOR_USER_TEMPLATE", "parse_plan", "parse_step_scores", "StepScores",
    "Planner", "StepEvaluator", "upper_median_gate", "uniform_sampling", "binary_search_sampling",
    "in_context_block", "dfrag_f1", "DFRAGResult", "DFRAG", "dfrag_select",
    "OracleResult", "dfrag_oracle", "RetrievalSupportEvaluator",
]

#: DF-RAG's lambda grid {0.1, ..., 1.0}: lambda = 0 (diversity only) is not a candidate.
DFRAG_THETAS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 11))
SCORE_MAX = 5

# ---------------------------------------------------------------------------------------------
# Parsing: a malformed reply raises (and is re-asked by the caller), never scores 0
# ---------------------------------------------------------------------------------------------
_STEP_LINE = re.compile(r"^\s*(?:step\s*)?\d+\s*[.):\-]\s*(?P<text>\S.*)$", re.IGNORECASE)
_BULLET_LINE = re.compile(r"^\s*[-*\u2022]\s+(?P<text>\S.*)$")
_SCORE_LINE = re.compile(
    r"^\s*\**\s*(?:step\s*)?(?P<step>\d+)\s*[.):\-]?\s*\**\s*score\s*\**\s*[:=]?\s*\**\s*"
    r"(?P<value>-?\d+(?:\.\d+)?|[A-Za-z]+)(?P<rest>.*)$", re.IGNORECASE)
_TOTAL_LINE = re.compile(r"total\s*score\s*\**\s*[:=]\s*\**\s*(-?\d+)", re.IGNORECASE)
_NOTE_PREFIX = re.compile(r"^\s*(?:/\s*5)?[\s.,;:\-)*]*(?:short\s+(?:explanation|answer)\s*\**\s*[:=]\s*)?", re.IGNORECASE)


def parse_plan(text: str) -> list[str]:
    """The plan steps of a Planner reply: its numbered ("1) ...", "2. ...", "Step 3: ...") or
    bulleted lines, in order, without their numbers; LLMError if there is none."""
    steps = []
    for line in str(text).splitlines():
        m = _STEP_LINE.match(line) or _BULLET_LINE.match(line)
        if m:
            steps.append(m.group("text").strip())
    if not steps:
        raise LLMError(f"the plan has no steps (no numbered or bulleted line): {str(text)[:200]!r}")
    return steps


@dataclass(frozen=True)
class StepScores:
    """The Evaluator's verdict on one candidate set: r(p_i) in {0..5} per step, its short
    answer (explanation) per step, and the Retrieval Support RS = sum_i r(p_i)."""

    scores: tuple[int, ...]
    notes: tuple[str, ...]
    reply: str = field(repr=False, default="")
    reported_total: int | None = None  # the model's own "Total Score" line (not used for RS)

    @property
    def support(self) -> int:
        return int(sum(self.scores))


def parse_step_scores(text: str, n_steps: int) -> StepScores:
    """Scores r(p_1..p_m) from an Evaluator reply ("<i>. Score: <0-5>. Short Explanation: ...").

    Raises LLMError when a step has no score, a score is not an integer in 0..5 ("six", "7",
    "4.5"), a step is scored twice, or a step number is outside 1..n_steps.
    """
    found: dict[int, tuple[int, str]] = {}
    for line in str(text).splitlines():
        m = _SCORE_LINE.match(line)
        if m is None:
            continue
        step, raw = int(m.group("step")), m.group("value")
        if not 1 <= step <= n_steps:
            raise LLMError(f"the Evaluator scored step {step} but the plan has steps 1..{n_steps}")
        if step in found:
            raise LLMError(f"the Evaluator scored step {step} twice")
        if not re.fullmatch(r"-?\d+", raw) or not 0 <= int(raw) <= SCORE_MAX:
            raise LLMError(f"the Evaluator's score for step {step} is {raw!r}, not an integer in 0..{SCORE_MAX}")
        note = _NOTE_PREFIX.sub("", m.group("rest"), count=1).strip()
        found[step] = (int(raw), note)
    missing = [i for i in range(1, n_steps + 1) if i not in found]
    if missing:
        raise LLMError(f"the Evaluator's reply has no score for step(s) {missing} of 1..{n_steps}: {str(text)[:200]!r}")
    total = _TOTAL_LINE.search(str(text))
    return StepScores(
        scores=tuple(found[i][0] for i in range(1, n_steps + 1)),
        notes=tuple(found[i][1] for i in range(1, n_steps + 1)),
        reply=str(text),
        reported_total=None if total is None else int(total.group(1)),
    )


def _ask(chat: OpenAIChat, messages: list[dict[str, str]], parse: Callable[[str], Any], max_tokens: int,
         format_retries: int, detail: str, what: str) -> Any:
    """Ask, parse; on a malformed reply re-ask in the same conversation (a new request, so a
    reply cache cannot return the bad reply again) up to ``format_retries`` times, then raise."""
    msgs = list(messages)
    for attempt in range(format_retries + 1):
        reply = chat.complete(msgs, max_tokens=max_tokens)
        try:
            return parse(reply)
        except LLMError as exc:
            if attempt == format_retries:
                raise LLMError(f"{what}: {exc} (after {attempt + 1} replies)") from exc
            msgs = [*msgs, {"role": "assistant", "content": reply},
                    {"role": "user", "content": REASK_TEMPLATE.format(reason=exc, detail=detail)}]
    raise AssertionError("unreachable")


def _check_retries(value: Any) -> int:
    return check_scalar(value, "format_retries", int, min_val=0)


class Planner:
    """DF-RAG's Planner: ``planner(question) -> [p_1, ..., p_m]`` by an LLM (one request).

    chat : an :class:`~divopt_rag.experiments.rag.llm.OpenAIChat`. The reply's numbered lines are the
    steps (:func:`parse_plan`); a reply without steps is re-asked ``format_retries`` times, then
    LLMError. Prompts: :data:`PLANNER_SYSTEM_PROMPT` and :data:`PLANNER_USER_TEMPLATE`.
    """

    def __init__(self, chat: OpenAIChat, *, system_prompt: str = PLANNER_SYSTEM_PROMPT,
                 user_template: str = PLANNER_USER_TEMPLATE, max_tokens: int = 800, format_retries: int = 1) -> None:
        self.chat, self.system_prompt, self.user_template = chat, system_prompt, user_template
        self.max_tokens, self.format_retries = int(max_tokens), _check_retries(format_retries)

    def messages(self, question: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.user_template.format(question=question)}]

    def __call__(self, question: str) -> list[str]:
        return _ask(self.chat, self.messages(question), parse_plan, self.max_tokens, self.format_retries,
                    ': one numbered line per sub-question, "1) ...", "2) ..."', "the DF-RAG Planner's plan")


class StepEvaluator:
    """DF-RAG's Evaluator: ``evaluator(steps, passages) -> StepScores`` by an LLM (one request
    per candidate set; the question itself is not shown, only the plan and the chunks).

    The reply gives r(p_i) in {0..5} per step (:func:`parse_step_scores`); a malformed reply is
    re-asked ``format_retries`` times, then LLMError. max_chars : cut each passage to this many
    characters (None: whole passages). Prompts: :data:`EVALUATOR_SYSTEM_PROMPT`,
    :data:`EVALUATOR_USER_TEMPLATE` (``{examples}``, ``{plan}``, ``{chunks}``).
    """

    def __init__(self, chat: OpenAIChat, *, system_prompt: str = EVALUATOR_SYSTEM_PROMPT,
                 user_template: str = EVALUATOR_USER_TEMPLATE, examples: str = EVALUATOR_EXAMPLES,
                 max_tokens: int = 2000, max_chars: int | None = None, format_retries: int = 1) -> None:
        self.chat, self.system_prompt, self.user_template, self.examples = chat, system_prompt, user_template, examples
        self.max_tokens, self.max_chars = int(max_tokens), max_chars
        self.format_retries = _check_retries(format_retries)

    def messages(self, steps: Sequence[str], passages: Sequence[str]) -> list[dict[str, str]]:
        plan = "\n".join(f"{i}) {s}" for i, s in enumerate(steps, 1))
        chunks = "\n".join(f"- {str(p)[: self.max_chars] if self.max_chars else p}" for p in passages)
        user = self.user_template.format(examples=self.examples, plan=plan, chunks=chunks)
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}]

    def __call__(self, steps: Sequence[str], passages: Sequence[str]) -> StepScores:
        if not steps:
            raise ValueError("the Evaluator needs at least one plan step")
        m = len(steps)
        return _ask(self.chat, self.messages(steps, passages), lambda r: parse_step_scores(r, m), self.max_tokens,
                    self.format_retries, f': lines "<i>. Score: <0-5>. Short Explanation: <text>" for i = 1..{m}, '
                    'then "Total Score: <sum>"', "the DF-RAG Evaluator's scores")


# ---------------------------------------------------------------------------------------------
# Gate and lambda sampling
# ---------------------------------------------------------------------------------------------
def upper_median_gate(thetas: Sequence[float], scores: Sequence[float]) -> float:
    """DF-RAG's gate: the upper median of the thetas with the best score (rule 4 above)."""
    return median_gate(thetas, scores, even="upper")


def uniform_sampling(grid: Sequence[float], support: Callable[[float], float]) -> list[float]:
    """Score every theta of the grid (ascending); returns the thetas in the order scored."""
    out = sorted(set(check_theta(t) for t in grid))
    for t in out:
        support(t)
    return out


def binary_search_sampling(grid: Sequence[float], support: Callable[[float], float]) -> list[float]:
    """Bisection over the sorted grid t_0 < ... < t_{n-1} (this module's reading of Appendix B.3):

        lo, hi = 0, n - 1; score t_lo and t_hi
        while hi - lo > 1:
            mid = (lo + hi) // 2; score t_mid
            if RS(t_lo) > RS(t_hi): hi = mid     # the low end is better: keep [lo, mid]
            else:                   lo = mid     # otherwise (ties too, as the upper gate) keep [mid, hi]

    About 2 + ceil(log2(n - 1)) Evaluator calls instead of n (6 or fewer for the 10-point grid).
    Returns the thetas in the order scored; the gate then runs over them.
    """
    g = sorted(set(check_theta(t) for t in grid))
    if not g:
        raise ValueError("the theta grid is empty")
    visited: list[float] = []
    rs: dict[float, float] = {}

    def visit(i: int) -> float:
        if g[i] not in rs:
            rs[g[i]] = float(support(g[i]))
            visited.append(g[i])
        return rs[g[i]]

    lo, hi = 0, len(g) - 1
    visit(lo)
    visit(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        visit(mid)
        if visit(lo) > visit(hi):
            hi = mid
        else:
            lo = mid
    return visited


_SAMPLING: dict[str, Callable[[Sequence[float], Callable[[float], float]], list[float]]] = {
    "uniform": uniform_sampling, "binary": binary_search_sampling,
}


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------
def in_context_block(steps: Sequence[str], evaluation: StepScores) -> str:
    """DF-RAG+IC's extra context: the plan and the Evaluator's short answer for each step."""
    plan = "\n".join(f"{i}) {s}" for i, s in enumerate(steps, 1))
    notes = "\n".join(f"{i}) {n}" for i, n in enumerate(evaluation.notes, 1))
    return f"Plan:\n{plan}\n\nShort answers to the plan's steps:\n{notes}"


def dfrag_f1(prediction: str, answers: Sequence[str]) -> float:
    """The answer F1 of DF-RAG's public evaluation script, the Oracle's default metric:
    :func:`divopt_rag.experiments.rag.answers.token_f1` with ``style="dfrag"`` (``\\w+`` tokens of the
    lower-cased text, multiset overlap) against the FIRST gold answer, as that script scores it.
    (LongBench's own metric is ``token_f1(prediction, answers)``: SQuAD tokens, max over golds.)"""
    if not answers:
        raise ValueError("dfrag_f1 needs at least one gold answer")
    return token_f1(prediction, answers[0], style="dfrag")


def _texts(context: Any) -> tuple[str, Sequence[str]]:
    qid = getattr(context, "query_id", "?")
    if getattr(context, "query_text", None) is None:
        raise ValueError(f"DF-RAG needs the question text: context.query_text is None for query {qid!r}")
    if getattr(context, "passages", None) is None:
        raise ValueError(f"DF-RAG needs the passage texts: context.passages is None for query {qid!r}")
    if len(context.passages) != context.instance.n:
        raise ValueError(f"context.passages must hold one text per pool row ({context.instance.n}), "
                         f"got {len(context.passages)} for query {qid!r}")
    return str(context.query_text), context.passages


def _generator_order(context: Any, indices: np.ndarray, order: str) -> np.ndarray:
    if order == "selection":
        return indices
    rel = context.instance.relevance.double().cpu().numpy()[indices]
    return indices[np.argsort(-rel, kind="stable")]


@dataclass
class DFRAGResult:
    """DF-RAG on one question: the chosen theta (lambda*), its selection and everything behind it."""

    theta: float
    indices: np.ndarray                    # S_theta in gMMR pick order
    passages: list[str]                    # the generator's passages (decreasing relevance by default)
    plan: list[str]
    support: dict[float, int]              # RS(theta) of every theta scored
    visited: list[float]                   # thetas in the order scored (uniform: the grid)
    tied: list[float]                      # thetas with the best RS
    evaluations: dict[float, StepScores] = field(repr=False, default_factory=dict)
    selections: dict[float, np.ndarray] = field(repr=False, default_factory=dict)
    extra_context: str | None = None       # DF-RAG+IC: plan + the Evaluator's short answers
    answer: str | None = None


class DFRAG:
    """The DF-RAG pipeline as published (module docstring). Defaults are the paper's.

    planner : ``planner(question) -> steps`` (:class:`Planner`). evaluator : ``evaluator(steps,
    passages) -> StepScores`` (:class:`StepEvaluator`). generator : ``generate(question,
    passages, extra_context) -> str``, needed by :meth:`answer` only. thetas : the lambda grid
    (:data:`DFRAG_THETAS`). method : the selector building the candidate sets ("gmmr"; any
    divopt selector is a divopt variant). sampling : "uniform" | "binary". in_context : DF-RAG+IC.
    order : the generator's passage order, "relevance" (authors' code) or "selection".

    Example, with any OpenAI-compatible server (vLLM, llama.cpp, Ollama)::

        chat = OpenAIChat.from_env(cache="llm_cache.sqlite")      # DIVOPT_LLM_BASE_URL / _MODEL
        res = DFRAG.from_chat(chat, in_context=True).answer(context)   # DF-RAG+IC
        res.theta, res.support, res.answer
    """

    def __init__(self, planner: Callable[[str], Sequence[str]], evaluator: Callable[..., StepScores], *,
                 generator: Callable[[str, Sequence[str], str | None], str] | None = None,
                 thetas: Sequence[float] = DFRAG_THETAS, method: str = "gmmr", sampling: str = "uniform",
                 in_context: bool = False, order: str = "relevance") -> None:
        self.planner, self.evaluator, self.generator = planner, evaluator, generator
        self.thetas = sorted(set(check_theta(t) for t in thetas))
        if not self.thetas:
            raise ValueError("thetas must hold at least one value in [0, 1]")
        self.method = method
        self.sampling = check_choice(sampling, "sampling", _SAMPLING)
        self.in_context = bool(in_context)
        self.order = check_choice(order, "order", ("relevance", "selection"))

    @classmethod
    def from_chat(cls, chat: OpenAIChat, **options: Any) -> "DFRAG":
        """Planner, Evaluator and generator (:class:`~divopt_rag.experiments.rag.generation.Generator` with
        the ``"dfrag"`` prompt template) on one chat endpoint."""
        options.setdefault("generator", Generator(chat, template="dfrag"))
        return cls(Planner(chat), StepEvaluator(chat), **options)

    def select(self, context: Any) -> DFRAGResult:
        """Plan, score the sampled thetas' candidate sets, gate; no generation."""
        question, texts = _texts(context)
        steps = list(self.planner(question))
        if not steps:
            raise LLMError("the Planner returned no steps")
        selections: dict[float, np.ndarray] = {}
        evaluations: dict[float, StepScores] = {}
        by_set: dict[tuple[int, ...], StepScores] = {}  # identical candidate sets: one Evaluator call

        def support(theta: float) -> float:
            sel = select(context.instance.replace(theta=theta), self.method)
            idx = check_indices(sel.indices, context.instance.n, f"{self.method} indices")
            key = tuple(int(i) for i in idx)
            if key not in by_set:
                by_set[key] = self.evaluator(steps, [texts[i] for i in key])
            selections[theta], evaluations[theta] = idx, by_set[key]
            return float(by_set[key].support)

        visited = _SAMPLING[self.sampling](self.thetas, support)
        rs = {t: evaluations[t].support for t in visited}
        theta = upper_median_gate(list(rs), list(rs.values()))
        best = max(rs.values())
        idx = selections[theta]
        return DFRAGResult(
            theta=theta, indices=idx, passages=[str(texts[i]) for i in _generator_order(context, idx, self.order)],
            plan=steps, support=rs, visited=visited, tied=sorted(t for t, v in rs.items() if v == best),
            evaluations=evaluations, selections=selections,
            extra_context=in_context_block(steps, evaluations[theta]) if self.in_context else None,
        )

    def answer(self, context: Any) -> DFRAGResult:
        """:meth:`select`, then the generator's answer from S_theta* (+ the extra context for +IC)."""
        if self.generator is None:
            raise ValueError("DFRAG.answer needs a generator(question, passages, extra_context) -> str")
        res = self.select(context)
        res.answer = str(self.generator(str(context.query_text), res.passages, res.extra_context))
        return res


def dfrag_select(context: Any, planner: Callable[[str], Sequence[str]], evaluator: Callable[..., StepScores],
                 **options: Any) -> DFRAGResult:
    """``DFRAG(planner, evaluator, **options).select(context)``: DF-RAG's choice on one question."""
    return DFRAG(planner, evaluator, **options).select(context)


# ---------------------------------------------------------------------------------------------
# The Oracle
# ---------------------------------------------------------------------------------------------
@dataclass
class OracleResult:
    """The Oracle theta of one question and the ground-truth value of every theta."""

    theta: float
    value: float
    values: dict[float, float]
    tied: list[float]
    answers: dict[float, str] = field(default_factory=dict)  # generated answer per theta (answer metrics)
    selections: dict[float, np.ndarray] = field(repr=False, default_factory=dict)


def dfrag_oracle(context: Any, generator: Callable[[str, Sequence[str], str | None], str] | None = None, *,
                 answers: Sequence[str] | None = None,
                 metric: Callable[[str, Sequence[str]], float] | str | None = None,
                 thetas: Sequence[float] = DFRAG_THETAS, method: str = "gmmr", order: str = "relevance") -> OracleResult:
    """DF-RAG's Oracle: the theta whose answer scores best against the ground truth.

    Default: generate an answer from every theta's candidate set (no extra context) and score
    it by answer F1 against the gold ``answers`` (default ``context.answers``), max over golds.
    metric : a callable ``metric(answer, gold_answers) -> float`` for another answer metric, or
    the name of a retrieval metric of ``selection_metrics`` ("alpha_ndcg", "recall", ...) for
    questions without answers (no generator needed). Ties: the upper median, as the gate.
    """
    order = check_choice(order, "order", ("relevance", "selection"))
    grid = sorted(set(check_theta(t) for t in thetas))
    if not grid:
        raise ValueError("thetas must hold at least one value in [0, 1]")
    retrieval = isinstance(metric, str)
    if not retrieval:
        if generator is None:
            raise ValueError("dfrag_oracle needs a generator(question, passages, extra_context) -> str "
                             "for an answer metric (or metric='<retrieval metric>')")
        golds = answers if answers is not None else getattr(context, "answers", None)
        if not golds:
            raise ValueError(f"dfrag_oracle needs gold answers (answers= or context.answers) for query "
                             f"{getattr(context, 'query_id', '?')!r}, or metric='<retrieval metric>'")
        score = metric if metric is not None else dfrag_f1
        question, texts = _texts(context)
    values: dict[float, float] = {}
    generated: dict[float, str] = {}
    selections: dict[float, np.ndarray] = {}
    for t in grid:
        idx = check_indices(select(context.instance.replace(theta=t), method).indices, context.instance.n)
        selections[t] = idx
        if retrieval:
            m = selection_metrics(context.instance, idx, qrels=getattr(context, "qrels", None),
                                  subtopics=getattr(context, "subtopics", None))
            if metric not in m:
                raise ValueError(f"metric {metric!r} is not available; available: {sorted(m)}")
            values[t] = float(m[metric])
        else:
            passages = [str(texts[i]) for i in _generator_order(context, idx, order)]
            generated[t] = str(generator(question, passages, None))
            values[t] = float(score(generated[t], list(golds)))
    theta = upper_median_gate(list(values), list(values.values()))
    best = max(values.values())
    return OracleResult(theta=theta, value=values[theta], values=values,
                        tied=sorted(t for t, v in values.items() if v == best), answers=generated,
                        selections=selections)


# ---------------------------------------------------------------------------------------------
# DF-RAG's Evaluator as a sweep evaluator
# ---------------------------------------------------------------------------------------------
class RetrievalSupportEvaluator:
    """``score(context, indices)`` = DF-RAG's Retrieval Support RS of the selection, for sweeps
    (``evaluator = {name = "dfrag", base_url = ..., model = ...}``): a sweep over
    ``--methods gmmr --theta 0.1 ... 1`` with ``--adaptive-metric`` then reports DF-RAG's gate
    (uniform sampling, upper median) beside the Oracle. The plan of each question is made once.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None, *,
                 planner: Mapping[str, Any] | None = None, evaluator: Mapping[str, Any] | None = None,
                 **connection: Any) -> None:
        if not base_url or not model:
            raise ValueError("the dfrag evaluator needs base_url and model of an OpenAI-compatible endpoint "
                             "(give them in --config: evaluator = {name = \"dfrag\", base_url = ..., model = ...})")
        chat = OpenAIChat(base_url, model, **connection)
        self.planner = Planner(chat, **dict(planner or {}))
        self.evaluator = StepEvaluator(chat, **dict(evaluator or {}))
        self._plans: dict[str, list[str]] = {}
        self.name = f"dfrag:{model}"

    def score(self, context: Any, indices: Any) -> float:
        question, texts = _texts(context)
        if question not in self._plans:
            self._plans[question] = list(self.planner(question))
        idx = check_indices(indices, context.instance.n)
        return float(self.evaluator(self._plans[question], [texts[int(i)] for i in idx]).support)
