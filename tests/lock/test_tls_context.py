"""Every https connection shares one TLS context per CA bundle (provision/stacks/tls.py): the bundle is loaded once,
not once per connection (20-40 ms of CPU each under OpenSSL 3; 16 times in an adopt of 123 wheels), and what is
trusted is what requests would trust: REQUESTS_CA_BUNDLE's bundle alone where it is set, certifi's otherwise. A real
TLS server on 127.0.0.1 with a certificate of a test CA (tests/data/tls: made for these tests, valid to 2126, its key
no secret)."""

from __future__ import annotations

import contextlib
import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from provision.errors import IndexUnreachable, InputError
from provision.stacks import index, tls

TLS = Path(__file__).parent.parent / "data" / "tls"
BODY = b"served over TLS\n" * 64


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive: connections are reused as with a real index

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


class KeptAliveServer(http.server.ThreadingHTTPServer):
    """A test server whose kept-alive connections end with it. Its handler threads were left waiting on the
    connections a test's sessions kept open, and the next test in that process ran in a threaded one: the scan's
    parallel search forks only from a process of one thread, and its tests failed there (a fresh clone's CI)."""

    daemon_threads = False
    block_on_close = True  # server_close joins the handler threads

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.connections: list[socket.socket] = []

    def process_request(self, request, client_address):  # type: ignore[no-untyped-def]
        self.connections.append(request)
        super().process_request(request, client_address)

    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        pass  # a connection ended by server_close, or a handshake a test's client refused: no traceback

    def server_close(self) -> None:
        for connection in self.connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        super().server_close()


def _serve(certificate: str) -> Iterator[str]:
    server = KeptAliveServer(("127.0.0.1", 0), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(TLS / f"{certificate}.pem", TLS / f"{certificate}.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/file"
    server.shutdown()
    server.server_close()


@pytest.fixture
def https_url() -> Iterator[str]:
    yield from _serve("server")  # the test CA's certificate for 127.0.0.1 and localhost


@pytest.fixture
def wrong_host_url() -> Iterator[str]:
    yield from _serve("wrong-host")  # the test CA's certificate for other.example only


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each CA bundle loaded into any TLS context in this process, by anyone; every shared context built afresh."""
    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.setattr(index, "_local", threading.local())  # fresh sessions: fresh connections
    loaded: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(
        self: ssl.SSLContext, cafile: object = None, capath: object = None, cadata: object = None
    ) -> None:
        loaded.append(cafile or capath or "data")
        load(self, cafile, capath, cadata)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return loaded


def test_many_connections_of_many_threads_load_the_bundle_once(
    https_url: str, loads: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "ca.pem"))
    with ThreadPoolExecutor(6) as pool:  # six threads: six sessions, six connections at least
        answers = list(pool.map(lambda _: index.get(https_url).content, range(24)))
    assert answers == [BODY] * 24
    assert loads == [str(TLS / "ca.pem")]


def test_the_server_is_still_verified_against_the_bundle_requests_would_use(
    https_url: str, loads: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trusted by its CA; not by another CA alone, even after a context that trusts the right one was built (each
    bundle its own context: nothing added to a shared one); not by certifi's default bundle."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "ca.pem"))
    assert index.get(https_url).content == BODY
    monkeypatch.setattr(index, "_local", threading.local())
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "other-ca.pem"))
    with pytest.raises(IndexUnreachable, match="certificate is not trusted"):
        index.get(https_url)
    monkeypatch.setattr(index, "_local", threading.local())
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with pytest.raises(IndexUnreachable, match="certificate is not trusted"):
        index.get(https_url)
    assert len(tls._contexts) == 3  # the test CA's, the other CA's, certifi's: one each


def test_a_certificate_of_the_trusted_ca_for_another_host_is_refused(
    https_url: str, wrong_host_url: str, loads: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared context checks the host name as urllib3's own per-connection context does, also after it served
    a connection to the right host."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "ca.pem"))
    assert index.get(https_url).content == BODY
    with pytest.raises(IndexUnreachable, match="certificate is not trusted"):
        index.get(wrong_host_url)
    assert loads == [str(TLS / "ca.pem")]


def test_a_bundle_that_is_not_there_is_one_line_naming_it_and_the_variable(
    https_url: str, loads: list[object], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(InputError, match="REQUESTS_CA_BUNDLE=.*missing.pem: no such file") as caught:
        index.get(https_url)
    assert "\n" not in caught.value.message
    assert tls._contexts == {}
