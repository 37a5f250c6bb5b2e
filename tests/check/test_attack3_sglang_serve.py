"""Attacks on the sglang-serve check's payload, through the real runner and the stand-in server: a worker that leaves
the payload's process group (setsid, then a double fork: no child of the server, in a session of its own) ran on
after the check, holding what it held (on a GPU machine, the GPU); a /generate answer nested 100,000 deep ended the
payload in a RecursionError (an ERROR with a traceback, not the FAIL the check owes a server that answers garbage); a
/health answered with a redirect to another server was followed there, and that server's 200 counted as the started
server's health."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_sglang_serve import env, gone, serve  # noqa: F401  (env: the fixture)


def test_a_worker_that_escapes_the_process_group_is_stopped_too(env: Path, tmp_path: Path) -> None:  # noqa: F811
    result, trace = serve(env, tmp_path, "escapes")
    assert result.status == "pass", result
    escaped = trace["workers"][-1]
    try:
        assert gone(trace["workers"]), f"the escaped worker {escaped} runs on"
    finally:
        import contextlib
        import os
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


def test_an_answer_nested_without_end_is_a_fail(env: Path, tmp_path: Path) -> None:  # noqa: F811
    result, trace = serve(env, tmp_path, "nested")
    assert result.status == "fail" and "POST /generate" in result.reason, result
    assert gone(trace["workers"])


def test_a_redirect_is_never_followed_to_another_server(
    env: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    class Other(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()

    other = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    monkeypatch.setenv("PROVISION_CHECK_TIMEOUT", "8")
    try:
        result, trace = serve(
            env,
            tmp_path,
            "redirect",
            FAKE_SGLANG_REDIRECT=f"http://127.0.0.1:{other.server_address[1]}/health",
        )
    finally:
        other.shutdown()
    assert asked == [], asked  # the check spoke to the server it started, and to no other
    assert result.status in ("fail", "error") and "did not answer /health" in result.reason, result
    assert gone(trace["workers"])
