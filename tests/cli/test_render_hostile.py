"""The one rendering path attacked: a stdout closed, its reader gone or its disk full; strings that would drive a
terminal or break a Markdown table; a view that raises. Each is one error line at most, never a traceback, with the
exit code of docs/exit-codes.md. Real processes (tests/launch.py) and real files; the Markdown is read back by a
real CommonMark parser (markdown-it-py, which rich ships with)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import launch
import pytest
from conftest import ROOT
from markdown_it import MarkdownIt
from markdown_it.token import Token

from provision.log import printable
from provision.views import render
from provision.views.render import Info, Line, Shown, TableBuilder

H200 = ROOT / "docs/machines/h200.probe.json"
FORMS = [("--json",), ("--markdown",), ()]
FULL_DISK = "error: cannot write the output: No space left on device\nhint: free space on that disk and run it again\n"


def run_to(
    stdout: int | IO[str],
    *args: str | Path,
    env: dict[str, str | None] | None = None,
    close_stdout: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`provision ARGS` with its stdout on `stdout` (or closed, as `>&-` leaves it), stderr read back."""
    return subprocess.run(
        launch.argv(args),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=launch.environment(env),
        preexec_fn=(lambda: os.close(1)) if close_stdout else None,
    )


def json_only(form: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for f in form if f == "--json")  # switch has no --markdown


@pytest.fixture
def reader_gone() -> Iterator[int]:
    """A pipe whose reader has gone: `provision ... | head -c 0`, every write is EPIPE."""
    read, write = os.pipe()
    os.close(read)
    yield write
    os.close(write)


@pytest.mark.parametrize("form", FORMS)
def test_a_reader_that_stops_reading_ends_it_quietly_and_alike_in_every_output(
    reader_gone: int, form: tuple[str, ...]
) -> None:
    done = run_to(reader_gone, "report", "--machine", H200, *form)
    # as click and rich end a table: --json and --markdown exited 0
    assert (done.returncode, done.stderr) == (
        1,
        "",
    )


def test_an_error_under_json_whose_reader_is_gone_is_its_line_and_its_code(
    reader_gone: int, tmp_path: Path
) -> None:
    done = run_to(reader_gone, "switch", "nope", "--json", "--home", tmp_path)
    assert done.returncode == 7, done.stderr  # was a traceback and exit 1: the error document's write failed
    assert done.stderr.splitlines() == [
        f"error: no environment named 'nope' in {tmp_path}",
        "hint: known: none yet; make one with provision create PROFILE",
    ]


@pytest.mark.parametrize("form", FORMS)
def test_a_closed_stdout_throws_the_output_away_and_keeps_the_exit_code(
    form: tuple[str, ...], tmp_path: Path
) -> None:
    done = run_to(subprocess.DEVNULL, "report", "--machine", H200, *form, close_stdout=True)
    assert (done.returncode, done.stderr) == (0, "")  # --json and --markdown were a traceback and exit 1
    failed = run_to(
        subprocess.DEVNULL, "switch", "nope", "--home", tmp_path, *json_only(form), close_stdout=True
    )
    assert failed.returncode == 7 and failed.stderr.startswith("error: no environment named 'nope'")
    assert "Traceback" not in failed.stderr


