"""Every server a test starts listens on 127.0.0.1 only (issue 16, item 7; the audit as a test,
so that a new test cannot open a door unnoticed):

* HTTP / socket servers are constructed with the literal host "127.0.0.1";
* no test calls ``ray.init`` itself: a local Ray comes from ``start_local_ray`` (loopback,
  verified; its own test checks the addresses Ray reports and the listening sockets);
* the notebook tests' Jupyter kernels use jupyter_client's default address, 127.0.0.1.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SERVER_CALL = re.compile(r"\b(HTTPServer|ThreadingHTTPServer|TCPServer|ThreadingTCPServer|UDPServer|make_server|"
                         r"create_server|\.bind)\(\s*\(?\s*(?P<host>[^,)\s]*)")
RAY_INIT = re.compile(r"\bray\.init\(")


def _sources():
    for path in sorted(TESTS.rglob("*.py")):
        if path.name != Path(__file__).name:
            yield path, path.read_text()


def test_every_test_server_binds_loopback():
    found = []
    for path, text in _sources():
        for m in SERVER_CALL.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((path.name, line, m["host"]))
    assert found, "the audit found no server at all: its pattern is broken"
    bad = [f for f in found if f[2] not in ('"127.0.0.1"', "'127.0.0.1'")]
    assert not bad, f"servers not bound to 127.0.0.1 (file, line, host): {bad}"


def test_no_test_starts_ray_by_hand():
    bad = [(path.name, text.count("\n", 0, m.start()) + 1) for path, text in _sources()
           for m in RAY_INIT.finditer(text)]
    assert not bad, f"ray.init in tests (use divopt_rag.experiments.engine.backends.start_local_ray): {bad}"


def test_notebook_kernels_listen_on_loopback():
    jupyter_client = pytest.importorskip("jupyter_client")
    km = jupyter_client.KernelManager(kernel_name="python3")
    assert km.transport == "tcp" and km.ip == "127.0.0.1"
