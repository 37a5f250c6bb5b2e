"""switch, rollback, remove and gc on a real full disk (tests/fulldisk.py), then on that disk read-only: switch and
rollback cannot write state.json and change nothing, in one line naming it; `remove`, the way to free room, removes
(it stopped when the pid could not be written into the build it set aside, after its name was gone: exit 7 and a
build left for gc)."""

from __future__ import annotations

import os
from pathlib import Path

import fulldisk
from test_damage import one_error


def test_a_full_home_switches_nothing_and_removes_what_is_asked(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tool.create("tiny", "--name", "a", "--no-checks")
    tool.create("tiny", "--name", "b", "--no-checks")
    tool.create("tiny", "--name", "c", "--no-checks")
    disk = small_disk(tmp_path / "disk")
    home = disk.view(tool.home)
    state = (home / "state.json").read_text()
    disk.fill()

    for args in (("switch", "a"), ("rollback",)):
        one_error(disk.run(*args, env=tool.env()), 7, "cannot write state.json in", "hint: free space")
        assert os.readlink(home / "active") == "envs/c" and (home / "state.json").read_text() == state
    done = disk.run("remove", "a", env=tool.env())
    assert done.returncode == 0 and "removed a" in done.stderr, done.stderr
    assert sorted(p.name.split("-")[0] for p in (home / "builds").iterdir()) == ["b", "c"]
    assert "nothing to clean" in disk.run("gc", env=tool.env()).stderr

    disk.unfill()
    disk.read_only()
    one_error(disk.run("switch", "b", env=tool.env()), 7, "Read-only file system", "make", "writable")
    assert os.readlink(home / "active") == "envs/c" and (home / "state.json").read_text() == state
