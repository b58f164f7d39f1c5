"""The generation step against a fake OpenAI-compatible server on 127.0.0.1: the prompt each template
sends keeps the cited source's structure, fields, scorer phrases and output format (the wording is
divopt's own: paraphrased, never copied), the reply cache, batching in order, extra context, and the
clear error when no endpoint is configured."""
from __future__ import annotations


import pytest
from helpers.fake_llm import FakeChat

from divopt_rag.experiments.rag.generation import Generator, generate, generate_batch
from divopt_rag.experiments.rag.llm import LLMNotConfigured, OpenAIChat
from divopt_rag.experiments.rag.prompts import TEMPLATES, PromptTemplate, get_template


# a reply that is a function of the prompt, so order can be checked under concurrency
_Chat = FakeChat(rule=lambda body: f"  re:{body['messages'][-1]['content'][-30:]}  ")


@pytest.fixture
def server():
    with _Chat.running() as url:
        yield url


PASSAGES = ["Facebook bought Instagram in 2012.", "Instagram is a photo app."]


def test_rgb_prompt_keeps_rgbs_layout_and_the_phrases_its_scorer_reads(server):
    gen = Generator(OpenAIChat(server, "m", timeout=5), "rgb")
    answer = gen.generate("Who acquired Instagram?", PASSAGES)
    (req,) = _Chat.requests
    system = req["messages"][0]["content"]
    assert req["messages"][0]["role"] == "system" and system.startswith("You are an AI assistant")
    # RGB's evalue.py counts an answer containing "insufficient information" as a decline; its fact check
    # looks for "factual errors": the paraphrase keeps both phrases
    assert "insufficient information" in system and "factual errors" in system
    # RGB's instruction layout "Document:\n{DOCS} \n\nQuestion:\n{QUERY}", documents joined by newlines
    assert req["messages"][1] == {"role": "user", "content": "Document:\nFacebook bought Instagram in 2012.\n"
                                  "Instagram is a photo app. \n\nQuestion:\nWho acquired Instagram?"}
    assert req["max_tokens"] == 256 and req["temperature"] == 0.0
    assert answer == "re:" + req["messages"][1]["content"][-30:]  # stripped


def test_mio_and_longbench_prompts(server):
    client = OpenAIChat(server, "m", timeout=5)
    Generator(client, "mio_llama3").generate("Who?", ["first doc", "second doc"])
    mio = _Chat.requests[-1]
    assert len(mio["messages"]) == 1 and mio["max_tokens"] == 500
    content = mio["messages"][0]["content"]
    # the report's Table 2: role and rule, Context Documents, Question, five Instructions, Answer
    assert "Context Documents:\nDocument 1:\nfirst doc\n\nDocument 2:\nsecond doc\n\nQuestion: Who?\n\nInstructions:\n" \
        in content and content.endswith("\n\nAnswer:")
    assert content.split("Instructions:\n")[1].count("\n- ") == 4 and "ONLY" in content.split("Context Documents")[0]
    Generator(client, "longbench_multidoc").generate("Where?", ["c1", "c2"])
    lb = _Chat.requests[-1]
    text = lb["messages"][0]["content"]
    # LongBench's layout: the instruction, the passages, the instruction again, Question, Answer
    head, rest = text.split("\nc1\n\nc2\n\n")
    assert head.startswith("Use the passages below to answer the question.") and rest.startswith("Use the passages above")
    assert text.endswith("\n\nQuestion: Where?\nAnswer:") and lb["max_tokens"] == 32
    Generator(client, "dfrag").generate("Where?", ["c1", "c2"], extra_context=["plan: find X", "X"])
    df = _Chat.requests[-1]
    assert df["max_tokens"] == 50
    assert df["messages"][0]["content"].startswith("Role: you are an assistant that answers questions.\n\n" + head)
    assert "\nc1\n\nc2\n\nplan: find X\n\nX\n\nUse the passages above" in df["messages"][0]["content"]


