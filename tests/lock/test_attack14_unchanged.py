"""Attack on `lock` made again leaving the lock in place (`unchanged`): hostile edits of the lock's text after its
packages (CRLF, a BOM, tables redefined or added, strings written another way, trailing whitespace) and odd files at -o.
Whatever `lock` decides, the file at -o afterwards means exactly what uv resolved (its `created` time aside), and a lock
left unchanged reads as valid. Real uv, the tests' own index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_lock_again import _lock, _served

from provision import toml
from provision.stacks import lockfile


def _meaning(path: Path) -> dict[str, object]:
    raw = toml.loads(path.read_text(encoding="utf-8-sig"))
    raw["tool"]["provision"].pop("created")
    return raw


_EDITS = {
    "crlf-tool": lambda head, rest: head + rest.replace("\n", "\r\n"),
    "bom": lambda head, rest: "\ufeff" + head + rest,
    "other-tool-table": lambda head, rest: head + rest + "\n[tool.other]\nx = 1\n",
    "tool-table-first": lambda head, rest: head + "[tool]\n" + rest,
    "second-tool-key-dotted": lambda head, rest: (
        head + rest.replace("[tool.provision]\n", "[tool]\nz.y = 1\n\n[tool.provision]\n")
    ),
    "literal-strings": lambda head, rest: head + rest.replace('profile = "mine"', "profile = 'mine'"),
    "unicode-escape": lambda head, rest: head + rest.replace('profile = "mine"', 'profile = "\\u006dine"'),
    "profile-changed-by-escape": lambda head, rest: (
        head + rest.replace('profile = "mine"', 'profile = "\\u006dine2"')
    ),
    "trailing-space": lambda head, rest: head + rest + "  \n# a comment\n",
    "array-of-tables-after-tool": lambda head, rest: (
        head + rest + '\n[[packages]]\nname = "evil"\nversion = "1"\n'
    ),
    "wheels-appended-after-tool": lambda head, rest: (
        head + rest + '\n[[packages.wheels]]\nurl = "http://x/y.whl"\n'
    ),
    "created-not-string": lambda head, rest: (
        head + rest.replace('created = "', 'created = 1979-05-27T07:32:00Z\nx_created = "')
    ),
}


@pytest.mark.parametrize("edit", sorted(_EDITS))
def test_a_hostile_edit_after_the_packages_never_survives_in_meaning(
    index_server, tmp_path: Path, edit: str
) -> None:
    served = _served(index_server)
    lockpath = tmp_path / "pylock.mine.toml"
    assert _lock(tmp_path, served).returncode == 0
    meant = _meaning(lockpath)
    text = lockpath.read_text()
    at = text.index("\n[tool")
    lockpath.write_bytes(_EDITS[edit](text[: at + 1], text[at + 1 :]).encode())
    done = _lock(tmp_path, served, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert _meaning(lockpath) == meant  # kept or written again, it means what uv resolved
    if result["unchanged"]:
        lockfile.read(lockpath)  # and a lock left as it is reads as valid


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_an_odd_file_at_o_is_never_left_as_the_lock(index_server, tmp_path: Path, kind: str) -> None:
    served = _served(index_server)
    lockpath = tmp_path / "pylock.mine.toml"
    assert _lock(tmp_path, served).returncode == 0
    kept = tmp_path / "elsewhere.toml"
    lockpath.rename(kept)
    if kind == "symlink":
        lockpath.symlink_to(kept)
    else:
        os.mkfifo(lockpath)
    done = _lock(tmp_path, served, check=False)
    if done.returncode == 0:
        assert json.loads(done.stdout)["unchanged"] is False
        assert lockpath.is_file() and not lockpath.is_symlink()
        lockfile.read(lockpath)
