"""A wheel's RECORD proven to be the RECORD of the bytes a lock pins. Range requests are a cheap way to tell a wheel
apart, never to tell it is the one: nothing ties the ranges a server answers to the sha256 its page lists, or to what
its full GET gives. So what `adopt` pins is downloaded whole, once: its sha256 is the sha256 of those bytes (checked
against the index's where it gives one), and its RECORD is read out of those same bytes, with every member hashed
against it (a wheel of other content carrying a copy of the genuine RECORD is not that wheel). Every member is read
streaming and bounded, a RECORD no further than RECORD_LIMIT."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from provision.scan import members

RECORD_LIMIT = 64 << 20  # a RECORD (torch's, among the largest, is a few MB)
# a download whose size the index gives, at most this, is proven in memory (a thread's reads of a spooled file were
# 46,000 preads for 123 wheels, each one the GIL handed back and forth); a larger one, or one of no size, is spooled
IN_MEMORY = 32 << 20
# what the downloads held at once (adopt's threads) may weigh in all; past it one is spooled
HELD_BUDGET = 128 << 20
_held = [0]
_holding = threading.Lock()
INFLATE_RATIO = 64  # what all members may inflate to, as a multiple of the wheel's size (plus INFLATE_SLACK)
INFLATE_SLACK = 256 << 20
_SIGNATURES = ("RECORD", "RECORD.jws", "RECORD.p7s")  # the RECORD does not hash itself or its signatures


# what reading a member of a hostile zip may raise (a zip64 offset past 2**63: OverflowError): each is NotProven
UNREADABLE = (
    OSError,
    ValueError,
    OverflowError,
    EOFError,
    NotImplementedError,
    zlib.error,
    zipfile.BadZipFile,
)


class NotProven(Exception):
    """The wheel's bytes and its RECORD do not agree (or it has no readable RECORD)."""


def bounded_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """The member `info` of `archive`, read no further than `limit` bytes inflated; NotProven for a larger one (a
    2 MB wheel whose RECORD inflates to 1.2 GB is never held whole)."""
    try:
        with archive.open(info) as opened:
            data = opened.read(limit + 1)
    except UNREADABLE as exc:
        raise NotProven(f"its {info.filename} cannot be read ({type(exc).__name__})") from None
    if len(data) > limit:
        raise NotProven(f"its {info.filename} is larger than {limit:,} bytes")
    return data


def record_of(stream: IO[bytes], *, verify: bool) -> str:
    """The .dist-info/RECORD of the wheel in `stream`; with `verify` (`stream` then a file with a descriptor, a
    spooled download, or an io.BytesIO, one held in memory), every member hashed against it first."""
    try:
        with zipfile.ZipFile(stream) as archive:
            infos = [
                i
                for i in archive.infolist()
                if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/RECORD")
            ]
            if not infos:
                raise NotProven("it has no .dist-info/RECORD")
            text = bounded_member(archive, infos[0], RECORD_LIMIT).decode("utf-8", "replace")
            if verify:
                _verify(archive, infos[0].filename.rpartition("/")[0], text, stream)
            return text
    except UNREADABLE as exc:
        raise NotProven(f"not a readable wheel ({type(exc).__name__}: {exc})") from None


def _verify(archive: zipfile.ZipFile, info_dir: str, record: str, stream: IO[bytes]) -> None:
    if isinstance(stream, io.BytesIO):
        with stream.getbuffer() as held:
            _verify_from(archive, info_dir, record, held)
    else:
        _verify_from(archive, info_dir, record, stream.fileno())


def _verify_from(archive: zipfile.ZipFile, info_dir: str, record: str, source: int | memoryview) -> None:
    hashes: dict[str, str] = {}
    for row in csv.reader(record.splitlines()):
        if len(row) >= 2 and row[0]:
            hashes[row[0]] = row[1]
    size = len(source) if isinstance(source, memoryview) else os.fstat(source).st_size
    budget = INFLATE_RATIO * size + INFLATE_SLACK
    names = [i.filename for i in archive.infolist()]
    if len(set(names)) != len(names):  # which copy an installer keeps is its own choice: neither is proven
        raise NotProven("a member is in the wheel twice")
    in_wheel = {i.filename for i in archive.infolist() if not i.is_dir()}
    for path, recorded in hashes.items():
        if recorded and path not in in_wheel:
            raise NotProven(f"{path} is in its RECORD but not in the wheel")
    signatures = {f"{info_dir}/{name}" for name in _SIGNATURES}
    for info in archive.infolist():
        if info.is_dir() or info.filename in signatures:
            continue
        algorithm, _, digest = hashes.get(info.filename, "").partition("=")
        if algorithm not in ("sha256", "sha384", "sha512"):
            raise NotProven(f"{info.filename} is in the wheel without a hash in its RECORD")
        found = hashlib.new(algorithm)
        try:
            with _member(archive, info, source) as opened:
                while chunk := opened.read(1 << 20):
                    budget -= len(chunk)
                    if budget < 0:
                        raise NotProven(f"its members inflate to more than {INFLATE_RATIO} times its size")
                    found.update(chunk)
        except UNREADABLE as exc:
            raise NotProven(f"{info.filename} cannot be read ({type(exc).__name__})") from None
        if base64.urlsafe_b64encode(found.digest()).rstrip(b"=").decode() != digest.rstrip("="):
            raise NotProven(f"{info.filename} does not match its RECORD")


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, source: int | memoryview) -> Any:
    """A reader of one member, stored or deflated: inflated by zlib straight from the file's descriptor or the bytes
    held (the scan's reader, provision.scan.members: no buffering of its own over zlib's, a tenth less CPU than
    zipfile's reader over the 123 wheels of a real venv, most of what is left zlib's inflate), its local header, size
    and CRC checked as zipfile checks them; zipfile's reader for any other method."""
    if info.compress_type not in (members.STORED, members.DEFLATED):
        return archive.open(info)
    return members.Reader(source, members.Place.of(info))


def downloaded(url: str, sha256: str | None, size: int | None = None) -> tuple[str, str]:
    """(RECORD, sha256) of the wheel at `url`, downloaded whole once (its sha256 checked against `sha256`, the
    index's, where given; no more read than `size`, the index's, where given) and every member checked against that
    RECORD; NotProven where they disagree."""
    from provision.stacks import index  # a wheel is downloaded: the index client is loaded

    with _held_if_room(size) as held, io.BytesIO() if held else tempfile.TemporaryFile() as spool:
        found = index.download(
            url, spool, sha256=sha256, hint="check the index; retry if the file changed", size=size
        )
        spool.seek(0)
        return record_of(spool, verify=True), found


@contextmanager
def _held_if_room(size: int | None) -> Iterator[bool]:
    """Whether a download of `size` bytes (the index's: no more is read) is held in memory: one of at most IN_MEMORY,
    while those held at once stay within HELD_BUDGET (16 threads of 32 MiB wheels would hold 512 MiB); its share is
    given back when its proof ends."""
    with _holding:
        held = size is not None and size <= IN_MEMORY and _held[0] + size <= HELD_BUDGET
        if held:
            _held[0] += size or 0
    try:
        yield held
    finally:
        if held:
            with _holding:
                _held[0] -= size or 0
