"""The LLM client's cache key, odd replies, broken cache files and bad settings (issue 48, item 8),
against real HTTP servers on 127.0.0.1 (tests/helpers/fake_llm.py).

The probes: server B's call was answered from server A's cached reply (B got 0 requests); a deeply
nested JSON reply escaped as RecursionError; a corrupt cache file or a cache path that is a folder
raised raw sqlite3 errors naming no path; ``temperature=nan`` was accepted.
"""
from __future__ import annotations

import pytest
from helpers.fake_llm import FakeChat

from divopt_rag.experiments.rag.llm import LLMError, OpenAIChat

ASK = [{"role": "user", "content": "which?"}]


def test_the_cache_key_holds_the_endpoint_another_server_is_asked(tmp_path):
    cache = tmp_path / "llm.sqlite"
    a, b = FakeChat(lambda body: "from A"), FakeChat(lambda body: "from B")
    with a.running() as url_a, b.running() as url_b:
        assert OpenAIChat(url_a, "m", cache=cache).complete(ASK) == "from A"
        chat_b = OpenAIChat(url_b, "m", cache=cache)
        assert chat_b.complete(ASK) == "from B"
        assert chat_b.requests_sent == 1 and len(b.requests) == 1
        again = OpenAIChat(url_a, "m", cache=cache)  # and each server's reply is still reused
        assert again.complete(ASK) == "from A" and again.requests_sent == 0


@pytest.mark.parametrize("change", [{"model": "other"}, {"temperature": 0.7}, {"seed": 7}, {"seed": None},
                                    {"max_tokens": 9}, {"messages": [{"role": "user", "content": "which!"}]}])
def test_every_setting_that_shapes_a_reply_is_in_the_key(tmp_path, change):
    cache = tmp_path / "llm.sqlite"
    chat = FakeChat(lambda body: "ok")
    with chat.running() as url:
        base = OpenAIChat(url, "m", cache=cache)
        assert base.complete(ASK) == "ok" and base.requests_sent == 1
        settings = {k: v for k, v in change.items() if k in ("model", "temperature", "seed")}
        other = OpenAIChat(url, settings.pop("model", "m"), cache=cache, **settings)
        other.complete(change.get("messages", ASK), max_tokens=change.get("max_tokens", 8))
        assert other.requests_sent == 1, change
        same = OpenAIChat(url, "m", cache=cache)
        same.complete(ASK)
        assert same.requests_sent == 0


def test_a_deeply_nested_reply_is_an_llm_error_not_a_recursion_error(tmp_path):
    deep = 200_000
    chat = FakeChat()
    with chat.running() as url:
        chat.replies.append((200, "[" * deep + "]" * deep))
        with pytest.raises(LLMError, match=r"nested too deeply") as info:
            OpenAIChat(url, "m", timeout=10, retries=0).complete(ASK)
        assert url in str(info.value)


def test_a_corrupt_cache_file_is_an_llm_error_naming_it(tmp_path):
    cache = tmp_path / "llm.sqlite"
    cache.write_bytes(b"this is not a database" * 100)
    chat = FakeChat(lambda body: "ok")
    with chat.running() as url:
        with pytest.raises(LLMError, match=f"LLM reply cache {cache}: cannot be used"):
            OpenAIChat(url, "m", cache=cache).complete(ASK)
        assert not chat.requests  # refused before the request


@pytest.mark.parametrize("where", ["folder", "below a file"])
def test_a_cache_path_that_cannot_be_a_file_is_an_llm_error_naming_it(tmp_path, where):
    if where == "folder":
        cache = tmp_path / "llm.sqlite"
        cache.mkdir()
    else:
        (tmp_path / "plain").write_text("x")
        cache = tmp_path / "plain" / "llm.sqlite"
    chat = FakeChat(lambda body: "ok")
    with chat.running() as url:
        with pytest.raises(LLMError, match=f"LLM reply cache {cache}"):
            OpenAIChat(url, "m", cache=cache).complete(ASK)


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), -0.1, 2.5, True, "0.5", None])
def test_a_temperature_outside_the_api_range_is_refused(temperature):
    with pytest.raises(ValueError, match=r"temperature must be a number in \[0, 2\]"):
        OpenAIChat("http://127.0.0.1:9/v1", "m", temperature=temperature)
