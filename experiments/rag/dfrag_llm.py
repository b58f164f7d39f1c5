"""DF-RAG's Planner and Evaluator (Khan et al., arXiv:2601.17212v1, Sec. 3.4, Figs. 8-11): the
LLM requests and the parsing of their replies.

* Planner: one request per question; the reply's numbered or bulleted lines are the plan steps
  p_1..p_m (:func:`parse_plan`).
* Evaluator: one request per candidate set; the reply scores each step r(p_i) in {0, ..., 5}
  (:func:`parse_step_scores`), and the Retrieval Support is RS = sum_i r(p_i) (Eq. 4).

A reply that cannot be parsed is re-asked ``format_retries`` times (default once), then raises
:class:`~divopt_rag.experiments.rag.llm.LLMError` (the paper does not say; the authors' code
scores it 0). The model's own "Total Score" line is kept as ``reported_total`` but not used.
The prompts (:mod:`divopt_rag.experiments.rag.dfrag_prompts`) follow Figs. 8-11 in divopt's words.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from divopt_rag.models.validation import check_indices, check_scalar

from .dfrag_candidates import SCORE_MAX, question_texts
from .dfrag_prompts import (
    EVALUATOR_EXAMPLES,
    EVALUATOR_SYSTEM_PROMPT,
    EVALUATOR_USER_TEMPLATE,
    PLANNER_SYSTEM_PROMPT,
    PLANNER_USER_TEMPLATE,
    REASK_TEMPLATE,
    format_chunks,
)
from .llm import LLMError, OpenAIChat

__all__ = ["parse_plan", "parse_step_scores", "StepScores", "Planner", "StepEvaluator", "RetrievalSupportEvaluator"]

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
    :data:`EVALUATOR_USER_TEMPLATE` (``{examples}``, ``{plan}``, ``{chunks}``); the chunks are
    listed as Figs. 10-11 list them, each in double quotes on its own line, in pick order.
    """

    def __init__(self, chat: OpenAIChat, *, system_prompt: str = EVALUATOR_SYSTEM_PROMPT,
                 user_template: str = EVALUATOR_USER_TEMPLATE, examples: str = EVALUATOR_EXAMPLES,
                 max_tokens: int = 2000, max_chars: int | None = None, format_retries: int = 1) -> None:
        self.chat, self.system_prompt, self.user_template, self.examples = chat, system_prompt, user_template, examples
        self.max_tokens, self.max_chars = int(max_tokens), max_chars
        self.format_retries = _check_retries(format_retries)

    def messages(self, steps: Sequence[str], passages: Sequence[str]) -> list[dict[str, str]]:
        plan = "\n".join(f"{i}) {s}" for i, s in enumerate(steps, 1))
        chunks = format_chunks(str(p)[: self.max_chars] if self.max_chars else str(p) for p in passages)
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
        question, texts = question_texts(context)
        if question not in self._plans:
            self._plans[question] = list(self.planner(question))
        idx = check_indices(indices, context.instance.n)
        return float(self.evaluator(self._plans[question], [texts[int(i)] for i in idx]).support)
