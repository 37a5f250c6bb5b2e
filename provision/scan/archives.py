"""Members of a Unix `ar` archive (static libraries, `.a`): the standard library has no reader for them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

AR_MAGIC = b"!<arch>\n"
HEADER = _HEADER = 60  # name[16] mtime[12] uid[6] gid[6] mode[8] size[10] fmag[2]
_SPECIAL = ("/", "//", "/SYM64/")


class DamagedArchive(ValueError):
    """A member header that cannot be right: its size is not a non-negative decimal, or it runs past the end."""


def header_at(header: bytes, offset: int) -> tuple[str | None, int, int, int]:
    """(name, body offset, body length, offset of the next header) of the member whose 60-byte header starts at
    `offset`; the name is None for the archive's own tables (symbols, long names); a BSD long name's bytes are not
    part of the body."""
    if header[58:60] != b"`\n":
        raise DamagedArchive(f"member header at byte {offset} has no end marker")
    text = header[48:58].decode("ascii", errors="replace").strip()
    if not text.isdigit():
        raise DamagedArchive(f"member at byte {offset} has size {text!r}")
    size, body = int(text), offset + _HEADER
    after = body + size + (size % 2)
    name = header[:16].decode(errors="replace").strip()
    if name in _SPECIAL:
        return None, body, size, after
    if name.startswith("#1/"):
        skip = name[3:]
        if not skip.isdigit() or int(skip) > size:
            raise DamagedArchive(f"member at byte {offset} has a bad BSD name {name!r}")
        return name, body + int(skip), size - int(skip), after
    return name, body, size, after


def members(buffer: Any, base: int = 0, length: int | None = None) -> Iterator[tuple[str, int, int]]:
    """Yield (name, offset, size) of each member of the archive at buffer[base:base+length]; offsets are into buffer.

    Every step moves forward by at least one header, so a damaged archive ends the walk instead of looping.
    """
    end = base + (len(buffer) - base if length is None else length)
    offset = base + len(AR_MAGIC)
    while offset + _HEADER <= end:
        name, body, size, after = header_at(bytes(buffer[offset : offset + _HEADER]), offset - base)
        body, after = body + base, after + base  # header_at counts from the archive's start
        if body + size > end:
            raise DamagedArchive(
                f"member at byte {offset - base} runs {body + size - end} bytes past the end"
            )
        if name is not None:
            yield name, body, size
        offset = after
