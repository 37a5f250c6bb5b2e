"""Output: JSON documents to stdout, rich tables for people, diagnostics to stderr. Rendering lives here only."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

SCHEMA_VERSION = 1


def dump_json(document: dict[str, Any]) -> None:
    """Print a JSON document with the schema version at its top level, beside the data."""
    sys.stdout.write(json.dumps({"schema_version": SCHEMA_VERSION, **document}, indent=2, default=str) + "\n")


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    # markup off: a package extra such as torch[cu128] must print as written.
    result = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=False)
    if not result.is_terminal:
        result.width = max(result.width, 120)  # piped into a file or a ticket: don't fold tables at 80
    return result


def table(title: str, *columns: str) -> Table:
    from rich.table import Table

    result = Table(title=title, title_justify="left", title_style="bold")
    for column in columns:
        result.add_column(column)
    return result


def error(message: str, hint: str = "") -> None:
    """One line of what went wrong, one of what to do; plain text so that it never folds."""
    sys.stderr.write(f"error: {message}\n" + (f"hint: {hint}\n" if hint else ""))


def info(message: str) -> None:
    """A line for people on stderr; -q hides it."""
    from provision import log

    log.info(message)


STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "error": "red", "skip": "dim", "info": "cyan"}


def status_text(status: str) -> Any:
    from rich.text import Text

    return Text(status.upper(), style=STATUS_STYLE.get(status, ""))
