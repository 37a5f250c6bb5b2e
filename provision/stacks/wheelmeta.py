"""A wheel's METADATA from its index without installing it: the PEP 658 `.metadata` file where the index serves one,
else the METADATA member read out of the remote zip with HTTP range requests (the central directory and one member,
a few hundred KiB of a 40 MB wheel), else the whole wheel, streamed. All through requests, with the index's timeout."""

from __future__ import annotations

import hashlib
import io
import tempfile
import zipfile
from typing import IO, Any

from packaging.metadata import Metadata

from provision.errors import IndexError_
from provision.stacks import index

BLOCK = 256 * 1024  # one range request: the zip's tail usually holds the whole central directory


class RangeFile(io.RawIOBase):
    """A seekable, read-only view of a remote file, fetched in blocks by HTTP range requests (what zipfile needs)."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.position = url, size, 0
        self.blocks: dict[int, bytes] = {}
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), max(0, self.size - self.position))
        done = 0
        while done < wanted:
            start = (self.position // BLOCK) * BLOCK
            block = self._block(start)
            offset = self.position - start
            take = min(wanted - done, len(block) - offset)
            if take <= 0:
                break
            view[done : done + take] = block[offset : offset + take]
            done += take
            self.position += take
        return done

    def _block(self, start: int) -> bytes:
        if start not in self.blocks:
            end = min(self.size, start + BLOCK) - 1
            response = index.get(self.url, headers={"Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"})
            if response.status_code != 206:
                raise _NoRanges(f"HTTP {response.status_code} to a range request")
            self.requests += 1
            self.blocks[start] = response.content
        return self.blocks[start]


class _NoRanges(Exception):
    pass


def metadata(url: str, *, core_metadata: bool | dict[str, str] = False, sha256: str | None = None) -> tuple[Metadata, str]:
    """Return the wheel's core metadata and how it was read: "pep658", "range" or "download"."""
    if core_metadata:
        response = index.get(url + ".metadata")
        if response.status_code == 200:
            expected = core_metadata.get("sha256") if isinstance(core_metadata, dict) else None
            if expected and hashlib.sha256(response.content).hexdigest() != expected:
                raise IndexError_(f"{index.redact(url)}.metadata: its sha256 does not match the index", "the index is inconsistent; retry or use a mirror")
            return _parse(response.content, url), "pep658"
    head = index.get(url, method="HEAD", headers={"Accept-Encoding": "identity"})
    size = int(head.headers.get("Content-Length") or 0)
    if head.status_code < 400 and size and head.headers.get("Accept-Ranges", "").lower() == "bytes":
        try:
            return _parse(_member(io.BufferedReader(RangeFile(url, size), BLOCK)), url), "range"
        except (_NoRanges, zipfile.BadZipFile):
            pass
    with tempfile.TemporaryFile() as spool:
        index.download(url, spool, sha256=sha256, hint="check the index and the version; retry if the file changed")
        spool.seek(0)
        return _parse(_member(spool), url), "download"


def record(url: str) -> bytes | None:
    """The wheel's .dist-info/RECORD read by HTTP range requests (the zip's directory and that member); None where
    the index does not answer range requests (the whole wheel is never downloaded for it)."""
    head = index.get(url, method="HEAD", headers={"Accept-Encoding": "identity"})
    size = int(head.headers.get("Content-Length") or 0)
    if head.status_code >= 400 or not size or head.headers.get("Accept-Ranges", "").lower() != "bytes":
        return None
    try:
        return _member(io.BufferedReader(RangeFile(url, size), BLOCK), "RECORD")
    except (_NoRanges, zipfile.BadZipFile):
        return None


def _member(stream: IO[bytes] | io.BufferedReader, member: str = "METADATA") -> bytes:
    try:
        with zipfile.ZipFile(stream) as wheel:
            names = [n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(f".dist-info/{member}")]
            if not names:
                raise zipfile.BadZipFile(f"no .dist-info/{member}")
            return wheel.read(names[0])
    except zipfile.BadZipFile:
        raise
    except (OSError, ValueError) as exc:
        raise zipfile.BadZipFile(str(exc)) from exc


def _parse(raw: bytes, url: str) -> Metadata:
    try:
        return Metadata.from_email(raw, validate=False)
    except Exception as exc:  # packaging raises an ExceptionGroup of what it could not read
        raise IndexError_(f"{index.redact(url)}: its METADATA cannot be read ({exc})", "report it to the package's maintainers") from exc
