"""The one rendering path: `views.render` turns a `Shown` into JSON, tables or Markdown and an exit code, and is the
only place (with views/ui.py, and cli/main.py's exit) where output is written and an exit decided; the rule is
checked here for the whole tree, by reading each module's calls."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision import log
from provision.views import render
from provision.views.render import Info, Line, Problem, Raw, Shown, TableBuilder, Verdict

PACKAGE = Path(__file__).parent.parent.parent / "provision"


@pytest.fixture
def level() -> Iterator[None]:
    yield
    log.set_level(log.NORMAL)


def table() -> render.Table:
    built = TableBuilder("Checks", "name", "status", "detail", caption="one row per check")
    built.add("imports", Verdict("pass"), "torch 2.11 | cu130")
    built.add("gemm", Verdict("fail"), "line one\nline two")
    return built.done()


def test_json_is_the_document_with_its_schema_version_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = Shown(
        {"active": "two", "skipped": []}, [table(), Line("a line"), Info("said"), Raw("raw\n")], exit_code=1
    )
    assert render.render(shown, "json") == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"schema_version": 1, "active": "two", "skipped": []}
    # no table, line or info beside the document
    assert list(json.loads(out))[0] == "schema_version" and err == ""
    with pytest.raises(ValueError, match="no JSON document"):
        render.render(Shown(None, [Line("x")]), "json")


def test_a_table_is_drawn_with_its_title_columns_verdicts_and_caption(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert render.render(Shown({}, [table(), Line("after the table")]), "table") == 0
    out, err = capsys.readouterr()
    assert (
        "Checks" in out
        and "status" in out
        and "PASS" in out
        and "FAIL" in out
        and "torch 2.11 | cu130" in out
    )
    assert "line one" in out and "line two" in out and "one row per check" in out
    assert out.index("Checks") < out.index("after the table") and err == ""


def test_markdown_escapes_pipes_and_newlines_in_cells_and_bolds_verdicts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    render.render(Shown({}, [Line("Report", heading=2), table(), Line("bell \x07 here")]), "markdown")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "## Report"
    assert "| name | status | detail |" in out and "| --- | --- | --- |" in out
    assert "| imports | **PASS** | torch 2.11 \\| cu130 |" in out
    assert "| gemm | **FAIL** | line one<br>line two |" in out
    assert "bell ? here" in out  # a control character never reaches the ticket
    assert "one row per check" in out


def test_markdown_says_more_where_the_command_gives_it(capsys: pytest.CaptureFixture[str]) -> None:
    render.render(Shown({}, [Line("short")], markdown=[Line("long, with sources")]), "markdown")
    out = capsys.readouterr().out
    assert out.startswith("long, with sources\n") and "short" not in out


def test_info_goes_to_stderr_and_quiet_hides_it(capsys: pytest.CaptureFixture[str], level: None) -> None:
    render.render(Shown({}, [Info("built tiny")]), "table")
    out, err = capsys.readouterr()
    assert out == "" and err == "built tiny\n"
    log.set_level(log.QUIET)
    render.render(Shown({}, [Info("built tiny")]), "table")
    assert capsys.readouterr() == ("", "")


def test_raw_text_is_written_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    text = "export PATH='/a|b'\nexport X=\"1\"\n"  # no folding, no escaping, no newline added
    render.render(Shown({}, [Raw(text)]), "table")
    assert capsys.readouterr().out == text
    render.render(Shown({}, [Raw(text)]), "markdown")
    assert capsys.readouterr().out == text + "\n"  # a block of its own in the ticket


LINES = [
    "",
    "plain",
    "x" * 300,
    "  lead and trail  ",
    "two\nlines",
    "trailing\n",
    "\x1b[31mred\x07 a\r\nb",
    "\x0b\x0c\x00\x7f\x85",
    "emoji :fire: [bold]x[/bold] torch[cu128]",
    "wide \u65e5\u672c a\u200bb \u00e9\u0301 " * 20,
    "a\u2028b",
]


def test_lines_without_a_table_are_written_as_rich_writes_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped lines with no table are written without loading rich (its import is a tenth of a second of CPU in every
    command that prints a line or two): the very text rich wrote, as a table among them still has it write them."""
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    render.render(Shown({}, [Line(text) for text in LINES]), "table")
    plain = capsys.readouterr().out
    render.render(Shown({}, [*(Line(text) for text in LINES), table()]), "table")
    by_rich = capsys.readouterr().out
    assert by_rich.startswith(plain) and len(by_rich) > len(plain) and plain.count("\n") >= len(LINES), (
        plain,
        by_rich,
    )


