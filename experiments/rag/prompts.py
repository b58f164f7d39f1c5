"""Generation prompt templates of the seed papers, as data.

A :class:`PromptTemplate` turns a question and its retrieved passages into chat messages.
Placeholders: ``{question}`` and ``{passages}`` in the user text; ``{i}`` (1-based rank),
``{text}`` and ``{title}`` in one passage's format.

Team rule: nobody's sentences go into divopt. Where a paper or benchmark publishes its prompt,
divopt's template is **paraphrased from** it: the same structure (system / user split, the order
of instruction, passages, question), the same fields and labels, the same output format and the
same phrases a scorer looks for (RGB's decline "insufficient information"), in divopt's own
words; ``source`` says what it paraphrases. ``verbatim`` stays False for every template (it would
mark text copied as published; divopt ships none).

==============================  ===============================================================
template                        origin
==============================  ===============================================================
``rgb``                         paraphrased from RGB ``config/instruction.yaml`` (en)
``dartboard``                   ``rgb`` (Dartboard evaluates on RGB and keeps its prompt, Sec. 3)
``mio_llama3``                  paraphrased from the MIO report's Table 2 (its notebook's
                                ``create_rag_prompt``)
``longbench_multidoc``          paraphrased from LongBench ``config/dataset2prompt.json``
                                (hotpotqa, 2wikimqa, musique)
``longbench_multifieldqa_en``   paraphrased from LongBench ``config/dataset2prompt.json``
``dfrag``                       paraphrased from DF-RAG's Fig. 12 (LongBench's multi-document
                                prompt after a role line), DF-RAG's 50-token answer budget
``alce_qampari``, ``alce_asqa`` paraphrased from ALCE ``prompts/{qampari,asqa}_default.json``
                                (instruction, document layout); zero-shot (ALCE adds two
                                demonstrations)
``ccbqp``                       divopt's: the CCBQP paper does not print its Tables 1-2 prompt
``neutral``                     divopt's short-answer prompt
==============================  ===============================================================
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PromptTemplate", "TEMPLATES", "get_template"]

_SLOT = re.compile(r"\{(question|passages)\}")
_PSLOT = re.compile(r"\{(i|text|title)\}")


@dataclass(frozen=True)
class PromptTemplate:
    """A generation prompt: ``system`` (optional) and ``user`` texts, the format of one
    passage and the string joining them, the answer budget and where the text comes from
    (``source``; ``verbatim`` would mark copied text, which divopt does not ship)."""

    name: str
    user: str
    system: str | None = None
    passage: str = "{text}"
    joiner: str = "\n\n"
    max_tokens: int = 256
    verbatim: bool = False
    source: str = ""

    def context(self, passages: Sequence[Any], extra_context: str | Sequence[str] | None = None) -> str:
        """The passages block; ``extra_context`` is appended as further passages (DF-RAG's
        public code appends the Evaluator's short answer to the chunk list the same way)."""
        items: list[tuple[str, str]] = []
        for k, p in enumerate(passages):
            if isinstance(p, str):
                items.append(("", p))
            elif isinstance(p, Mapping) and isinstance(p.get("text"), str):
                items.append((str(p.get("title") or ""), p["text"]))
            else:
                raise TypeError(f"passages[{k}] must be a string or a mapping with 'text' (and 'title'), got {p!r}")
        extras = [extra_context] if isinstance(extra_context, str) else list(extra_context or [])
        for k, e in enumerate(extras):
            if not isinstance(e, str):
                raise TypeError(f"extra_context[{k}] must be a string, got {type(e).__name__}")
            items.append(("", e))
        blocks = []
        for i, (title, text) in enumerate(items, 1):
            values = {"i": str(i), "text": text, "title": title}
            blocks.append(_PSLOT.sub(lambda m: values[m.group(1)], self.passage))
        return self.joiner.join(blocks)

    def render(self, question: str, passages: Sequence[Any], extra_context: str | Sequence[str] | None = None) -> list[dict[str, str]]:
        """Chat messages for ``question`` over ``passages`` (strings, or mappings with
        ``text`` and ``title``)."""
        if not isinstance(question, str):
            raise TypeError(f"question must be a string, got {type(question).__name__}")
        if isinstance(passages, str):
            raise TypeError("passages must be a list of passages, got one string")
        values = {"question": question, "passages": self.context(passages, extra_context)}
        user = _SLOT.sub(lambda m: values[m.group(1)], self.user)
        messages = [] if self.system is None else [{"role": "system", "content": self.system}]
        return messages + [{"role": "user", "content": user}]


# ---- RGB and Dartboard --------------------------------------------------------------------
_RGB_SYSTEM = (
    "You are an AI assistant who answers questions accurately and reliably with the help of outside documents. "
    "Bear in mind that the documents may be noisy or may contain false statements. When the documents hold the "
    "correct answer, give it accurately. When they do not hold it, reply 'I cannot answer the question: the documents "
    "give insufficient information.'. When some documents contradict the facts, reply 'The provided documents contain "
    "factual errors.' and then give the correct answer."
)
RGB = PromptTemplate(
    name="rgb",
    system=_RGB_SYSTEM,
    user="Document:\n{passages} \n\nQuestion:\n{question}",
    passage="{text}",
    joiner="\n",
    max_tokens=256,
    verbatim=False,
    source="paraphrased from RGB (Chen et al., 2024), github.com/chen700564/RGB config/instruction.yaml, the 'en' "
    "system text and instruction layout (Document / Question); the decline keeps the phrase 'insufficient "
    "information' that RGB's evalue.py looks for, the error reply the phrase 'factual errors'; evalue.py joins the "
    "documents with newlines. The answer budget is divopt's (RGB uses each model's default).",
)
DARTBOARD = PromptTemplate(
    **{**RGB.__dict__, "name": "dartboard",
       "source": "Dartboard (Pickett et al., 2024, Sec. 3): 'we do not modify the prompting of LLMs', so its QA "
       "column uses RGB's benchmark prompt: template 'rgb' (paraphrased from RGB)."},
)

# ---- MIO report ---------------------------------------------------------------------------
MIO_LLAMA3 = PromptTemplate(
    name="mio_llama3",
    user=(
        "You answer questions precisely. Using the documents provided, reply with the direct answer ONLY: no "
        "explanation, no context, nothing extra.\n\n"
        "Context Documents:\n{passages}\n\n"
        "Question: {question}\n\n"
        "Instructions:\n"
        "- Reply with the direct answer ONLY\n"
        '- Do NOT start with lead-ins like "The documents say..." or "As stated in..."\n'
        "- Do NOT give explanations or reasoning\n"
        "- When a single word, number or short phrase answers the question, reply with just that\n"
        "- When a sentence is needed, keep it as short as you can\n\n"
        "Answer:"
    ),
    passage="Document {i}:\n{text}",
    joiner="\n\n",
    max_tokens=500,
    verbatim=False,
    source="paraphrased from the MIO report (Zhang, Liu, Zhang, MIT 15.C57), Table 2 (the notebook "
    "rag_llm_evaluation.ipynb, create_rag_prompt, github.com/kbzh2558/robustness_view_of_rag): the same fields "
    "(Context Documents, Question, Instructions, Answer) and five instructions; sent to Llama-3 8B (Ollama "
    "'llama3') at temperature 0 with num_predict 500.",
)

# ---- LongBench and DF-RAG -----------------------------------------------------------------
_LB_ONLY = "Reply with the answer alone and no other words."
_LB_MULTIDOC = (
    "Use the passages below to answer the question. " + _LB_ONLY + "\n\nHere are the passages.\n{passages}\n\n"
    "Use the passages above to answer the question. " + _LB_ONLY + "\n\nQuestion: {question}\nAnswer:"
)
LONGBENCH_MULTIDOC = PromptTemplate(
    name="longbench_multidoc",
    user=_LB_MULTIDOC,
    joiner="\n\n",
    max_tokens=32,
    verbatim=False,
    source="paraphrased from LongBench (Bai et al., 2024), github.com/THUDM/LongBench config/dataset2prompt.json, "
    "the prompt of hotpotqa / 2wikimqa / musique: instruction, the passages, the instruction again, Question, "
    "Answer; max_tokens from config/dataset2maxlen.json (32).",
)
LONGBENCH_MULTIFIELDQA_EN = PromptTemplate(
    name="longbench_multifieldqa_en",
    user="Read the text below and keep your answer short.\n\n{passages}\n\nNow answer the question below from the "
    "text above. " + _LB_ONLY + "\n\nQuestion: {question}\nAnswer:",
    joiner="\n\n",
    max_tokens=64,
    verbatim=False,
    source="paraphrased from LongBench config/dataset2prompt.json, multifieldqa_en; max_tokens from "
    "config/dataset2maxlen.json (64).",
)
DFRAG = PromptTemplate(
    **{**LONGBENCH_MULTIDOC.__dict__, "name": "dfrag", "max_tokens": 50,
       "user": "Role: you are an assistant that answers questions.\n\n" + _LB_MULTIDOC,
       "source": "paraphrased from DF-RAG (Khan et al., 2026), Fig. 12: a role line ('Instruction'), then LongBench's "
       "multi-document QA layout (Sec. 3.4: 'We follow the prompt released in LongBench'): instruction, the "
       "passages, the instruction again, Question, Answer. One user message and the answer budget of 50 tokens "
       "(temperature 0.01) as in the authors' run_dfrag.py; for +IC the incremental context follows the passages."},
)

# ---- ALCE (QAMPARI, ASQA) and the CCBQP paper ---------------------------------------------
_ALCE_DOC = "Document [{i}](Title: {title}): {text}\n"
ALCE_QAMPARI = PromptTemplate(
    name="alce_qampari",
    user="Instruction: List correct answers to the question below, using nothing but the search results given "
    "(some may be irrelevant), and cite them. Cite exactly one document for every answer. Put commas between "
    "answers. When the question has more than 5 answers, give at least 5.\n\nQuestion: {question}\n\n{passages}\n"
    "Answer:",
    passage=_ALCE_DOC,
    joiner="",
    max_tokens=300,
    verbatim=False,
    source="paraphrased from ALCE (Gao et al., 2023), github.com/princeton-nlp/ALCE prompts/qampari_default.json: "
    "instruction, demo_prompt layout and doc_prompt; zero-shot (ALCE adds two demonstrations).",
)
ALCE_ASQA = PromptTemplate(
    name="alce_asqa",
    user="Instruction: Write a correct, readable and short answer to the question below, using nothing but the search "
    "results given (some may be irrelevant), and cite them. Keep a neutral, journalistic tone. Cite a source for "
    "every factual claim. Cite several results as [1][2][3]. Every sentence cites at least one and at most three "
    "documents; when several documents support a sentence, cite the smallest subset that suffices.\n\n"
    "Question: {question}\n\n{passages}\nAnswer:",
    passage=_ALCE_DOC,
    joiner="",
    max_tokens=300,
    verbatim=False,
    source="paraphrased from ALCE prompts/asqa_default.json: instruction, demo_prompt layout and doc_prompt; "
    "zero-shot.",
)
CCBQP = PromptTemplate(
    name="ccbqp",
    user="Answer the question using only the passages below; some may be irrelevant. List every correct answer "
    "you find, separated by commas, and write nothing else.\n\nPassages:\n{passages}\n\nQuestion: {question}\n"
    "Answers:",
    passage="[{i}] {text}",
    joiner="\n",
    max_tokens=300,
    verbatim=False,
    source="divopt's: the CCBQP paper's (Lu & Sidiropoulos, 2026) generation prompt for its Tables 1-2 is not "
    "available to divopt (its public code, github.com/luqh357/CCBQP-RAG, covers retrieval only). A list prompt "
    "whose comma-separated answers split_list_answer/list_prf score; 'alce_qampari' is the field's published "
    "alternative.",
)
NEUTRAL = PromptTemplate(
    name="neutral",
    user="Answer the question using only the passages below. Give only the answer, without explanation.\n\n"
    "Passages:\n{passages}\n\nQuestion: {question}\nAnswer:",
    passage="[{i}] {text}",
    joiner="\n",
    max_tokens=64,
    verbatim=False,
    source="divopt's neutral short-answer prompt.",
)

#: Every template by name.
TEMPLATES: dict[str, PromptTemplate] = {
    t.name: t
    for t in (RGB, DARTBOARD, MIO_LLAMA3, LONGBENCH_MULTIDOC, LONGBENCH_MULTIFIELDQA_EN, DFRAG, ALCE_QAMPARI,
              ALCE_ASQA, CCBQP, NEUTRAL)
}


def get_template(template: str | PromptTemplate) -> PromptTemplate:
    """A template by name (see :data:`TEMPLATES`), or the given :class:`PromptTemplate`."""
    if isinstance(template, PromptTemplate):
        return template
    if template not in TEMPLATES:
        raise ValueError(f"unknown template {template!r}; expected one of {sorted(TEMPLATES)} or a PromptTemplate")
    return TEMPLATES[template]
