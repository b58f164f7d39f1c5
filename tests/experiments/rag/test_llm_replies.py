"""LLM replies are validated by the API's shape before use, and an error is never cached (issue
39, items 2 and 6), against a real HTTP server on 127.0.0.1 (tests/helpers/fake_llm.py).

The probes: ``"content": null`` became the answer 'None' with status ok and was cached; a 302
with a JSON body was taken as the answer; a 307 was reported as "invalid JSON".
"""
from __future__ import annotations

import sqlite3

import pytest
from helpers.fake_llm import FakeChat, chat_reply

from divopt_rag.experiments.rag.llm import LLMError, OpenAIChat, chat_content

_Chat = FakeChat()  # answers the queued replies only
ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server():
    with _Chat.running() as url:
        yield url


def _cached(path) -> list[tuple]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return db.execute("SELECT key, content FROM replies").fetchall()


def _choice(**message) -> dict:
    return {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}]}


BAD_SHAPES = [
    (_choice(content=None), r"choices\[0\]\.message\.content is null, expected a string \(finish_reason 'stop'\)"),
    (_choice(content=None, refusal="I cannot help"), r"content is null.*refusal 'I cannot help'"),
    (_choice(content=None, tool_calls=[{"id": "t"}]), r"content is null.*tool calls"),
    (_choice(), r"choices\[0\]\.message has no 'content'"),
    (_choice(content=3), r"content is a number, expected a string"),
    (_choice(content=["a"]), r"content is an array, expected a string"),
    (_choice(content={"text": "a"}), r"content is an object, expected a string"),
    ({"choices": [{"text": "a"}]}, r"choices\[0\]\.message is missing, expected an object"),
    ({"choices": ["a"]}, r"choices\[0\] is a string, expected an object"),
    ({"choices": {"0": {}}}, r"'choices' is an object, expected a non-empty array"),
    ({"choices": []}, r"'choices' is an empty array"),
    ({"error": {"message": "model overloaded"}}, r"no 'choices'; its error: 'model overloaded'"),
    ([chat_reply("a")], r"the body is an array, expected an object"),
    ("null", r"the body is null"),
    ('"hello"', r"the body is a string"),
]


@pytest.mark.parametrize("payload, problem", BAD_SHAPES)
def test_a_reply_of_another_shape_is_an_error_naming_the_endpoint_and_is_not_cached(server, tmp_path, payload,
                                                                                      problem):
    cache = tmp_path / "llm.sqlite"
    chat = OpenAIChat(server, "m", timeout=5, retries=2, backoff=0.0, cache=cache)
    _Chat.replies = [(200, payload)]
    with pytest.raises(LLMError, match=rf"LLM endpoint {server}/chat/completions returned a reply that is not a "
                                       rf"chat completion: .*{problem}"):
        chat.complete(ASK)
    assert chat.requests_sent == 1  # a malformed reply is not retried
    assert _cached(cache) == []  # ... and never stored
    _Chat.replies = [(200, chat_reply("fine"))]  # the same question is asked again, and now answered
    assert chat.complete(ASK) == "fine" and chat.requests_sent == 2
    assert [c for _, c in _cached(cache)] == ["fine"]
    assert chat.complete(ASK) == "fine" and chat.requests_sent == 2  # from the cache


def test_an_empty_string_is_an_answer_and_a_number_is_not_turned_into_text(server):
    chat = OpenAIChat(server, "m", timeout=5)
    _Chat.replies = [(200, _choice(content=""))]
    assert chat.complete(ASK) == ""  # the API's shape allows it; parse_number refuses it later
    assert chat_content(_choice(content="4")) == "4"
    with pytest.raises(LLMError, match="content is a number"):
        chat_content(_choice(content=4))


@pytest.mark.parametrize("status, body", [(302, chat_reply("taken as the answer")), (307, "<html>moved</html>"),
                                          (301, ""), (308, chat_reply("x")), (303, "see other")])
def test_a_redirect_is_refused_naming_it_not_followed_retried_or_cached(server, tmp_path, status, body):
    cache = tmp_path / "llm.sqlite"
    chat = OpenAIChat(server, "m", timeout=5, retries=2, backoff=0.0, cache=cache, api_key="secret")
    _Chat.replies = [(status, body, {"Location": "http://127.0.0.1:9/v1/chat/completions"})]
    with pytest.raises(LLMError) as info:
        chat.complete(ASK)
    text = str(info.value)
    assert f"LLM endpoint {server}/chat/completions answered HTTP {status}, a redirect to " \
           f"http://127.0.0.1:9/v1/chat/completions" in text
    assert "set base_url" in text and "invalid JSON" not in text
    assert chat.requests_sent == 1 and len(_Chat.calls) == 1  # one request, to the endpoint only
    assert _cached(cache) == []


def test_a_2xx_other_than_200_is_not_an_answer(server):
    chat = OpenAIChat(server, "m", timeout=5, retries=0)
    _Chat.replies = [(202, chat_reply("queued"))]
    with pytest.raises(LLMError, match="answered HTTP 202, expected 200"):
        chat.complete(ASK)
