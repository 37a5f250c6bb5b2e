"""A server whose certificate is refused (another CA's, for another host, expired) is refused through the shared TLS
context (provision/stacks/tls.py) as it was through urllib3's own, and said as that in one line naming the bundle
trusted: it was "cannot connect or the connection broke (SSLError) after 3 tries" with the hint "check the index is
up", three handshakes for a refusal that no retry mends. A bundle changed between requests of one session is the one
trusted by the next request, though a connection verified by the other is still open. Real TLS servers on 127.0.0.1
(tests/data/tls: expired.pem, of expired-ca.pem, was valid in the year 2000 only)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator

import pytest
from test_tls_context import BODY, TLS, KeptAliveServer, _Handler

from provision.errors import IndexUnreachable
from provision.stacks import index, tls


class _Counted(KeptAliveServer):
    """Counts the connections it accepts (a refused handshake fails inside accept: counted before it)."""

    accepted = 0

    def get_request(self):  # type: ignore[no-untyped-def]
        self.accepted += 1
        return super().get_request()


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.setattr(index, "_local", threading.local())
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    servers: list[_Counted] = []

    def start(certificate: str) -> tuple[str, _Counted]:
        server = _Counted(("127.0.0.1", 0), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(TLS / f"{certificate}.pem", TLS / f"{certificate}.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"https://127.0.0.1:{server.server_address[1]}/file", server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("certificate", "bundle", "why"),
    [
        ("server", "other-ca.pem", "unable to get local issuer certificate"),
        ("wrong-host", "ca.pem", "certificate is not valid for '127.0.0.1'"),
        ("expired", "expired-ca.pem", "certificate has expired"),
    ],
)
def test_a_refused_certificate_is_said_once_naming_the_bundle_trusted(
    serve, monkeypatch: pytest.MonkeyPatch, certificate: str, bundle: str, why: str
) -> None:
    url, server = serve(certificate)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / bundle))
    with pytest.raises(IndexUnreachable) as caught:
        index.get(url)
    message, hint = caught.value.message, caught.value.hint
    assert message.startswith(f"{url}: its TLS certificate is not trusted (") and why in message, message
    assert f"REQUESTS_CA_BUNDLE={TLS / bundle}" in hint and "\n" not in message + hint, hint
    assert server.accepted == 1  # no retry: the same certificate would be refused again


def test_certifis_bundle_is_named_where_no_variable_gives_one(serve) -> None:
    url, server = serve("server")
    with pytest.raises(IndexUnreachable, match="its TLS certificate is not trusted") as caught:
        index.get(url)
    assert "certifi's bundle" in caught.value.hint and server.accepted == 1


def test_a_bundle_changed_between_requests_of_one_session_is_the_one_trusted(
    serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One thread, one session, its connection to the server kept open after the first answer: a request under
    another bundle does not ride on that verified connection."""
    url, server = serve("server")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "ca.pem"))
    assert index.get(url).content == BODY
    assert index.get(url).content == BODY and server.accepted == 1  # the connection was kept
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "other-ca.pem"))
    with pytest.raises(IndexUnreachable, match="not trusted"):
        index.get(url)
    # REQUESTS_CA_BUNDLE is read first, as requests reads
    monkeypatch.setenv("CURL_CA_BUNDLE", str(TLS / "ca.pem"))
    with pytest.raises(IndexUnreachable, match="not trusted"):
        index.get(url)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    assert index.get(url).content == BODY  # CURL_CA_BUNDLE's, the test CA
    monkeypatch.delenv("CURL_CA_BUNDLE")
    with pytest.raises(IndexUnreachable, match="not trusted") as caught:
        index.get(url)
    assert "certifi's bundle" in caught.value.hint
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(TLS / "ca.pem"))
    assert index.get(url).content == BODY
