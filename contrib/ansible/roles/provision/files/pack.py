"""Pack the files `provision create` needs beside it on each host into one tar archive (upgrade.yml's first play,
run by the controller's own Python, so that no tar flag differs between GNU and BSD tar).

    python pack.py OUT.tar '[[SOURCE, NAME_IN_ARCHIVE, MODE_OCTAL?], ...]'

Each member is a regular file (a pipe or a device is refused before it is opened: opening a pipe waits for a writer),
owned by root in the archive (a host extracting as root owns them as root, any other user as itself), with MODE when
given, else its own permission bits, never more than rwxr-xr-x (no set-user-ID, set-group-ID or sticky bit, no
group or world write: root on a host would extract them as they are). A member list of another shape (not a list, an entry
not [SOURCE, NAME] or [SOURCE, NAME, MODE], a part not a non-empty string, a mode not octal) is one line, as every
refusal here is. Two members of one name are refused (on a host the second would overwrite the
first: a profile named as its lock). OUT is replaced whole or not at all, and two packs at once never share a
temporary file."""

from __future__ import annotations

import json
import os
import stat
import sys
import tarfile
import tempfile

# Of a member's mode, what a host may get: root extracts an archive's set-user-ID, set-group-ID and sticky bits and
# its group and world write bits as they are, on files it owns (a carried sitecustomize.py any user could rewrite).
SAFE_BITS = 0o755


def checked(members: object) -> list[list[str]]:
    """`members` when it is a list of [SOURCE, NAME] or [SOURCE, NAME, MODE_OCTAL] of non-empty strings (no NUL byte,
    MODE of one to four octal digits); else a ValueError that says which entry is wrong and how."""
    if not isinstance(members, list):
        raise ValueError(
            f"the member list is {type(members).__name__}, expected [[SOURCE, NAME, MODE_OCTAL?], ...]"
        )
    for position, member in enumerate(members):
        shape = (
            isinstance(member, list)
            and len(member) in (2, 3)
            and all(isinstance(part, str) and part and "\0" not in part for part in member)
        )
        if not shape:
            raise ValueError(
                f"member {position} is {json.dumps(member)[:120]}, expected [SOURCE, NAME, MODE_OCTAL?] of "
                "non-empty strings"
            )
        if len(member) == 3 and not (
            member[2].isascii()
            and member[2].isdigit()
            and len(member[2]) <= 4
            and set(member[2]) <= set("01234567")
        ):
            raise ValueError(
                f"member {position}: mode {member[2][:20]!r} is not one to four octal digits, such as 644"
            )
    return members


def pack(out: str, members: list[list[str]]) -> None:
    members = checked(members)
    names = [member[1] for member in members]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(
            f"two files would land at {', '.join(twice)} on each host; name the environment (or the profile) "
            "so that its lock, the profile and the files it carries differ"
        )
    fd, part = tempfile.mkstemp(
        prefix=f"{os.path.basename(out)}.", suffix=".part", dir=os.path.dirname(out) or "."
    )
    os.close(fd)
    try:
        with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as tar:
            for source, name, *mode in members:
                with open(source, "rb", opener=_regular) as data:
                    info = tar.gettarinfo(arcname=name, fileobj=data)
                    info.uid = info.gid = 0
                    info.uname = info.gname = "root"
                    info.mode = (int(mode[0], 8) if mode else info.mode) & SAFE_BITS
                    tar.addfile(info, data)
        os.replace(part, out)
    except BaseException:
        if os.path.lexists(part):
            os.unlink(part)
        raise


def _regular(path: str, flags: int) -> int:
    """Open without waiting on a pipe, and only a regular file (a link to one is followed, as a copy would)."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path}: not a regular file; the lock and a profile's files are")
    return fd


if __name__ == "__main__":
    try:
        if len(sys.argv) != 3:
            raise ValueError("usage: python pack.py OUT.tar '[[SOURCE, NAME_IN_ARCHIVE, MODE_OCTAL?], ...]'")
        pack(sys.argv[1], json.loads(sys.argv[2]))
    # JSONDecodeError is a ValueError
    except (
        OSError,
        ValueError,
        RecursionError,
        tarfile.TarError,
    ) as error:
        sys.exit(f"pack.py: {error}")