def test_alce_layout_with_titles(server):
    Generator(OpenAIChat(server, "m", timeout=5), "alce_qampari").generate(
        "Which cars did Autozam make?", [{"title": "Autozam", "text": "The Scrum."}, "The Clef."])
    content = _Chat.requests[-1]["messages"][0]["content"]
    assert content.endswith("\n\nQuestion: Which cars did Autozam make?\n\nDocument [1](Title: Autozam): The Scrum.\n"
                            "Document [2](Title: ): The Clef.\n\nAnswer:")
    assert content.startswith("Instruction: List correct answers") and "commas" in content


def test_cache_answers_repeats_without_requests(server, tmp_path):
    cache = tmp_path / "replies.sqlite"
    first = generate("Who acquired Instagram?", PASSAGES, "neutral", client=OpenAIChat(server, "m", cache=cache, timeout=5))
    again = OpenAIChat(server, "m", cache=cache, timeout=5)  # another run, same cache file
    assert generate("Who acquired Instagram?", PASSAGES, "neutral", client=again) == first
    assert again.requests_sent == 0 and len(_Chat.requests) == 1
    generate("Who acquired Instagram?", PASSAGES[:1], "neutral", client=again)  # a different prompt asks
    assert again.requests_sent == 1


@pytest.mark.parametrize("workers", [1, 3])
def test_batch_keeps_order(server, workers):
    questions = [f"question {i}?" for i in range(7)]
    passages = [[f"passage {i}"] for i in range(7)]
    client = OpenAIChat(server, "m", timeout=5)
    got = generate_batch(questions, passages, "neutral", client=client, workers=workers, progress=False)
    expected = [Generator(client, "neutral").messages(q, p)[-1]["content"][-30:] for q, p in zip(questions, passages)]
    assert got == ["re:" + e for e in expected] and len(_Chat.requests) == 7
    with pytest.raises(ValueError, match="one entry per question: got 7, 6"):
        generate_batch(questions, passages[:6], client=client)


def test_no_endpoint_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("DIVOPT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("DIVOPT_LLM_MODEL", raising=False)
    with pytest.raises(LLMNotConfigured, match="DIVOPT_LLM_BASE_URL.*DIVOPT_LLM_MODEL"):
        generate("q", ["p"])
    with pytest.raises(LLMNotConfigured):
        Generator(template="rgb")


def test_templates_registry_and_rendering_errors():
    assert {"rgb", "dartboard", "mio_llama3", "longbench_multidoc", "dfrag", "alce_qampari", "alce_asqa", "ccbqp",
            "neutral"} <= set(TEMPLATES)
    for t in TEMPLATES.values():
        assert t.source and "{question}" in t.user and "{passages}" in t.user
    # nobody's sentences ship: every template is paraphrased from its source or divopt's own
    assert not any(t.verbatim for t in TEMPLATES.values())
    for name in ("rgb", "mio_llama3", "longbench_multidoc", "longbench_multifieldqa_en", "dfrag", "alce_qampari",
                 "alce_asqa"):
        assert TEMPLATES[name].source.startswith("paraphrased from"), name
    own = PromptTemplate(name="mine", user="Q={question} P={passages}", passage="<{i}:{title}|{text}>", joiner=";")
    assert get_template(own) is own
    assert own.render("x {passages}", ["a", {"text": "b", "title": "T"}]) == [
        {"role": "user", "content": "Q=x {passages} P=<1:|a>;<2:T|b>"}]  # no re-substitution of user text
    with pytest.raises(ValueError, match="unknown template 'gpt'"):
        get_template("gpt")
    with pytest.raises(TypeError, match="passages must be a list of passages, got one string"):
        own.render("q", "one string")
    with pytest.raises(TypeError, match=r"passages\[0\] must be a string or a mapping"):
        own.render("q", [3])
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 1"):
        Generator(OpenAIChat("http://127.0.0.1:9/v1", "m"), max_tokens=0)
