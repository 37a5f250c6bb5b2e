"""Read which SMs a CUDA binary carries from fatbin entry headers, without touching (or decompressing) payloads.

The fatbin format is not published by NVIDIA. What this relies on is in docs/fatbin.md, with the experiments
(nvcc 13.0 -gencode sets, compressed and not) that pin it down and the sources that agree with them.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

CONTAINER_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
ENTRY_ARCH_OFFSET = 28  # u32: 90, 100, 120 ...
ENTRY_FLAGS_OFFSET = 40  # u64
KIND_PTX, KIND_CUBIN, KIND_LTO = 1, 2, 8
FLAG_ARCH_SPECIFIC = 0x100000  # the `a` variant (sm_90a)
FLAG_FAMILY = 0x200000  # the `f` variant (sm_120f)
FLAG_COMPRESSED = 0x2000 | 0x8000  # LZ4 (CUDA <= 12) and the newer compression of CUDA 12.8+/13
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")


@dataclass
class Counts:
    cubin: Counter[str] = field(default_factory=Counter)
    ptx: Counter[str] = field(default_factory=Counter)
    lto: Counter[str] = field(default_factory=Counter)
    compressed: int = 0
    containers: int = 0

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


def entry_label(kind: int, arch: int, flags: int) -> str:
    """Return "sm_120f", "compute_90a" or "lto_100" for an entry header's kind, arch and flags."""
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else ("f" if flags & FLAG_FAMILY else "")
    prefix = {KIND_PTX: "compute", KIND_CUBIN: "sm", KIND_LTO: "lto"}.get(kind, f"kind{kind}")
    return f"{prefix}_{arch}{suffix}"


def parse(buffer: Any, start: int, size: int, counts: Counts) -> None:
    """Count every entry of every container in buffer[start:start+size]; containers may be padded apart."""
    offset, end = start, start + size
    while offset + _CONTAINER.size <= end:
        magic, _version, header_size, body_size = _CONTAINER.unpack_from(buffer, offset)
        if magic != CONTAINER_MAGIC:
            offset += 8  # containers are 8-byte aligned; skip padding between them
            continue
        counts.containers += 1
        entry = offset + header_size
        body_end = min(entry + body_size, end)
        while entry + _ENTRY.size <= body_end:
            kind, _v, entry_header, payload = _ENTRY.unpack_from(buffer, entry)
            if entry_header < ENTRY_FLAGS_OFFSET + 8:
                break  # not an entry header we understand: stop rather than invent counts
            (arch,) = struct.unpack_from("<I", buffer, entry + ENTRY_ARCH_OFFSET)
            (flags,) = struct.unpack_from("<Q", buffer, entry + ENTRY_FLAGS_OFFSET)
            label = entry_label(kind, arch, flags)
            bucket = counts.cubin if kind == KIND_CUBIN else counts.ptx if kind == KIND_PTX else counts.lto
            bucket[label] += 1
            counts.compressed += 1 if flags & FLAG_COMPRESSED else 0
            entry += entry_header + payload
        offset = max(body_end, offset + 8)


def cubin_label(e_flags: int, abi_version: int) -> str:
    """Return the SM of a bare cubin from its ELF header: bits 8-15 of e_flags from ABI version 8, else bits 0-7.

    Bare cubins do not record the `a`/`f` variant in e_flags (nvcc 13.0: sm_120, sm_120a and sm_120f cubins all
    carry 0x6007802), so a bare cubin is labelled plainly, as cuobjdump does.
    """
    sm = (e_flags >> 8) & 0xFF if abi_version >= 8 else e_flags & 0xFF
    return f"sm_{sm}"
