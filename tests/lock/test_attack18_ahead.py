"""The uv a lock made again starts ahead (stacks/ahead), attacked: a record holds nothing provision shows as ****
wherever it would come from (the command line too, not only uv's environment)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tiny
from test_ahead import AHEAD, leftovers, locked


@pytest.fixture
def temp(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def cached_files() -> list[Path]:
    return [p for p in (Path(os.environ["XDG_CACHE_HOME"]) / "provision").rglob("*") if p.is_file()]


def test_a_password_on_the_command_line_is_never_remembered(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    """--index given twice for one index: the last is used (no password reaches uv, whose environment was all that was
    looked at), the first, with its password, was kept in the record's copy of the command line."""
    output = tmp_path / "pylock.tiny.toml"
    secret = "S3cr3t-argv"
    with_password = tool.served.url.replace("http://", f"http://alice:{secret}@")
    twice = ("--index", f"default={with_password}", "--index", f"default={tool.served.url}")
    for _ in range(2):
        done = locked(tool, output, *twice, env={"TMPDIR": str(temp)})
        assert done.returncode == 0 and AHEAD not in done.stderr, done.stderr
    assert not any(secret.encode() in p.read_bytes() for p in cached_files())
    assert not leftovers(temp)
