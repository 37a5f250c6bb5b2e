"""roles/provision/files/pack.py, which upgrade.yml's first play runs on the controller to pack the lock, the profile
and the files it carries into the one archive each host unarchives: the layout and modes it promises, and what it
refuses (a pipe is never waited on, a missing file is one line) without leaving a half-written archive."""

from __future__ import annotations

import hashlib
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
    return subprocess.run(
        [sys.executable, str(PACK), str(out), json.dumps(members)], capture_output=True, text=True, timeout=30
    )


def test_members_keep_their_places_the_given_modes_and_root_as_owner(tmp_path: Path) -> None:
    (tmp_path / "patches" / "deep").mkdir(parents=True)
    lock, profile = tmp_path / "pylock.x.toml", tmp_path / "x.toml"
    lock.write_text("lock\n")
    lock.chmod(0o600)
    profile.write_text("profile\n")
    script = tmp_path / "patches" / "deep" / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    # a link inside the profile's folder: its file is packed
    (tmp_path / "patches" / "linked.py").symlink_to(script)
    out = tmp_path / "carry.tar"
    done = pack(
        out,
        [
            [str(lock), "pylock.x.toml", "644"],
            [str(profile), "x.toml", "644"],
            [str(script), "patches/deep/run.sh"],
            [str(tmp_path / "patches" / "linked.py"), "patches/linked.py"],
        ],
    )
    assert done.returncode == 0, done.stderr
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert list(members) == ["pylock.x.toml", "x.toml", "patches/deep/run.sh", "patches/linked.py"]
        assert all(
            m.isreg() and (m.uid, m.gid, m.uname, m.gname) == (0, 0, "root", "root") for m in members.values()
        )
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
        assert out.read_bytes() == before and not list(tmp_path.glob("carry.tar.*"))  # no temporary file left


def test_two_members_of_one_name_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A profile pylock.x.toml rolled out as environment x: its lock is pylock.x.toml too, and on the host the profile
    would have overwritten the lock (a copy per file did so, and create then read a profile as a lock)."""
    profile = tmp_path / "pylock.x.toml"
    profile.write_text("profile\n")
    lock = tmp_path / "fleet" / "pylock.x.toml"
    lock.parent.mkdir()
    lock.write_text("lock\n")
    out = tmp_path / "fleet" / "carry.x.tar"
    done = pack(out, [[str(lock), "pylock.x.toml", "644"], [str(profile), "pylock.x.toml", "644"]])
    assert done.returncode == 1 and "two files would land at pylock.x.toml on each host" in done.stderr, (
        done.stderr
    )
    assert len(done.stderr.strip().splitlines()) == 1 and sorted(p.name for p in lock.parent.iterdir()) == [
        "pylock.x.toml"
    ]


def test_two_packs_at_once_each_write_their_own_and_the_archive_is_one_of_them_whole(tmp_path: Path) -> None:
    """Two rollouts of one environment started together (a second terminal): each packs into a temporary file of its
    own, and the archive left is one of the two, whole (a shared `OUT.part` let them write into one file)."""
    out = tmp_path / "carry.x.tar"
    sources = []
    for i in range(2):
        source = tmp_path / f"pylock-{i}.toml"
        source.write_bytes(f"lock {i}\n".encode())
        os.truncate(source, 64 << 20)  # 64 MB (sparse): each pack writes for long enough that the two overlap
        sources.append(source)
    started = [
        subprocess.Popen(
            [sys.executable, str(PACK), str(out), json.dumps([[str(s), "pylock.x.toml", "644"]])],
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in sources
    ]
    assert [p.wait(timeout=60) for p in started] == [0, 0], [p.stderr.read() for p in started if p.stderr]
    with tarfile.open(out) as tar:
        (member,) = tar.getmembers()
        packed = hashlib.sha256(tar.extractfile(member).read()).digest()  # type: ignore[union-attr]
        assert packed in {hashlib.sha256(s.read_bytes()).digest() for s in sources}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["carry.x.tar", "pylock-0.toml", "pylock-1.toml"]


def test_a_malformed_member_list_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    """A member list of another shape ended in a Python traceback (TypeError, IndexError), and `{}` packed an empty
    archive; each is now one line naming what is wrong, and the archive before stays whole."""
    lock = tmp_path / "pylock.x.toml"
    lock.write_text("lock\n")
    out = tmp_path / "carry.tar"
    assert pack(out, [[str(lock), "pylock.x.toml", "644"]]).returncode == 0
    before = out.read_bytes()
    for members, said in (
        ({}, "the member list is dict"),
        ([1], "member 0 is 1"),
        ([[str(lock)]], "member 0 is ["),
        ([[str(lock), 2]], "member 0 is ["),
        ([[str(lock), "x", "644", "extra"]], "member 0 is ["),
        ([[str(lock), ""]], "non-empty strings"),
        ([[str(lock), "x\0y"]], "member 0 is ["),
        ([[str(lock), "x", "9x"]], "mode '9x' is not one to four octal digits"),
        ([[str(lock), "x", "0o644"]], "not one to four octal digits"),
    ):
        done = subprocess.run(
            [sys.executable, str(PACK), str(out), json.dumps(members)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, (members, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, (members, done.stderr)
        assert out.read_bytes() == before and not list(tmp_path.glob("carry.tar.*"))
    for text in ("not json", "[" * 100_000):
        done = subprocess.run(
            [sys.executable, str(PACK), str(out), text], capture_output=True, text=True, timeout=30
        )
        assert (
            done.returncode == 1
            and "Traceback" not in done.stderr
            and len(done.stderr.strip().splitlines()) == 1
        )
