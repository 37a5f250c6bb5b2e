"""A wheel's `.dist-info/` member read by its own central directory entry (provision/stacks/zipentry.py) agrees with
zipfile wherever it answers, and answers None (zipfile reads the zip then) wherever the zip is not of the common case:
a comment, zip64, two members of the name, a member deeper than one folder, encryption, another compression, a CRC
or size that does not add up, a local header naming another file, a zip cut short."""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable

import pytest

from provision.stacks import wheelmeta, zipentry

RECORD = b"pkg/__init__.py,sha256=abc,10\npkg-1.0.dist-info/RECORD,,\n" * 40


def wheel(
    *, method: int = zipfile.ZIP_DEFLATED, members: dict[str, bytes] | None = None, comment: bytes = b""
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in (
            members or {"pkg/__init__.py": b"x = 1\n", "pkg-1.0.dist-info/RECORD": RECORD}
        ).items():
            archive.writestr(name, data)
        archive.comment = comment
    return buffer.getvalue()


def test_the_formats_are_zipfiles_own() -> None:
    theirs = vars(zipfile)  # undocumented names (typeshed has none of them): what zipfile reads zips with

    def same(ours: struct.Struct, name: str) -> bool:
        fmt = theirs[name]
        return ours.format == (fmt.decode() if isinstance(fmt, bytes) else fmt)

    assert same(zipentry.END, "structEndArchive") and zipentry.END.size == theirs["sizeEndCentDir"]
    assert same(zipentry.CENTRAL, "structCentralDir") and zipentry.CENTRAL.size == theirs["sizeCentralDir"]
    assert same(zipentry.LOCAL, "structFileHeader") and zipentry.LOCAL.size == theirs["sizeFileHeader"]
    signatures = (theirs["stringEndArchive"], theirs["stringCentralDir"], theirs["stringFileHeader"])
    assert signatures == (zipentry.END_SIGNATURE, zipentry.CENTRAL_SIGNATURE, zipentry.LOCAL_SIGNATURE)


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED], ids=["deflated", "stored"])
@pytest.mark.parametrize("place", ["last", "first", "middle"])
def test_the_member_is_read_as_zipfile_reads_it(method: int, place: str) -> None:
    others = {f"pkg/m{n}.py": b"y = %d\n" % n for n in range(50)}
    items = list(others.items())
    at = {"first": 0, "middle": 25, "last": len(items)}[place]
    members = dict(items[:at] + [("pkg-1.0.dist-info/RECORD", RECORD)] + items[at:])
    data = wheel(method=method, members=members)
    assert zipentry.member(io.BytesIO(data), "RECORD", 1 << 20) == RECORD
    assert wheelmeta._member(io.BytesIO(data), "RECORD", 1 << 20) == RECORD


def _patched(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) >= 1
    return data.replace(old, new)


def _with_crc(data: bytes) -> bytes:  # the RECORD's CRC in its central entry, one off
    at = data.rindex(zipentry.CENTRAL_SIGNATURE)
    fields = list(zipentry.CENTRAL.unpack(data[at : at + zipentry.CENTRAL.size]))
    fields[9] ^= 1
    return data[:at] + zipentry.CENTRAL.pack(*fields) + data[at + zipentry.CENTRAL.size :]


def _local_renamed(data: bytes) -> bytes:  # the local header names another file of the same length
    first = data.index(b"pkg-1.0.dist-info/RECORD")
    return data[:first] + b"pkg-1.0.dist-info/RECORX" + data[first + 24 :]


CASES: dict[str, Callable[[], bytes]] = {
    "comment": lambda: wheel(comment=b"a comment"),
    "two-records": lambda: wheel(
        members={"a-1.0.dist-info/RECORD": RECORD, "b-1.0.dist-info/RECORD": RECORD}
    ),
    "deeper": lambda: wheel(members={"x/pkg-1.0.dist-info/RECORD": RECORD}),
    "none": lambda: wheel(members={"pkg/__init__.py": b""}),
    "bzip2": lambda: wheel(method=zipfile.ZIP_BZIP2),
    "crc": lambda: _with_crc(wheel()),
    "local-name": lambda: _local_renamed(wheel()),
    "cut-short": lambda: wheel()[:-5],
    "not-a-zip": lambda: b"PK" + b"\0" * 100,
    "empty": lambda: b"",
}


@pytest.mark.parametrize("case", list(CASES))
def test_anything_but_the_common_case_is_left_to_zipfile(case: str) -> None:
    data = CASES[case]()
    assert zipentry.member(io.BytesIO(data), "RECORD", 1 << 20) is None
    try:
        by_zipfile: bytes | None = wheelmeta._member(io.BytesIO(data), "RECORD", 1 << 20)
    except zipfile.BadZipFile:
        by_zipfile = None
    if case == "bzip2":
        assert by_zipfile == RECORD  # zipfile reads what this leaves to it
    elif case in ("crc", "local-name", "cut-short", "not-a-zip", "empty", "none", "deeper"):
        assert by_zipfile is None


def test_a_member_past_the_limit_is_not_read() -> None:
    data = wheel()
    assert zipentry.member(io.BytesIO(data), "RECORD", len(RECORD) - 1) is None
    assert zipentry.member(io.BytesIO(data), "RECORD", len(RECORD)) == RECORD


def test_a_deflate_bomb_is_inflated_no_further_than_the_entry_says() -> None:
    """An entry that says 10 bytes and inflates to 10 MB: no more than 11 bytes are inflated, and it is refused."""
    bomb = wheel(members={"pkg-1.0.dist-info/RECORD": b"\0" * (10 << 20)})
    at = bomb.rindex(zipentry.CENTRAL_SIGNATURE)
    fields = list(zipentry.CENTRAL.unpack(bomb[at : at + zipentry.CENTRAL.size]))
    fields[11] = 10  # its size, as the central entry says it
    lied = bomb[:at] + zipentry.CENTRAL.pack(*fields) + bomb[at + zipentry.CENTRAL.size :]
    assert zipentry.member(io.BytesIO(lied), "RECORD", 1 << 30) is None


def test_a_name_field_pointing_past_the_directory_is_refused() -> None:
    data = wheel()
    at = data.rindex(zipentry.CENTRAL_SIGNATURE)
    fields = list(zipentry.CENTRAL.unpack(data[at : at + zipentry.CENTRAL.size]))
    fields[18] = len(data)  # the local header's offset: past the central directory
    moved = data[:at] + zipentry.CENTRAL.pack(*fields) + data[at + zipentry.CENTRAL.size :]
    assert zipentry.member(io.BytesIO(moved), "RECORD", 1 << 20) is None
    assert struct.calcsize(zipentry.CENTRAL.format) == zipentry.CENTRAL.size
