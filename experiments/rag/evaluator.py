"""Evaluators: score a selection for one query, so a query-adaptive policy can choose theta.

An evaluator is any object with ``name`` and ``score(context, indices) -> float`` (higher is
better), where ``context`` is a :class:`QueryContext` (the query's :class:`Instance`, and where
the dataset has them its query text, passage texts, qrels, subtopic labels and gold answers) and
``indices`` are rows of ``context.instance``. Built in (:data:`EVALUATORS`):

* ``metric``: a ground-truth metric of :func:`divopt_rag.experiments.measures.metrics.selection_metrics`
  (alpha-nDCG, S-recall, recall, nDCG, ...). This is what a retrieval Oracle uses; it needs labels.
* ``coverage``: a label-free proxy, the relevance-weighted coverage of the candidate pool
      cov(S) = sum_i w_i max_{s in S} cos(e_i, e_s) / sum_i w_i,   w_i = max(c_i, 0),
  over the ``top`` most relevant pool items (all if None). It rewards sets that represent
  every relevant region of the pool, so it needs no ground truth.
* ``dfrag``: DF-RAG's Planner + Evaluator as published, the Retrieval Support
  RS = sum_i r(p_i), r in {0..5} per plan step
  (:class:`divopt_rag.experiments.rag.dfrag_llm.RetrievalSupportEvaluator`; the whole pipeline is
  :class:`divopt_rag.experiments.rag.dfrag.DFRAG`).
* ``judge_0_10`` (alias ``openai``): divopt's earlier one-number LLM judge (:class:`OpenAIJudge`),
  not DF-RAG's Evaluator.

LLM evaluators go through :class:`~divopt_rag.experiments.rag.llm.OpenAIChat` (any OpenAI-compatible
server: vLLM, llama.cpp, Ollama, a hosted API) and are OFF by default: built only when a config
names them with an explicit ``base_url``; they need query and passage texts.

:class:`DeltaPlanner` is divopt's earlier planning step (an LLM rates the diversity a question
needs and a window of thetas is kept), used by :func:`divopt_rag.experiments.rag.adaptive.dfrag_delta`;
DF-RAG's own Planner writes plan steps (:class:`divopt_rag.experiments.rag.dfrag_llm.Planner`).

:func:`make_evaluator` builds one from a spec ``{"name": ..., **options}``; ``register_evaluator``
adds to the registry.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import torch

from divopt_rag.models import Instance
from divopt_rag.models.validation import check_indices, check_nonnegative, check_scalar

from .dfrag_llm import RetrievalSupportEvaluator
from .llm import LLMError, OpenAIChat, parse_number
from divopt_rag.experiments.measures.metrics import selection_metrics

__all__ = [
    "QueryContext",
    "Evaluator",
    "EvaluatorError",
    "MetricEvaluator",
    "CoverageEvaluator",
    "CallableEvaluator",
    "OpenAIJudge",
    "OpenAIEvaluator",
    "DeltaPlanner",
    "OpenAIPlanner",
    "EVALUATORS",
    "register_evaluator",
    "make_evaluator",
]


#: An evaluator could not score a selection (endpoint down, unparseable answer, no texts); the
#: LLM client's error, so one ``except`` catches both.
EvaluatorError = LLMError


@dataclass
class QueryContext:
    """What an evaluator may look at for one query. ``passages[i]`` is the text of row i;
    ``answers`` are the gold answers (for answer-level Oracles such as DF-RAG's answer F1)."""

    query_id: str
    instance: Instance
    query_text: str | None = None
    passages: Sequence[str] | None = None
    qrels: Mapping[str, int] | None = None
    subtopics: Mapping[str, Any] | None = None
    answers: Sequence[str] | None = None


@runtime_checkable
class Evaluator(Protocol):
    name: str

    def score(self, context: QueryContext, indices: Any) -> float: ...


@functools.lru_cache(maxsize=1)
def metric_names() -> frozenset[str]:
    """Every metric name :func:`divopt_rag.experiments.measures.metrics.selection_metrics` can report (read
    off a tiny labelled selection, so the list follows that function)."""
    inst = Instance(torch.eye(2), torch.tensor([1.0, 0.0]), k=2, theta=0.5)
    return frozenset(selection_metrics(inst, [0, 1], qrels={0: 1}, subtopics={0: "a", 1: "b"}, sigma=0.1))


class MetricEvaluator:
    """Ground truth: ``selection_metrics(...)[metric]`` (e.g. alpha_ndcg, s_recall, recall, ndcg)."""

    def __init__(self, metric: str = "alpha_ndcg", **metric_kwargs: Any) -> None:
        # names checked now, not in every run: a typo would otherwise make every row an error
        valid = metric_names()
        if metric not in valid:
            raise ValueError(f"unknown metric {metric!r}; expected one of {sorted(valid)}")
        options = set(inspect.signature(selection_metrics).parameters) - {"inst", "indices", "qrels", "subtopics"}
        unknown = sorted(set(metric_kwargs) - options)
        if unknown:
            raise TypeError(f"metric evaluator has no option {unknown}; its options: {sorted(options | {'metric'})}")
        self.metric = str(metric)
        self.metric_kwargs = metric_kwargs
        self.name = f"metric:{self.metric}"

    def score(self, context: QueryContext, indices: Any) -> float:
        m = selection_metrics(
            context.instance, indices, qrels=context.qrels, subtopics=context.subtopics, **self.metric_kwargs
        )
        if self.metric not in m:
            raise EvaluatorError(
                f"metric {self.metric!r} is not available for query {context.query_id!r}; "
                f"available: {sorted(m)} (recall/ndcg need qrels, alpha_ndcg/s_recall need subtopics)"
            )
        return float(m[self.metric])


class CoverageEvaluator:
    """Label-free proxy: relevance-weighted pool coverage (formula in the module docstring)."""

    def __init__(self, top: int | None = None) -> None:
        self.top = check_scalar(top, "top", int, min_val=1, allow_none=True)
        self.name = "coverage"

    def score(self, context: QueryContext, indices: Any) -> float:
        inst = context.instance
        idx = check_indices(indices, inst.n)
        c = inst.relevance.double()
        rows = torch.topk(c, min(self.top, inst.n)).indices if self.top else torch.arange(inst.n, device=inst.device)
        w = c[rows].clamp_min(0.0)
        if float(w.sum()) <= 0.0:
            w = torch.ones_like(w)
        E = inst.E
        S = E[torch.as_tensor(idx, device=inst.device)].double()
        best = (E[rows].double() @ S.T).amax(dim=1)
        return float((w * best).sum() / w.sum())


class CallableEvaluator:
    """Wrap a plain function ``fn(context, indices) -> float``."""

    def __init__(self, fn: Callable[[QueryContext, Any], float], name: str = "callable") -> None:
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self.fn, self.name = fn, name

    def score(self, context: QueryContext, indices: Any) -> float:
        return float(self.fn(context, indices))


_SYSTEM_PROMPT = (
    "You judge retrieved context for retrieval-augmented generation. Given a question and a set of "
    "passages, rate how useful the passages are, together, for answering the question completely: "
    "they should be relevant and cover the different aspects the answer needs, without redundancy. "
    "Answer with a single integer from 0 to {scale} and nothing else."
)


class OpenAIJudge(OpenAIChat):
    """divopt's one-number LLM judge (``judge_0_10``): NOT DF-RAG's Evaluator (off unless configured).

    It shows the question and the passages and asks for one integer usefulness score in
    [0, scale] (default 0-10), returning answer / scale in [0, 1]. DF-RAG's Evaluator
    (:class:`divopt_rag.experiments.rag.dfrag_llm.StepEvaluator`) instead scores each step of a plan
    0-5 against the passages (without the question) and sums the scores; its prompt follows the
    paper, this one is divopt's own.

    Connection options as :class:`OpenAIChat`. max_chars : each passage is cut to this many
    characters in the prompt.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None, *, scale: int = 10, max_chars: int = 1000,
                 system_prompt: str | None = None, **connection: Any) -> None:
        super().__init__(base_url, model, **connection)
        self.scale = check_scalar(scale, "scale", int, min_val=1)
        self.max_chars = int(max_chars)
        self.system_prompt = (system_prompt or _SYSTEM_PROMPT).format(scale=self.scale)
        self.name = f"judge_0_10:{model}"

    def messages(self, context: QueryContext, indices: Any) -> list[dict[str, str]]:
        if context.query_text is None or context.passages is None:
            raise EvaluatorError(
                f"the judge_0_10 evaluator needs the query text and passage texts (query {context.query_id!r} has "
                f"{'no query text' if context.query_text is None else 'no passage texts'}); "
                "use a dataset with texts, or the 'coverage'/'metric' evaluators"
            )
        idx = check_indices(indices, context.instance.n)
        body = "\n\n".join(
            f"[{r + 1}] {str(context.passages[int(i)])[: self.max_chars]}" for r, i in enumerate(idx)
        )
        user = f"Question: {context.query_text}\n\nPassages:\n{body}\n\nScore (0-{self.scale}):"
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}]

    def score(self, context: QueryContext, indices: Any) -> float:
        content = self.complete(self.messages(context, indices), max_tokens=8)
        return parse_number(content, 0, self.scale) / self.scale


_PLANNER_PROMPT = (
    "You plan retrieval for retrieval-augmented generation. For the question below, say how much "
    "the retrieved passages should be diversified: 0 means the question has one focused answer "
    "(retrieve the most relevant passages, even if similar), 1 means the answer needs many "
    "different aspects or interpretations (retrieve varied passages). Answer with a single number "
    "between 0 and 1 and nothing else."
)


class DeltaPlanner(OpenAIChat):
    """divopt's diversity-rating planner (the ``dfrag_delta`` variant): NOT DF-RAG's Planner.

    The LLM rates the diversity the question needs, delta in [0, 1]; the planner keeps the
    candidate thetas with |theta - (1 - delta)| <= ``window`` (theta = 1 is pure relevance), or
    the nearest candidate if none is that close; a judge then scores only those. DF-RAG's
    Planner (:class:`divopt_rag.experiments.rag.dfrag_llm.Planner`) instead writes plan steps p_1..p_m that
    the Evaluator checks against every candidate set; it never narrows the lambda grid.
    A planner for :func:`divopt_rag.experiments.rag.adaptive.adaptive_select`. Needs the query text.
    Off unless constructed.
    """

    def __init__(self, base_url: str, model: str, *, window: float = 0.3, system_prompt: str | None = None,
                 **connection: Any) -> None:
        super().__init__(base_url, model, **connection)
        self.window = float(check_nonnegative(window, "window"))
        self.system_prompt = system_prompt or _PLANNER_PROMPT
        self.name = f"dfrag_delta-planner:{model}"

    def diversity(self, context: QueryContext) -> float:
        if context.query_text is None:
            raise EvaluatorError(f"the dfrag_delta planner needs the query text (query {context.query_id!r} has none)")
        content = self.complete([{"role": "system", "content": self.system_prompt},
                                 {"role": "user", "content": f"Question: {context.query_text}\nDiversity (0-1):"}])
        return parse_number(content, 0.0, 1.0)

    def __call__(self, context: QueryContext, thetas: Sequence[float]) -> list[float]:
        if not len(thetas):
            raise ValueError("the planner needs at least one candidate theta")
        target = 1.0 - self.diversity(context)
        near = [t for t in thetas if abs(t - target) <= self.window + 1e-12]
        return near or [min(thetas, key=lambda t: (abs(t - target), t))]


#: Earlier names, kept so existing code and configs run unchanged.
OpenAIEvaluator = OpenAIJudge
OpenAIPlanner = DeltaPlanner

EVALUATORS: dict[str, Callable[..., Evaluator]] = {
    "metric": MetricEvaluator,
    "coverage": CoverageEvaluator,
    "dfrag": RetrievalSupportEvaluator,
    "judge_0_10": OpenAIJudge,
    "openai": OpenAIJudge,  # the earlier name of judge_0_10
}


def register_evaluator(name: str) -> Callable[[Callable[..., Evaluator]], Callable[..., Evaluator]]:
    """Decorator adding an evaluator factory to :data:`EVALUATORS`."""

    def deco(factory: Callable[..., Evaluator]) -> Callable[..., Evaluator]:
        EVALUATORS[name] = factory
        return factory

    return deco


def make_evaluator(spec: Mapping[str, Any] | str | None) -> Evaluator | None:
    """An evaluator from ``{"name": ..., **options}`` (or a bare name); None gives None.

    ``"metric:alpha_ndcg"`` is short for ``{"name": "metric", "metric": "alpha_ndcg"}``.
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        name, _, arg = spec.partition(":")
        spec = {"name": name, **({"metric": arg} if name == "metric" and arg else {})}
    opts = dict(spec)
    name = opts.pop("name", None)
    if name not in EVALUATORS:
        raise ValueError(f"unknown evaluator {name!r}; expected one of {sorted(EVALUATORS)}")
    factory = EVALUATORS[name]
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        params = []
    if params and not any(p.kind is p.VAR_KEYWORD for p in params):
        valid = sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        unknown = sorted(set(opts) - set(valid))
        if unknown:
            raise TypeError(f"evaluator {name!r} has no option {unknown}; its options: {valid}")
    return factory(**opts)


