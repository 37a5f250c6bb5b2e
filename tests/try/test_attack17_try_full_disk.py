"""`try --file` whose workload fills the disk (a real one, tests/fulldisk.py): the trial's files cannot be put back
until there is room, and the one line says so, naming the venv and what puts them back; the next command on the
environment, once there is room, does. It said `error: No space left on device` and nothing of the venv it left
changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fulldisk
import tiny
from test_damage import one_error

from provision.envs import drift

# the baseline: 100 tok/s, alpha.FACTOR times; with TRY_FILL it first fills the disk that file is on, as a workload
# writing its logs or a cache might
PROGRAM = """
import os, alpha
fill = os.environ.get("TRY_FILL")
if fill:
    with open(fill, "ab") as hog:
        try:
            while True:
                hog.write(bytes(65536))
                hog.flush()
        except OSError:
            pass
print(f"decode {100 * getattr(alpha, 'FACTOR', 1.0):.3f} tok/s")
"""


def test_a_trial_that_fills_the_disk_says_its_files_stay_until_there_is_room(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tiny.profile(
        tool.profiles,
        extra=f'[baseline]\ncommand = ["python", "-c", {json.dumps(PROGRAM)}]\n'
        'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n',
    )
    tool.create("tiny", "--no-checks")
    tool("baseline", "tiny", "--runs", "3", check=True)
    site = drift.site_packages(tiny.build_of(tool) / "venv")
    patched = tmp_path / "patched.py"
    patched.write_text("FACTOR = 1.1\n")
    disk = small_disk(tmp_path / "disk")
    module = disk.view(site / "alpha" / "__init__.py")
    original = module.read_text()

    hog = tmp_path / "disk" / "hog"
    done = disk.run(
        "try",
        "tiny",
        "fills",
        "--env",
        f"TRY_FILL={hog}",
        "--file",
        f"alpha/__init__.py={patched}",
        "--runs",
        "3",
        env=tool.env(),
    )
    one_error(done, 7, f"cannot put the trial's files back in {site.parent.parent.parent}", "No space left")
    assert "free space on that disk, then run any command on tiny" in done.stderr
    assert module.read_text() == patched.read_text(), "the trial's file is still there, as said"

    os.unlink(disk.view(hog))
    done = disk.run("check", "tiny", "--only", "drift", env=tool.env())
    assert done.returncode == 0 and "put back 1 file(s)" in done.stderr, done.stderr
    assert module.read_text() == original
