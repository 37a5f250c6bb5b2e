"""The one place a command's result becomes output and an exit code.

A command returns a `Shown`: its JSON document, the blocks a person reads (tables and lines, in order) and its exit
code. It never prints its result and never exits; `provision.cli.main` hands the `Shown` to `render`, which writes
the JSON document (schema version at its top level), rich tables, or Markdown, and returns the exit code. Views build
a `Shown` from an operation's typed result and import nothing heavy: rich is loaded only when a table is drawn, and
the blocks are named tuples: immutable and typed like frozen dataclasses, but made at import in a sixth of the time
(every command loads this module, `switch` and `rollback` included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    from provision.status import Status

Output = Literal["table", "json", "markdown"]


class Verdict(NamedTuple):
    """A status shown as one: upper case, coloured in a table, bold in Markdown."""

    status: Status | str

    def __str__(self) -> str:
        return self.status.upper()


Cell = str | Verdict


class Table(NamedTuple):
    """A titled table of plain cells (a cell may span lines with \\n); an optional caption below it."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...] = ()
    caption: str = ""


class Line(NamedTuple):
    """A line (or lines) of text for people; `heading` makes it a Markdown heading of that level."""

    text: str
    heading: int = 0


class Info(NamedTuple):
    """A line for people on stderr, never on stdout (-q hides it): what a command did, beside no table."""

    text: str


class Raw(NamedTuple):
    """Text written to stdout exactly as it is, never escaped or folded (what `shell-env` prints for a shell)."""

    text: str


class Problem(NamedTuple):
    """An `error:` line and its `hint:` on stderr, in every output (--json too; -q keeps it): what a command passed
    over and says beside its result (a *.toml in a profiles folder that is no file), its exit code saying so too."""

    message: str
    hint: str = ""


Block = Table | Line | Info | Raw | Problem


class Shown(NamedTuple):
    """What a command shows: `document` under --json, `blocks` for people (`markdown` for --markdown where it says
    more than the tables, e.g. each verdict's source), and the exit code either way."""

    document: Mapping[str, object] | None = None
    blocks: Sequence[Block] = ()
    exit_code: int = 0
    markdown: Sequence[Block] | None = None


class TableBuilder:
    """Rows added one at a time, then frozen into a `Table`: `t = TableBuilder(title, *columns); t.add(...); t.done()`."""

    def __init__(self, title: str, *columns: str, caption: str = "") -> None:
        self.title, self.columns, self.caption = title, columns, caption
        self.rows: list[tuple[Cell, ...]] = []

    def add(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.title!r}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(tuple(cells))

    def done(self) -> Table:
        return Table(self.title, tuple(self.columns), tuple(self.rows), self.caption)


def render(shown: Shown, output: Output) -> int:
    """Write `shown` as `output` on stdout (its problems on stderr, first); return its exit code."""
    problems = [b for b in shown.blocks if isinstance(b, Problem)]
    if problems:
        from provision.views import ui

        for problem in problems:
            ui.error(problem.message, problem.hint)
    if output == "json":
        if shown.document is None:
            raise ValueError("this command has no JSON document")
        from provision.views import ui

        ui.dump_json(dict(shown.document))
    elif output == "markdown":
        import sys

        from provision import log

        blocks: list[Table | Line | Raw] = []
        for block in shown.markdown if shown.markdown is not None else shown.blocks:
            if isinstance(block, Info):
                log.info(block.text)  # stderr, as in a table: the ticket gets the result only
            elif not isinstance(block, Problem):
                blocks.append(block)
        sys.stdout.write(markdown_text(blocks))
    else:
        _tables(shown.blocks)
    return shown.exit_code


def warm(output: Output) -> None:
    """Import what `render` will need for `output` (rich, for tables), called off the main thread while a command
    waits on a child (`lock` while uv resolves): the import is then paid in time the process spends waiting anyway."""
    if output == "table":
        import rich.console
        import rich.table  # noqa: F401


def markdown_text(blocks: Sequence[Table | Line | Raw]) -> str:
    """`blocks` as the Markdown --markdown prints (a page written to a file: `upgrade --markdown FILE`)."""
    return "\n".join(_markdown(b) for b in blocks) + ("\n" if blocks else "")


def _tables(blocks: Sequence[Block]) -> None:
    import sys

    from provision import log
    from provision.log import printable
    from provision.views import ui

    # rich is imported only when there is something to draw: lines alone, piped, are written as rich writes them
    drawn = [b for b in blocks if isinstance(b, (Table, Line))]
    plain = bool(drawn) and all(isinstance(b, Line) and "\t" not in b.text for b in drawn) and not _terminal()
    out = ui.console() if drawn and not plain else None
    for block in blocks:
        if isinstance(block, Problem):
            continue  # written by render, whatever the output
        if isinstance(block, Info):
            log.info(block.text)
        elif isinstance(block, Raw):
            sys.stdout.write(block.text)
            sys.stdout.flush()
        elif plain and isinstance(block, Line):
            sys.stdout.write(printable(block.text) + "\n")
            sys.stdout.flush()  # as rich does: an Info line after it on stderr comes after it in 2>&1
        elif out is None:
            continue
        elif isinstance(block, Line):
            # piped, one line however long (grep sees it whole; rich folded it at 120 columns); a terminal wraps words
            out.print(block.text, soft_wrap=not out.is_terminal)
        else:
            table = ui.table(block.title, *block.columns)
            for row in block.rows:
                table.add_row(*(ui.status_text(c.status) if isinstance(c, Verdict) else c for c in row))
            if block.caption:
                table.caption = printable(block.caption)
            out.print(table)


def _terminal() -> bool:
    """Whether rich would take stdout for a terminal (its Console.is_terminal: TTY_COMPATIBLE, FORCE_COLOR, then
    isatty), where it wraps lines and colours them. A line with a tab stays with rich, which expands it by cell width."""
    import os
    import sys

    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    try:
        return sys.stdout.isatty()
    except ValueError:  # closed
        return False


def _escape(cell: Cell) -> str:
    """A cell as data: a backslash, pipe or newline never ends it, and no HTML, autolink, link or image is made of it."""
    if isinstance(cell, Verdict):
        return f"**{cell}**"
    return (
        cell.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace("](", "\\](")
        .replace("\n", "<br>")
    )


def _markdown(block: Table | Line | Raw) -> str:
    from provision.log import printable

    if isinstance(block, Raw):
        return block.text
    # a heading is one line: a newline in a path must not end it
    if isinstance(block, Line) and block.heading:
        return "#" * block.heading + " " + " ".join(printable(block.text).splitlines()) + "\n"
    if isinstance(block, Line):
        return printable(block.text) + "\n"
    lines = [f"**{printable(block.title)}**\n"] if block.title else []
    lines.append("| " + " | ".join(_escape(printable(c)) for c in block.columns) + " |")
    lines.append("|" + " --- |" * len(block.columns))
    for row in block.rows:
        lines.append(
            "| " + " | ".join(_escape(c if isinstance(c, Verdict) else printable(c)) for c in row) + " |"
        )
    if block.caption:
        lines.append(f"\n{printable(block.caption)}")
    return "\n".join(lines) + "\n"
