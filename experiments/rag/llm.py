"""The one client for LLM steps (DF-RAG planner/evaluator, generation): any OpenAI-compatible server.

divopt talks to ``{base_url}/chat/completions`` of an OpenAI-compatible API: a local vLLM,
llama.cpp or Ollama server, or a hosted one. Nothing is contacted unless a client is built with
an explicit ``base_url`` (or :meth:`OpenAIChat.from_env` finds one), so recipes that need no LLM
run offline.

* **Repeatable**: requests use ``temperature`` 0 and a ``seed`` by default.
* **Cached**: with ``cache=PATH`` each reply is stored in a SQLite file keyed by the sha256 of
  the request (model, messages, temperature, max_tokens, seed); a repeated prompt is answered
  from the file without a request. SQLite's own locking makes one cache file safe to share
  between concurrent runs.
* **Retried**: HTTP 429/5xx answers and unreachable endpoints are retried ``retries`` times with
  exponential backoff; any other failure (HTTP 4xx, a reply that is not JSON, no
  ``choices[0].message.content``) raises :class:`LLMError` at once, naming the endpoint.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from divopt_rag.models.validation import check_nonnegative, check_scalar

__all__ = ["LLMError", "LLMNotConfigured", "OpenAIChat", "parse_number", "ENV_PREFIX"]

#: Environment variables read by :meth:`OpenAIChat.from_env`: ``{ENV_PREFIX}_BASE_URL``,
#: ``{ENV_PREFIX}_MODEL`` and (optional) ``{ENV_PREFIX}_API_KEY``.
ENV_PREFIX = "DIVOPT_LLM"


class LLMError(RuntimeError):
    """An LLM step failed: endpoint down or refusing, malformed reply, or unusable answer."""


class LLMNotConfigured(LLMError):
    """No endpoint was configured for a step that needs an LLM."""


def parse_number(content: str, low: float, high: float, what: str = "LLM answer") -> float:
    """The first number in ``content``, which must lie in [low, high]; LLMError otherwise.

    Never returns a silent default: an answer without a number, or out of range, is an error
    the caller can retry or report.
    """
    m = re.search(r"-?\d+(?:\.\d+)?", content)
    if m is None:
        raise LLMError(f"{what} has no number: {content[:200]!r}")
    value = float(m.group())
    if not math.isfinite(value) or value < low or value > high:
        raise LLMError(f"{what} {value:g} is outside [{low:g}, {high:g}]")
    return value


class OpenAIChat:
    """A client of an OpenAI-compatible ``/chat/completions`` endpoint (stdlib urllib).

    base_url : e.g. ``http://127.0.0.1:8000/v1``; requests go to ``{base_url}/chat/completions``.
    model : the model name the server expects.
    api_key : sent as ``Authorization: Bearer``; defaults to the environment variable
        ``api_key_env`` (``OPENAI_API_KEY``), and no header if neither is set (local servers).
    temperature, seed : sampling settings sent with every request (0 and 0: repeatable).
    timeout : seconds per request. retries : extra attempts after HTTP 429/5xx or an unreachable
        endpoint, waiting ``backoff * 2**attempt`` seconds between them.
    cache : path of a SQLite reply cache (created if missing), or None for no cache.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        temperature: float = 0.0,
        seed: int | None = 0,
        retries: int = 2,
        backoff: float = 0.5,
        cache: str | os.PathLike | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL of an OpenAI-compatible API, got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        retries = check_scalar(retries, "retries", int, min_val=0)
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.timeout = float(check_nonnegative(timeout, "timeout", allow_zero=False))
        self.temperature = float(temperature)
        self.seed = seed
        self.retries = retries
        self.backoff = float(check_nonnegative(backoff, "backoff"))
        self.cache_path = None if cache is None else Path(cache)
        self.requests_sent = 0  # HTTP requests actually made (cache hits excluded)

    @classmethod
    def from_env(cls, prefix: str = ENV_PREFIX, **options: Any) -> "OpenAIChat":
        """A client configured by ``{prefix}_BASE_URL`` / ``_MODEL`` / ``_API_KEY``.

        Raises :class:`LLMNotConfigured` with the variables to set when none is configured.
        """
        base_url, model = os.environ.get(f"{prefix}_BASE_URL"), os.environ.get(f"{prefix}_MODEL")
        if not base_url or not model:
            raise LLMNotConfigured(
                f"this step needs an LLM but none is configured: set {prefix}_BASE_URL (e.g. "
                f"http://127.0.0.1:8000/v1 for a local vLLM/llama.cpp/Ollama server) and {prefix}_MODEL, "
                "or pass base_url and model explicitly"
            )
        options.setdefault("api_key", os.environ.get(f"{prefix}_API_KEY"))
        return cls(base_url, model, **options)

    # --- cache ---------------------------------------------------------------------------------
    def _cache_get(self, key: str) -> str | None:
        if self.cache_path is None or not self.cache_path.exists():
            return None
        with sqlite3.connect(self.cache_path, timeout=30) as db:
            db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, content TEXT, created REAL)")
            row = db.execute("SELECT content FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _cache_put(self, key: str, content: str) -> None:
        if self.cache_path is None:
            return
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(self.cache_path, timeout=30) as db:
            db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, content TEXT, created REAL)")
            db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?)", (key, content, time.time()))

    # --- requests ------------------------------------------------------------------------------
    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(payload).encode()
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            self.requests_sent += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    body = resp.read().decode()
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")[:300]
                error = LLMError(f"LLM endpoint {self.url} answered HTTP {exc.code}: {detail}")
                if exc.code != 429 and exc.code < 500:
                    raise error from exc
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                error = LLMError(f"LLM endpoint {self.url} is unreachable: {exc}")
            else:
                try:
                    return json.loads(body)
                except json.JSONDecodeError as exc:
                    raise LLMError(f"LLM endpoint {self.url} returned invalid JSON: {exc}") from exc
            if attempt < self.retries:
                time.sleep(self.backoff * 2**attempt)
        raise error

    def complete(self, messages: list[dict[str, str]], max_tokens: int = 8) -> str:
        """The assistant's answer to ``messages`` (from the cache when the same request was made)."""
        payload: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": self.temperature, "max_tokens": int(max_tokens),
        }
        if self.seed is not None:
            payload["seed"] = int(self.seed)
        key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        cached = self._cache_get(key)
        if cached is not None:
            return cached
        data = self._post(payload)
        try:
            content = str(data["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"LLM endpoint {self.url} returned no choices[0].message.content: {data!r:.300}") from exc
        self._cache_put(key, content)
        return content

    def __repr__(self) -> str:
        return f"OpenAIChat(base_url={self.base_url!r}, model={self.model!r})"
