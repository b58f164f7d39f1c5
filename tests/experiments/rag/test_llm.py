"""The OpenAI-compatible client against a fake server on 127.0.0.1: retries, cache, errors."""
import pytest
from helpers.fake_llm import FakeChat, chat_reply

from divopt_rag.experiments.rag.llm import LLMError, LLMNotConfigured, OpenAIChat, parse_number


_Chat = FakeChat()  # answers the queued replies only


@pytest.fixture
def server():
    with _Chat.running() as url:
        yield url


_reply = chat_reply


def test_retries_transient_errors_then_answers(server):
    chat = OpenAIChat(server, "m", retries=2, backoff=0.0, timeout=5)
    _Chat.replies = [(503, "busy"), (429, "slow down"), (200, _reply("hello"))]
    assert chat.complete([{"role": "user", "content": "hi"}]) == "hello"
    assert chat.requests_sent == 3 and len(_Chat.requests) == 3


def test_client_errors_are_not_retried_and_name_the_endpoint(server):
    chat = OpenAIChat(server, "m", retries=3, backoff=0.0, timeout=5)
    _Chat.replies = [(400, "bad request")]
    with pytest.raises(LLMError, match=r"/v1/chat/completions answered HTTP 400"):
        chat.complete([{"role": "user", "content": "hi"}])
    assert chat.requests_sent == 1
    _Chat.replies = [(200, {"choices": []})]
    with pytest.raises(LLMError, match="no choices"):
        chat.complete([{"role": "user", "content": "hi"}])


def test_cache_answers_repeated_prompts_without_a_request(server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    a = OpenAIChat(server, "m", cache=cache, timeout=5)
    _Chat.replies = [(200, _reply("first")), (200, _reply("other"))]
    msgs = [{"role": "user", "content": "same prompt"}]
    assert a.complete(msgs, max_tokens=16) == "first"
    b = OpenAIChat(server, "m", cache=cache, timeout=5)  # a second client (another run) shares the file
    assert b.complete(msgs, max_tokens=16) == "first" and b.requests_sent == 0
    assert b.complete(msgs, max_tokens=32) == "other"  # a different request is not a cache hit
    assert len(_Chat.requests) == 2 and _Chat.requests[0]["temperature"] == 0.0 and _Chat.requests[0]["seed"] == 0


def test_from_env_names_the_variables_when_unconfigured(monkeypatch):
    monkeypatch.delenv("DIVOPT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("DIVOPT_LLM_MODEL", raising=False)
    with pytest.raises(LLMNotConfigured, match="DIVOPT_LLM_BASE_URL"):
        OpenAIChat.from_env()
    monkeypatch.setenv("DIVOPT_LLM_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("DIVOPT_LLM_MODEL", "local")
    assert OpenAIChat.from_env().model == "local"


def test_parse_number_never_returns_a_silent_default():
    assert parse_number("Score: 4/5", 0, 5) == 4
    with pytest.raises(LLMError, match="no number"):
        parse_number("I cannot rate this", 0, 5)
    with pytest.raises(LLMError, match="outside"):
        parse_number("7", 0, 5)
