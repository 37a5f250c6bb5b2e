"""Wheels fetched by provision, kept so that each is read from the network once: `$XDG_CACHE_HOME/provision/wheels/
<sha256>/<file name>`, stored only after its sha256 was checked against the lock's, and checked again on reuse unless
its size, mtime and inode are those it had when checked (`checked` beside it). Every download goes through
`index.download`, the one bounded network read."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from provision import regular
from provision.log import Progress

REPORT_EVERY = 64 << 20  # a progress line per this many bytes of one wheel
SHA256 = re.compile(r"^[0-9a-f]{64}\Z")  # a sha256 as hashlib spells it: what names a kept wheel's folder


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "provision" / "wheels"


def _stamp(path: Path) -> list[int]:
    status = path.stat()
    return [status.st_size, status.st_mtime_ns, status.st_ino]


def cached(sha256: str, filename: str) -> Path | None:
    """The kept wheel of that sha256, checked; None when there is none (a damaged one is removed)."""
    if not SHA256.match(sha256) or "/" in filename or filename in ("", ".", ".."):
        return None
    place = folder() / sha256
    wheel, checked = place / filename, place / "checked"
    try:
        if json.loads(regular.read_bytes(checked, 4096)) == _stamp(wheel):
            return wheel
        if _sha256(wheel) == sha256:
            checked.write_text(json.dumps(_stamp(wheel)))
            return wheel
    except (OSError, ValueError, RecursionError):  # RecursionError: a stamp nested past the limit
        pass
    shutil.rmtree(place, ignore_errors=True)
    return None


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(regular.open_fd(path), "rb") as handle:
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


def fetch(url: str, sha256: str, filename: str, *, hint: str, size: int | None = None,
          progress: Progress = lambda _: None) -> Path:
    """The wheel at `url`, from the cache or downloaded into it (its sha256 checked against `sha256`, the lock's;
    no more than `size` bytes read, the lock's, where it gives one)."""
    found = cached(sha256, filename)
    if found:
        return found
    from provision.stacks import index  # a wheel is fetched

    place = folder() / sha256
    place.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    progress(f"fetching {filename}")
    with tempfile.TemporaryDirectory(prefix=f".{sha256[:12]}-", dir=place.parent) as work:
        partial = Path(work) / filename
        with open(partial, "wb") as handle:
            sink = _Counting(handle, filename, progress)
            index.download(url, sink, sha256=sha256, expected_from="the lock's", hint=hint, size=size)  # type: ignore[arg-type]
        (Path(work) / "checked").write_text(json.dumps(_stamp(partial)))
        try:
            os.rename(work, place)  # whole or not at all; a concurrent fetch of the same wheel may have won
            os.mkdir(work)  # for TemporaryDirectory's own clean-up
        except OSError:
            pass
    progress(f"fetched {filename}: {_size(sink.count)} in {time.perf_counter() - started:.1f} s")
    kept = cached(sha256, filename)
    if kept is None:
        raise OSError(f"{place}: the wheel just fetched is not there")
    return kept


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 1 << 20 else f"{count} B"
