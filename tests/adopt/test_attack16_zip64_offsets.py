"""A zip64 directory entry may put a member's local header at any offset up to 2**64 - 1. Past 2**63 os.pread and
io.BytesIO.seek refuse it with an OverflowError, which no reader of a zip answers: a spooled download's member, or
a held one's RECORD, so placed came out of wheelproof as a bare OverflowError (adopt said "internal error" for the
whole run, where one hostile wheel is one unmatched distribution). Each is NotProven, spooled and held alike, and
the member reader answers over a descriptor as over bytes in memory."""

from __future__ import annotations

import struct
import tempfile
import zipfile
from pathlib import Path

import pytest
from test_wheelproof_hostile import HELD, _central, _wheel

from provision.scan import members
from provision.stacks import wheelproof

RECORD = "hostile-1.0.dist-info/RECORD"


def _zip64_offset(data: bytearray, name: str, offset: int) -> None:
    """`name`'s directory entry made to give its local header's offset in a zip64 extra field: `offset`."""
    at = _central(data, name)
    name_size, extra_size = struct.unpack_from("<HH", data, at + 28)
    extra = struct.pack("<HHQ", 1, 8, offset)  # zip64 extended information: the header offset alone
    struct.pack_into("<I", data, at + 42, 0xFFFFFFFF)
    struct.pack_into("<H", data, at + 30, extra_size + len(extra))
    end = at + 46 + name_size + extra_size
    data[end:end] = extra
    directory_end = data.rfind(b"PK\x05\x06")
    size = struct.unpack_from("<I", data, directory_end + 12)[0]
    struct.pack_into("<I", data, directory_end + 12, size + len(extra))


OFFSETS = [2**63 - 1, 2**63, 2**64 - 1]


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("name", ["pkg/lib.so", "pkg/raw.so", RECORD])
def test_a_member_placed_past_any_file_is_not_proven(
    tmp_path: Path, name: str, offset: int, held: str
) -> None:
    data = _wheel(tmp_path)
    _zip64_offset(data, name, offset)
    with HELD[held]() as spool, pytest.raises(wheelproof.NotProven, match="cannot be read"):
        spool.write(data)
        spool.seek(0)
        wheelproof.record_of(spool, verify=True)


@pytest.mark.parametrize("offset", [*OFFSETS, 1 << 40, -1])
def test_the_member_reader_answers_over_a_file_as_over_memory(tmp_path: Path, offset: int) -> None:
    data = bytes(_wheel(tmp_path))
    with zipfile.ZipFile(tmp_path / "rewritten.whl") as archive:
        place = members.Place.of(archive.getinfo("pkg/lib.so"))
    place = members.Place(place.name, offset, place.method, place.packed, place.size, place.crc, place.flags)
    answers = []
    with tempfile.TemporaryFile() as spooled:
        spooled.write(data)
        spooled.flush()
        for source in (spooled.fileno(), memoryview(data)):
            try:
                with members.Reader(source, place) as reader:
                    reader.read(1 << 20)
                answers.append("read")
            except Exception as exc:  # what each answers is the test: the two must be the same kind
                answers.append(type(exc).__name__)
    assert answers[0] == answers[1] and answers[0] in ("BadZipFile", "OSError"), answers
