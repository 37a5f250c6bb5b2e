"""Output: JSON documents to stdout, rich tables for people, diagnostics to stderr. Rendering lives here only."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from provision.log import Progress, printable

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console
    from rich.status import Status
    from rich.table import Table
    from rich.text import Text

SCHEMA_VERSION = 1


def dump_json(document: Mapping[str, object]) -> None:
    """Print a JSON document with the schema version at its top level, beside the data. Every string in it is valid
    Unicode (docs/json.md, "Bytes that are not UTF-8"): a path's byte that is not UTF-8 is U+FFFD there, and the
    top-level `not_utf8` gives that string's exact bytes."""
    body = {"schema_version": SCHEMA_VERSION, **document}
    text = _dumps(body)
    # json writes a lone surrogate as \udcXX (and a character beyond U+FFFF as a pair of them): only then look closer
    if "\\ud" in text:
        clean, found = valid_unicode(body)
        if found and isinstance(clean, dict):
            text = _dumps({**clean, NOT_UTF8: found})
    sys.stdout.write(text + "\n")


def _dumps(body: Mapping[str, object]) -> str:
    try:
        return json.dumps(body, indent=2, default=str, allow_nan=False)
    # NaN or an infinity (a figure measured as 0/0): JSON has no such number, so it is null
    except ValueError:
        from provision.atomic import finite

        return json.dumps(finite(body), indent=2, default=str)


NOT_UTF8 = "not_utf8"  # the top-level key of the strings that held bytes that are not UTF-8


def valid_unicode(value: object) -> tuple[object, list[dict[str, object]]]:
    """`value` with each lone surrogate in its strings (member names too) as U+FFFD; and for each string changed, its
    JSON Pointer (RFC 6901) in the document as written and its exact bytes in base64 (null for a surrogate that
    stands for no byte), `"key": true` where the string is a member's name. Python keeps a file name's byte that is
    not UTF-8 as a lone surrogate (U+DC80 to U+DCFF): JSON text can escape one, but it is no Unicode character, and
    strict readers refuse it (or, as jq does, replace it without a word: two paths then read alike)."""
    import base64
    import re

    surrogate = re.compile("[\ud800-\udfff]")
    found: list[dict[str, object]] = []

    def text(string: str, pointer: str, key: bool) -> str:
        if not surrogate.search(string):
            return string
        try:
            exact: str | None = base64.b64encode(string.encode("utf-8", "surrogateescape")).decode("ascii")
        except UnicodeEncodeError:
            exact = None
        shown = surrogate.sub("\ufffd", string)
        found.append(
            {"pointer": pointer + "/" + _escaped(shown) if key else pointer, "bytes": exact}
            | ({"key": True} if key else {})
        )
        return shown

    def walk(item: object, pointer: str) -> object:
        if isinstance(item, str):
            return text(item, pointer, key=False)
        if isinstance(item, Mapping):
            made = {}
            for name, inner in item.items():
                # a name json writes as a string of its own (a number, true, null) is named so in the pointer
                shown = text(name, pointer, key=True) if isinstance(name, str) else name
                step = shown if isinstance(shown, str) else json.dumps(shown)
                made[shown] = walk(inner, pointer + "/" + _escaped(step))
            return made
        if isinstance(item, (list, tuple)):
            return [walk(inner, f"{pointer}/{number}") for number, inner in enumerate(item)]
        if item is None or isinstance(item, (bool, int, float)):
            return item
        # what json.dumps writes with default=str (a Path): its text, judged as a string
        return text(str(item), pointer, key=False)

    return walk(value, ""), found


def _escaped(name: str) -> str:
    """A member name as one step of a JSON Pointer (RFC 6901): ~ as ~0, / as ~1."""
    return name.replace("~", "~0").replace("/", "~1")


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    class _Console(Console):
        # what a file or a child wrote, never as escapes
        def print(self, *objects: Any, **options: Any) -> None:
            super().print(*(printable(o) if isinstance(o, str) else o for o in objects), **options)

    # markup and emoji codes off: a package extra such as torch[cu128] or a path with :fire: in it prints as written.
    result = _Console(stderr=stderr, markup=False, emoji=False, highlight=False, soft_wrap=False)
    if not result.is_terminal:
        result.width = max(result.width, 120)  # piped into a file or a ticket: don't fold tables at 80
    return result


def table(title: str, *columns: str) -> Table:
    from rich.table import Table

    class _Table(Table):
        def add_row(self, *cells: Any, **options: Any) -> None:  # a RECORD path or a reason may carry escapes
            super().add_row(*(printable(c) if isinstance(c, str) else c for c in cells), **options)

    result = _Table(title=printable(title), title_justify="left", title_style="bold")
    for column in columns:  # a cell too long for a narrow terminal folds onto more lines: never cut to "..."
        result.add_column(column, overflow="fold")
    return result


def error(message: str, hint: str = "") -> None:
    """One line of what went wrong, one of what to do; plain text so that it never folds. A newline inside (a file
    name may hold one) is shown as \\n, as control characters are shown as ?: each is one line whatever it names."""
    from provision.log import one_line, say

    say(f"error: {one_line(message)}\n" + (f"hint: {one_line(hint)}\n" if hint else ""))


def info(message: str) -> None:
    """A line for people on stderr; -q hides it."""
    from provision import log

    log.info(message)


STATUS_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "red",
    "error": "red",
    "skip": "dim",
    "info": "cyan",
}


def status_text(status: str) -> Text:
    from rich.text import Text

    return Text(status.upper(), style=STATUS_STYLE.get(status, ""))


def gib(value: int | None) -> str:
    return f"{value / 2**30:.1f} GiB" if value else "-"


def dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def moment(at: str | None) -> str:
    """A stored time (ISO 8601, UTC: `2026-12-06T22:59:31+00:00`) for a table: to the minute, marked UTC with its Z.
    Cut to the minute, it lost its zone, and read as local time where TZ is not UTC (14 hours off under
    TZ=Pacific/Kiritimati). A time of another zone is shown in UTC; one that does not read as a time, as written."""
    import datetime

    if not at:
        return "-"
    try:
        parsed = datetime.datetime.fromisoformat(at)
    except ValueError:
        return at[:16]
    if parsed.tzinfo is None:
        return at[:16]
    return parsed.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


class progress:
    """Show long steps as a spinner on stderr (never on stdout, never under --json or when not a terminal)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.status: Status | None = None

    def __enter__(self) -> Progress:
        import sys

        from provision import log

        self.quiet = self.quiet or log.level() < log.NORMAL
        if not self.quiet and sys.stderr.isatty():  # rich is loaded only when something is drawn
            self.status = console(stderr=True).status("working")
            self.status.__enter__()
        return self.step

    def step(self, message: str) -> None:
        if self.status is not None:
            self.status.update(message)
        elif not self.quiet:
            info(f"... {message}")

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.status is not None:
            self.status.__exit__(kind, value, trace)


def size(value: object) -> str:
    if not isinstance(value, int):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "-"
