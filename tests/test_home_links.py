"""Lock files a damaged or hostile home holds as links: HOME/.lock and BUILD/.env.json.lock are opened without following
a link, so no command makes (or writes its pid into) a file wherever the link leads; one error naming it, exit 7."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiny


@pytest.fixture
def tool(tmp_path: Path, provision_bin: str, index_server) -> tiny.Tool:
    return tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))


COMMANDS = [("check", "tiny", "--only", "drift"), ("switch", "tiny"), ("restore", "tiny", "--no-checks"), ("gc",)]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_home_lock_as_a_link_out_is_never_followed(tool: tiny.Tool, tmp_path: Path, command: tuple[str, ...]) -> None:
    outside = tmp_path / "outside" / "made-by-provision"
    outside.parent.mkdir()
    (tool.home / ".lock").unlink(missing_ok=True)
    (tool.home / ".lock").symlink_to(outside)
    done = tool(*command, check=False)
    assert not outside.exists(), f"{command[0]} made a file through HOME/.lock"
    if command[0] != "check":  # check takes HOME's lock only to store its results
        assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
        assert f"{tool.home / '.lock'} is not a file provision wrote" in done.stderr and "\nhint: remove it" in done.stderr


def test_env_json_lock_as_a_link_out_is_never_followed(tool: tiny.Tool, tmp_path: Path) -> None:
    (build,) = (tool.home / "builds").iterdir()
    outside = tmp_path / "outside-file"
    (build / ".env.json.lock").unlink(missing_ok=True)
    (build / ".env.json.lock").symlink_to(outside)
    done = tool("check", "tiny", "--only", "drift", check=False)
    assert not outside.exists(), "check made a file through BUILD/.env.json.lock"
    assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
    assert f"{build / '.env.json.lock'} is not a file provision wrote" in done.stderr
