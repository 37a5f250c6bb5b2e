"""A wheel's `.dist-info/` member read by its own central directory entry (provision/stacks/zipentry.py) agrees with
zipfile wherever it answers, and answers None (zipfile reads the zip then) wherever the zip is not of the common case:
a comment, zip64, two members of the name, a member deeper than one folder, encryption, another compression, a CRC
or size that does not add up, a local header naming another file, a zip cut short."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
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


def _by_zipfile(data: bytes) -> bytes | None:
    """What zipfile alone answers for the zip's RECORD (wheelmeta's way after zipentry); None where it refuses it."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [
                i
                for i in archive.infolist()
                if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/RECORD")
            ]
            with archive.open(names[0]) as opened:
                return opened.read()
    except (zipfile.BadZipFile, IndexError):
        return None


def _forged(data: bytes, crc: int) -> bytes:
    """`data` with its last 4 bytes chosen so that its CRC-32 is `crc` (CRC-32 is affine: a linear system over GF(2))."""
    base = bytearray(data[:-4] + b"\0\0\0\0")
    columns = []
    for bit in range(32):
        flipped = bytearray(base)
        flipped[len(base) - 4 + bit // 8] ^= 1 << (bit % 8)
        columns.append(zlib.crc32(flipped) ^ zlib.crc32(base))
    rows = [(columns[bit], 1 << bit) for bit in range(32)]
    want, chosen = zlib.crc32(base) ^ crc, 0
    for pivot in range(32):  # Gaussian elimination over the 32 columns
        at = next(n for n in range(pivot, 32) if rows[n][0] >> pivot & 1)
        rows[pivot], rows[at] = rows[at], rows[pivot]
        for n in range(32):
            if n != pivot and rows[n][0] >> pivot & 1:
                rows[n] = (rows[n][0] ^ rows[pivot][0], rows[n][1] ^ rows[pivot][1])
    for pivot in range(32):
        if want >> pivot & 1:
            chosen ^= rows[pivot][1]
    base[-4:] = chosen.to_bytes(4, "little")
    assert zlib.crc32(base) == crc
    return bytes(base)


def _local(name: bytes, data: bytes, method: int = zipfile.ZIP_STORED) -> bytes:
    packed = zlib.compressobj(9, zlib.DEFLATED, -15) if method == zipfile.ZIP_DEFLATED else None
    body = packed.compress(data) + packed.flush() if packed else data
    return (
        zipentry.LOCAL.pack(
            zipentry.LOCAL_SIGNATURE,
            20,
            0,
            0,
            method,
            0,
            0,
            zlib.crc32(data),
            len(body),
            len(data),
            len(name),
            0,
        )
        + name
        + body
    )


def _central(name: bytes, data: bytes, offset: int, *, comment: bytes = b"", **fields: int) -> bytes:
    values = {"version": 20, "system": 3, "extract": 20, "reserved": 0, "flags": 0, "method": 0, "time": 0}
    values |= {"date": 0, "crc": zlib.crc32(data), "compressed": len(data), "size": len(data)} | fields
    return (
        zipentry.CENTRAL.pack(
            zipentry.CENTRAL_SIGNATURE,
            *(
                values[k]
                for k in ("version", "system", "extract", "reserved", "flags", "method", "time", "date")
            ),
            *(values[k] for k in ("crc", "compressed", "size")),
            len(name),
            0,
            len(comment),
            0,
            0,
            0,
            offset,
        )
        + name
        + comment
    )


def _end(entries: int, cd_size: int, cd_offset: int) -> bytes:
    return zipentry.END.pack(zipentry.END_SIGNATURE, 0, 0, entries, entries, cd_size, cd_offset, 0)


def test_a_zip64_locator_in_the_last_entrys_comment_is_left_to_zipfile() -> None:
    """zipfile takes a zip64 locator and record just before the end record as the zip's, wherever they are: here inside
    the last central entry's comment, saying the directory starts where it does but the zip begins elsewhere, so that
    zipfile reads the RECORD by another local header (of the same name, size and CRC, other bytes)."""
    name = b"pkg-1.0.dist-info/RECORD"
    honest = RECORD
    other = _forged(
        b"evil/path.py,sha256=x,1\n".ljust(len(RECORD) - 4, b"#") + b"\0\0\0\0", zlib.crc32(honest)
    )
    first = _local(name, honest)
    second = _local(name, other)
    shift = len(first)  # zipfile's offsets moved by this: onto the second local header
    cd_offset = len(first) + len(second)
    entry_size = zipentry.CENTRAL.size + len(name) + 56 + 20
    record64 = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, entry_size - 76, cd_offset - shift
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, 0, 1)
    directory = _central(name, honest, 0, comment=record64 + locator)
    # zipfile: the directory is the `size` bytes before the zip64 record, from the entry on; the zip starts at `shift`
    data = first + second + directory + _end(1, len(directory), cd_offset)
    assert _by_zipfile(data) == other  # what zipfile reads: the other bytes
    assert zipentry.member(io.BytesIO(data), "RECORD", 1 << 20) in (None, other)


