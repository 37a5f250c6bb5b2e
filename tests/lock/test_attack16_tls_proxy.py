"""Through an HTTPS_PROXY (a CONNECT tunnel, as corporate networks have), the shared TLS context
(provision/stacks/tls.py) verifies the index at the far end of the tunnel as it does a direct connection: the test
CA's certificate is trusted, another CA's is refused, and NO_PROXY takes the index out of the tunnel, still verified.
A real CONNECT proxy and a real TLS server, both on 127.0.0.1."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from test_tls_context import BODY, TLS, _serve

from provision.errors import IndexUnreachable
from provision.stacks import index, tls


class _Tunnel(socketserver.StreamRequestHandler):
    """CONNECT host:port, then the bytes of both sides piped to each other until either ends."""

    def handle(self) -> None:
        line = self.rfile.readline().decode("latin-1")
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        method, target, _ = line.split(" ", 2)
        assert method == "CONNECT", line
        self.server.tunnels.append(target)  # type: ignore[attr-defined]
        host, _, port = target.rpartition(":")
        with socket.create_connection((host, int(port))) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            back = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
            back.start()
            _pipe(self.connection, upstream)
            back.join(5)


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.setattr(index, "_local", threading.local())
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Tunnel)
    server.daemon_threads = True
    server.tunnels = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
    yield server.tunnels  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


@pytest.fixture
def https_url() -> Iterator[str]:
    yield from _serve("server")


@pytest.mark.timeout(60)
def test_an_index_behind_a_connect_proxy_is_verified_at_the_far_end(
    proxy: list[str], https_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = https_url.split("/")[2]
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "ca.pem"))
    assert index.get(https_url).content == BODY
    assert proxy == [where]
    monkeypatch.setattr(index, "_local", threading.local())
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "other-ca.pem"))
    with pytest.raises(IndexUnreachable, match="its TLS certificate is not trusted"):
        index.get(https_url)
    assert proxy == [where, where]  # through the tunnel, and refused there


@pytest.mark.timeout(60)
def test_no_proxy_takes_the_index_out_of_the_tunnel_still_verified(
    proxy: list[str], https_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "other-ca.pem"))
    with pytest.raises(IndexUnreachable, match="its TLS certificate is not trusted"):
        index.get(https_url)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "ca.pem"))
    assert index.get(https_url).content == BODY
    assert proxy == []
