"""A wheel's members inflated with zlib straight from the wheel's file, each in one pass, its CRC checked at the end.

zipfile reads the central directory (once, in the process that plans the scan); each member is then found by the
place zipfile gave (`Place`: offset of its local header, method, sizes, CRC), which is all a worker process needs.
zipfile's own member reader needs a ZipFile object, that is the central directory read again in every worker (the
tensorflow wheel: 24,000 entries, 0.2 s of CPU each time), and adds buffering of its own on top of zlib's inflate.
Methods other than stored and deflate (no wheel tool writes them) are read through zipfile.
"""

from __future__ import annotations

import copy
import errno
import os
import struct
import sys
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

CHUNK = 1 << 20  # compressed bytes read at a time
_LOCAL = struct.Struct("<4s22xHH")  # signature, ..., file name length, extra field length
LOCAL_SIGNATURE = b"PK\x03\x04"
STORED, DEFLATED = 0, 8


@dataclass(frozen=True)
class Place:
    """Where a member lies in its wheel and what reading it must give: what a worker gets instead of a ZipFile."""

    name: str
    header: int
    method: int
    packed: int
    size: int
    crc: int
    flags: int

    @classmethod
    def of(cls, info: zipfile.ZipInfo) -> Place:
        return cls(
            info.filename,
            info.header_offset,
            info.compress_type,
            info.compress_size,
            info.file_size,
            info.CRC,
            info.flag_bits,
        )


def _pread_of(source: int | memoryview) -> Callable[[int, int], bytes]:
    """pread(count, offset) of a descriptor, or the same of bytes in memory (an offset past the end gives b"", a
    negative one the error pread gives)."""
    if isinstance(source, int):

        def pread_file(count: int, offset: int) -> bytes:
            # a zip64 directory may give an offset of up to 2**64 - 1: os.pread refuses one past 2**63 - 1 with an
            # OverflowError (no error a reader of a zip answers), and one whose read would end past it with EINVAL;
            # past the end of any file, either is b"", as over the bytes in memory
            return b"" if offset > sys.maxsize - max(count, 0) else os.pread(source, count, offset)

        return pread_file

    def pread(count: int, offset: int) -> bytes:
        if offset < 0 or count < 0:
            raise OSError(errno.EINVAL, "Invalid argument")
        return bytes(source[offset : offset + count])

    return pread


@dataclass(frozen=True)
class Mark:
    total: int  # bytes of the member given out before this point
    at: int
    left: int
    pending: bytes
    inflater: Any
    crc: int


class Reader:
    """One member as a binary stream (`read`, a context manager) of a wheel given as a descriptor (which stays the
    caller's) or as its bytes in memory (a download small enough to be held: no system call per read, which in a
    thread costs the GIL handed back and forth). zipfile.BadZipFile for a bad local header or CRC, EOFError for data
    that ends early, as zipfile raises them."""

    def __init__(self, fd: int | memoryview, place: Place, path: str = "", chunk: int = CHUNK) -> None:
        self.fd, self.place, self.chunk = fd, place, chunk
        self._pread = _pread_of(fd)
        self.crc, self.total, self.eof, self.pending = 0, 0, place.size == 0 and place.packed == 0, b""
        self.fallback: IO[bytes] | None = None
        self.archive: zipfile.ZipFile | None = None
        if place.flags & 0x1:
            raise ValueError("encrypted: not read")
        head = self._pread(_LOCAL.size, place.header)
        if len(head) < _LOCAL.size or head[:4] != LOCAL_SIGNATURE:
            raise zipfile.BadZipFile(f"bad local file header for {place.name!r}")
        _signature, name_size, extra_size = _LOCAL.unpack(head)
        name = self._pread(name_size, place.header + _LOCAL.size)
        if name.decode("utf-8" if place.flags & 0x800 else "cp437", errors="replace") != place.name:
            raise zipfile.BadZipFile(f"file name in directory {place.name!r} and header {name!r} differ")
        self.at = place.header + _LOCAL.size + name_size + extra_size
        self.left = place.packed
        if place.method == DEFLATED:
            self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        elif place.method != STORED:  # bzip2, lzma: legal in a zip, never written by wheel tools
            self.archive = zipfile.ZipFile(path)
            self.fallback = self.archive.open(place.name)

    def _raw(self, count: int) -> bytes:
        data = self._pread(min(count, self.left), self.at) if self.left else b""
        # the file ends first (a local header's lengths that lie): none comes again
        if not data and self.left:
            raise EOFError(f"{self.place.name}: the wheel ends inside this member")
        self.at += len(data)
        self.left -= len(data)
        return data

    def read(self, count: int = -1) -> bytes:
        if self.fallback is not None:
            return self.fallback.read(count)
        parts, have = [], 0
        while not self.eof and (count < 0 or have < count):
            # never more than one byte past the member's size comes out (a bomb whose directory says 1 KB is a
            # BadZipFile after 1 KB, as zipfile's reader stops at the size it is told), however much it inflates to
            past = self.place.size - self.total + 1
            limit = past if count < 0 else min(count - have, past)
            if self.place.method == STORED:
                data = self._raw(limit)  # EOFError where the file ends first
                self.eof = not self.left
            else:
                if not self.pending and self.left:
                    self.pending = self._raw(self.chunk)
                data = self.inflate.decompress(self.pending, limit)  # b"" in: what zlib still holds comes out
                self.pending = self.inflate.unconsumed_tail
                self.eof = self.inflate.eof
                if not (data or self.eof or self.pending or self.left):
                    raise EOFError(
                        f"{self.place.name}: compressed data ended before the end-of-stream marker"
                    )
            self.crc = zlib.crc32(data, self.crc)
            self.total += len(data)
            if self.total > self.place.size:
                raise zipfile.BadZipFile(
                    f"{self.place.name!r} inflates past its size, {self.place.size:,} bytes"
                )
            parts.append(data)
            have += len(data)
            if self.eof and (self.crc != self.place.crc or self.total != self.place.size):
                raise zipfile.BadZipFile(f"Bad CRC-32 for file {self.place.name!r}")
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def mark(self) -> Mark | None:
        """Where reading stands (the inflater's state copied: its 32 KiB window and little else), for `resumed`."""
        if self.fallback is not None:
            return None
        inflater = self.inflate.copy() if self.place.method == DEFLATED else None
        return Mark(self.total, self.at, self.left, self.pending, inflater, self.crc)

    def resumed(self, mark: Mark) -> Reader:
        """A reader of the same member going on from `mark`: what lies before it is not inflated again."""
        other = copy.copy(self)
        other.total, other.at, other.left, other.pending, other.crc = (
            mark.total,
            mark.at,
            mark.left,
            mark.pending,
            mark.crc,
        )
        other.eof = False
        if mark.inflater is not None:
            other.inflate = mark.inflater.copy()
        return other

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fallback is not None and self.archive is not None:
            self.fallback.close()
            self.archive.close()
