"""roles/provision/files/pack.py, which upgrade.yml's first play runs on the controller to pack the lock, the profile
and the files it carries into the one archive each host unarchives: the layout and modes it promises, and what it
refuses (a pipe is never waited on, a missing file is one line) without leaving a half-written archive."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

from test_ansible import PLAYBOOKS

PACK = PLAYBOOKS / "roles" / "provision" / "files" / "pack.py"


def pack(out: Path, members: list[list[str]]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PACK), str(out), json.dumps(members)], capture_output=True, text=True,
                          timeout=30)


def test_members_keep_their_places_the_given_modes_and_root_as_owner(tmp_path: Path) -> None:
    (tmp_path / "patches" / "deep").mkdir(parents=True)
    lock, profile = tmp_path / "pylock.x.toml", tmp_path / "x.toml"
    lock.write_text("lock\n")
    lock.chmod(0o600)
    profile.write_text("profile\n")
    script = tmp_path / "patches" / "deep" / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    (tmp_path / "patches" / "linked.py").symlink_to(script)  # a link inside the profile's folder: its file is packed
    out = tmp_path / "carry.tar"
    done = pack(out, [[str(lock), "pylock.x.toml", "644"], [str(profile), "x.toml", "644"],
                      [str(script), "patches/deep/run.sh"], [str(tmp_path / "patches" / "linked.py"), "patches/linked.py"]])
    assert done.returncode == 0, done.stderr
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert list(members) == ["pylock.x.toml", "x.toml", "patches/deep/run.sh", "patches/linked.py"]
        assert all(m.isreg() and (m.uid, m.gid, m.uname, m.gname) == (0, 0, "root", "root") for m in members.values())
        assert [stat.S_IMODE(m.mode) for m in members.values()] == [0o644, 0o644, 0o750, 0o750]
        assert tar.extractfile("patches/linked.py").read() == b"#!/bin/sh\n"  # type: ignore[union-attr]
        assert tar.extractfile("pylock.x.toml").read() == b"lock\n"  # type: ignore[union-attr]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["carry.tar", "patches", "pylock.x.toml", "x.toml"]


def test_a_pipe_or_a_missing_file_is_one_line_and_the_archive_before_stays_whole(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.x.toml"
    lock.write_text("lock\n")
    out = tmp_path / "carry.tar"
    assert pack(out, [[str(lock), "pylock.x.toml", "644"]]).returncode == 0
    before = out.read_bytes()
    fifo = tmp_path / "patch.py"
    os.mkfifo(fifo)  # nobody writes to it: opening it to read would wait for ever
    for source, said in ((fifo, "not a regular file"), (tmp_path / "gone.py", "No such file")):
        done = pack(out, [[str(lock), "pylock.x.toml", "644"], [str(source), "patch.py"]])
        assert done.returncode == 1 and said in done.stderr and str(source) in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert out.read_bytes() == before and not Path(f"{out}.part").exists()
