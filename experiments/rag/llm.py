"""The one client for LLM steps (DF-RAG planner/evaluator, generation): any OpenAI-compatible server.

divopt talks to ``{base_url}/chat/completions`` of an OpenAI-compatible API: a local vLLM,
llama.cpp or Ollama server, or a hosted one. Nothing is contacted unless a client is built with
an explicit ``base_url`` (or :meth:`OpenAIChat.from_env` finds one), so recipes that need no LLM
run offline.

* **Repeatable**: requests use ``temperature`` 0 and a ``seed`` by default.
* **Cached**: with ``cache=PATH`` each reply is stored in a SQLite file keyed by the sha256 of
  the endpoint and the request (model, messages, temperature, max_tokens, seed); a repeated prompt is answered
  from the file without a request. SQLite's own locking makes one cache file safe to share
  between concurrent runs.
* **Retried**: HTTP 429/5xx answers and unreachable endpoints are retried ``retries`` times with
  exponential backoff; any other failure raises :class:`LLMError` at once, naming the endpoint.
* **Validated**: a reply is used only when it has the shape of the API's chat completion
  (:func:`chat_content`): a JSON object whose ``choices[0].message.content`` is a string. A null,
  missing or non-string content (a refusal, a tool call, a server's error object sent with
  HTTP 200), a body that is not JSON or not that object, and any HTTP 3xx are errors naming the
  endpoint and what was wrong. Redirects are refused, not followed (as curl does by default): the
  request carries the API key, and a POST turned into a GET by a 301/302 would ask another
  question; set ``base_url`` to the address that answers. Only validated answers are cached:
  an error is never stored, so the next call asks again.
* **Bounded**: one :meth:`OpenAIChat.complete` call takes at most ``timeout`` seconds of wall
  clock (default 30), every attempt, backoff, connect, send and read included: each socket
  operation waits at most for what is left of that budget, so an endpoint that accepts and
  never answers, or trickles a byte every few seconds, ends in one :class:`LLMTimeout` naming
  the endpoint and the limit (``requests``/``httpx`` timeouts bound each read, not the whole
  request; this bounds the whole call). A reply larger than ``max_response_bytes`` (default
  16 MiB; a chat completion is a few KiB) is refused as soon as its header announces it or its
  body passes the cap while streaming, so memory stays within the cap.
"""
from __future__ import annotations

import hashlib
import http.client
import contextlib
import json
import math
import os
import re
import socket
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from divopt_rag.models.validation import check_nonnegative, check_scalar

__all__ = ["LLMError", "LLMNotConfigured", "LLMTimeout", "LLMResponseTooLarge", "OpenAIChat", "parse_number",
           "chat_content", "ENV_PREFIX", "DEFAULT_TIMEOUT", "DEFAULT_MAX_RESPONSE_BYTES"]

#: Environment variables read by :meth:`OpenAIChat.from_env`: ``{ENV_PREFIX}_BASE_URL``,
#: ``{ENV_PREFIX}_MODEL`` and (optional) ``{ENV_PREFIX}_API_KEY`` and ``{ENV_PREFIX}_TIMEOUT``
#: (seconds per call, for slow local models).
ENV_PREFIX = "DIVOPT_LLM"
#: Seconds of wall clock one :meth:`OpenAIChat.complete` call may take, retries included: a user
#: waiting on a dead or stuck endpoint learns it within this (raise it for slow local models).
DEFAULT_TIMEOUT = 30.0
#: Bytes of the largest reply body read (a chat completion is a few KiB).
DEFAULT_MAX_RESPONSE_BYTES = 16 * 2**20
#: Seconds a TCP connect may take within the call's budget (a black-holed address does not use
#: the whole budget, so the retries still get their turn).
DEFAULT_CONNECT_TIMEOUT = 10.0


#: The sampling temperature an OpenAI-compatible API accepts.
TEMPERATURE_RANGE = (0.0, 2.0)


class LLMError(RuntimeError):
    """An LLM step failed: endpoint down or refusing, malformed reply, or unusable answer."""


class LLMNotConfigured(LLMError):
    """No endpoint was configured for a step that needs an LLM."""


class LLMTimeout(LLMError, TimeoutError):
    """A call to the endpoint ran out of its wall-clock budget (``timeout``)."""


class LLMResponseTooLarge(LLMError):
    """The endpoint's reply is larger than ``max_response_bytes``."""


class _Expired(Exception):
    """Internal: the call's deadline passed during an attempt."""


