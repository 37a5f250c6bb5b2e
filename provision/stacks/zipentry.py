"""One `.dist-info/` member of a wheel read by its own entry in the zip's central directory, the rest of the directory
left unparsed. zipfile.ZipFile parses every entry before it opens one: 77,520 entries for the RECORDs of the SGLang
stack's 207 wheels, a quarter of what a first lock spends reading them, to read 207 members. This reads the common
case only, by APPNOTE's records (the struct formats zipfile itself reads them with, held equal by a test): a zip
without a comment or zip64 records, one entry of that name, stored or deflated, its sizes and CRC-32 checked as
zipfile checks them. Anything else answers None, and the caller reads the zip with zipfile as before."""

from __future__ import annotations

import re
import struct
import zipfile
import zlib
from typing import IO

# APPNOTE 4.3.16 (end of central directory), 4.3.12 (central directory header), 4.3.7 (local file header): each
# record's signature and layout, as zipfile's structEndArchive, structCentralDir and structFileHeader give them
END, END_SIGNATURE = struct.Struct("<4s4H2LH"), b"PK\x05\x06"
CENTRAL, CENTRAL_SIGNATURE = struct.Struct("<4s4B4HL2L5H2L"), b"PK\x01\x02"
LOCAL, LOCAL_SIGNATURE = struct.Struct("<4s2B4HL2L2H"), b"PK\x03\x04"
# fields by position in each record's unpacked tuple
_CD_FLAGS, _CD_METHOD, _CD_CRC, _CD_COMPRESSED, _CD_SIZE, _CD_NAME, _CD_DISK, _CD_OFFSET = (
    5,
    6,
    9,
    10,
    11,
    12,
    15,
    18,
)
_LF_NAME, _LF_EXTRA = 10, 11
_ENCRYPTED = 0x1
_FAR = 0xFFFFFFFF  # a 32-bit field that says "see the zip64 record"
# APPNOTE 4.3.15: zipfile takes the 20 bytes before the end record for a zip64 locator wherever they say so (even inside
# the last entry's comment) and then reads the directory and offsets it names instead
LOCATOR_SIGNATURE, LOCATOR_SIZE = b"PK\x06\x07", 20


def member(stream: IO[bytes], name: str, limit: int) -> bytes | None:
    """The bytes of the zip's one `*.dist-info/<name>` member (a single folder deep), at most `limit` of them; None
    where the zip is not of the common case (see above) or that member is larger than `limit`. What the stream raises
    (the network) is the caller's."""
    try:
        return _member(stream, name, limit)
    except struct.error:  # a field cut short: the zip ends early
        return None


def _member(stream: IO[bytes], name: str, limit: int) -> bytes | None:
    size = stream.seek(0, 2)
    if size < END.size:
        return None
    before = min(size - END.size, LOCATOR_SIZE)
    stream.seek(size - END.size - before)
    tail = _exactly(stream, before + END.size)
    if tail[: len(LOCATOR_SIGNATURE)] == LOCATOR_SIGNATURE:
        return None  # zipfile reads it as a zip64 locator
    end = END.unpack(tail[before:])
    signature, disk, cd_disk, here, entries, cd_size, cd_offset, comment = end
    if (
        signature != END_SIGNATURE
        or disk
        or cd_disk
        or comment
        or here != entries
        or 0xFFFF in (here, entries)
        or _FAR in (cd_size, cd_offset)
        or cd_offset + cd_size != size - END.size  # nothing between: no zip64 records, no prefix
    ):
        return None
    stream.seek(cd_offset)
    directory = _exactly(stream, cd_size)
    wanted = f".dist-info/{name}".encode()
    found = [m.start() for m in re.finditer(re.escape(wanted), directory)]
    if len(found) != 1:
        return None  # none, or several (zipfile's reader takes the first its order gives)
    start = directory.rfind(CENTRAL_SIGNATURE, 0, found[0])
    if start < 0 or start + CENTRAL.size > found[0]:
        return None
    if directory.find(CENTRAL_SIGNATURE, max(0, start - _SPELLED), start + len(CENTRAL_SIGNATURE) - 1) >= 0:
        return None  # a signature spelled by the fields of an entry that starts just before (see _SPELLED)
    fields = CENTRAL.unpack(directory[start : start + CENTRAL.size])
    named = directory[start + CENTRAL.size : start + CENTRAL.size + fields[_CD_NAME]]
    if (
        start + CENTRAL.size + len(named) != found[0] + len(wanted)  # the name ends where the match ends
        or named.count(b"/") != 1
        or fields[_CD_FLAGS] & _ENCRYPTED
        or fields[_CD_METHOD] not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
        or fields[_CD_DISK]
        or _FAR in (fields[_CD_COMPRESSED], fields[_CD_SIZE], fields[_CD_OFFSET])
        or fields[_CD_SIZE] > limit
        or fields[_CD_OFFSET] + LOCAL.size > cd_offset
        or fields[_CD_COMPRESSED] > _deflated_bound(fields[_CD_SIZE])  # read no further than the size allows
    ):
        return None
    stream.seek(fields[_CD_OFFSET])
    local = LOCAL.unpack(_exactly(stream, LOCAL.size))
    if local[0] != LOCAL_SIGNATURE or _exactly(stream, local[_LF_NAME]) != named:
        return None  # zipfile refuses a local header that names another file
    data_at = fields[_CD_OFFSET] + LOCAL.size + local[_LF_NAME] + local[_LF_EXTRA]
    if data_at + fields[_CD_COMPRESSED] > cd_offset:
        return None
    stream.seek(data_at)
    data = _exactly(stream, fields[_CD_COMPRESSED])
    if fields[_CD_METHOD] == zipfile.ZIP_DEFLATED:
        try:
            inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            data = inflater.decompress(data, fields[_CD_SIZE] + 1)  # never past what the entry says
        except zlib.error:
            return None
    if len(data) != fields[_CD_SIZE] or zlib.crc32(data) != fields[_CD_CRC]:
        return None
    return data


# How far into an entry a signature spelled by its own fields can start and still be taken for an entry whose name ends
# where that entry's name ends: the fake's disk number (at +34, zero) must fall within the real entry's 46 bytes of
# fields, since a zero byte in a name ends it for zipfile (which would not take that entry for the member). A fake 12 or
# more bytes on would end the real name early; one closer is refused by looking this far back.
_SPELLED = CENTRAL.size - 34 - 1


def _deflated_bound(size: int) -> int:
    """The most compressed bytes an honest entry of `size` bytes takes: deflate's worst case (stored blocks, 5 bytes of
    each 64 KiB; zlib's deflateBound is smaller) with room to spare; stored takes exactly `size`."""
    return size + (size >> 10) + 64


def _exactly(stream: IO[bytes], count: int) -> bytes:
    """`count` bytes from the stream's position; fewer where it ends (which every caller's checks then refuse)."""
    return stream.read(count) if count else b""
