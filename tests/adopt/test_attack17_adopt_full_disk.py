"""`adopt` on a real full disk (tests/fulldisk.py): one line naming the home and the file, exit 7 as any home that
cannot be written, and nothing registered: the half-made build folder (its link to the venv) was left, exit 3 with no
file named, and the same adopt again within that second read `File exists`."""

from __future__ import annotations

from pathlib import Path

import fulldisk
from test_adopt import Setup
from test_damage import one_error


def test_adopt_on_a_full_home_registers_nothing_and_adopts_once_there_is_room(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tool.create("tiny", "--no-checks")
    setup = Setup(tmp_path, provision_bin)
    setup.build(tool.served.url, "alpha==1.0")
    disk = small_disk(tmp_path / "disk")
    home = disk.view(tool.home)
    before = fulldisk.tree(home)
    disk.fill()

    adopt = ("adopt", "old", str(setup.venv), "--no-lock")
    done = disk.run(*adopt, env=tool.env())
    one_error(
        done, 7, f"cannot register old in {tool.home}: No space left on device", "env.json", "free space"
    )
    assert fulldisk.tree(home) == before and (setup.venv / "bin" / "python").exists()
    disk.unfill()
    done = disk.run(*adopt, env=tool.env())
    assert done.returncode == 0, done.stderr
    assert "old" in [link.name for link in (home / "envs").iterdir()]


def test_a_lock_that_cannot_be_written_leaves_the_venv_adopted_and_says_how_to_lock_it(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    """adopt's promise (envs/adopted.py): a lock that cannot be written leaves the venv registered all the same. On a
    real full disk it was exit 3, `No space left on device: .../pylock.adopted.toml`, the name registered all the same,
    and the adopt the error asked for again refused: the name exists."""
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tool.create("tiny", "--no-checks")
    setup = Setup(tmp_path, provision_bin)
    setup.build(tool.served.url, "alpha==1.0")
    disk = small_disk(tmp_path / "disk")
    disk.fill(leave=4 << 10)  # env.json, a page, fits; the lock does not

    done = disk.run("adopt", "old", str(setup.venv), env=tool.env())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (
        "not locked: cannot write old's lock in" in done.stdout and "No space left on device" in done.stdout
    )
    assert "provision lock --env old" in done.stdout
    disk.unfill()
    done = disk.run("lock", "--env", "old", env=tool.env())
    assert done.returncode == 0, done.stderr
