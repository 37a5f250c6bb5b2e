"""A lock made again (issue 41) over a lock in the way that provision reads but uv does not take as its preferences (a
hash cut short, a size below zero: edited by hand), a link, a file past a lock's size: the lock is made, as over any
lock that is no preference, never an error that names no file (the shapes the reads ahead did not expect are in
test_lock_again's damaged locks)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_lock_again import _lock, _served, _versions


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: re.sub(r'sha256 = "[0-9a-f]{64}"', 'sha256 = "00"', text, count=1),
        lambda text: text.replace("wheels = [{ url", "wheels = [{ size = -1, url", 1),
    ],
    ids=["short-hash", "negative-size"],
)
def test_a_lock_uv_refuses_as_preferences_is_replaced(index_server, tmp_path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    served = _served(index_server)
    _lock(tmp_path, served)
    path = tmp_path / "pylock.mine.toml"
    edited = edit(path.read_text())
    assert edited != path.read_text()
    path.write_text(edited)
    done = _lock(tmp_path, served, check=False)
    assert done.returncode == 0, done.stderr
    assert _versions(done) == {"app": "1.0", "lib": "1.0"} and json.loads(done.stdout)["preferred"] is None
    assert path.read_text() != edited


def test_a_link_in_the_way_is_no_preference_and_what_it_names_is_never_shown(
    index_server, tmp_path: Path
) -> None:
    """A lockfile committed as a link to a file of secrets (lockfiles/pylock.mine.toml -> ~/.netrc): handed to uv as its
    preferences, uv's parse error quoted the secret's line, which -v prints (a CI log). A link is no preference."""
    import os

    served = _served(index_server)
    secret = tmp_path / "netrc"
    secret.write_text("machine example.org login alice password hunter2\n")
    os.symlink(secret, tmp_path / "pylock.mine.toml")
    done = _lock(tmp_path, served, "-v", check=False)
    assert done.returncode == 0, done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert json.loads(done.stdout)["preferred"] is None
    # the link replaced, not it
    assert secret.read_text() == "machine example.org login alice password hunter2\n"
    assert not (tmp_path / "pylock.mine.toml").is_symlink()


def test_a_file_past_a_locks_size_in_the_way_is_no_preference(index_server, tmp_path: Path) -> None:
    """A file past lockfile.MAX_BYTES is no lock: its first 64 MiB were handed to uv, which failed on them, and uv ran
    again without them."""
    from provision.stacks import lockfile

    served = _served(index_server)
    (tmp_path / "pylock.mine.toml").write_bytes(b"#" * (lockfile.MAX_BYTES + 1))
    done = _lock(tmp_path, served, "-v", check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["preferred"] is None
    assert len(re.findall(r"^\$ \S*uv pip compile", done.stderr, re.M)) == 1, done.stderr
