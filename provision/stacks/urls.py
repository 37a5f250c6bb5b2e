"""URLs as provision shows and hands them on: secrets redacted, credentials taken out (to go by variable), and the
one timeout for every index request (PROVISION_HTTP_TIMEOUT). Apart from the index client (index.py), so that what
only runs uv (`provision envs` asks it for its cache) loads neither requests' helpers nor packaging."""

from __future__ import annotations

import re
from urllib.parse import unquote

from provision import log

TIMEOUT_VARIABLE = "PROVISION_HTTP_TIMEOUT"


def timeout() -> float:
    """Seconds to wait for an index (PROVISION_HTTP_TIMEOUT, default 30): a positive finite number."""
    from provision import durations

    return durations.seconds(TIMEOUT_VARIABLE, 30, "30")


CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")  # requests' own, read in this order


def ca_bundle_variable() -> tuple[str, str] | None:
    """(variable, path) of the CA bundle provision's requests trust by variable (requests' rule: REQUESTS_CA_BUNDLE,
    else CURL_CA_BUNDLE; an empty one is unset); None where neither names one (certifi's bundle then)."""
    import os

    return next(((n, os.environ[n]) for n in CA_BUNDLE_VARIABLES if os.environ.get(n)), None)


def check_ca_bundle(path: str | None = None) -> None:
    """The CA bundle at `path` (the variable's where not given; none named, nothing to check) must be one by its kind
    (ca_bundle_problem), else an InputError naming it and its variable (exit 2). lock and create ask before anything
    runs (uvtool.check_settings); the shared TLS context asks before it reads a bundle (tls.context)."""
    if path is None:
        named = ca_bundle_variable()
        if named is None:
            return
        path = named[1]
    why = ca_bundle_problem(path)
    if why:
        raise ca_bundle_error(path, why)


def ca_bundle_error(path: str, why: str) -> Exception:
    """The one line for a CA bundle that is none: the path, the variable that names it where one does, and why."""
    from provision.errors import InputError

    named = ca_bundle_variable()
    variable = named[0] if named is not None and named[1] == path else ""
    return InputError(
        f"{variable + '=' if variable else 'the CA bundle '}{log.one_line(path)}: {why}",
        f"point {variable or 'REQUESTS_CA_BUNDLE'} at a file (or folder) of PEM CA certificates, or unset it "
        "(certifi's bundle is used then)",
    )


def ca_bundle_problem(path: str) -> str:
    """Why `path` cannot be a CA bundle, told by its kind alone ("" where it may be one): it is looked at, never
    opened, so a FIFO (whose open waits for a writer for ever) or a device is refused rather than read."""
    import os
    import stat

    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "no such file or folder of CA certificates"
    except (OSError, ValueError) as exc:  # a name too long, a NUL in it, a loop of links
        return f"cannot be looked at ({type(exc).__name__})"
    if stat.S_ISDIR(found.st_mode):
        return ""
    if not stat.S_ISREG(found.st_mode):
        return "not a file or folder of CA certificates (a FIFO, a socket or a device)"
    if found.st_size == 0:
        return "an empty file: no CA certificates in it"
    return ""


def redact(url: str) -> str:
    """Return `url` with its secrets shown as ****: the user name and password (also user:password@host without a
    scheme), query values and token-like path segments (log.redact's rule)."""
    return log.redact(re.sub(r"^[^/\s@]+@", "****@", url) if "://" not in url else url)


def userinfo(url: str) -> tuple[str, str, str] | None:
    """(scheme://, user info, the rest) of a URL with credentials, else None. A password may hold an unencoded /, ?
    or # (which would end the host part for urlsplit and put the whole password in the path): then `user:` up to the
    last @ of the URL is the user info."""
    if "@" not in url:  # none (a lock's four hundred file URLs are read in one pass)
        return None
    found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*://)(.*)", url, re.DOTALL)
    if found is None:
        return None
    scheme, rest = found.groups()
    host_part = re.split(r"[/?#]", rest, maxsplit=1)[0]
    last = rest.rfind("@")
    if (
        last > 0
        and re.match(r"[^/?#@:]*:", rest)
        and re.match(r"[A-Za-z0-9.\[\]:-]+(?:[/?#]|$)", rest[last + 1 :])
    ):
        at = last  # user:password@host, the password holding what urlsplit would end the host part at
    elif "@" in host_part:
        at = host_part.rfind("@")
    else:
        return None
    return scheme, rest[:at], rest[at + 1 :]


def strip_credentials(url: str) -> str:
    """`url` without its user name and password (what uv is given; the credentials go by variable)."""
    parts = userinfo(url)
    return url if parts is None else parts[0] + parts[2]


def page_base(asked: str, final: str) -> str:
    """What a page's relative links are relative to: the URL it came from after redirects (`final`), as browsers, pip
    and uv join them. The credentials of the URL asked go with it where the redirect stayed on that scheme, host and
    port (requests sends them there too, and a file linked from the page needs them as the page did); never to
    another host."""
    from urllib.parse import urlsplit

    if not final or userinfo(final) is not None or userinfo(asked) is None:
        return final or asked
    here, there = urlsplit(strip_credentials(asked)), urlsplit(final)
    if (here.scheme, here.netloc) != (there.scheme, there.netloc):
        return final
    scheme, user, _rest = userinfo(asked) or ("", "", "")
    return scheme + user + "@" + final[len(scheme) :]


def shown(url: str) -> str:
    """`url` as provision writes it where people and files read it (a lock's header and [tool.provision], `rebuild`):
    no user info, and every secret `redact` hides shown as **** (a query token, a token-like path segment)."""
    return redact(strip_credentials(url))


def credentials(url: str) -> tuple[str, str]:
    """The user name and password in `url` (percent-decoded), empty when there are none."""
    parts = userinfo(url)
    if parts is None:
        return "", ""
    user, _, password = parts[1].partition(":")
    return unquote(user), unquote(password)


def host_credentials(url: str) -> tuple[str, str] | None:
    """The user name and password a PROVISION_INDEX_<NAME> variable gives for the scheme, host and port of `url` (a
    credential-free URL, such as a wheel's in a lock), as uv sends an index's credentials to its host; else None. Never
    for another host."""
    import os
    from urllib.parse import urlsplit

    if userinfo(url) is not None:
        return None
    try:
        wanted = urlsplit(url)
        for name, value in os.environ.items():
            if name.startswith("PROVISION_INDEX_") and userinfo(value) is not None:
                there = urlsplit(strip_credentials(value))
                if (there.scheme, there.netloc) == (wanted.scheme, wanted.netloc):
                    return credentials(value)
    except ValueError:  # a variable that is no URL (an odd port): passed over, as lock passes it over
        return None
    return None


def digest(url: str) -> str:
    """The sha256 of `url`: what a cache keeps of the URL something was read from (never the URL: it may hold a token)."""
    import hashlib

    return hashlib.sha256(url.encode("utf-8", "surrogateescape")).hexdigest()


def filename(url: str) -> str:
    """The file name a URL (or an href) names: the last part of its path, without its query or fragment,
    percent-decoded. A signed URL's `?X-Amz-Signature=...` is no part of a wheel's name, nor a secret to show with it,
    and `torch-2.9.1%2Bcu128-...whl` is the wheel `torch-2.9.1+cu128-...whl`."""
    path = re.split(r"[?#]", url, maxsplit=1)[0]
    return unquote(path.rsplit("/", 1)[-1])


def redact_text(text: str) -> str:
    """`text` with the secrets of any URL in it (any scheme, even one that is not a valid URL) shown as ****."""
    return log.redact(text)