@pytest.mark.parametrize("form", FORMS)
def test_a_full_disk_under_stdout_is_one_error_line_and_exit_3(form: tuple[str, ...], tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        done = run_to(full, "report", "--machine", H200, *form)
        failed = run_to(full, "switch", "nope", "--home", tmp_path, *json_only(form))
    assert (done.returncode, done.stderr) == (3, FULL_DISK)  # --json was two tracebacks and exit 1
    # its own error, once
    assert failed.returncode == 7 and len(failed.stderr.splitlines()) == 2, failed.stderr


def test_a_view_that_raises_is_one_error_line_and_exit_3(tmp_path: Path) -> None:
    """A bug cannot be caused for real (it would be fixed): the profiles view is made to raise in the real process."""
    (tmp_path / "sitecustomize.py").write_text(
        "import provision.views.stacks as views\n\n"
        "def profiles(found):\n    raise KeyError('description')\n\n"
        "views.profiles = profiles\n"
    )
    env: dict[str, str | None] = {"PYTHONPATH": str(tmp_path)}
    done = launch.run_provision("profiles", env=env)
    assert done.returncode == 3 and done.stdout == "", done.stderr  # was a traceback and exit 1
    assert done.stderr.splitlines() == [
        "error: internal error: KeyError: 'description'",
        "hint: a bug in provision: run it again with -v and report what it prints",
    ]
    as_json = launch.run_provision("profiles", "--json", env=env)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["error"]["exit_code"] == 3
    assert "Traceback" in launch.run_provision("profiles", "-v", env=env).stderr  # -v shows where


HOSTILE = "A|B [bold]x[/bold] :fire: \x1b[31mESC\x1b[0m cr\rhere nul\x00z\nnext back\\|slash <b>h</b>"


def test_a_hostile_profile_description_prints_as_data(tmp_path: Path) -> None:
    (tmp_path / "hostile.toml").write_text(
        'schema = 1\nname = "hostile"\ncuda = "13.0"\n'
        f'description = {json.dumps(HOSTILE)}\n[packages]\nalpha = "==1.0"\n'
    )
    env: dict[str, str | None] = {"PROVISION_PROFILES": str(tmp_path)}
    table = launch.run_provision("profiles", env=env, check=True).stdout
    assert ":fire:" in table and "🔥" not in table  # rich's emoji codes made it a flame
    assert "[bold]x[/bold]" in table and "?[31mESC?[0m" in table and "\x1b" not in table and "\r" not in table
    document = json.loads(launch.run_provision("profiles", "--json", env=env, check=True).stdout)
    assert [p["description"] for p in document["profiles"] if p["name"] == "hostile"] == [HOSTILE]


def test_a_newline_in_a_machine_path_never_ends_its_markdown_heading_or_bullet(tmp_path: Path) -> None:
    machine = tmp_path / "m|x\n# evil.json"
    document = json.loads(H200.read_text())
    # a FAIL: the fleet's summary names the machine
    document["driver"].update(version="575.57.08", cuda="12.9")
    machine.write_text(json.dumps(document))
    done = launch.run_provision(
        "report", "--machine", H200, "--machine", machine, "--profile", "cu130", "--markdown", check=True
    )
    lines = done.stdout.splitlines()
    # the heading, one line
    assert f"## {tmp_path}/m|x # evil.json: driver 575.57.08 (CUDA 12.9), 1 GPU(s) sm_90" in lines
    # the cause, one bullet
    assert any(
        line.startswith("- profile `cu130`: FAIL on 1 machine (") and "x # evil.json): driver" in line
        for line in lines
    )
    # no heading of its own for the rest of a path
    assert not [line for line in lines if line.startswith("# ")]


# --- in the renderer: Markdown cells, captions, emoji codes, narrow cells ------------------------------------------

CELLS = [
    "a|b",
    "back\\|slash",
    "ends with \\",
    "line\nnext",
    "<img src=x onerror=alert(1)>",
    "![pixel](http://127.0.0.1/p.png)",
    "[click](http://127.0.0.1/)",
    "cr\rhere nul\x00z esc\x1b[31m",
    "[bold]b[/bold] :fire: *not* _em_",
    "x" * 3000,
]


def _cell_text(inline: Token) -> str:
    """A parsed cell back as the text it shows: <br> is its newline; anything else active (a link, an image, HTML)
    is named, so that the comparison fails on it."""
    parts = []
    for child in inline.children or []:
        if child.type == "html_inline" and child.content == "<br>":
            parts.append("\n")
        elif child.type == "text":
            parts.append(child.content)
        elif child.type in ("em_open", "em_close"):
            parts.append("*" if child.markup == "*" else "_")
        else:
            parts.append(f"<{child.type}>")
    return "".join(parts)


def test_markdown_cells_are_data_to_a_commonmark_parser(capsys: pytest.CaptureFixture[str]) -> None:
    table = TableBuilder("", "name", "value")
    for i, cell in enumerate(CELLS):
        table.add(f"c{i}", cell)
    render.render(Shown({}, [table.done()]), "markdown")
    tokens = MarkdownIt("commonmark").enable("table").parse(capsys.readouterr().out)
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows:
            rows[-1].append(_cell_text(token))
    assert rows[0] == ["name", "value"] and len(rows) == len(CELLS) + 1
    assert [row[1] for row in rows[1:]] == [printable(c) for c in CELLS]  # every cell whole, shown as it is


def test_a_markdown_heading_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    render.render(Shown({}, [Line("/m\n# evil\r", heading=2)]), "markdown")
    assert capsys.readouterr().out == "## /m # evil?\n\n"


def test_tables_print_emoji_codes_and_escapes_in_captions_as_data(capsys: pytest.CaptureFixture[str]) -> None:
    table = TableBuilder("title :fire:", "a", caption="caption :fire: \x1b]0;title\x07")
    table.add(":thumbs_up: " + "y" * 400)
    render.render(Shown({}, [table.done(), Line("line :cross_mark:")]), "table")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "caption :fire: ?]0;title?" in out
    assert out.count(":fire:") == 2 and ":thumbs_up:" in out and ":cross_mark:" in out
    assert out.count("y") == 400 and "…" not in out  # folded onto more lines, never cut short


def test_info_stays_on_stderr_under_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    """Info is for people beside the result: a ticket pasted from --markdown gets the result only, and -q hides it."""
    from provision import log

    render.render(Shown({}, [Info("built tiny"), Line("result")]), "markdown")
    assert capsys.readouterr() == ("result\n\n", "built tiny\n")  # the line was in the ticket
    log.set_level(log.QUIET)
    try:
        render.render(Shown({}, [Info("built tiny"), Line("result")]), "markdown")
    finally:
        log.set_level(log.NORMAL)
    assert capsys.readouterr() == ("result\n\n", "")


def strict_json(text: str) -> object:
    """JSON as RFC 8259 has it: NaN and Infinity are no numbers (jq, JavaScript and Go refuse them)."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_baseline_whose_figure_is_no_number_fails_and_stores_nothing(
    tmp_path: Path, index_server: object, provision_bin: str
) -> None:
    """A baseline whose command prints NaN or Infinity (Python's json.dumps does, for 0/0 or x/0) measured nothing: the
    run fails with a one-line reason, --json is the error document, and env.json keeps no such figure (it stored NaN,
    which no JSON parser but Python's reads)."""
    import tiny

    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))  # type: ignore[arg-type]
    printed = tmp_path / "printed.txt"
    code = f"print(open({str(printed)!r}).read())"
    tiny.profile(
        tool.profiles,
        "nan",
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(code)}]\n'
            'json_key = "tok_s"\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n'
        ),
    )
    tool.create("nan")
    env_json = next((tool.home / "builds").glob("nan*/env.json"))
    for figure in ("NaN", "Infinity", "-Infinity"):
        printed.write_text(f'{{"tok_s": {figure}}}')
        done = tool("baseline", "nan", "--json", check=False)
        assert done.returncode == 7, done.stderr
        error = strict_json(done.stdout)["error"]  # type: ignore[index]
        assert (
            f"its figure tok_s is {figure.lower().replace('infinity', 'inf')}, not a number"
            in error["message"]
        ), error
        assert done.stderr.count("\n") == 2 and done.stderr.startswith("error: nan: the baseline failed"), (
            done.stderr
        )
        assert strict_json(env_json.read_text())["baselines"] == []  # type: ignore[index]
    # an integer no float holds: the run's failure, not provision's
    printed.write_text('{"tok_s": 1' + "0" * 400 + "}")
    done = tool("baseline", "nan", "--json", check=False)
    assert (
        done.returncode == 7
        and "its figure tok_s is '1000000000" in done.stderr
        and "internal" not in done.stderr
    ), done.stderr
    # a NaN beside the figure (a spread of 0/0) is null in env.json, as --json shows it: it stored NaN
    printed.write_text('{"tok_s": 12.5, "spread": NaN, "runs": [Infinity, 12.5]}')
    assert strict_json(tool("baseline", "nan", "--json").stdout)["figure"] == 12.5  # type: ignore[index]
    (stored,) = strict_json(env_json.read_text())["baselines"]  # type: ignore[index]
    assert (stored["figure"], stored["details"]) == (
        12.5,
        {"tok_s": 12.5, "spread": None, "runs": [None, 12.5]},
    ), stored


