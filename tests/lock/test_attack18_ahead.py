"""The uv a lock made again starts ahead (stacks/ahead), attacked: a record holds nothing provision shows as ****
wherever it would come from (the command line too, not only uv's environment)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import launch
import pytest
import tiny
from test_ahead import AHEAD, ENDED, leftovers, locked, versions
from test_sources import git, source_tree


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


def test_a_profile_edited_through_a_link_starts_nothing_ahead(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    """A profile kept as a link (to a dotfiles or project repository) is edited at its target: the link's own inode and
    times never change. Its record was taken as it was, and the uv of the profile before the edit started ahead (to
    be ended at the claim, having asked the index for a package the profile no longer holds)."""
    kept = tmp_path / "repository"
    kept.mkdir()
    target = tiny.profile(kept)
    link = tool.profiles / "tiny.toml"
    link.unlink()
    link.symlink_to(target)
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    assert AHEAD in locked(tool, output, env=env).stderr
    tiny.profile(kept, packages='beta = "==1.0"')
    done = locked(tool, output, env=env)
    assert done.returncode == 0 and AHEAD not in done.stderr and ENDED not in done.stderr, done.stderr
    assert versions(output) == {"beta": "1.0"} and not leftovers(temp)


@pytest.mark.parametrize("closed", ["<&- >&-", "<&- >&- 2>&-"])
def test_a_lock_run_with_its_output_closed_takes_the_uv_started_ahead_and_ends_well(
    tool: tiny.Tool, tmp_path: Path, temp: Path, closed: str
) -> None:
    """stdout closed by the shell (a job that wants no output), stdin too: the pipe made for uv's stdout took number
    1; the command line then put /dev/null there, as it does for any closed stream (cli/main._closed_streams), and
    closing uv's pipe closed the command's own stdout: the lock was written, and the command ended in exit 3, `cannot
    write the output: Bad file descriptor`."""
    output = tmp_path / "pylock.tiny.toml"
    command = shlex.join(launch.argv(("lock", "tiny", "-o", str(output), "-v")))
    env = launch.environment(tool.env({"TMPDIR": str(temp)}))
    runs = [
        subprocess.run(["sh", "-c", f"exec {command} {closed}"], capture_output=True, text=True, env=env)
        for _ in range(2)
    ]
    assert [run.returncode for run in runs] == [0, 0], runs[1].stderr
    assert closed.endswith("2>&-") or AHEAD in runs[1].stderr, runs[1].stderr
    assert versions(output) == {"alpha": "1.0"} and not leftovers(temp)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_source_whose_url_provision_shows_as_stars_is_never_remembered(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    """uv's pyproject names the profile's git sources (their URLs without user info): one with a token-like segment
    in its path was kept in the record's work files, where only uv's environment was looked at."""
    token = "Tok3nAheadRepo0123456789"
    repo = source_tree(tmp_path / token / "repo", "fromgit", "1.0", "REV = 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    tiny.profile(
        tool.profiles, packages=f'alpha = "==1.0"\nfromgit = {{ git = "file://{repo}", rev = "main" }}'
    )
    output = tmp_path / "pylock.tiny.toml"
    for _ in range(2):
        done = locked(tool, output, env={"TMPDIR": str(temp)})
        assert done.returncode == 0 and AHEAD not in done.stderr, done.stderr
    assert not any(token.encode() in p.read_bytes() for p in cached_files())
