"""A small package-index client on requests: PEP 691 JSON, else PEP 503 HTML. Every request has a deadline for the whole
of it and a byte bound (`get`, the one way provision reads the network), retries are bounded, and credentials are
never shown: every URL in a message goes through `redact`."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import urljoin

from packaging.utils import canonicalize_name

from provision import log
from provision.errors import IndexUnreachable, InputError
from provision.stacks import urls
from provision.stacks.urls import TIMEOUT_VARIABLE, credentials, redact, strip_credentials, timeout, userinfo

if TYPE_CHECKING:
    import requests

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
RETRIES = 2
CHUNK = 1 << 20
# bytes a second: past its first 2 x PROVISION_HTTP_TIMEOUT seconds, a transfer must average this
MIN_RATE = 64 << 10
PAGE_LIMIT = 64 << 20  # a project page (the largest, torch's, is a few MB)
# a file whose size neither the lock nor the index gives: larger than any wheel indexes serve
DOWNLOAD_LIMIT = 4 << 30


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    core_metadata: bool | dict[str, str] = False  # PEP 658/714: <url>.metadata is served (with its hashes)
    size: int | None = None  # PEP 700, where a JSON page gives it: the most a download of it reads


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool | dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            href = found.get("href")
            if href:
                self.links.append(
                    (
                        href,
                        _core_metadata(
                            found.get("data-core-metadata") or found.get("data-dist-info-metadata")
                        ),
                    )
                )


def _core_metadata(value: object) -> bool | dict[str, str]:
    """PEP 658 in HTML ("true" or "sha256=...") and PEP 691 JSON (true or {"sha256": ...}), one form."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str) and "=" in value:
        name, _, digest = value.partition("=")
        return {name: digest}
    return bool(value) and value not in ("false", "False")


_local = threading.local()


def _session() -> requests.Session:
    """One session per thread, kept: its connections stay open, so a hundred page reads cost one TLS handshake per
    host and thread rather than one each (requests' sessions are not shared across threads), and every connection of
    every thread shares one TLS context per CA bundle (tls.py: the bundle is not loaded again per connection)."""
    import requests

    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        from provision.stacks import tls

        session = _local.session = requests.Session()
        session.mount("https://", tls.SharedContextAdapter())
    return session


@dataclass(frozen=True)
class Answer:
    """An index's answer, its body read whole (within the bound) or handed to a sink as it came."""

    url: str  # where it came from: the URL asked, or after redirects the last one (urls.page_base)
    status_code: int
    headers: Mapping[str, str]
    content: bytes = b""

    @property
    def text(self) -> str:
        from requests.structures import CaseInsensitiveDict
        from requests.utils import get_encoding_from_headers

        charset = get_encoding_from_headers(CaseInsensitiveDict(self.headers)) or "utf-8"
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know
            return self.content.decode("utf-8", errors="replace")