def test_a_baseline_pattern_that_matches_no_number_is_the_runs_failure() -> None:
    """`tok/s: (\\S+)` matching `tok/s: n/a`: the figure is that text (the run fails naming it, exit 7), not a
    ValueError that said 'internal error' (exit 3)."""
    from provision.checks import baseline
    from provision.stacks.profiles import Baseline

    spec = Baseline(command=("true",), pattern=r"tok/s: (\S+)")
    assert baseline.extract(spec, "tok/s: 3.5\ntok/s: n/a\n") == ("n/a", None)
    assert baseline.extract(spec, "tok/s: 3.5\n") == (3.5, None)


def test_what_a_failing_all_reduce_perf_printed_never_drives_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench allreduce's table is Raw text (never folded): nccl-tests' own last lines reach it in its error, escapes too."""
    from provision.checks import allreduce
    from provision.records.allreduce_runs import AllreduceRow, AllreduceRun, VariantRun
    from provision.views import checks as views

    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\nprintf 'NCCL WARN \\033]0;pwned\\007\\033[2J cleared\\n' >&2\nexit 3\n")
    binary.chmod(0o755)
    rows = [AllreduceRow(size=8, count=2, wrong=0, eager_us=20.0, eager_busbw=0.0)]
    measured = allreduce.beside_nccl_tests(
        VariantRun(variant={}, rows=rows),
        {},
        binary,
        venv=tmp_path,
        env=dict(os.environ),
        world=2,
        min_bytes=8,
        max_bytes=2**27,
        factor=2,
        iters=20,
    )
    shown = views.allreduce("h200", AllreduceRun(at="now", backend="nccl", world_size=2, runs=[measured]))
    assert render.render(shown, "table") == 1
    out = capsys.readouterr().out
    # a retitled, cleared terminal
    assert "NCCL WARN ?]0;pwned??[2J cleared" in out and "\x1b" not in out and "\x07" not in out


def test_a_stderr_that_cannot_be_written_changes_neither_the_result_nor_the_exit_code(
    tmp_path: Path, index_server: object, provision_bin: str
) -> None:
    """Stderr is for people: switch's line there failing on a full disk made a switch that happened exit 3."""
    import tiny

    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))  # type: ignore[arg-type]
    tool.create("tiny", "--name", "other", "--no-checks")
    with open("/dev/full", "w") as full:
        switched = subprocess.run(
            launch.argv(("switch", "tiny")),
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            env=launch.environment(tool.env()),
            timeout=60,
        )
        failed = subprocess.run(
            launch.argv(("switch", "nope", "--json")),
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            env=launch.environment(tool.env()),
            timeout=60,
        )
    assert switched.returncode == 0
    assert {e["name"]: e["active"] for e in json.loads(tool("envs", "--json").stdout)["environments"]}[
        "tiny"
    ] is True
    # the error document stays
    assert failed.returncode == 7 and json.loads(failed.stdout)["error"]["exit_code"] == 7


