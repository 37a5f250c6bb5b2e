"""`accept` on a real full disk (tests/fulldisk.py): one line naming the file it could not write, nothing accepted,
and the same accept succeeds once there is room. The pid written into a lock it takes (here the build's .restoring,
made new) is for one who waits, and the disk being full no reason to stop: it read `error: No space left on device`."""

from __future__ import annotations

import json
from pathlib import Path

import fulldisk
import tiny
from test_damage import one_error

from provision.envs import drift


def test_accept_on_a_full_home_names_the_file_and_accepts_nothing(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tool.create("tiny", "--no-checks")
    (drift.site_packages(tiny.build_of(tool) / "venv") / "sitecustomize.py").write_text("import os\n")
    disk = small_disk(tmp_path / "disk")
    build = disk.view(tiny.build_of(tool))
    record = (build / "env.json").read_text()
    disk.fill()

    done = disk.run("accept", "tiny", "sitecustomize.py", env=tool.env())
    one_error(done, 3, "No space left on device: ", str(tiny.build_of(tool)), "hint: free space on that disk")
    assert (build / "env.json").read_text() == record and not (build / "accepted").exists()
    disk.unfill()
    done = disk.run("accept", "tiny", "sitecustomize.py", env=tool.env())
    assert done.returncode == 0, done.stderr
    assert [k["path"] for k in json.loads((build / "env.json").read_text())["accepted"]] == [
        "sitecustomize.py"
    ]
