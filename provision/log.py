"""Diagnostics on stderr: what provision is doing (hidden by -q) and the commands it runs (shown by -v).

The CLI sets the level once per process; core code only calls `info` and `debug`. Kept free of the `logging`
package on purpose: `switch` and `rollback` must start in well under 0.1 s, and logging alone costs a good part of it.
"""

from __future__ import annotations

import re
import sys

QUIET, NORMAL, VERBOSE = -1, 0, 1
_level = NORMAL
_hidden: dict[str, str] = {}  # a secret value -> what every line shows instead


def hide(value: str, shown: str = "****") -> None:
    """Never print `value` (a secret passed to a child, which its failure output may echo): every line shows `shown`."""
    if value:
        _hidden[value] = shown


def _masked(message: str) -> str:
    for value in sorted(_hidden, key=len, reverse=True):
        message = message.replace(value, _hidden[value])
    return printable(message)


def printable(text: str) -> str:
    """`text` with terminal control characters (ESC, BEL, CR, C1...) shown as `?`: a file name or a child's output
    that carries escape sequences must not drive the user's terminal. Newlines and tabs stay."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "?", text)


# Secrets in URLs, wherever a URL appears in a line: the user info (a password may hold an unencoded / ? or #, so
# "user:" up to the @ goes whole), every query value (?token=...), and path segments shaped like tokens: 20 or more
# letters, digits, - and _ mixing upper case, lower case and digits (a normalized project name, a wheel's name, a
# version or a hex content hash never does), or carrying a known token prefix.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)(?:[^\s@/?#:]*:[^\s@]*|[^\s@/?#:]+)@")
_QUERY_VALUE = re.compile(r"([?&;][^=\s&;#?/'\"]+=)[^&;\s#'\"]+")
_PREFIXES = ("ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "hf_", "npm_", "pypi-", "AKIA", "xox")
_SEGMENT = re.compile(r"(?<=/)([A-Za-z0-9_~-]{4,})(?=[/?#\s'\"]|$)")


def _token_like(segment: str) -> bool:
    if segment.startswith(_PREFIXES):
        return True
    return len(segment) >= 20 and any(c.isupper() for c in segment) and any(c.islower() for c in segment) and \
        any(c.isdigit() for c in segment)


def _url_secrets(match: re.Match[str]) -> str:
    url = _QUERY_VALUE.sub(r"\1****", _USERINFO.sub(r"\1****@", match.group(0)))
    return _SEGMENT.sub(lambda m: "****" if _token_like(m.group(1)) else m.group(1), url)


def redact(text: str) -> str:
    """`text` with the secrets of every URL in it shown as ****: user info, query values, token-like path segments."""
    return _URL.sub(_url_secrets, text)


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")


def set_level(level: int) -> None:
    """-q lowers the level below NORMAL, each -v raises it by one."""
    global _level
    _level = level


def level() -> int:
    return _level


def info(message: str) -> None:
    """A line about what provision is doing, for people; -q hides it."""
    if _level >= NORMAL:
        sys.stderr.write(_masked(message) + "\n")


def debug(message: str) -> None:
    """A line only -v shows: the commands provision runs, and what they printed when they failed (credentials in
    URLs redacted: an index URL with a token in it is part of uv's argv)."""
    if _level >= VERBOSE:
        sys.stderr.write(redact(_masked(message).rstrip("\n")) + "\n")