def test_a_central_signature_inside_the_entrys_own_fields_is_left_to_zipfile() -> None:
    """A central entry whose first bytes after its signature spell another signature, a fake entry 4 bytes in (its
    fields are the real entry's fields and the first 4 bytes of its name) naming `x.dist-info/RECORD` and another local
    header, 16 MB on: zipfile reads the real entry's RECORD, so must this (or leave it to zipfile)."""
    # the fake's CRC: the real's size
    real_data, fake_data = (
        RECORD[:30],
        _forged(b"evil.py,sha256=x,1\n\0\0\0", 30),
    )
    # the fake's offset: the real name's first 4 bytes
    fake_name, lead = (
        b"x.dist-info/RECORD",
        b"\x01\x01\x01\x01",
    )
    fake_at = int.from_bytes(lead, "little")
    real_local = _local(lead + fake_name, real_data)
    fake_local = _local(fake_name, fake_data, zipfile.ZIP_DEFLATED)
    # 30 bytes of data
    fake_local = fake_local.ljust(zipentry.LOCAL.size + len(fake_name) + len(real_data), b"\0")
    body = real_local + b"\0" * (fake_at - len(real_local)) + fake_local
    real = _central(
        lead + fake_name,
        real_data,
        0,
        comment=b"",
        version=ord("P"),
        system=ord("K"),
        extract=1,
        reserved=2,
        method=zipfile.ZIP_STORED,
        date=zipfile.ZIP_DEFLATED,  # the fake's method
    )
    fields = list(zipentry.CENTRAL.unpack(real[: zipentry.CENTRAL.size]))
    # the comment length, the fake's name length: its name ends where the real one does
    fields[14] = len(fake_name)
    real = zipentry.CENTRAL.pack(*fields) + real[zipentry.CENTRAL.size :] + b"\0" * len(fake_name)
    data = body + real + _end(1, len(real), len(body))
    assert _by_zipfile(data) == real_data
    assert zipentry.member(io.BytesIO(data), "RECORD", 1 << 20) in (None, real_data)


class _Counted(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, size: int | None = -1, /) -> bytes:
        got = super().read(size)
        self.taken += len(got)
        return got


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED], ids=["deflated", "stored"])
def test_a_compressed_size_that_lies_is_not_read_past_the_limit(method: int) -> None:
    """A 100-byte RECORD whose entry says it takes 8 MB compressed (the rest of a big wheel): what the entry's size
    allows is read, not 8 MB (zipfile reads no more than the limit either)."""
    name = b"pkg-1.0.dist-info/RECORD"
    local = _local(name, RECORD[:100], method)
    padded = local + b"\0" * (8 << 20)
    compressed = len(padded) - zipentry.LOCAL.size - len(name)
    directory = _central(name, RECORD[:100], 0, method=method, compressed=compressed)
    stream = _Counted(padded + directory + _end(1, len(directory), len(padded)))
    zipentry.member(stream, "RECORD", 1 << 20)
    assert stream.taken < 1 << 20
