"""Wheels fetched by provision, kept so that each is read from the network once: `$XDG_CACHE_HOME/provision/wheels/
<sha256>/<file name>`, stored only after its sha256 was checked against the lock's, and checked again on reuse unless
its stamp is the one it had when checked (`checked` beside it). Every download goes through `index.download`, the one
bounded network read.

The stamp is what no edit of the file can put back: its size, mtime, inode and device, and its ctime (the kernel sets
it on every write, chmod, touch or link; utime cannot set it, so an edit in place that restores the size and mtime
still changes it). A wheel whose stamp differs is hashed again before use, and removed when it is no longer that
sha256. Nothing in the cache is followed or written through a link: `<sha256>` a link is removed (the link, never what
it leads to), the wheel and `checked` are opened with O_NOFOLLOW, and `checked` is written by rename (a link there is
replaced, not written through). The cache folder itself may be a link (a bigger disk): it is the user's. A cache
folder, kept wheel or its folder that is another user's or writable by others (regular.foreign) is never used: another
user could have put a wheel of other content there beside a stamp read off it; fetch refuses to keep a wheel there."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from provision import regular
from provision.atomic import write_atomic
from provision.log import Progress

REPORT_EVERY = 64 << 20  # a progress line per this many bytes of one wheel
SHA256 = re.compile(r"^[0-9a-f]{64}\Z")  # a sha256 as hashlib spells it: what names a kept wheel's folder


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "provision" / "wheels"


def untrusted() -> tuple[Path, str] | None:
    """The folder of the cache (provision's, or its wheels/) another local user could write, and why; None when both
    are this user's alone (or not there yet)."""
    for place in (folder().parent, folder()):
        try:
            why = regular.foreign(os.stat(place))
        except OSError:
            continue
        if why is not None:
            return place, why
    return None


def _stamp(path: Path) -> list[int]:
    return regular.stamp_of(os.stat(path, follow_symlinks=False))


def cached(sha256: str, filename: str) -> Path | None:
    """The kept wheel of that sha256, checked; None when there is none (a damaged one, or a link, is removed)."""
    if not SHA256.match(sha256) or "/" in filename or filename in ("", ".", ".."):
        return None
    place = folder() / sha256
    wheel, checked = place / filename, place / "checked"
    if untrusted() is not None:
        return None
    try:
        status = os.lstat(place)
        if stat.S_ISLNK(status.st_mode):
            os.unlink(place)  # the link itself: what it leads to is never read, written or removed
            return None
        with os.fdopen(regular.open_fd(wheel, follow=False), "rb") as handle:
            if regular.foreign(status) or regular.foreign(os.fstat(handle.fileno())):
                # removed below: a wheel this user did not keep is fetched again
                raise OSError("another user's")
            now = regular.stamp_of(os.fstat(handle.fileno()))
            if _checked(checked) == now:
                return wheel
            # not changed while hashed
            if _sha256(handle) == sha256 and regular.stamp_of(os.fstat(handle.fileno())) == now:
                write_atomic(checked, json.dumps(now), 0o644)
                return wheel
    except (OSError, ValueError, RecursionError):  # RecursionError: a stamp nested past the limit
        pass
    if os.path.lexists(place) and not os.path.islink(place):
        shutil.rmtree(place, ignore_errors=True)
    return None


def _checked(checked: Path) -> object:
    """The stamp `checked` holds; None when it holds none (gone, damaged, a link: never followed)."""
    try:
        return json.loads(regular.read_bytes(checked, 4096, follow=False))
    except (OSError, ValueError, RecursionError):  # RecursionError: a stamp nested past the limit
        return None


def _sha256(handle: IO[bytes]) -> str:
    import hashlib

    digest = hashlib.sha256()
    while chunk := handle.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


class _Counting:
    """A sink that writes through and says, now and then, how far a download has come."""

    def __init__(self, handle: object, filename: str, progress: Progress) -> None:
        self.handle, self.filename, self.count, self.next = handle, filename, 0, REPORT_EVERY
        self.progress = progress

    def write(self, data: bytes) -> int:
        self.count += len(data)
        if self.count >= self.next:
            self.progress(f"fetching {self.filename}: {_size(self.count)}")
            self.next += REPORT_EVERY
        return self.handle.write(data)  # type: ignore[attr-defined, no-any-return]


def fetch(
    url: str,
    sha256: str,
    filename: str,
    *,
    hint: str,
    size: int | None = None,
    progress: Progress = lambda _: None,
) -> Path:
    """The wheel at `url`, from the cache or downloaded into it (its sha256 checked against `sha256`, the lock's;
    no more than `size` bytes read, the lock's, where it gives one)."""
    found = cached(sha256, filename)
    if found:
        return found
    place = folder() / sha256
    place.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    place.parent.mkdir(mode=0o700, exist_ok=True)
    shared = untrusted()
    if shared is not None:
        from provision.errors import EnvError

        raise EnvError(
            f"{shared[0]} is {shared[1]}: a wheel kept there could be replaced by another user",
            "make it yours alone (chown, chmod go-w), or remove it; or set XDG_CACHE_HOME to a folder of your own",
        )
    # a link where the kept wheel's folder belongs: the rename below must not land through it
    if os.path.islink(place):
        os.unlink(place)
    started = time.perf_counter()
    progress(f"fetching {filename}")
    with tempfile.TemporaryDirectory(prefix=f".{sha256[:12]}-", dir=place.parent) as work:
        partial = Path(work) / filename
        count = _download(url, partial, sha256, hint=hint, size=size, progress=progress)
        (Path(work) / "checked").write_text(json.dumps(_stamp(partial)))
        try:
            os.rename(work, place)  # whole or not at all; a concurrent fetch of the same wheel may have won
            os.mkdir(work)  # for TemporaryDirectory's own clean-up
        except OSError:
            pass
    progress(f"fetched {filename}: {_size(count)} in {time.perf_counter() - started:.1f} s")
    kept = cached(sha256, filename)
    if kept is None:
        raise OSError(f"{place}: the wheel just fetched is not there")
    return kept


@contextlib.contextmanager
def fetched(
    url: str,
    sha256: str,
    filename: str,
    *,
    hint: str,
    size: int | None = None,
    progress: Progress = lambda _: None,
) -> Iterator[Path]:
    """`fetch`'s wheel; where the cache cannot be written (a full disk, read-only), the wheel downloaded into a
    temporary folder that goes when the block ends, with a note: the cache is an optimisation, never a reason to fail."""
    try:
        kept = fetch(url, sha256, filename, hint=hint, size=size, progress=progress)
    except OSError as exc:
        from provision import log

        log.info(
            f"note: {filename} cannot be kept in {folder()} ({exc.strerror or exc}): read from a temporary folder "
            "instead, and fetched again next time; to keep it, free space there or set XDG_CACHE_HOME elsewhere"
        )
        with tempfile.TemporaryDirectory(prefix="provision-wheel-") as work:
            partial = Path(work) / filename
            _download(url, partial, sha256, hint=hint, size=size, progress=progress)
            yield partial
        return
    yield kept


def _download(url: str, path: Path, sha256: str, *, hint: str, size: int | None, progress: Progress) -> int:
    """The wheel at `url` written to `path` (its sha256 checked against the lock's); the bytes written. A write that
    fails (a full disk) names `path`."""
    from provision.stacks import index

    try:
        with open(path, "wb") as handle:
            sink = _Counting(handle, path.name, progress)
            index.download(url, sink, sha256=sha256, expected_from="the lock's", hint=hint, size=size)  # type: ignore[arg-type]
    except OSError as exc:
        exc.filename = exc.filename or str(path)
        raise
    return sink.count


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 1 << 20 else f"{count} B"