def test_an_error_naming_a_path_with_a_newline_is_one_line(tmp_path: Path) -> None:
    """A name holding a newline printed its error as two lines (the second one no `error:` line at all): shown as \\n,
    as control characters are shown as ?. The --json error document keeps the name as it is."""
    odd = tmp_path / "a\nb.so"
    done = launch.run_provision("scan", odd, "--json")
    assert done.stderr.splitlines() == [
        f"error: {tmp_path}/a\\nb.so: no such file or directory",
        "hint: give a shared object, cubin, wheel or folder",
    ], done.stderr
    assert json.loads(done.stdout)["error"]["message"] == f"{odd}: no such file or directory"


def test_a_note_naming_a_path_with_a_newline_is_one_line(tmp_path: Path) -> None:
    """scan's note on a pipe named `a\\nb.so` was two stdout lines (the second one no `note:` line, and it could read
    as anything): shown as \\n, as errors show it."""
    import os

    odd = tmp_path / "a\nb.so"
    os.mkfifo(odd)
    done = launch.run_provision("scan", odd)
    notes = [line for line in done.stdout.splitlines() if "b.so" in line]
    assert done.returncode == 0 and notes == [
        f"note: {tmp_path}/a\\nb.so: not read (OSError: [Errno 22] not a regular file: {str(odd)!r})"
    ], done.stdout


def test_a_problem_beside_a_result_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from provision.views.render import Problem

    render.render(Shown({}, [Problem("/p/x\ny.toml: not a file", "hint\r\nmore"), Line("result")]), "table")
    assert capsys.readouterr() == ("result\n", "error: /p/x\\ny.toml: not a file\nhint: hint?\\nmore\n")
