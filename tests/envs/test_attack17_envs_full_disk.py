"""switch, rollback, remove and gc on a real full disk (tests/fulldisk.py), then on that disk read-only: switch and
rollback cannot write state.json and change nothing, in one line naming it; `remove`, the way to free room, removes
(it stopped when the pid could not be written into the build it set aside, after its name was gone: exit 7 and a
build left for gc)."""

from __future__ import annotations

import json
import os
import time
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


def test_gc_cache_on_a_read_only_then_full_cache_says_what_it_removed(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    """On a read-only cache nothing can be removed, and gc --cache says so: it counted every wheel it meant to remove as
    removed, its size freed, and an old entry of scans/, records/, ... that it could not remove was exit 3. On a full
    one it removes (deleting needs no room)."""
    tool = fulldisk.with_big(fulldisk.tool_on(tmp_path, provision_bin, index_server))
    lock = tmp_path / "pylock.big.toml"
    cache = tmp_path / "disk" / "cache"
    tool("lock", "big", "-o", str(lock), check=True)
    tool("report", "--lock", str(lock), env={"XDG_CACHE_HOME": str(cache)}, check=True)  # big's wheel kept
    lock.unlink()  # no lock names it now: gc --cache removes it
    old = time.time() - 40 * 86400  # and an entry not used for 40 days
    (entry,) = (cache / "provision" / "records").iterdir()
    os.utime(entry, (old, old))
    disk = small_disk(tmp_path / "disk")
    disk.fill()

    def gc() -> dict[str, dict]:
        done = disk.run("gc", "--cache", "--json", env=tool.env({"XDG_CACHE_HOME": str(cache)}))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return {c["name"]: c for c in json.loads(done.stdout)["caches"]}

    disk.read_only()
    said = gc()
    assert (said["wheels"]["removed"], said["wheels"]["entries"]) == (0, 1)
    assert (said["records"]["removed"], said["records"]["entries"]) == (0, 1)
    disk.read_only(False)
    said = gc()
    assert (said["wheels"]["removed"], said["wheels"]["entries"]) == (1, 0)
    assert (said["records"]["removed"], said["records"]["entries"]) == (1, 0)
    assert not any(disk.view(cache / "provision" / "wheels").iterdir())