class _Transfer:
    """One request's progress, shared by the thread doing it and the one waiting on its deadline."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.received = 0
        self.cancelled = (
            False  # set, under `lock`, by the waiting thread at the deadline: no chunk is handed on after
        )
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.answer: Answer | None = None
        self.error: BaseException | None = None

    def deadline(self, seconds: float) -> float:
        """When the request is overdue: twice `seconds` (one read may wait `seconds` for a silent server, which is
        then retried), plus one second per MIN_RATE bytes received."""
        return self.started + 2 * seconds + self.received / MIN_RATE


def get(
    url: str,
    *,
    accept: str | None = None,
    headers: Mapping[str, str] | None = None,
    method: str = "GET",
    limit: int = PAGE_LIMIT,
    sink: Callable[[bytes], None] | None = None,
    bodies: Collection[int] = range(200, 300),
    what: str = "the answer",
) -> Answer:
    """GET (or HEAD) `url` and read its body: the one way provision reads the network. The whole request has a
    deadline (twice PROVISION_HTTP_TIMEOUT seconds, plus one per MIN_RATE bytes that arrived: a server trickling a
    byte a second fails then, a large wheel arriving at any useful speed does not) and the body a byte bound
    (`limit`: more is an IndexUnreachable, never read on). The body is read only for statuses in `bodies`, into the answer
    or, given a `sink`, handed to it chunk by chunk. Connection errors and 5xx are retried a bounded number of times;
    every error names the URL, credentials redacted."""
    last = ""
    sent = {**({"Accept": accept} if accept else {}), **(headers or {})}
    seconds = timeout()
    import urllib3  # noqa: F401 - imported here, not on the clock of the first request

    for attempt in range(RETRIES + 1):
        session = _session()
        transfer = _Transfer()
        worker = threading.Thread(
            target=_exchange,
            args=(session, url, method, sent, limit, sink, bodies, transfer, seconds),
            daemon=True,
            name="provision-http",
        )
        worker.start()
        while not transfer.done.wait(max(0.0, transfer.deadline(seconds) - time.monotonic())):
            if time.monotonic() >= transfer.deadline(seconds):
                with transfer.lock:
                    transfer.cancelled = True
                _local.session = None  # the stalled thread keeps that session's connection: never reused
                got = f"; {transfer.received:,} bytes of {what} had come" if transfer.received else ""
                raise IndexUnreachable(
                    f"{redact(url)}: no complete answer within {transfer.deadline(seconds) - transfer.started:.3g} s{got}",
                    f"the server is too slow or stalled; retry, use a mirror, or raise {TIMEOUT_VARIABLE} (now {seconds:g})",
                )
        if transfer.error is None and transfer.answer is not None:
            if transfer.answer.status_code < 500:
                return transfer.answer
            last = f"HTTP {transfer.answer.status_code}"
        elif isinstance(transfer.error, _Retry) and not (sink is not None and transfer.received):
            last = str(transfer.error)  # a sink that was handed bytes cannot take them again: no retry then
        elif isinstance(transfer.error, _Retry):
            raise IndexUnreachable(
                f"{redact(url)}: {transfer.error} after {transfer.received:,} bytes", "retry; check the index"
            ) from None
        else:
            raise transfer.error or IndexUnreachable(f"{redact(url)}: no answer", "retry")
        if attempt < RETRIES:
            time.sleep(0.2 * (attempt + 1))
    raise IndexUnreachable(
        f"{redact(url)}: {last} after {RETRIES + 1} tries",
        "check the index is up, or point --index NAME=URL (or PROVISION_INDEX_NAME) at a mirror",
    )


class _Retry(Exception):
    """A failure that another try may mend: no connection, no answer in time, a connection that broke."""


def _exchange(
    session: requests.Session,
    url: str,
    method: str,
    sent: dict[str, str],
    limit: int,
    sink: Callable[[bytes], None] | None,
    bodies: Collection[int],
    transfer: _Transfer,
    seconds: float,
) -> None:
    """The request and its body, on the worker thread; the outcome goes into `transfer`, never raised."""
    import requests
    import urllib3

    try:
        # the credentials as requests' auth, split by our rule: a password with an unencoded / ? or # is whole; a URL
        # without any (a wheel's in a lock) gets those a PROVISION_INDEX_<NAME> variable gives for its host, as uv sends them
        response = session.request(
            method,
            strip_credentials(url),
            headers=sent,
            timeout=(seconds, seconds),
            stream=True,
            allow_redirects=True,
            auth=credentials(url) if userinfo(url) else urls.host_credentials(url),
        )
        with response:
            content = b""
            if method != "HEAD" and response.status_code in bodies:
                content = _body(response, url, limit, sink, transfer)
            if method != "HEAD" and response.raw.closed:  # a body read to its end: its connection is kept for
                response.raw.release_conn()  # the next request, not closed with the response (a HEAD's is closed:
                # a server that sends a body after one would have it read as the next answer)

            # redirected: where it came from
            where = urls.page_base(url, response.url) if response.history else url
            transfer.answer = Answer(
                url=where, status_code=response.status_code, headers=response.headers, content=content
            )
    except requests.TooManyRedirects:  # a loop of redirects: the index's fault, and no retry mends it
        transfer.error = IndexUnreachable(
            f"{redact(url)}: more than {session.max_redirects} redirects",
            "check the index URL, or use a mirror",
        )
    except (requests.Timeout, urllib3.exceptions.TimeoutError):
        transfer.error = _Retry(f"no answer within {seconds:g} s")
    except requests.exceptions.SSLError as exc:
        transfer.error = _untrusted(url, exc) or _Retry(
            f"cannot connect or the connection broke ({type(exc).__name__})"
        )
    except (
        requests.ConnectionError,
        urllib3.exceptions.HTTPError,
        requests.exceptions.ChunkedEncodingError,
    ) as exc:
        transfer.error = _Retry(f"cannot connect or the connection broke ({type(exc).__name__})")
    # InvalidURL, InvalidSchema, MissingSchema; urllib3's own
    except (
        requests.RequestException,
        ValueError,
    ) as exc:
        # URL parsing ("Invalid IPv6 URL", a bad port) in some versions: no retry mends the URL
        why = type(exc).__name__ if isinstance(exc, requests.RequestException) else str(exc)
        # the URL asked is one: a redirect led where no fetch goes (file://, a port that is no number)
        if _fetchable(url):
            transfer.error = IndexUnreachable(
                f"{redact(url)}: the index redirected to a URL provision does not fetch ({why})",
                "check the index URL, or use a mirror; only http:// and https:// URLs are fetched",
            )
        else:
            transfer.error = InputError(
                f"{redact(url)}: not a URL provision can fetch ({why})",
                "give an http:// or https:// URL with a host (and a port that is a number)",
            )
    except BaseException as exc:
        transfer.error = exc
    finally:
        transfer.done.set()


def _untrusted(url: str, exc: BaseException) -> IndexUnreachable | None:
    """The error for a server whose certificate was refused (another CA's, for another host, expired), found in
    the exceptions requests and urllib3 wrap it in; None for another TLS failure (a connection reset in the
    handshake), which another try may mend. A refused certificate is refused again: said once, not as "cannot
    connect" after three tries."""
    import ssl

    seen: list[BaseException] = []
    while exc is not None and len(seen) < 8:
        if isinstance(exc, ssl.SSLCertVerificationError):
            named = urls.ca_bundle_variable()
            bundle = log.one_line(f"{named[0]}={named[1]}" if named else "certifi's bundle")
            return IndexUnreachable(
                f"{redact(url)}: its TLS certificate is not trusted ({exc.verify_message or exc.reason})",
                f"provision trusts the CA certificates of {bundle}; for an index whose "
                "certificate another CA signed, point REQUESTS_CA_BUNDLE at that CA's bundle",
            )
        seen.append(exc)
        wrapped = getattr(exc, "reason", None)  # urllib3's MaxRetryError
        if not isinstance(wrapped, BaseException):
            wrapped = next((a for a in exc.args if isinstance(a, BaseException)), None)
        exc = wrapped or exc.__cause__ or exc.__context__  # type: ignore[assignment]
        if exc in seen:
            break
    return None


def _fetchable(url: str) -> bool:
    """Whether `url` is an http(s) URL with a host and, if it names one, a port that is a number."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(strip_credentials(url))
        return (
            parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and (parts.port is None or parts.port > 0)
        )
    except ValueError:
        return False


def _body(
    response: requests.Response,
    url: str,
    limit: int,
    sink: Callable[[bytes], None] | None,
    transfer: _Transfer,
) -> bytes:
    """The body, read as it arrives (read1: whatever the socket has, so the deadline is looked at often) and
    never past `limit` bytes."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(url, limit, f"it says {int(declared):,} bytes")
    chunks: list[bytes] = []
    while chunk := response.raw.read1(CHUNK, decode_content=True):
        with transfer.lock:
            if transfer.cancelled:
                break
            transfer.received += len(chunk)
            if transfer.received > limit:
                raise _too_large(url, limit, "it sent more")
            if sink is not None:
                sink(chunk)
            else:
                chunks.append(chunk)
    return b"".join(chunks)


def _too_large(url: str, limit: int, why: str) -> IndexUnreachable:
    return IndexUnreachable(
        f"{redact(url)}: larger than the {limit:,} bytes provision reads of it ({why}); nothing more was read",
        "the index serves something other than what it lists; check the URL, or use a mirror",
    )


def project_files(index_url: str, project: str, keep: Callable[[str], bool] | None = None) -> list[IndexFile]:
    """Return the files an index lists for `project` (those whose file name `keep` accepts, when given: a page of
    thousands of files costs a URL join each otherwise); an empty list when it has no such project (404)."""
    url = index_url.rstrip("/") + f"/{canonicalize_name(project)}/"
    response = get(url, accept=f"{JSON_TYPE}, text/html;q=0.1", what="the page")
    if response.status_code == 404:
        return []
    if response.status_code >= 400:
        raise IndexUnreachable(
            f"{redact(url)}: HTTP {response.status_code}", "check the index URL and its credentials"
        )
    if response.headers.get("Content-Type", "").startswith(JSON_TYPE):
        return _json_files(url, response.url, response.content, keep)
    parser = _Links()
    parser.feed(response.text)
    files = []
    for href, metadata in parser.links:
        if keep is not None and not keep(urls.filename(href)):
            continue
        absolute = urljoin(response.url, href)  # relative to where the page came from, after redirects
        path, _, fragment = absolute.partition("#")
        sha = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        files.append(IndexFile(filename=urls.filename(path), url=path, sha256=sha, core_metadata=metadata))
    return files


def _json_files(
    url: str, base: str, content: bytes, keep: Callable[[str], bool] | None = None
) -> list[IndexFile]:
    """The files of the PEP 691 page asked at `url` (their URLs relative to `base`, where it came from after
    redirects); a page of another shape is an IndexUnreachable naming `url`, whatever it holds."""
    import json

    try:
        page = json.loads(content)
    except (ValueError, RecursionError) as exc:
        raise _bad_page(url, f"not JSON ({type(exc).__name__})") from None
    listed = page.get("files") if isinstance(page, dict) else None
    if not isinstance(listed, list):
        raise _bad_page(url, "no list of files")
    files = []
    for entry in listed:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("filename"), str)
            or not isinstance(entry.get("url"), str)
        ):
            raise _bad_page(url, "a file without a filename and url")
        if keep is not None and not keep(entry["filename"]):
            continue
        hashes = entry.get("hashes")
        sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
        size = entry.get("size")
        files.append(
            IndexFile(
                filename=entry["filename"],
                url=urljoin(base, entry["url"]),
                sha256=sha256 if isinstance(sha256, str) else None,
                core_metadata=_core_metadata(
                    entry.get("core-metadata", entry.get("data-dist-info-metadata", False))
                ),
                size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
            )
        )
    return files


