"""provision.scan.members: a wheel's members inflated with zlib from the wheel's file give what zipfile gives."""

from __future__ import annotations

import os
import random
import zipfile
from pathlib import Path

import pytest

from provision.scan import members


def _archive(path: Path) -> dict[str, bytes]:
    rng = random.Random(23)
    contents = {
        "zeros.bin": bytes(1 << 20),  # 1 MiB from 1 KiB: reads bounded by max_length, zlib's tail drained
        "noise.bin": rng.randbytes(300_000),
        "mixed.so": b"\x7fELF" + (rng.randbytes(5000) + bytes(70_000)) * 9,
        "empty.txt": b"",
        "tiny.txt": b"abc",
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in contents.items():
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
            archive.writestr("stored/" + name, data, compress_type=zipfile.ZIP_STORED)
        archive.writestr("bz2/mixed.so", contents["mixed.so"], compress_type=zipfile.ZIP_BZIP2)
    return contents


@pytest.mark.parametrize("count", [1000, 65536, -1])
@pytest.mark.parametrize("chunk", [16, members.CHUNK])
def test_reader_gives_what_zipfile_gives(tmp_path: Path, count: int, chunk: int) -> None:
    contents = _archive(tmp_path / "w.zip")
    fd = os.open(tmp_path / "w.zip", os.O_RDONLY)
    try:
        with zipfile.ZipFile(tmp_path / "w.zip") as archive:
            for info in archive.infolist():
                with members.Reader(
                    fd, members.Place.of(info), str(tmp_path / "w.zip"), chunk=chunk
                ) as member:
                    parts = []
                    while part := member.read(count):
                        assert count < 0 or len(part) <= count
                        parts.append(part)
                assert b"".join(parts) == contents[info.filename.split("/")[-1]] == archive.read(info), (
                    info.filename
                )
    finally:
        os.close(fd)


def test_a_bad_crc_and_a_cut_member_are_zipfiles_errors(tmp_path: Path) -> None:
    path = tmp_path / "w.zip"
    contents = _archive(path)
    with zipfile.ZipFile(path) as archive:
        stored, deflated = archive.getinfo("stored/noise.bin"), archive.getinfo("mixed.so")
    data = bytearray(path.read_bytes())
    start = data.rindex(contents["noise.bin"][:64])  # the stored copy (the deflated one comes first)
    data[start + 1000] ^= 0xFF  # one bit of the stored member's data: only its CRC can tell
    path.write_bytes(bytes(data))
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(zipfile.BadZipFile, match="CRC"):
            members.Reader(fd, members.Place.of(stored)).read()
        cut = members.Place.of(deflated)
        short = members.Place(cut.name, cut.header, cut.method, cut.packed // 2, cut.size, cut.crc, cut.flags)
        with pytest.raises(EOFError):
            members.Reader(fd, short).read()
        moved = members.Place(cut.name, cut.header + 1, cut.method, cut.packed, cut.size, cut.crc, cut.flags)
        with pytest.raises(zipfile.BadZipFile, match="header"):
            members.Reader(fd, moved)
    finally:
        os.close(fd)


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_a_member_inflating_past_its_size_is_stopped_at_it(tmp_path: Path, method: int) -> None:
    """A member whose directory says 1,000 bytes and whose data inflates to 256 MiB (a bomb: a scan streamed it to
    the end, wheelproof's proof to its budget) is a BadZipFile once more than its size came out, as zipfile's
    reader stops at the size it was told."""
    import dataclasses

    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("bomb.so", bytes(256 << 20), compress_type=method)
    fd = os.open(path, os.O_RDONLY)
    try:
        with zipfile.ZipFile(path) as archive:
            place = dataclasses.replace(members.Place.of(archive.infolist()[0]), size=1000)
        given = 0
        with pytest.raises(zipfile.BadZipFile), members.Reader(fd, place) as reader:
            while chunk := reader.read(1 << 20):
                given += len(chunk)
        assert given <= 1000
    finally:
        os.close(fd)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_a_member_whose_data_lies_past_the_files_end_is_an_eof_not_a_hang(
    tmp_path: Path, method: int
) -> None:
    """A local header whose extra length (65,535) puts the member's data past the end of the file: a deflated one
    was read for ever (each read gave nothing and the reader asked again), as the scan's workers read it."""
    import struct

    path = tmp_path / "short.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("lib.so", b"\x7fELF" + bytes(4000), compress_type=method)
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 28, 0xFFFF)  # the first local header's extra field length
    path.write_bytes(bytes(data))
    fd = os.open(path, os.O_RDONLY)
    try:
        with zipfile.ZipFile(path) as archive:
            place = members.Place.of(archive.infolist()[0])
        with pytest.raises(EOFError), members.Reader(fd, place) as reader:
            while reader.read(1 << 20):
                pass
    finally:
        os.close(fd)
