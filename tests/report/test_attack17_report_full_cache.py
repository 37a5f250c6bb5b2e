"""`report --lock` with provision's cache on a real full disk, then on that disk read-only (tests/fulldisk.py): the
cache is an optimisation, never a reason to fail. A wheel that cannot be kept under $XDG_CACHE_HOME/provision/wheels is
read from a temporary folder instead, with a note; it failed the whole report, exit 3 (`error: No space left on
device`, naming nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import fulldisk
import tiny


def conflict_gate(done) -> dict:
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (target,) = json.loads(done.stdout)["machines"][0]["targets"]
    return next(g for g in target["gates"] if g["id"] == "conflict")


def test_a_full_or_read_only_cache_reads_the_wheel_from_a_temporary_folder_and_keeps_nothing(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = fulldisk.with_big(tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server)))
    lock = tmp_path / "pylock.big.toml"
    tool("lock", "big", "-o", str(lock))
    disk = small_disk(tmp_path / "disk")
    cache = {"XDG_CACHE_HOME": str(tmp_path / "disk" / "cache")}
    disk.fill()

    done = disk.run("report", "--lock", str(lock), "--json", env=tool.env(cache))
    assert conflict_gate(done)["reason"] == "the 1 wheels share no path", "big's RECORD was read"
    assert "cannot be kept" in done.stderr and str(tmp_path / "disk" / "cache") in done.stderr
    kept = disk.view(tmp_path / "disk" / "cache" / "provision" / "wheels")
    assert not any(kept.iterdir()), "nothing half-written is left in the cache"

    disk.unfill()
    disk.read_only()
    done = disk.run("report", "--lock", str(lock), "--json", env=tool.env(cache))
    assert conflict_gate(done)["status"] == "pass" and "Read-only file system" in done.stderr
