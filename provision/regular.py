"""Reading and writing files a user names, without hanging on what is not a file: a pipe, a socket or a device named
where a file belongs is an OSError naming it, never a read that waits for a writer (or a write for a reader)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def _refuse_unless_regular(fd: int, path: Path) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))


def read_bytes(path: Path, limit: int = -1) -> bytes:
    """The bytes of the regular file at `path` (at most `limit`, all when -1), opened without blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    _refuse_unless_regular(fd, path)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit)


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path`, a regular file or none yet, atomically (a full disk leaves the old file or none, never
    half of the new); a pipe with no reader is refused (ENXIO), not waited on, and left as it was."""
    from provision.atomic import write_atomic

    if os.path.lexists(path):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        _refuse_unless_regular(fd, path)
        os.close(fd)
    write_atomic(path, text)
