"""Atomic writes: a temp file in the same folder, fsync, rename. A reader sees the old file or the new, never half.
Paths are str or Path, handled with os.path: `switch` and `rollback` write state.json here and load no pathlib."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping


def stage(path: str | os.PathLike[str], text: str | bytes, mode: int = 0o600) -> str:
    """`text` written to a new file beside `path` and synced, not yet in its place: `os.replace(staged, path)` puts it
    there atomically (`write_atomic`, or a caller that makes several renames durable with one `fsync_dir`)."""
    folder, name = os.path.split(os.fspath(path))
    os.makedirs(folder or ".", exist_ok=True)
    # O_EXCL with this process's id and a fresh counter, as mkstemp would, without importing tempfile (and with it
    # shutil, lzma, bz2 and random) on the `switch` path
    temp = os.path.join(folder, f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as exc:
        _unlink(temp)
        # a write on a full disk names no file (an open does): the error names the one being written
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = os.fspath(path)
        raise
    return temp


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def write_atomic(path: str | os.PathLike[str], text: str | bytes, mode: int = 0o600) -> None:
    """Write a file atomically: a temp file in the same folder, fsync, rename. Readers see the old or the new."""
    temp = stage(path, text, mode)
    try:
        os.replace(temp, path)
    except BaseException:
        _unlink(temp)
        raise


def json_text(data: Mapping[str, object]) -> str:
    """How provision writes its own JSON files."""
    return json.dumps(data, indent=2, sort_keys=True, default=str)


def finite(value: object) -> object:
    """`value` with every NaN or infinity inside it as None (null): JSON has no such number (--json documents, what a
    measurement printed beside its figure in env.json)."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_json(path: str | os.PathLike[str], data: Mapping[str, object]) -> None:
    write_atomic(path, json_text(data))


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic_at(folder_fd: int, name: str, data: bytes, mode: int = 0o600, *, sync: bool = True) -> None:
    """`write_atomic` inside the folder open at `folder_fd`: the temp file made there (O_EXCL, never through a link)
    and renamed over `name`, which rename never follows. A folder path swapped for a link meanwhile changes nothing:
    both names are looked up in the folder held open. Without `sync`, for a cache whose reader checks every entry."""
    temp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=folder_fd)
        raise
