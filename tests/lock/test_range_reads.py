"""A wheel's RECORD read by range requests from a real HTTP/1.1 server on 127.0.0.1: opened by one request for the
zip's tail (its Content-Range gives the size: no HEAD), every request of a thread on one kept connection (a cold lock
of the SGLang stack paid a TLS handshake and a CA bundle load per request when each answer closed its connection), and
an answer that is not the tail asked for read no further."""

from __future__ import annotations

import http.server
import io
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from provision.stacks import index, wheelmeta


def _wheel(files: int = 3) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(files):
            archive.writestr(f"pkg/m{n}.py", f"x = {n}\n" * 50)
        archive.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        archive.writestr("pkg-1.0.dist-info/RECORD", "pkg/m0.py,sha256=abc,10\npkg-1.0.dist-info/RECORD,,\n")
    return buffer.getvalue()


class Server:
    """HTTP/1.1 with keep-alive; `answer` decides each response from (method, Range header)."""

    def __init__(self, answer: Callable[[str, str], tuple[int, dict[str, str], bytes]]) -> None:
        self.connections = 0
        self.handlers: list[threading.Thread] = []
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                server.connections += 1
                server.handlers.append(threading.current_thread())
                super().setup()

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._answer("GET")

            def do_HEAD(self) -> None:
                self._answer("HEAD")

            def _answer(self, method: str) -> None:
                wanted = self.headers.get("Range", "")
                server.requests.append((method, wanted))
                status, headers, body = answer(method, wanted)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                if method == "GET":
                    self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        """Stop serving, and end each connection's thread: the client's kept connections closed first (a thread left
        waiting on one keeps this process from forking: scan's searchers fork only where one thread runs)."""
        session = getattr(index._local, "session", None)
        if session is not None:
            session.close()
        self.httpd.shutdown()
        self.httpd.server_close()
        for handler in self.handlers:
            handler.join(10)
            assert not handler.is_alive(), "a connection's thread outlived the test"


def ranges_of(data: bytes) -> Callable[[str, str], tuple[int, dict[str, str], bytes]]:
    def answer(method: str, wanted: str) -> tuple[int, dict[str, str], bytes]:
        if not wanted.startswith("bytes="):
            return 200, {"Accept-Ranges": "bytes"}, data
        first, _, last = wanted.removeprefix("bytes=").partition("-")
        start = max(0, len(data) - int(last)) if not first else int(first)
        end = len(data) - 1 if not first else min(int(last), len(data) - 1)
        return 206, {"Content-Range": f"bytes {start}-{end}/{len(data)}"}, data[start : end + 1]

    return answer


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(answer: Callable[[str, str], tuple[int, dict[str, str], bytes]]) -> Server:
        server = Server(answer)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def test_a_record_is_read_by_one_request_and_the_connection_is_kept(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(index._local, "session", None, raising=False)  # this thread's session, new
    data = _wheel()
    server = serve(ranges_of(data))
    for n in range(5):
        assert wheelmeta.record(f"{server.url}/pkg-1.0-py3-none-any.whl?{n}") == (
            b"pkg/m0.py,sha256=abc,10\npkg-1.0.dist-info/RECORD,,\n"
        )
    # no HEAD: the tail's answer gives the size
    assert server.requests == [("GET", f"bytes=-{wheelmeta.RECORD_TAIL}")] * 5
    assert server.connections == 1  # each answer read whole: its connection kept for the next


def test_a_server_refusing_a_suffix_longer_than_the_file_is_read_by_ranges(serve) -> None:  # type: ignore[no-untyped-def]
    """RFC 9110 answers a suffix longer than the file with all of it; a server that answers 416 instead says the
    size (`bytes */SIZE`), and the wheel is read by ordinary ranges."""
    data = _wheel()
    plain = ranges_of(data)

    def answer(method: str, wanted: str) -> tuple[int, dict[str, str], bytes]:
        if wanted.startswith("bytes=-") and int(wanted.removeprefix("bytes=-")) > len(data):
            return 416, {"Content-Range": f"bytes */{len(data)}"}, b""
        return plain(method, wanted)

    server = serve(answer)
    assert wheelmeta.record(f"{server.url}/pkg-1.0-py3-none-any.whl") is not None
    assert server.requests == [
        ("GET", f"bytes=-{wheelmeta.RECORD_TAIL}"),
        ("GET", f"bytes=0-{len(data) - 1}"),
    ]


def test_a_large_directory_is_read_in_blocks_before_the_tail(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(wheelmeta, "BLOCK", 4096)
    monkeypatch.setattr(wheelmeta, "RECORD_TAIL", 1024)
    data = _wheel(files=400)  # a central directory larger than the tail first read
    assert len(data) > 4 * 4096
    server = serve(ranges_of(data))
    assert wheelmeta.record(f"{server.url}/pkg-1.0-py3-none-any.whl") == wheelmeta._member(
        io.BytesIO(data), "RECORD"
    )
    assert server.requests[0] == ("GET", "bytes=-1024") and len(server.requests) > 1
    assert all(method == "GET" for method, _ in server.requests)
    later = [wanted for _, wanted in server.requests[1:]]
    assert all(int(w.split("=")[1].split("-")[0]) % 4096 == 0 for w in later), later  # then by aligned BLOCKs


@pytest.mark.parametrize(
    "answer",
    [
        lambda method, wanted: (200, {}, b"PK" + b"\0" * 1000),  # no ranges: the whole file, not read
        lambda method, wanted: (206, {"Content-Range": "bytes 0-9/20"}, b"0123456789"),  # not the tail
        lambda method, wanted: (206, {"Content-Range": "bytes 10-19/20"}, b"01234"),  # shorter than it says
        lambda method, wanted: (206, {"Content-Range": "bytes */20"}, b""),  # no range at all
        lambda method, wanted: (206, {}, b"0123456789"),  # no Content-Range
    ],
    ids=["200", "head-not-tail", "short", "unsatisfied", "no-content-range"],
)
def test_an_answer_that_is_not_the_tail_asked_for_is_read_no_further(serve, answer) -> None:  # type: ignore[no-untyped-def]
    server = serve(answer)
    assert wheelmeta.record(f"{server.url}/pkg-1.0-py3-none-any.whl") is None
    assert len(server.requests) == 1


def test_a_metadata_read_by_range_falls_back_to_the_whole_wheel_where_ranges_are_refused(
    serve, tmp_path: Path
) -> None:
    data = _wheel()
    server = serve(lambda method, wanted: (200, {}, data))  # no ranges: the whole wheel is read once
    raw, source = wheelmeta._read(
        f"{server.url}/pkg-1.0-py3-none-any.whl", core_metadata=False, sha256=None, size=None
    )
    assert source == "download" and b"Name: pkg" in raw
    # the tail asked (a 200, not read on), then the file
    assert [m for m, _ in server.requests] == [
        "GET",
        "GET",
    ]
