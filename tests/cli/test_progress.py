"""Long steps say what they are doing on stderr (one line each where stderr is not a terminal): what uv installs,
package by package; each environment's steps in `report --env`; the deletion in `remove`. `-q` silences them, and
stdout carries only the result."""

from __future__ import annotations

import json
from pathlib import Path

import tiny


def test_create_report_env_and_remove_show_progress_and_q_silences_it(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(
        tmp_path, provision_bin, tiny.index(index_server), ("two", 'alpha = "==2.0"\nbeta = "==1.0"')
    )
    created = tool.create("two", "--no-checks")
    lines = created.stderr.splitlines()
    assert "... uv: + alpha==2.0" in lines and "... uv: + beta==1.0" in lines, created.stderr  # per package
    assert any(line.startswith("... uv: Installed 2 packages") for line in lines)
    quiet = tool.create("tiny", "--no-checks", "-q")
    assert quiet.stderr == ""
    as_json = tool.create("tiny", "--name", "third", "--no-checks", "--json")
    assert "uv:" not in as_json.stderr and json.loads(as_json.stdout)["passed"]

    reported = tool("report", "--env", "two", "--profile", "tiny", "--json")
    assert json.loads(reported.stdout)["machines"]
    reported = tool("report", "--env", "two", "--profile", "tiny")
    assert (
        "... two: scanning its CUDA binaries" in reported.stderr
        and "... two: reading the installed versions" in reported.stderr
    )
    assert tool("report", "--env", "two", "--profile", "tiny", "-q").stderr == ""

    removed = tool("remove", "two")
    assert "... deleting two's files" in removed.stderr
    assert tool("remove", "tiny", "-q").stderr == ""
