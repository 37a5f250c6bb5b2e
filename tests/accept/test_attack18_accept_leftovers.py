"""A failed `accept` leaves the build folder as it was: the copies it kept (BUILD/accepted/<sha256>) before env.json
could list them, and the `accepted/` folder it made for them, go again. A full home left an empty `accepted/` (or
copies that nothing lists, which nothing would ever read) behind."""

from __future__ import annotations

import json
from pathlib import Path

import fulldisk
import pytest
import tiny

from provision.envs import drift

# the locks accept takes (the build's restore lock, env.json's): empty files beside env.json, kept as every lock file
# of the home is, so that one who waits on one never waits on a file removed under it; and the drift scan's cache of
# the venv's hashes, which any drift check writes (check --only drift), true whatever accept did next
LOCKS_AND_CACHE = {".restoring", ".env.json.lock", "drift-cache.json"}


@pytest.mark.parametrize("pages", range(5))
def test_accept_stopped_by_a_full_home_leaves_the_build_as_it_was(
    tmp_path: Path, provision_bin: str, index_server, small_disk, pages: int
) -> None:
    """The disk filled with `pages` of 4 KiB left: the first copy, the second or env.json is the write that fails."""
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tool.create("tiny", "--no-checks")
    site = drift.site_packages(tiny.build_of(tool) / "venv")
    (site / "sitecustomize.py").write_text("import os\n")
    (site / "usercustomize.py").write_text("import sys\n")
    disk = small_disk(tmp_path / "disk")
    build = disk.view(tiny.build_of(tool))
    record = (build / "env.json").read_text()
    before = fulldisk.tree(build)
    disk.fill(leave=pages << 12)

    done = disk.run("accept", "tiny", "sitecustomize.py", "usercustomize.py", env=tool.env())
    made = fulldisk.tree(build) - before
    if done.returncode == 0:
        assert len(json.loads((build / "env.json").read_text())["accepted"]) == 2
        assert {"accepted"} <= made, sorted(made)
    else:
        assert done.returncode == 3 and "No space left on device" in done.stderr, done.stderr
        assert (build / "env.json").read_text() == record
        assert made <= LOCKS_AND_CACHE, sorted(made)
