"""Read which SMs a CUDA binary carries from fatbin entry headers, without touching (or decompressing) payloads.

The fatbin format is not published by NVIDIA. What this relies on is in docs/fatbin.md, with the experiments
(nvcc 13.0 -gencode sets, compressed and not, cuobjdump 13.5 on real wheels) that pin it down.
"""

from __future__ import annotations

import bisect
import struct
from collections import Counter
from typing import Any

CONTAINER_MAGIC = 0xBA55ED50
CONTAINER_VERSION = 1  # every one of the 46,764 containers in the wheels of issue 13
# What the search looks for: the magic alone. Adding the version and header size (01 00 10 00) would end the needle
# in zero bytes, which makes CPython's search step one byte at a time through zero-filled data (5x slower here).
CONTAINER_START = struct.pack("<I", CONTAINER_MAGIC)
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
# the same, then the arch (at 28) and flags (at 40): one read per entry
_ENTRY_READ = struct.Struct("<HHIQ12xI8xQ")
CONTAINER_HEADER = 16
ENTRY_ARCH_OFFSET = 28  # u32: 90, 100, 120 ...
ENTRY_FLAGS_OFFSET = 40  # u64
ENTRY_HEADER_MIN, ENTRY_HEADER_MAX = ENTRY_FLAGS_OFFSET + 8, 4096
KIND_PTX, KIND_CUBIN, KIND_LTO = 1, 2, 8
FLAG_ARCH_SPECIFIC = 0x100000  # the `a` variant (sm_90a)
FLAG_FAMILY = 0x200000  # the `f` variant (sm_120f)
FLAG_COMPRESSED = 0x2000 | 0x8000  # LZ4 (CUDA <= 12) and the newer compression of CUDA 12.8+/13
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
RELOCATABLE_SECTION = "__nv_relfatbin"


class Counts:
    """Entries by label, and how many were compressed, in how many containers. (Counts and Code are plain classes, as
    render's blocks are named tuples: a dataclass is generated at import, a cost a one-file `scan --json` feels.)"""

    __slots__ = ("cubin", "ptx", "lto", "compressed", "containers")

    def __init__(
        self,
        cubin: Counter[str] | None = None,
        ptx: Counter[str] | None = None,
        lto: Counter[str] | None = None,
        compressed: int = 0,
        containers: int = 0,
    ) -> None:
        self.cubin: Counter[str] = Counter() if cubin is None else cubin
        self.ptx: Counter[str] = Counter() if ptx is None else ptx
        self.lto: Counter[str] = Counter() if lto is None else lto
        self.compressed, self.containers = compressed, containers

    def _key(self) -> tuple[object, ...]:
        return self.cubin, self.ptx, self.lto, self.compressed, self.containers

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Counts) and self._key() == other._key()

    def __repr__(self) -> str:
        return (
            f"Counts(cubin={self.cubin!r}, ptx={self.ptx!r}, lto={self.lto!r}, compressed={self.compressed}, "
            f"containers={self.containers})"
        )

    def add(self, other: Counts) -> None:
        self.cubin.update(other.cubin)
        self.ptx.update(other.ptx)
        self.lto.update(other.lto)
        self.compressed += other.compressed
        self.containers += other.containers

    def labels(self) -> dict[str, dict[str, int]]:
        """{"cubin": {...}, "ptx": {...}, "lto": {...}}, each sorted by label: the JSON form of the counts."""
        return {kind: dict(sorted(getattr(self, kind).items())) for kind in ("cubin", "ptx", "lto")}

    @property
    def empty(self) -> bool:
        return not (self.cubin or self.ptx or self.lto)


class Code:
    """What one file carries: `loadable` is what the driver can load; `relocatable` is device code a shared
    library or executable keeps only as link input (`__nv_relfatbin`), never loaded, never judged."""

    __slots__ = ("loadable", "relocatable")

    def __init__(self, loadable: Counts | None = None, relocatable: Counts | None = None) -> None:
        self.loadable = Counts() if loadable is None else loadable
        self.relocatable = Counts() if relocatable is None else relocatable

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Code) and (self.loadable, self.relocatable) == (
            other.loadable,
            other.relocatable,
        )

    def __repr__(self) -> str:
        return f"Code(loadable={self.loadable!r}, relocatable={self.relocatable!r})"

    def add(self, other: Code) -> None:
        self.loadable.add(other.loadable)
        self.relocatable.add(other.relocatable)

    @property
    def empty(self) -> bool:
        return self.loadable.empty and self.relocatable.empty


