"""Reading and writing files a user names, without hanging on what is not a file: a pipe, a socket or a device named
where a file belongs is an OSError naming it, never a read that waits for a writer (or a write for a reader)."""

from __future__ import annotations

import errno
import os
import stat
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path


def open_fd(path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, follow: bool = True) -> int:
    """A descriptor of the regular file at `path`, opened without blocking (and, unless `follow`, not through a link:
    ELOOP); OSError EINVAL for a pipe, a socket or a device, closed again. The one way provision opens such files."""
    fd = os.open(path, flags | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW), 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def open_file(
    path: str | os.PathLike[str],
    flags: int = os.O_RDONLY,
    mode: str = "rb",
    *,
    follow: bool = True,
    errors: str | None = None,
    newline: str | None = None,
) -> IO[Any]:
    """`open_fd(path, flags, follow=follow)` as a file object of `mode` (text modes decode UTF-8, with `errors`)."""
    fd = open_fd(path, flags, follow=follow)
    try:
        if "b" in mode:
            return os.fdopen(fd, mode)
        return os.fdopen(fd, mode, encoding="utf-8", errors=errors, newline=newline)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], limit: int = -1, *, follow: bool = True) -> bytes:
    """The bytes of the regular file at `path` (at most `limit`, all when -1), opened without blocking (and,
    unless `follow`, not through a link)."""
    with open_file(path, follow=follow) as handle:
        data: bytes = handle.read(limit)
        return data


def read_text(
    path: str | os.PathLike[str], limit: int = -1, *, follow: bool = True, errors: str = "strict"
) -> str:
    """`read_bytes` decoded as UTF-8 (UnicodeDecodeError unless `errors` says otherwise)."""
    return read_bytes(path, limit, follow=follow).decode("utf-8", errors)


def refusal(exc: OSError) -> bool:
    """Whether `exc` is `open_fd` refusing what is not a regular file (a pipe, a socket, a device; a link when
    not followed), rather than a file that is missing or unreadable."""
    return exc.errno in (errno.EINVAL, errno.ELOOP, errno.ENXIO)


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path`, a regular file or none yet, atomically (a full disk leaves the old file or none, never
    half of the new); a pipe with no reader is refused (ENXIO), not waited on, and left as it was."""
    from provision.atomic import write_atomic

    if os.path.lexists(path):
        os.close(open_fd(path, os.O_WRONLY))
    write_atomic(path, text)


def stamp_of(status: os.stat_result) -> list[int]:
    """What an edit of a file cannot put back: size, mtime, ctime (the kernel sets it on every write, chmod or touch,
    and utime cannot), inode, device. A kept wheel's (stacks/wheelcache) and a file a lock's record read (stacks/ahead)."""
    return [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev]


def foreign(status: os.stat_result) -> str | None:
    """Why a cache's folder or entry with this status could hold what another local user wrote (owned by another
    user, or writable by group or others), else None: what provision keeps to read back unchecked lives only where no
    one else can write."""
    if status.st_uid != os.geteuid():
        return "owned by another user"
    if status.st_mode & 0o022:
        return "writable by other users (group or others)"
    return None
