"""Generation prompt templates of the seed papers, as data.

A :class:`PromptTemplate` turns a question and its retrieved passages into chat messages.
``verbatim=True`` marks text taken as published (the source is cited in ``source``);
``verbatim=False`` marks divopt's own text, written where a paper does not publish its
prompt (the ``source`` says so). Placeholders: ``{question}`` and ``{passages}`` in the
user text; ``{i}`` (1-based rank), ``{text}`` and ``{title}`` in one passage's format.

==================  ========  ==============================================================
template            verbatim  source
==================  ========  ==============================================================
``rgb``             yes       RGB benchmark ``config/instruction.yaml`` (en)
``dartboard``       no        Dartboard's own prompt not available; RGB's (``rgb``) reused
``mio_llama3``      yes       MIO report, ``rag_llm_evaluation.ipynb`` ``create_rag_prompt``
``longbench_multidoc`` yes    LongBench ``config/dataset2prompt.json`` (hotpotqa, 2wikimqa,
                              musique)
``longbench_multifieldqa_en`` yes  LongBench ``config/dataset2prompt.json``
``dfrag``           no        DF-RAG's generator prompt not available; LongBench's multi-doc
                              QA prompt reused, DF-RAG's 50-token answer budget
``alce_qampari``    yes*      ALCE ``prompts/qampari_default.json`` (instruction, layout)
``alce_asqa``       yes*      ALCE ``prompts/asqa_default.json`` (instruction, layout)
``ccbqp``           no        CCBQP paper's Tables 1-2 prompt not available; divopt's list
                              prompt
``neutral``         no        divopt's short-answer prompt
==================  ========  ==============================================================

(*) ALCE's prompts carry two in-context demonstrations; divopt's versions are zero-shot.
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
    passage and the string joining them, the answer budget and where the text comes from."""

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
    "You are an accurate and reliable AI assistant that can answer questions with the help of external documents. "
    "Please note that external documents may contain noisy or factually incorrect information. If the information "
    "in the document contains the correct answer, you will give an accurate answer. If the information in the "
    "document does not contain the answer, you will generate \u2019I can not answer the question because of the "
    "insufficient information in documents.\u2018. If there are inconsistencies with the facts in some of the "
    "documents, please generate the response 'There are factual errors in the provided documents.' and provide "
    "the correct answer."
)
RGB = PromptTemplate(
    name="rgb",
    system=_RGB_SYSTEM,
    user="Document:\n{passages} \n\nQuestion:\n{question}",
    passage="{text}",
    joiner="\n",
    max_tokens=256,
    verbatim=True,
    source="RGB (Chen et al., 2024), github.com/chen700564/RGB config/instruction.yaml, 'en' system and "
    "instruction; evalue.py joins the documents with newlines. The answer budget is divopt's (RGB uses each "
    "model's default).",
)
DARTBOARD = PromptTemplate(
    **{**RGB.__dict__, "name": "dartboard", "verbatim": False,
       "source": "Dartboard (Pickett et al., 2024) evaluates end-to-end QA on RGB; its own generation prompt is not "
       "available to divopt, so divopt uses RGB's benchmark prompt (template 'rgb', verbatim from RGB)."},
)

# ---- MIO report ---------------------------------------------------------------------------
MIO_LLAMA3 = PromptTemplate(
    name="mio_llama3",
    user=(
        "You are a precise question-answering assistant. Based on the provided documents, answer the question with "
        "ONLY the direct answer. Do not include explanations, context, or additional information.\n\n"
        "Context Documents:\n{passages}\n\n"
        "Question: {question}\n\n"
        "Instructions:\n"
        "- Provide ONLY the direct answer to the question\n"
        '- Do NOT add phrases like "Based on the documents..." or "According to..."\n'
        "- Do NOT provide explanations or reasoning\n"
        "- If the answer is a single word, number, or short phrase, return only that\n"
        "- If the answer requires a sentence, make it as brief as possible\n\n"
        "Answer:"
    ),
    passage="Document {i}:\n{text}",
    joiner="\n\n",
    max_tokens=500,
    verbatim=True,
    source="MIO report (Zhang, Liu, Zhang, MIT 15.C57), github.com/kbzh2558/robustness_view_of_rag "
    "rag_llm_evaluation.ipynb, create_rag_prompt; sent to Llama-3 8B (Ollama 'llama3') at temperature 0 with "
    "num_predict 500.",
)

