"""One TLS context per CA bundle, shared by every connection of every thread.

requests hands urllib3 the path of its CA bundle for each new connection, and urllib3 builds a context and loads the
bundle into it each time: 20-40 ms of CPU under OpenSSL 3 (cpython#95031), 16 times in an `adopt` of 123 wheels, each
under the interpreter's lock. Here the bundle requests would use (certifi's, or REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE,
or a `verify` path) is loaded once into a context urllib3 would have built, and the connection gets that context and
no path to load again. What is verified does not change: the same bundle, the same hostname check; a connection that
does not verify, or that presents a client certificate, is left to requests as it was. An SSLContext is made to be
shared by connections (thread-safe while it is not reconfigured: urllib3 sets its verify_mode to the value it already
has)."""

from __future__ import annotations

import os
import ssl
import threading
from typing import Any

from requests.adapters import HTTPAdapter
from requests.utils import DEFAULT_CA_BUNDLE_PATH

_contexts: dict[str, ssl.SSLContext] = {}
_building = threading.Lock()


def context(bundle: str) -> ssl.SSLContext:
    """The shared context that trusts `bundle` (a file of certificates, or a folder of them), built once. A bundle
    that is no such thing (a FIFO, whose open would wait for ever, holding the lock every other build waits on; a
    file with no certificate in it) is an InputError naming it, not an ssl.SSLError out of the request."""
    with _building:
        found = _contexts.get(bundle)
        if found is None:
            from urllib3.util.ssl_ import create_urllib3_context

            from provision.stacks import urls

            urls.check_ca_bundle(bundle)  # by its kind, before any open: a FIFO's would wait for ever
            found = create_urllib3_context()  # as urllib3 builds one for each connection: CERT_REQUIRED
            try:
                if os.path.isdir(bundle):
                    found.load_verify_locations(capath=bundle)
                else:
                    found.load_verify_locations(cafile=bundle)
            except (ssl.SSLError, OSError) as exc:
                raise urls.ca_bundle_error(
                    bundle, f"no CA certificate in it can be read ({exc.strerror or exc})"
                ) from None
            _contexts[bundle] = found
        return found


def _bundle(verify: Any) -> str | None:
    """The CA bundle a request's `verify` (already merged with REQUESTS_CA_BUNDLE by the session) names; None where it
    does not verify. A path that is no bundle is said by `context`, naming it and its variable."""
    if verify is True:
        return DEFAULT_CA_BUNDLE_PATH
    return verify if isinstance(verify, str) else None


class SharedContextAdapter(HTTPAdapter):
    """requests' adapter, each https connection given the shared context of its CA bundle."""

    def build_connection_pool_key_attributes(
        self, request: Any, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        host, pool = super().build_connection_pool_key_attributes(request, verify, cert)
        bundle = _bundle(verify)
        if host.get("scheme") == "https" and bundle is not None and cert is None:
            pool["ssl_context"] = context(bundle)
            pool.pop("ca_certs", None)
            pool.pop("ca_cert_dir", None)
        return host, pool

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # its checks, as they are (`context` checked the bundle first)
        super().cert_verify(conn, url, verify, cert)
        shared = getattr(conn, "conn_kw", {}).get("ssl_context")
        if shared is not None and cert is None and shared is _contexts.get(_bundle(verify) or ""):
            conn.ca_certs = conn.ca_cert_dir = None  # in the context already: not loaded again per connection