def _bad_page(url: str, why: str) -> IndexUnreachable:
    return IndexUnreachable(
        f"{redact(url)}: not a PEP 691 project page ({why})",
        "check the index URL; report it to the index's operators",
    )


def download(
    url: str,
    sink: BinaryIO | None = None,
    *,
    sha256: str | None = None,
    expected_from: str = "the index's",
    hint: str = "check the index",
    size: int | None = None,
) -> str:
    """Stream `url` into `sink` (or nowhere) and return its sha256; a file whose sha256 is not `sha256` is an error
    that names both (`expected_from` says whose: "the lock's", "the index's"). No more than `size` bytes are read
    where the size is known (the lock's, the index's, a server's Content-Length), and never more than DOWNLOAD_LIMIT:
    a size claimed can lower the bound, not raise it."""
    digest = hashlib.sha256()

    def take(chunk: bytes) -> None:
        digest.update(chunk)
        if sink is not None:
            sink.write(chunk)

    response = get(
        url, sink=take, limit=DOWNLOAD_LIMIT if size is None else min(size, DOWNLOAD_LIMIT), what="the file"
    )
    if response.status_code >= 400:
        raise IndexUnreachable(f"{redact(url)}: HTTP {response.status_code}", hint)
    found = digest.hexdigest()
    if sha256 and found != sha256:
        raise IndexUnreachable(
            f"{redact(url)}: sha256 {found[:16]}... is not {expected_from} {sha256[:16]}...", hint
        )
    return found


def sha256_of(url: str) -> str:
    """Download `url` once, streaming, and return its sha256."""
    return download(url)