# ---- LongBench and DF-RAG -----------------------------------------------------------------
_LB_MULTIDOC = (
    "Answer the question based on the given passages. Only give me the answer and do not output any other words."
    "\n\nThe following are given passages.\n{passages}\n\nAnswer the question based on the given passages. Only "
    "give me the answer and do not output any other words.\n\nQuestion: {question}\nAnswer:"
)
LONGBENCH_MULTIDOC = PromptTemplate(
    name="longbench_multidoc",
    user=_LB_MULTIDOC,
    joiner="\n\n",
    max_tokens=32,
    verbatim=True,
    source="LongBench (Bai et al., 2024), github.com/THUDM/LongBench config/dataset2prompt.json, the prompt of "
    "hotpotqa / 2wikimqa / musique ({input} -> {question}, {context} -> the passages); max_tokens from "
    "config/dataset2maxlen.json (32).",
)
LONGBENCH_MULTIFIELDQA_EN = PromptTemplate(
    name="longbench_multifieldqa_en",
    user="Read the following text and answer briefly.\n\n{passages}\n\nNow, answer the following question based on "
    "the above text, only give me the answer and do not output any other words.\n\nQuestion: {question}\nAnswer:",
    joiner="\n\n",
    max_tokens=64,
    verbatim=True,
    source="LongBench config/dataset2prompt.json, multifieldqa_en; max_tokens from config/dataset2maxlen.json (64).",
)
DFRAG = PromptTemplate(
    **{**LONGBENCH_MULTIDOC.__dict__, "name": "dfrag", "verbatim": False, "max_tokens": 50,
       "user": "You are a question answering assistant. " + _LB_MULTIDOC,
       "source": "DF-RAG (Khan et al., 2026): the paper's generator prompt text is not available to divopt "
       "(the public run_dfrag.py builds it with prompts.format_prompt, whose text is not in the public copy). "
       "divopt uses LongBench's multi-document QA prompt (verbatim, template 'longbench_multidoc') after a "
       "role line, as the authors' code frames it, with run_dfrag.py's answer budget of 50 tokens (it samples "
       "at temperature 0.01)."},
)

# ---- ALCE (QAMPARI, ASQA) and the CCBQP paper ---------------------------------------------
_ALCE_DOC = "Document [{i}](Title: {title}): {text}\n"
ALCE_QAMPARI = PromptTemplate(
    name="alce_qampari",
    user="Instruction: Provide a list of accurate answers for the given question using only the provided search "
    "results (some of which might be irrelevant) and cite them properly. Always cite one and only one document for "
    "each answer. Separate answers by commas. For questions that have more than 5 answers, write at least 5 "
    "answers.\n\nQuestion: {question}\n\n{passages}\nAnswer:",
    passage=_ALCE_DOC,
    joiner="",
    max_tokens=300,
    verbatim=True,
    source="ALCE (Gao et al., 2023), github.com/princeton-nlp/ALCE prompts/qampari_default.json: instruction, "
    "demo_prompt layout and doc_prompt; zero-shot (ALCE adds two demonstrations).",
)
ALCE_ASQA = PromptTemplate(
    name="alce_asqa",
    user="Instruction: Write an accurate, engaging, and concise answer for the given question using only the "
    "provided search results (some of which might be irrelevant) and cite them properly. Use an unbiased and "
    "journalistic tone. Always cite for any factual claim. When citing several search results, use [1][2][3]. Cite "
    "at least one document and at most three documents in each sentence. If multiple documents support the "
    "sentence, only cite a minimum sufficient subset of the documents.\n\nQuestion: {question}\n\n{passages}\n"
    "Answer:",
    passage=_ALCE_DOC,
    joiner="",
    max_tokens=300,
    verbatim=True,
    source="ALCE prompts/asqa_default.json: instruction, demo_prompt layout and doc_prompt; zero-shot.",
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
