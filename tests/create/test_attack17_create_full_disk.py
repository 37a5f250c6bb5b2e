"""`create` on a real full disk (tests/fulldisk.py): uv filling the home's disk, or its own cache's, as it installs is
one line naming the file and saying to free space (uv's text once read as an unresolvable pin, exit 6, "run again
with -v"), as are the copy of the lock given into the build (it named the lock given, as if that could not be
written) and the lock made in it (`No space left on device`, naming nothing); the active environment, state.json and
the builds stay as they were, and the same create succeeds once there is room."""

from __future__ import annotations

import os
from pathlib import Path

import fulldisk
import pytest
import tiny
from test_damage import one_error


@pytest.mark.parametrize(
    ("leave", "given", "code", "words"),
    [
        (
            4 << 10,
            True,
            7,
            ("cannot copy the lock into the build in", "pylock.toml"),
        ),  # its .building is written
        (4 << 10, False, 7, ("cannot lock big in",)),  # uv's input, in the build
        (256 << 10, True, 3, ("blob.bin",)),  # the venv is made; big's 1 MiB is not
    ],
    ids=["lock-copy", "locking", "uv-install"],
)
def test_a_build_that_fills_the_homes_disk_leaves_the_home_as_it_was(
    tmp_path: Path,
    provision_bin: str,
    index_server,
    small_disk,
    leave: int,
    given: bool,
    code: int,
    words: tuple[str, ...],
) -> None:
    tool = fulldisk.with_big(fulldisk.tool_on(tmp_path, provision_bin, index_server))
    tool.create("tiny", "--name", "a", "--no-checks")
    tool.create("tiny", "--name", "b", "--no-checks")
    lock = tmp_path / "pylock.big.toml"
    tool("lock", "big", "-o", str(lock))
    disk = small_disk(tmp_path / "disk")
    home = disk.view(tool.home)
    state, before = (home / "state.json").read_text(), fulldisk.tree(home)

    disk.fill(leave)
    create = ("create", "big", *(("--lock", str(lock)) if given else ()), "--python", tiny.PY, "--no-checks")
    done = disk.run(*create, env=tool.env())
    one_error(done, code, "No space left on device", *words, "hint: free space on that disk")
    assert os.readlink(home / "active") == "envs/b" and (home / "state.json").read_text() == state
    assert fulldisk.tree(home) == before, "no half build is left"

    disk.unfill()
    done = disk.run(*create, env=tool.env())
    assert done.returncode == 0, done.stderr
    assert os.readlink(home / "active") == "envs/big"


def test_uvs_cache_filling_its_disk_as_it_downloads_names_uv_cache_dir(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = fulldisk.with_big(tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server)))
    tool.create("tiny", "--no-checks")
    lock = tmp_path / "pylock.big.toml"
    tool("lock", "big", "-o", str(lock))
    builds = tool.builds()
    disk = small_disk(tmp_path / "disk")
    cache = {"UV_CACHE_DIR": str(tmp_path / "disk" / "uv")}

    disk.fill(leave=256 << 10)
    create = ("create", "big", "--lock", str(lock), "--python", tiny.PY, "--no-checks")
    done = disk.run(*create, env=tool.env(cache))
    one_error(done, 3, "No space left on device", str(tmp_path / "disk" / "uv"), "UV_CACHE_DIR")
    assert tool.builds() == builds and os.readlink(tool.home / "active") == "envs/tiny"

    disk.unfill()
    assert disk.run(*create, env=tool.env(cache)).returncode == 0


def test_a_build_named_but_not_made_active_for_want_of_room_says_so(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    """The last step of create, making the new build active, cannot be written (the disk's last inode taken: a link
    and a staged state.json need one each): the build is kept, named and checked, and the line says how to make it
    active. It said `nothing active was changed`, and `run it again`, which refuses the name it had just made."""
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tool.create("tiny", "--name", "a", "--no-checks")
    disk = small_disk(tmp_path / "disk", inodes=3000)
    home = disk.view(tool.home)
    state = (home / "state.json").read_text()
    create = ("create", "tiny", "--python", tiny.PY, "--no-checks", "--name")
    before = disk.inodes_free()
    assert disk.run(*create, "k", env=tool.env()).returncode == 0
    needed = before - disk.inodes_free()  # what a build keeps; one more is in use while active is swapped
    for args in (("switch", "a"), ("remove", "k")):
        assert disk.run(*args, env=tool.env()).returncode == 0
    state = (home / "state.json").read_text()

    disk.fill_inodes(leave=needed + 1)
    done = disk.run(*create, "c", env=tool.env())
    one_error(done, 7, "cannot point active at envs/c", "No space left on device", "provision switch c")
    assert os.readlink(home / "active") == "envs/a" and (home / "state.json").read_text() == state
    assert os.readlink(home / "envs" / "c").startswith("../builds/c-"), "kept: built, checked and named"
    disk.unfill()
    assert disk.run("switch", "c", env=tool.env()).returncode == 0
