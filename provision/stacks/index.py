"""A small package-index client on requests: PEP 691 JSON, else PEP 503 HTML. Timeouts, bounded retries, and
credentials never shown: every URL in a message goes through `redact`."""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, BinaryIO
from urllib.parse import unquote, urljoin

from packaging.utils import canonicalize_name

from provision import log
from provision.errors import IndexError_, UsageError

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
TIMEOUT_VARIABLE = "PROVISION_HTTP_TIMEOUT"
RETRIES = 2


def timeout() -> float:
    """Seconds to wait for an index (PROVISION_HTTP_TIMEOUT, default 30): a positive finite number."""
    text = os.environ.get(TIMEOUT_VARIABLE) or "30"
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{TIMEOUT_VARIABLE}={text!r} is not a number of seconds", "set it to a positive number such as 30, or unset it")
    return seconds


def redact(url: str) -> str:
    """Return `url` with its secrets shown as ****: the user name and password (also user:password@host without a
    scheme), query values and token-like path segments (log.redact's rule)."""
    return log.redact(re.sub(r"^[^/\s@]+@", "****@", url) if "://" not in url else url)


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """(scheme://, user info, the rest) of a URL with credentials, else None. A password may hold an unencoded /, ?
    or # (which would end the host part for urlsplit and put the whole password in the path): then `user:` up to the
    last @ of the URL is the user info."""
    found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*://)(.*)", url, re.DOTALL)
    if found is None:
        return None
    scheme, rest = found.groups()
    host_part = re.split(r"[/?#]", rest, maxsplit=1)[0]
    last = rest.rfind("@")
    if last > 0 and re.match(r"[^/?#@:]*:", rest) and re.match(r"[A-Za-z0-9.\[\]:-]+(?:[/?#]|$)", rest[last + 1:]):
        at = last  # user:password@host, the password holding what urlsplit would end the host part at
    elif "@" in host_part:
        at = host_part.rfind("@")
    else:
        return None
    return scheme, rest[:at], rest[at + 1:]


def strip_credentials(url: str) -> str:
    """`url` without its user name and password (what uv is given; the credentials go by variable)."""
    parts = _userinfo(url)
    return url if parts is None else parts[0] + parts[2]


def credentials(url: str) -> tuple[str, str]:
    """The user name and password in `url` (percent-decoded), empty when there are none."""
    parts = _userinfo(url)
    if parts is None:
        return "", ""
    user, _, password = parts[1].partition(":")
    return unquote(user), unquote(password)


def redact_text(text: str) -> str:
    """`text` with the secrets of any URL in it (any scheme, even one that is not a valid URL) shown as ****."""
    return log.redact(text)


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    core_metadata: bool | dict[str, str] = False  # PEP 658/714: <url>.metadata is served (with its hashes)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool | dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            href = found.get("href")
            if href:
                self.links.append((href, _core_metadata(found.get("data-core-metadata") or found.get("data-dist-info-metadata"))))


def _core_metadata(value: object) -> bool | dict[str, str]:
    """PEP 658 in HTML ("true" or "sha256=...") and PEP 691 JSON (true or {"sha256": ...}), one form."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str) and "=" in value:
        name, _, digest = value.partition("=")
        return {name: digest}
    return bool(value) and value not in ("false", "False")


_local = threading.local()


def _session() -> Any:
    """One session per thread, kept: its connections stay open, so a hundred page reads cost one TLS handshake per
    host and thread rather than one each (requests' sessions are not shared across threads)."""
    import requests

    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = requests.Session()
    return session


def get(url: str, *, accept: str | None = None, stream: bool = False, headers: dict[str, str] | None = None,
        method: str = "GET") -> Any:
    """GET `url` with a timeout and a bounded retry on connection errors and 5xx; IndexError_ names the URL."""
    import requests

    last = ""
    sent = {**({"Accept": accept} if accept else {}), **(headers or {})}
    for attempt in range(RETRIES + 1):
        try:
            # the credentials as requests' auth, split by our rule: a password with an unencoded / ? or # is whole
            response = _session().request(method, strip_credentials(url), headers=sent, timeout=timeout(), stream=stream,
                                          allow_redirects=True, auth=credentials(url) if _userinfo(url) else None)
        except requests.Timeout:
            last = f"no answer within {timeout():g} s"
        except requests.ConnectionError as exc:
            last = f"cannot connect ({type(exc).__name__})"
        except requests.RequestException as exc:  # InvalidURL, InvalidSchema, MissingSchema: no retry mends the URL
            raise UsageError(f"{redact(url)}: not a URL provision can fetch ({type(exc).__name__})",
                             "give an http:// or https:// URL with a host (and a port that is a number)") from None
        else:
            if response.status_code < 500:
                return response
            last = f"HTTP {response.status_code}"
        if attempt < RETRIES:
            time.sleep(0.2 * (attempt + 1))
    raise IndexError_(f"{redact(url)}: {last} after {RETRIES + 1} tries",
                      "check the index is up, or point --index NAME=URL (or PROVISION_INDEX_NAME) at a mirror")


def project_files(index_url: str, project: str) -> list[IndexFile]:
    """Return the files an index lists for `project`; an empty list when it has no such project (404)."""
    url = index_url.rstrip("/") + f"/{canonicalize_name(project)}/"
    response = get(url, accept=f"{JSON_TYPE}, text/html;q=0.1")
    if response.status_code == 404:
        return []
    if response.status_code >= 400:
        raise IndexError_(f"{redact(url)}: HTTP {response.status_code}", "check the index URL and its credentials")
    if response.headers.get("Content-Type", "").startswith(JSON_TYPE):
        return [
            IndexFile(filename=f["filename"], url=urljoin(url, f["url"]), sha256=(f.get("hashes") or {}).get("sha256"),
                      core_metadata=_core_metadata(f.get("core-metadata", f.get("data-dist-info-metadata", False))))
            for f in response.json().get("files", [])
        ]
    parser = _Links()
    parser.feed(response.text)
    files = []
    for href, metadata in parser.links:
        absolute = urljoin(url, href)
        path, _, fragment = absolute.partition("#")
        sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        files.append(IndexFile(filename=unquote(path.rsplit("/", 1)[-1]), url=path, sha256=sha, core_metadata=metadata))
    return files


def download(url: str, sink: BinaryIO | None = None, *, sha256: str | None = None, expected_from: str = "the index's",
             hint: str = "check the index") -> str:
    """Stream `url` into `sink` (or nowhere) and return its sha256; a file whose sha256 is not `sha256` is an error
    that names both (`expected_from` says whose: "the lock's", "the index's")."""
    response = get(url, stream=True)
    if response.status_code >= 400:
        raise IndexError_(f"{redact(url)}: HTTP {response.status_code}", hint)
    digest = hashlib.sha256()
    for chunk in response.iter_content(1 << 20):
        digest.update(chunk)
        if sink is not None:
            sink.write(chunk)
    found = digest.hexdigest()
    if sha256 and found != sha256:
        raise IndexError_(f"{redact(url)}: sha256 {found[:16]}... is not {expected_from} {sha256[:16]}...", hint)
    return found


def sha256_of(url: str) -> str:
    """Download `url` once, streaming, and return its sha256."""
    return download(url)
