"""Diagnostics on stderr: what provision is doing (hidden by -q) and the commands it runs (shown by -v).

The CLI sets the level once per process; core code only calls `info` and `debug`. Kept free of the `logging`
package on purpose: `switch` and `rollback` must start in well under 0.1 s, and logging alone costs a good part of it.
"""

from __future__ import annotations

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
    import re

    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "?", text)


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
        import re

        sys.stderr.write(re.sub(r"(https?://)[^/\s@]+@", r"\1****@", _masked(message).rstrip("\n")) + "\n")