def entry_label(kind: int, arch: int, flags: int) -> str:
    """Return "sm_120f", "compute_90a" or "lto_100" for an entry header's kind, arch and flags."""
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else ("f" if flags & FLAG_FAMILY else "")
    prefix = {KIND_PTX: "compute", KIND_CUBIN: "sm", KIND_LTO: "lto"}.get(kind, f"kind{kind}")
    return f"{prefix}_{arch}{suffix}"


def container_at(buffer: Any, offset: int) -> int:
    """Return the size (header + entries) of a plausible container at `offset`, or 0 when there is none.

    Plausible means: the magic, version 1, a 16-byte header, and a first entry header of a known kind and a sane
    size whose payload fits the body. That is what lets containers be found by magic anywhere in a file (cuFFT
    keeps thousands in `.data`/`.ldata`) without counting stray bytes that happen to match. The caller checks
    the size fits.
    """
    if offset + CONTAINER_HEADER + ENTRY_HEADER_MIN > len(buffer):
        return 0
    magic, version, header_size, body_size = _CONTAINER.unpack_from(buffer, offset)
    if (magic, version, header_size) != (CONTAINER_MAGIC, CONTAINER_VERSION, CONTAINER_HEADER):
        return 0
    if body_size < ENTRY_HEADER_MIN:
        return 0
    kind, _v, entry_header, payload = _ENTRY.unpack_from(buffer, offset + CONTAINER_HEADER)
    if (
        kind not in (KIND_PTX, KIND_CUBIN, KIND_LTO)
        or not ENTRY_HEADER_MIN <= entry_header <= ENTRY_HEADER_MAX
    ):
        return 0
    if entry_header + payload > body_size:
        return 0
    return CONTAINER_HEADER + int(body_size)


def count_entry(buffer: Any, offset: int, counts: Counts) -> int:
    """Count the entry whose header is at `offset` (ENTRY_HEADER_MIN bytes held); return how far the next entry is,
    0 when this is no entry."""
    kind, _v, entry_header, payload, arch, flags = _ENTRY_READ.unpack_from(buffer, offset)
    if not ENTRY_HEADER_MIN <= entry_header <= ENTRY_HEADER_MAX:
        return 0  # not an entry header we understand: stop rather than invent counts
    key = (kind, arch, flags & (FLAG_ARCH_SPECIFIC | FLAG_FAMILY))
    label = _LABELS.get(key) or _LABELS.setdefault(key, entry_label(kind, arch, flags))
    bucket = counts.cubin if kind == KIND_CUBIN else counts.ptx if kind == KIND_PTX else counts.lto
    bucket[label] += 1
    if flags & FLAG_COMPRESSED:
        counts.compressed += 1
    return int(entry_header + payload)


# (kind, arch, variant flags) -> label: a library has a few dozen
_LABELS: dict[tuple[int, int, int], str] = {}


def parse(buffer: Any, start: int, size: int, counts: Counts, hits: list[int] | None = None) -> None:
    """Count every container in buffer[start:start+size], found by magic and header, jumping over each one found
    (so a section that is all fatbin costs one look per container, not a read of its payloads). `hits`, when given,
    are every offset of the magic in that range, in order (found beforehand, in parallel: provision.scan.search):
    the same walk, without searching again."""
    offset, end = start, min(start + size, len(buffer))
    while offset < end:
        if hits is None:
            found = buffer.find(CONTAINER_START, offset, end)
        else:
            index = bisect.bisect_left(hits, offset)
            found = hits[index] if index < len(hits) and hits[index] + len(CONTAINER_START) <= end else -1
        if found < 0:
            return
        length = container_at(buffer, found)
        if not length or found + length > end:
            offset = found + 1
            continue
        counts.containers += 1
        entry = found + CONTAINER_HEADER
        while entry + ENTRY_HEADER_MIN <= found + length and (step := count_entry(buffer, entry, counts)):
            entry += step
        offset = found + length
