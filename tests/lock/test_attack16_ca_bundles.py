"""A CA bundle (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) that is there but is no bundle: each is one line naming it and its
variable, before any connection, never a traceback or a hang. A FIFO hung the shared context's build (its open waits
for a writer) while holding the lock every other build waits on; an empty file or one of no certificates came out of
index.get as a bare ssl.SSLError (`provision` said "[X509: NO_CERTIFICATE_OR_CRL_FOUND]... check that path", naming
no path). A real TLS server on 127.0.0.1 with the test CA's certificate (tests/data/tls)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_tls_context import TLS, _serve

from provision.errors import InputError
from provision.stacks import index, tls


@pytest.fixture
def https_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.setattr(index, "_local", threading.local())
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("PROVISION_HTTP_TIMEOUT", "3")  # a hang shows as a timeout error, not as this test's
    yield from _serve("server")


def _bundle(tmp_path: Path, kind: str) -> str:
    path = tmp_path / f"{kind}.pem"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    elif kind == "device":
        return os.devnull
    return str(path)


SAID = {
    "fifo": "not a file or folder of CA certificates",
    "device": "not a file or folder of CA certificates",
    "empty": "an empty file",
    "garbage": "no CA certificate in it can be read",
}


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
@pytest.mark.parametrize("kind", SAID)
@pytest.mark.timeout(30)
def test_a_bundle_that_is_no_bundle_is_one_line_naming_it_and_its_variable(
    https_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, variable: str
) -> None:
    bundle = _bundle(tmp_path, kind)
    monkeypatch.setenv(variable, bundle)
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        index.get(https_url)
    assert time.monotonic() - started < 2  # said at once: no wait on a FIFO, no retries
    message = caught.value.message
    assert message.startswith(f"{variable}={bundle}: ") and SAID[kind] in message, message
    assert "\n" not in message and variable in caught.value.hint
    assert tls._contexts == {}
    # the lock of the builds is not held by the one that failed
    monkeypatch.setenv(variable, str(TLS / "ca.pem"))
    assert index.get(https_url).status_code == 200


@pytest.mark.timeout(30)
def test_a_fifo_given_as_the_bundle_to_verify_with_is_refused_without_opening_it(tmp_path: Path) -> None:
    """A `verify` path (not a variable's) goes through the same build: the FIFO is refused by its kind, never opened
    (an open would wait here for a writer that never comes)."""
    fifo = _bundle(tmp_path, "fifo")
    with pytest.raises(InputError, match=r"^the CA bundle .*fifo.pem: not a file or folder"):
        tls.context(fifo)
    assert fifo not in tls._contexts


@pytest.mark.timeout(120)
def test_provision_lock_refuses_a_fifo_bundle_before_anything_runs(tool, tmp_path: Path) -> None:
    fifo = _bundle(tmp_path, "fifo")
    done = tool(
        "lock",
        "tiny",
        "-o",
        str(tmp_path / "pylock.tiny.toml"),
        env={"REQUESTS_CA_BUNDLE": fifo},
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[-2] == f"error: REQUESTS_CA_BUNDLE={fifo}: {SAID['fifo']} (a FIFO, a socket or a device)", (
        lines
    )
    assert not (tmp_path / "pylock.tiny.toml").exists()
