"""pack.py packed each carried file with its own permission bits, set-user-ID, set-group-ID, sticky and group or world
write included, owned by root in the archive: a host unarchiving as root (upgrade.yml's unarchive, become) made a
set-user-ID root file, or a root-owned file any user could rewrite before create copied it into the venv (a carried
sitecustomize.py). Now no member is more than rwxr-xr-x, whatever the source's mode or the MODE given."""

from __future__ import annotations

import stat
import tarfile
from pathlib import Path

from test_ansible_pack import pack


def test_no_member_carries_special_bits_or_group_and_world_write(tmp_path: Path) -> None:
    sources = {"setuid.sh": 0o4755, "writable.py": 0o666, "sticky-dir-like": 0o3777, "plain.py": 0o640}
    members = []
    for name, mode in sources.items():
        (tmp_path / name).write_text("x\n")
        (tmp_path / name).chmod(mode)
        members.append([str(tmp_path / name), f"files/{name}"])
    (tmp_path / "pylock.x.toml").write_text("lock\n")
    members.append([str(tmp_path / "pylock.x.toml"), "pylock.x.toml", "6777"])
    out = tmp_path / "carry.tar"
    done = pack(out, members)
    assert done.returncode == 0, done.stderr
    with tarfile.open(out) as tar:
        modes = {m.name: stat.S_IMODE(m.mode) for m in tar.getmembers()}
    assert modes == {
        "files/setuid.sh": 0o755,
        "files/writable.py": 0o644,
        "files/sticky-dir-like": 0o755,
        "files/plain.py": 0o640,
        "pylock.x.toml": 0o755,
    }, {k: oct(v) for k, v in modes.items()}
