"""The generation step of a RAG pipeline: a question and its retrieved passages in, an answer out.

A :class:`Generator` renders a prompt template (:mod:`divopt_rag.experiments.rag.prompts`: the seed
papers' templates as data) and asks the shared OpenAI-compatible client
(:class:`divopt_rag.experiments.rag.llm.OpenAIChat`) for the answer, so every call inherits its reply
cache (SQLite, keyed by the request), retries and errors::

    gen = Generator(template="rgb")                    # client from DIVOPT_LLM_BASE_URL / _MODEL
    answer = gen.generate(question, passages)          # or gen(question, passages, extra_context)
    answers = gen.generate_batch(questions, passages_per_question)   # progress bar, order kept

Without an endpoint, building a Generator raises
:class:`~divopt_rag.experiments.rag.llm.LLMNotConfigured` naming the variables to set; nothing else
in divopt needs one, so recipes without generation run offline.
"""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tqdm.auto import tqdm

from divopt_rag.experiments.rag.llm import OpenAIChat
from divopt_rag.experiments.rag.prompts import PromptTemplate, get_template
from divopt_rag.models.validation import check_scalar

__all__ = ["Generator", "generate", "generate_batch"]


class Generator:
    """Answers questions from passages with one prompt template and one LLM client.

    client : an :class:`OpenAIChat`; default :meth:`OpenAIChat.from_env` (raises
        :class:`LLMNotConfigured` when no endpoint is configured).
    template : a name in :data:`divopt_rag.experiments.rag.prompts.TEMPLATES` or a
        :class:`PromptTemplate` (default ``"neutral"``, divopt's short-answer prompt).
    max_tokens : answer budget; default the template's.
    Callable: ``gen(question, passages, extra_context=None)`` is :meth:`generate`, the
    ``generate(question, passages, extra_context) -> str`` shape pipelines take.
    """

    def __init__(self, client: OpenAIChat | None = None, template: str | PromptTemplate = "neutral", *,
                 max_tokens: int | None = None) -> None:
        self.template = get_template(template)
        max_tokens = check_scalar(max_tokens, "max_tokens", int, min_val=1, allow_none=True)
        self.max_tokens = self.template.max_tokens if max_tokens is None else max_tokens
        self.client = OpenAIChat.from_env() if client is None else client

    def messages(self, question: str, passages: Sequence[Any], extra_context: str | Sequence[str] | None = None):
        """The chat messages sent for ``question`` (see :meth:`PromptTemplate.render`)."""
        return self.template.render(question, passages, extra_context)

    def generate(self, question: str, passages: Sequence[Any], extra_context: str | Sequence[str] | None = None) -> str:
        """The model's answer (whitespace-stripped) to ``question`` given ``passages``;
        ``extra_context`` (e.g. DF-RAG+IC's plan and short answer) is appended as passages."""
        reply = self.client.complete(self.messages(question, passages, extra_context), max_tokens=self.max_tokens)
        return reply.strip()

    __call__ = generate

    def generate_batch(
        self,
        questions: Sequence[str],
        passages: Sequence[Sequence[Any]],
        extra_contexts: Sequence[str | Sequence[str] | None] | None = None,
        *,
        workers: int = 1,
        progress: bool = True,
    ) -> list[str]:
        """Answers for many questions, in order, with a progress bar. ``workers`` > 1 sends
        that many requests at a time (the reply cache is safe to share)."""
        n = len(questions)
        if len(passages) != n or (extra_contexts is not None and len(extra_contexts) != n):
            raise ValueError(
                f"questions, passages and extra_contexts must have one entry per question: got {n}, {len(passages)}"
                f"{'' if extra_contexts is None else f', {len(extra_contexts)}'}"
            )
        workers = check_scalar(workers, "workers", int, min_val=1)
        extras = [None] * n if extra_contexts is None else list(extra_contexts)
        bar = tqdm(total=n, desc=f"generate ({self.template.name})", disable=not progress)

        def one(i: int) -> str:
            answer = self.generate(questions[i], passages[i], extras[i])
            bar.update(1)
            return answer

        try:
            if workers == 1:
                return [one(i) for i in range(n)]
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(one, range(n)))
        finally:
            bar.close()

    def __repr__(self) -> str:
        return f"Generator(template={self.template.name!r}, max_tokens={self.max_tokens}, client={self.client!r})"


def generate(
    question: str,
    passages: Sequence[Any],
    template: str | PromptTemplate = "neutral",
    extra_context: str | Sequence[str] | None = None,
    *,
    client: OpenAIChat | None = None,
    max_tokens: int | None = None,
) -> str:
    """One answer: ``Generator(client, template, max_tokens=...).generate(question, passages,
    extra_context)``; the client defaults to :meth:`OpenAIChat.from_env`."""
    return Generator(client, template, max_tokens=max_tokens).generate(question, passages, extra_context)


def generate_batch(
    questions: Sequence[str],
    passages: Sequence[Sequence[Any]],
    template: str | PromptTemplate = "neutral",
    extra_contexts: Sequence[str | Sequence[str] | None] | None = None,
    *,
    client: OpenAIChat | None = None,
    max_tokens: int | None = None,
    workers: int = 1,
    progress: bool = True,
) -> list[str]:
    """Many answers with one template (:meth:`Generator.generate_batch`)."""
    gen = Generator(client, template, max_tokens=max_tokens)
    return gen.generate_batch(questions, passages, extra_contexts, workers=workers, progress=progress)