def test_problems_go_to_stderr_in_every_output_and_quiet_keeps_them(
    capsys: pytest.CaptureFixture[str], level: None
) -> None:
    shown = Shown(
        {"skipped": ["x.toml"]}, [Problem("x.toml: not a regular file", "move it"), table()], exit_code=4
    )
    log.set_level(log.QUIET)
    for output in ("json", "table", "markdown"):
        assert render.render(shown, output) == 4
        out, err = capsys.readouterr()
        assert err == "error: x.toml: not a regular file\nhint: move it\n", output
        assert "not a regular file" not in out, output
    render.render(Shown({}, [Problem("no hint")]), "table")
    assert capsys.readouterr().err == "error: no hint\n"


def test_exit_codes_come_from_the_shown_in_every_output(capsys: pytest.CaptureFixture[str]) -> None:
    for output in ("table", "json", "markdown"):
        assert render.render(Shown({}, exit_code=4), output) == 4
    capsys.readouterr()


def test_a_row_of_the_wrong_width_is_refused() -> None:
    built = TableBuilder("t", "a", "b")
    with pytest.raises(ValueError, match="1 cells for 2 columns"):
        built.add("only one")


# --- the rule, for the whole tree --------------------------------------------------------------------------------

# Calls that write output or decide an exit: by their last name anywhere (`out.print`, `ui.console()`), or dotted.
WRITES = {"print", "exit", "dump_json", "console", "echo", "secho"}
DOTTED = {"ui.info", "ui.error", "log.info", "sys.stdout.write", "sys.stderr.write", "sys.exit"}
# Where output and exits are decided: the renderer, the console helpers, the group's error handling.
ALLOWED = {"views/render.py", "views/ui.py", "cli/main.py"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def writes(path: Path) -> list[str]:
    """`line: call` for each call in `path` that writes output or exits."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.rsplit(".", 1)[-1] in WRITES or name in DOTTED:
                found.append((node.lineno, name))
    return [f"{line}: {name}" for line, name in sorted(found)]


def modules() -> list[str]:
    return sorted(
        str(p.relative_to(PACKAGE)) for folder in ("cli", "views") for p in (PACKAGE / folder).glob("*.py")
    )


@pytest.mark.parametrize("module", modules())
def test_commands_and_views_never_write_or_exit(module: str) -> None:
    """A command returns a Shown and a view builds one; neither prints, dumps JSON, opens a console or exits."""
    if module in ALLOWED:
        pytest.skip("where output is written")
    assert writes(PACKAGE / module) == [], module


def reads_the_output(path: Path) -> list[str]:
    """`line: as_json` wherever `path` names it: a view is handed its result, never the output it will be shown as."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            (isinstance(node, ast.Name) and node.id == "as_json")
            or (isinstance(node, ast.arg) and node.arg == "as_json")
            or (isinstance(node, ast.Attribute) and node.attr == "as_json")
        ):
            found.append(node.lineno)
    return [f"{line}: as_json" for line in sorted(found)]


@pytest.mark.parametrize("module", [m for m in modules() if m.startswith("views/")])
def test_views_never_choose_the_output(module: str) -> None:
    """JSON, tables or Markdown is render's choice: a view builds every form of its Shown, whatever was asked for."""
    assert reads_the_output(PACKAGE / module) == [], module


def test_the_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sys\nfrom provision.views import ui\n\ndef cmd(out):\n    ui.dump_json({})\n    out.print('x')\n"
        "    ui.console().print('y')\n    print('z')\n    ui.info('i')\n    sys.exit(4)\n    return render.Shown({})\n"
    )
    assert writes(sample) == [
        "5: ui.dump_json",
        "6: out.print",
        "7: ?.print",
        "7: ui.console",
        "8: print",
        "9: ui.info",
        "10: sys.exit",
    ]
    # every name here is a module that exists, and all are read
    assert set(modules()) >= ALLOWED and len(modules()) > 10
    sample.write_text(
        "def shown(result, as_json: bool):\n    if as_json:\n        return 1\n    return app.as_json\n"
    )
    assert reads_the_output(sample) == ["1: as_json", "2: as_json", "4: as_json"]
