"""uv wraps its error and cause lines at the width COLUMNS gives it (its stderr is a pipe here, so a COLUMNS the caller
exported is all that decides), and indents what runs onto the next lines. provision runs uv without the caller's
COLUMNS (uvtool.environment); these tests give uv one, as a later uv that wraps by other means would. provision still says uv's whole message in
one line: the URL or name a wrapped line carries on below is part of it, a credential in that URL is still redacted,
and words provision looks for that the wrap split in two still tell the failure apart. The real uv and a real index
on 127.0.0.1; the wrap is checked in uv's own lines, so these tests fail loudly if uv ever stops wrapping."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from provision.errors import IndexUnreachable, ProvisionError, ResolveError
from provision.stacks import uvtool

TOKEN = "AbCdEf0123456789XyZ0123"  # an index whose path carries a token, as a private mirror's may
LONG = "a-very-long-package-name-that-no-index-here-has-at-all"
_MARKERS = ("error:", "cause:", "hint:", "warning:", "×", "├─▶", "╰─▶", "Caused by")


def compile_failing(
    tmp_path: Path, requirement: str, index_url: str, columns: int
) -> tuple[ProvisionError, list[str]]:
    """(the error provision makes of uv's failure to compile `requirement`, uv's stderr lines as it wrote them)."""
    source = tmp_path / "requirements.in"
    source.write_text(requirement + "\n")
    written: list[str] = []
    with pytest.raises(ProvisionError) as failed:
        uvtool.run(
            [
                "pip",
                "compile",
                str(source),
                "--no-header",
                "--python",
                sys.executable,
                "--default-index",
                index_url,
            ],
            env={"COLUMNS": str(columns)},
            on_line=written.append,
            timeout=120,
        )
    return failed.value, written


def wrapped(lines: list[str]) -> list[str]:
    """uv's continuation lines: indented, with none of the words that start an error, a cause or a hint."""
    return [
        line for line in lines if line[:1] == " " and line.strip() and not line.strip().startswith(_MARKERS)
    ]


@pytest.mark.parametrize("columns", [60, 30])  # at 30, a cause runs on with the word "error"
def test_a_wrapped_fetch_error_keeps_the_url_on_its_next_line_redacted(
    tmp_path: Path, index_server, columns: int
) -> None:
    served = index_server.index(TOKEN)
    served.add("alpha", "1.0")
    wheel = f"{served.url.removesuffix('/simple')}/files/alpha-9.0-py3-none-any.whl"  # the index answers 404
    error, lines = compile_failing(tmp_path, f"alpha @ {wheel}", served.url, columns)
    assert any(wheel in line for line in wrapped(lines)), lines
    assert isinstance(error, IndexUnreachable), error
    assert "\n" not in error.message and TOKEN not in error.message, error.message
    redacted = wheel.replace(TOKEN, "****")
    assert f"Failed to fetch: {redacted}" in error.message, error.message
    assert f"404 Not Found) for url ({redacted})" in error.message, error.message


def test_a_resolution_error_wrapped_inside_its_words_is_still_told_apart(
    tmp_path: Path, index_server
) -> None:
    served = index_server.index("abi")
    served.add("alpha", "1.0", tag="cp27-cp27mu-manylinux1_x86_64")  # a wheel no Python of these tests takes
    error, lines = compile_failing(tmp_path, "alpha==1.0", served.url, 40)
    assert not any("no wheels with a matching" in line for line in lines), lines  # split by the wrap
    assert isinstance(error, ResolveError) and "\n" not in error.message, error
    assert error.message.startswith("no wheel fits the target Python and platform: "), error.message
    assert "alpha==1.0 has no wheels with a matching Python" in error.message, error.message
    assert "we can conclude that your requirements are unsatisfiable" in error.message, error.message


def test_a_wrapped_explanation_is_said_whole(tmp_path: Path, index_server) -> None:
    served = index_server.index("plain")
    served.add("alpha", "1.0")
    error, lines = compile_failing(tmp_path, f"{LONG}==1.0", served.url, 60)
    assert any(line.strip() == LONG for line in wrapped(lines)), lines
    assert isinstance(error, ResolveError) and "\n" not in error.message, error
    assert error.message == (
        f"the pins cannot all hold: Because {LONG} was not found in the package registry and you require "
        f"{LONG}==1.0, we can conclude that your requirements are unsatisfiable."
    ), error.message