class _DeadlineSocket:
    """A connected socket whose every send/receive waits at most until ``deadline`` (a reading
    of ``clock``), so header lines and body bytes trickled slowly still end on time.

    ``http.client`` reads the response through ``makefile("rb")`` and writes with ``sendall``;
    both are routed through :meth:`_arm`, which sets the socket timeout to what is left.
    """

    def __init__(self, sock: socket.socket, deadline: float, clock: Callable[[], float]) -> None:
        self._sock, self._deadline, self._clock = sock, deadline, clock

    def _arm(self) -> None:
        left = self._deadline - self._clock()
        if left <= 0:
            raise _Expired()
        self._sock.settimeout(left)

    def sendall(self, data: bytes) -> None:
        self._arm()
        try:
            self._sock.sendall(data)
        except TimeoutError as exc:
            raise _Expired() from exc

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any):
        import io

        outer = self

        class _Raw(io.RawIOBase):
            def readable(self) -> bool:
                return True

            def readinto(self, b) -> int:  # type: ignore[override]
                outer._arm()
                try:
                    return outer._sock.recv_into(b)
                except TimeoutError as exc:
                    raise _Expired() from exc

        return io.BufferedReader(_Raw())

    def close(self) -> None:
        """No-op: ``http.client`` closes the connection's socket as soon as it has parsed the
        headers of a reply that ends with the connection, while the body is still to be read
        (a real socket's ``makefile`` counts references for that); :meth:`shut` closes it."""

    def shut(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _connection(url: urllib.parse.SplitResult, deadline: float, connect_timeout: float,
                clock: Callable[[], float]) -> http.client.HTTPConnection:
    """An HTTP(S) connection to ``url`` whose socket operations end by ``deadline`` (on ``clock``)."""
    base = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection

    class Connection(base):  # type: ignore[misc, valid-type]
        def connect(self) -> None:
            left = deadline - clock()
            if left <= 0:
                raise _Expired()
            self.timeout = min(connect_timeout, left)  # TCP connect and the TLS handshake
            super().connect()
            self.sock = self.deadline_sock = _DeadlineSocket(self.sock, deadline, clock)

    return Connection(url.hostname, url.port)


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (what a schema error reports)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


def chat_content(reply: Any, url: str = "the LLM endpoint") -> str:
    """The answer of a decoded chat-completion ``reply``: ``choices[0].message.content``, checked
    against the shape of the OpenAI chat completions API (an object; ``choices`` a non-empty
    array of objects; ``message`` an object; ``content`` a string). :class:`LLMError` naming
    ``url`` and the first thing that differs otherwise, e.g. ``choices[0].message.content is
    null``; never a stand-in value such as ``'None'``."""

    def wrong(what: str) -> LLMError:
        return LLMError(f"LLM endpoint {url} returned a reply that is not a chat completion: {what}")

    if not isinstance(reply, dict):
        raise wrong(f"the body is {_json_type(reply)}, expected an object with 'choices'")
    choices = reply.get("choices")
    if "choices" not in reply:
        error = reply.get("error")
        detail = error.get("message", error) if isinstance(error, dict) else error
        raise wrong(f"it has no 'choices'{f'; its error: {detail!r:.200}' if error is not None else ''}")
    if not isinstance(choices, list) or not choices:
        raise wrong(f"it has no choices ('choices' is {'an empty array' if choices == [] else _json_type(choices)}, "
                    f"expected a non-empty array)")
    first = choices[0]
    if not isinstance(first, dict):
        raise wrong(f"choices[0] is {_json_type(first)}, expected an object")
    message = first.get("message")
    if not isinstance(message, dict):
        what = "missing" if "message" not in first else _json_type(message)
        raise wrong(f"choices[0].message is {what}, expected an object")
    if "content" not in message:
        raise wrong("choices[0].message has no 'content'")
    content = message["content"]
    if not isinstance(content, str):
        why = [f"finish_reason {first['finish_reason']!r}"] if first.get("finish_reason") is not None else []
        if message.get("refusal") is not None:
            why.append(f"refusal {message['refusal']!r:.200}")
        if message.get("tool_calls"):
            why.append("it asks for tool calls")
        raise wrong(f"choices[0].message.content is {_json_type(content)}, expected a string"
                    + (f" ({'; '.join(why)})" if why else ""))
    return content


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
    timeout : wall-clock seconds for one :meth:`complete` call, everything included: connect,
        send, every read of every attempt and the backoff between attempts (default
        :data:`DEFAULT_TIMEOUT`, 30 s). An attempt gets what is left; no retry starts without
        time left. Raise it for slow local models (the server answers only when it has
        generated the whole reply). On expiry: :class:`LLMTimeout` naming the endpoint.
    retries : extra attempts after HTTP 429/5xx or an unreachable endpoint, waiting
        ``backoff * 2**attempt`` seconds between them (within ``timeout``).
    connect_timeout : seconds one TCP connect (and TLS handshake) may take, within ``timeout``.
    max_response_bytes : the largest reply body read (default 16 MiB); a larger one raises
        :class:`LLMResponseTooLarge` without reading past the cap.
    cache : path of a SQLite reply cache (created if missing), or None for no cache.

    The attributes ``clock`` (``time.monotonic``) and ``sleep`` (``time.sleep``) are where a call
    reads the time and waits between attempts; a test may replace them with a fake clock.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = DEFAULT_TIMEOUT,
        temperature: float = 0.0,
        seed: int | None = 0,
        retries: int = 2,
        backoff: float = 0.5,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        cache: str | os.PathLike | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL of an OpenAI-compatible API, got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        retries = check_scalar(retries, "retries", int, min_val=0)
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self._split = urllib.parse.urlsplit(self.url)
        try:
            self._split.port  # noqa: B018  (a malformed port raises here, not at the first call)
        except ValueError as exc:
            raise ValueError(f"base_url has an invalid port: {base_url!r}") from exc
        if not self._split.hostname:
            raise ValueError(f"base_url has no host: {base_url!r}")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.timeout = check_scalar(timeout, "timeout", float, min_val=0.0, include_boundaries="neither")
        self.connect_timeout = check_scalar(connect_timeout, "connect_timeout", float, min_val=0.0,
                                            include_boundaries="neither")
        if not math.isfinite(self.timeout) or not math.isfinite(self.connect_timeout):
            raise ValueError(f"timeout and connect_timeout must be finite, got {timeout!r}, {connect_timeout!r}")
        self.max_response_bytes = check_scalar(max_response_bytes, "max_response_bytes", int, min_val=1)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
                not (TEMPERATURE_RANGE[0] <= float(temperature) <= TEMPERATURE_RANGE[1]):  # nan fails too
            raise ValueError(f"temperature must be a number in [{TEMPERATURE_RANGE[0]:g}, {TEMPERATURE_RANGE[1]:g}] "
                             f"(OpenAI's range), got {temperature!r}")
        self.temperature = float(temperature)
        self.seed = seed
        self.retries = retries
        self.backoff = float(check_nonnegative(backoff, "backoff"))
        self.cache_path = None if cache is None else Path(cache)
        self.requests_sent = 0  # HTTP requests actually made (cache hits excluded)
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], None] = time.sleep

    @classmethod
    def from_env(cls, prefix: str = ENV_PREFIX, **options: Any) -> "OpenAIChat":
        """A client configured by ``{prefix}_BASE_URL`` / ``_MODEL`` / ``_API_KEY`` / ``_TIMEOUT``.

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
        timeout = os.environ.get(f"{prefix}_TIMEOUT")
        if timeout and "timeout" not in options:
            try:
                options["timeout"] = float(timeout)
            except ValueError:
                raise ValueError(f"{prefix}_TIMEOUT must be a number of seconds > 0, got {timeout!r}") from None
        return cls(base_url, model, **options)

    # --- cache ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _cache(self) -> Iterator[sqlite3.Connection]:
        """The reply cache, opened; any failure (a corrupt file, a folder or a FIFO in its place,
        no permission) is an :class:`LLMError` naming the path."""
        path = self.cache_path
        try:
            if path.exists() and not path.is_file():
                raise LLMError(f"LLM reply cache {path}: is not a file (a folder or a device); pass another cache path")
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=30)
            try:
                with db:
                    db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, content TEXT, created REAL)")
                    yield db
            finally:
                db.close()
        except (sqlite3.Error, OSError) as exc:
            raise LLMError(f"LLM reply cache {path}: cannot be used ({type(exc).__name__}: {exc}); remove it or pass "
                           f"another cache path") from None

    def _cache_get(self, key: str) -> str | None:
        if self.cache_path is None or not self.cache_path.exists() and self.cache_path.parent.is_dir():
            return None
        with self._cache() as db:
            row = db.execute("SELECT content FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _cache_put(self, key: str, content: str) -> None:
        if self.cache_path is None:
            return
        with self._cache() as db:
            db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?)", (key, content, time.time()))

    def cache_key(self, payload: Mapping[str, Any]) -> str:
        """The reply cache's key of a request: sha256 of everything that shapes the reply, the
        endpoint (``url``) and the request body (model, messages, temperature, max_tokens, seed),
        as canonical JSON. Another server, model or setting is another key."""
        return hashlib.sha256(json.dumps({"endpoint": self.url, "request": payload}, sort_keys=True).encode()).hexdigest()

    # --- requests ------------------------------------------------------------------------------
    def _attempt(self, data: bytes, headers: dict[str, str], deadline: float) -> tuple[int, bytes, dict[str, str]]:
        """One request: (HTTP status, body, headers with lower-case names), every socket operation
        ending by ``deadline``.

        Raises :class:`LLMResponseTooLarge` (not retried), ``_Expired`` or an OSError."""
        conn = _connection(self._split, deadline, self.connect_timeout, self.clock)
        target = self._split.path + (f"?{self._split.query}" if self._split.query else "")
        try:
            conn.request("POST", target, body=data, headers=headers)
            resp = conn.getresponse()
            cap = self.max_response_bytes
            length = resp.getheader("Content-Length")
            if length is not None and length.strip().isdigit() and int(length) > cap:
                raise LLMResponseTooLarge(
                    f"LLM endpoint {self.url} announced a {int(length)}-byte reply (HTTP {resp.status}), more than "
                    f"max_response_bytes={cap}; nothing was read (raise max_response_bytes if it is expected)")
            chunks, size = [], 0
            while True:
                chunk = resp.read(min(65536, cap + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > cap:
                    raise LLMResponseTooLarge(
                        f"LLM endpoint {self.url} sent a reply larger than max_response_bytes={cap} "
                        f"(HTTP {resp.status}); reading stopped at {size} bytes")
            return resp.status, b"".join(chunks), {name.lower(): value for name, value in resp.getheaders()}
        finally:
            conn.close()
            if getattr(conn, "deadline_sock", None) is not None:
                conn.deadline_sock.shut()

    def _post(self, payload: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(payload).encode()
        t0 = self.clock()
        deadline = t0 + self.timeout
        error: LLMError | None = None
        attempts = 0
        for attempt in range(self.retries + 1):
            if attempt and error is not None:
                pause = self.backoff * 2 ** (attempt - 1)
                if self.clock() + pause >= deadline:
                    break  # no time left for another attempt
                self.sleep(pause)
            attempts += 1
            self.requests_sent += 1
            try:
                status, body, headers_in = self._attempt(data, headers, deadline)
            except _Expired:
                error = None  # the budget is spent: the timeout below says so
                break
            except (http.client.HTTPException, OSError) as exc:
                if self.clock() >= deadline:
                    error = None
                    break
                error = LLMError(f"LLM endpoint {self.url} is unreachable: {exc!r}")
                continue
            if 300 <= status < 400:  # never followed: the answer is elsewhere, or the question would change
                where = f" to {location}" if (location := headers_in.get("location")) else ""
                raise LLMError(f"LLM endpoint {self.url} answered HTTP {status}, a redirect{where}; redirects are not "
                               f"followed (the request carries the API key and a redirected POST may become a GET): "
                               f"set base_url to the address that answers")
            if status >= 400:
                detail = body[:300].decode(errors="replace")
                error = LLMError(f"LLM endpoint {self.url} answered HTTP {status}: {detail}")
                if status != 429 and status < 500:
                    raise error
                continue
            if status != 200:
                raise LLMError(f"LLM endpoint {self.url} answered HTTP {status}, expected 200 with a chat completion: "
                               f"{body[:200].decode(errors='replace')!r}")
            try:
                return json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise LLMError(f"LLM endpoint {self.url} returned invalid JSON (HTTP {status}): {exc}") from exc
            except RecursionError:  # nested deeper than the interpreter parses: not a chat completion
                raise LLMError(f"LLM endpoint {self.url} returned JSON nested too deeply to parse (HTTP {status}, "
                               f"{len(body)} bytes); expected a chat completion") from None
        if error is not None and self.clock() < deadline:
            raise error  # every retry used, each failing fast
        last = f"; last attempt: {error}" if error is not None else ""
        raise LLMTimeout(
            f"LLM endpoint {self.url} gave no complete reply within timeout={self.timeout:g} s "
            f"({attempts} attempt{'s' if attempts != 1 else ''} in {self.clock() - t0:.1f} s{last}); "
            f"raise timeout= for a slow model, or check that the server answers")

    def complete(self, messages: list[dict[str, str]], max_tokens: int = 8) -> str:
        """The assistant's answer to ``messages`` (from the cache when the same request was made)."""
        payload: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": self.temperature, "max_tokens": int(max_tokens),
        }
        if self.seed is not None:
            payload["seed"] = int(self.seed)
        key = self.cache_key(payload)
        cached = self._cache_get(key)
        if cached is not None:
            return cached
        content = chat_content(self._post(payload), self.url)  # LLMError on any other shape: nothing cached
        self._cache_put(key, content)
        return content

    def __repr__(self) -> str:
        return f"OpenAIChat(base_url={self.base_url!r}, model={self.model!r})"
