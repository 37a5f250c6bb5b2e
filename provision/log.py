"""Diagnostics on stderr: what provision is doing (hidden by -q) and the commands it runs (shown by -v).

The CLI sets the level once per process; core code only calls `info` and `debug`. Kept free of the `logging`
package on purpose: `switch` and `rollback` must start in about the time of `import click`, and logging alone costs a good
part of it.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable

QUIET, NORMAL, VERBOSE = -1, 0, 1
_level = NORMAL
_hidden: dict[str, str] = {}  # a secret value -> what every line shows instead
Progress = Callable[[str], None]  # what an operation says it is doing: the stderr progress line, or nothing


def hide(value: str, shown: str = "****") -> None:
    """Never print `value` (a secret passed to a child, which its failure output may echo): every line shows `shown`."""
    if value:
        _hidden[value] = shown


def _masked(message: str) -> str:
    for value in sorted(_hidden, key=len, reverse=True):
        message = message.replace(value, _hidden[value])
    return printable(message)


# C0 but newline and tab, DEL, C1: one table, so that printing a line compiles no pattern
_CONTROL = dict.fromkeys([*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)], "?")


def printable(text: str) -> str:
    """`text` with terminal control characters (ESC, BEL, CR, C1...) shown as `?`: a file name or a child's output
    that carries escape sequences must not drive the user's terminal. Newlines and tabs stay."""
    return text.translate(_CONTROL)


def one_line(text: str) -> str:
    """`printable(text)` with a newline inside (a file name may hold one) shown as \\n: a line that names a file (an
    error, a note) stays one line whatever it names."""
    return printable(text).replace("\n", "\\n")


# Secrets in URLs, wherever a URL appears in a line: the user info (a password may hold an unencoded / ? or #, so
# "user:" up to the @ goes whole), every query value (?token=...), and path segments shaped like tokens: 20 or more
# letters, digits, - and _ mixing upper case, lower case and digits (a normalized project name, a wheel's name, a
# version or a hex content hash never does), or carrying a known token prefix.
_PREFIXES = ("ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "hf_", "npm_", "pypi-", "AKIA", "xox")


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(a URL, its user info, a query value, a path segment): compiled when a line is first redacted, not at import."""
    # scheme:/ and scheme:/// too: a WHATWG parser (uv's) reads them as scheme:// (and a \ as a /); a path's segment
    # ends at a backtick too, as uv quotes a URL (`http://host/TOKEN`)
    return (
        re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[/\\]+[^\s'\"<>]*"),
        re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:[/\\]+)(?:[^\s@/?#:\\]*:[^\s@]*|[^\s@/?#:\\]+)@"),
        re.compile(r"([?&;][^=\s&;#?/'\"]+=)[^&;\s#'\"]+"),
        re.compile(r"(?<=/)([A-Za-z0-9_~-]{4,})(?=[/?#\s'\"`]|$)"),
    )


def _token_like(segment: str) -> bool:
    if segment.startswith(_PREFIXES):
        return True
    return (
        len(segment) >= 20
        and any(c.isupper() for c in segment)
        and any(c.islower() for c in segment)
        and any(c.isdigit() for c in segment)
    )


def _url_secrets(match: re.Match[str]) -> str:
    _, userinfo, query_value, segment = _patterns()
    url = query_value.sub(r"\1****", userinfo.sub(r"\1****@", match.group(0)))
    return segment.sub(lambda m: "****" if _token_like(m.group(1)) else m.group(1), url)


def redact(text: str) -> str:
    """`text` with the secrets of every URL in it shown as ****: user info, query values, token-like path segments."""
    return _patterns()[0].sub(_url_secrets, text)


def say(text: str) -> None:
    """Write `text` on stderr. Stderr is for people: where it cannot be written (a full disk, a reader gone) the
    command goes on without it, as if -q were given, and its result and exit code stay what they were."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except OSError:
        import os

        # what it still holds goes nowhere, never a second error at exit
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, sys.stderr.fileno())
        except (OSError, ValueError):  # not a file (a test's capture)
            pass
        finally:
            os.close(null)


def set_level(level: int) -> None:
    """-q lowers the level below NORMAL, each -v raises it by one."""
    global _level
    _level = level


def level() -> int:
    return _level


def info(message: str) -> None:
    """A line about what provision is doing, for people; -q hides it."""
    if _level >= NORMAL:
        say(_masked(message) + "\n")


def debug(message: str) -> None:
    """A line only -v shows: the commands provision runs, and what they printed when they failed (credentials in
    URLs redacted: an index URL with a token in it is part of uv's argv)."""
    if _level >= VERBOSE:
        say(redact(_masked(message).rstrip("\n")) + "\n")


class ticking:
    """While the block runs, `progress(said(seconds so far))` every `every` seconds from a thread: a step that prints
    nothing for a minute (uv downloading a 9 GB stack says nothing until it has all of it) still shows it is working."""

    def __init__(self, progress: Progress, said: Callable[[float], str], every: float = 10.0) -> None:
        import threading

        self._progress, self._said, self._every = progress, said, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import contextlib
        import time

        started = time.monotonic()
        while not self._stop.wait(self._every):
            # a line that cannot be made costs the line, never the install
            with contextlib.suppress(Exception):
                self._progress(self._said(time.monotonic() - started))

    def __enter__(self) -> ticking:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
