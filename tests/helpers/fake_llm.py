"""One fake OpenAI-compatible chat server for every test that talks to an LLM: it listens on
127.0.0.1 only (tests/test_servers_bind_loopback.py audits that), answers ``POST .../chat/completions``
and records what it was sent.

A reply comes from the queue ``replies`` of ``(HTTP status, payload)`` or ``(HTTP status,
payload, headers)`` when it holds any (the payload is sent as is when it is a string, as JSON
otherwise; ``headers`` a dict, e.g. ``{"Location": ...}``), else from ``rule(body)``, the
text of a 200 reply (a function of the request, so order can be checked under concurrency).
``requests`` holds the JSON bodies, ``calls`` the path, ``Authorization`` header and body of
each request. Use::

    CHAT = FakeChat(rule=lambda body: "hello")      # module level: tests set CHAT.rule / CHAT.replies

    @pytest.fixture
    def server():
        with CHAT.running() as url:                 # http://127.0.0.1:PORT/v1; requests/replies reset
            yield url
"""
from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

__all__ = ["FakeChat", "chat_reply"]


def chat_reply(content: str) -> dict:
    """The JSON of a chat completion whose one choice says ``content``."""
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


class FakeChat:
    """The state of a fake chat server (rule, queued replies, what it received); :meth:`running`
    serves it on a free 127.0.0.1 port for the length of a ``with`` block."""

    def __init__(self, rule: Callable[[dict], str] | None = None) -> None:
        self.rule = rule
        self.replies: list[tuple] = []
        self.requests: list[dict] = []
        self.calls: list[dict] = []
        self.lock = threading.Lock()

    def answer(self, path: str, auth: str | None, body: dict) -> tuple[int, bytes, dict]:
        with self.lock:
            self.requests.append(body)
            self.calls.append({"path": path, "auth": auth, "body": body})
            if self.replies or self.rule is None:
                status, payload, *more = self.replies.pop(0)  # an unexpected request fails its connection
            else:
                status, payload, more = 200, None, []
        if payload is None:
            payload = chat_reply(self.rule(body))
        headers = more[0] if more else {}
        return status, (payload if isinstance(payload, str) else json.dumps(payload)).encode(), headers

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Serve on 127.0.0.1 (a free port) with empty ``requests``/``replies``; yields the base
        URL ``http://127.0.0.1:PORT/v1``."""
        fake = self
        self.replies, self.requests, self.calls = [], [], []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, data, headers = fake.answer(self.path, self.headers.get("Authorization"), body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep the test output clean
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
        finally:
            srv.shutdown()
            srv.server_close()
