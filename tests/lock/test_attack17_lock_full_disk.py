"""`lock` on a real full disk (tests/fulldisk.py): the folder of -o full is one line naming the lock, the lock in
place left byte for byte and no temp file beside it; uv's cache full is one line naming it and UV_CACHE_DIR (it read
as pins that cannot be resolved, exit 6; with COLUMNS exported, uv broke its text over lines and the one line kept
"Failed to initialize cache at; failed to write to file", naming nothing); TMPDIR full is no matter, and nothing is
left in it."""

from __future__ import annotations

from pathlib import Path

import fulldisk
import tiny
from test_damage import one_error


def test_lock_on_a_full_disk_names_what_it_could_not_write_and_leaves_the_lock_in_place(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    lock = tmp_path / "disk" / "pylock.tiny.toml"
    tool("lock", "tiny", "-o", str(lock), check=True)
    tiny.profile(tool.profiles, packages='alpha = "==1.0"\nbeta = "==1.0"')  # a lock that changes
    (tmp_path / "disk" / "tmp").mkdir()
    disk = small_disk(tmp_path / "disk")
    before = disk.view(lock).read_bytes()
    disk.fill()

    done = disk.run("lock", "tiny", "-o", str(lock), env=tool.env())
    one_error(
        done, 2, f"cannot write the lock to {lock}: No space left on device", "hint: free space on that disk"
    )
    assert disk.view(lock).read_bytes() == before
    assert sorted(p.name for p in disk.view(lock.parent).iterdir()) == [fulldisk.FILLER, lock.name, "tmp"]

    elsewhere = tmp_path / "pylock.tiny.toml"
    cache = {"UV_CACHE_DIR": str(tmp_path / "disk" / "uv"), "COLUMNS": "80"}  # a terminal's, exported
    done = disk.run("lock", "tiny", "-o", elsewhere, env=tool.env(cache))
    one_error(done, 3, "No space left on device", str(tmp_path / "disk" / "uv"), "UV_CACHE_DIR")
    assert not elsewhere.exists()

    temp = {"TMPDIR": str(tmp_path / "disk" / "tmp")}
    done = disk.run("lock", "tiny", "-o", elsewhere, env=tool.env(temp))
    assert done.returncode == 0, done.stderr
    assert not any(disk.view(tmp_path / "disk" / "tmp").iterdir()), "nothing is left in TMPDIR"
