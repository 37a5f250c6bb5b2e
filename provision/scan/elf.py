"""The device code of one ELF image (shared object, executable, object, bare cubin) held in a buffer.

The ELF header and section table of a 64-bit little-endian file (every CUDA binary of CUDA 12 and 13) are read with
`struct`, as the System V ABI lays them out: importing pyelftools costs a third of what
`provision scan FILE` takes as a whole process. Every other ELF (32-bit, big-endian) goes through pyelftools, and
tests/test_scan_elf.py checks that both readers give the same table on real files.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from provision.scan import fatbin

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
SHT_PROGBITS, SHT_NOBITS = 1, 8
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
SHN_XINDEX = 0xFFFF
_HEADER = struct.Struct("<HHIQQQIHHHHHH")  # e_type ... e_shstrndx, after the 16 bytes of e_ident
# sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, link, info, ...
_SECTION = struct.Struct("<IIQQQQIIQQ")
# Bare cubins: the `a` variant. CUDA 12.8/12.9 set bit 0x8 of e_flags (ELF ABI version 8; LLVM's
# EF_CUDA_ACCELERATORS_V2) and 0x800 before (EF_CUDA_ACCELERATORS); nvcc 13 leaves e_flags alone and writes
# attribute 9 = 1 in `.nv.compat` (sm_90a, sm_100a, sm_120a: 1; sm_100, sm_100f: 0; docs/fatbin.md).
EF_CUDA_ACCELERATORS_V2, EF_CUDA_ACCELERATORS = 0x8, 0x800
COMPAT_ARCH_SPECIFIC = 9


# named tuples, not dataclasses: made at import in a sixth of the time (fatbin.Counts)
class Section(NamedTuple):
    name: str
    type: int
    flags: int
    offset: int
    size: int


class Image(NamedTuple):
    type: int
    machine: int
    flags: int
    abi_version: int
    sections: tuple[Section, ...]

    @property
    def linked(self) -> bool:
        """A shared object or executable: what the driver loads is its allocated sections only."""
        return self.type in (ET_EXEC, ET_DYN)


class Header(NamedTuple):
    type: int
    machine: int
    flags: int
    abi_version: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


def read_header(buffer: Any, base: int = 0) -> Header | None:
    """The ELF header of a 64-bit little-endian file at buffer[base:]; None for any other ELF class or order."""
    ident = bytes(buffer[base : base + 16])
    if len(ident) < 16 or ident[:4] != ELF_MAGIC:
        raise ValueError("not an ELF file")
    if ident[4] != 2 or ident[5] != 1:  # not ELFCLASS64 + ELFDATA2LSB
        return None
    if len(buffer) < base + 64:
        raise ValueError("ELF header truncated")
    (e_type, machine, _v, _entry, phoff, shoff, flags, _eh, phentsize, phnum, shentsize, shnum, shstrndx) = (
        _HEADER.unpack_from(buffer, base + 16)
    )
    return Header(
        e_type, machine, flags, ident[8], phoff, phentsize, phnum, shoff, shentsize, shnum, shstrndx
    )


def section_rows(header: Header, buffer: Any, at: int, length: int) -> tuple[list[tuple[int, ...]], int]:
    """The raw section headers (from buffer[at:], `length` bytes held) and the index of the section-name table,
    extended numbering resolved; ValueError when the table runs past the bytes held."""
    if not header.shoff or header.shentsize < _SECTION.size:
        return [], 0
    if length < _SECTION.size:
        raise ValueError("truncated or damaged: no section table where the ELF header points")
    first = _SECTION.unpack_from(buffer, at)
    count = first[5] if header.shnum == 0 else header.shnum  # extended numbering: the count is in section 0
    names = first[6] if header.shstrndx == SHN_XINDEX else header.shstrndx
    if count * header.shentsize > length:
        raise ValueError("truncated or damaged: its section table ends past the end of the file")
    return [_SECTION.unpack_from(buffer, at + index * header.shentsize) for index in range(count)], names


def name_sections(
    rows: list[tuple[int, ...]], names: Any, names_at: int, names_size: int
) -> tuple[Section, ...]:
    """Sections named from the string table held at names[names_at:names_at+names_size]."""
    sections = []
    for row in rows:
        name = ""
        if row[0] < names_size:
            end = names.find(b"\0", names_at + row[0], names_at + names_size)
            name = bytes(names[names_at + row[0] : end]).decode(errors="replace") if end >= 0 else ""
        sections.append(Section(name, row[1], row[2], row[4], row[5]))
    return tuple(sections)


def read_image(buffer: Any, base: int, length: int) -> Image:
    """Return the ELF header fields and section table of the ELF image at buffer[base:base+length]."""
    header = read_header(buffer, base)
    if header is None:
        return _read_with_pyelftools(bytes(buffer[base : base + length]))
    if length < 64:
        raise ValueError("ELF header truncated")
    rows, names = section_rows(header, buffer, base + header.shoff, max(0, length - header.shoff))
    names_at, names_size = 0, 0
    if names < len(rows) and rows[names][4] < length:
        names_at, names_size = base + rows[names][4], min(rows[names][5], length - rows[names][4])
    sections = name_sections(rows, buffer, names_at, names_size)
    return Image(header.type, header.machine, header.flags, header.abi_version, sections)


def _read_with_pyelftools(data: bytes) -> Image:
    import io

    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    sections = tuple(
        Section(
            s.name,
            {"SHT_PROGBITS": SHT_PROGBITS, "SHT_NOBITS": SHT_NOBITS}.get(s["sh_type"], 0),
            s["sh_flags"],
            s["sh_offset"],
            s["sh_size"],
        )
        for s in elf.iter_sections()
    )
    types = {"ET_REL": ET_REL, "ET_EXEC": ET_EXEC, "ET_DYN": ET_DYN}
    machine = EM_CUDA if elf["e_machine"] in ("EM_CUDA", EM_CUDA) else 0
    return Image(
        types.get(elf["e_type"], 0), machine, elf["e_flags"], elf["e_ident"]["EI_ABIVERSION"], sections
    )


def code_in_image(buffer: Any, base: int = 0, length: int | None = None, jobs: int = 1) -> fatbin.Code:
    """Return the device code of the ELF image at buffer[base:base+length] (the whole buffer by default). The data
    sections searched by magic are searched over `jobs` processes when large (provision.scan.search); the fatbin
    sections are walked container to container meanwhile."""
    length = len(buffer) - base if length is None else length
    image = read_image(buffer, base, length)
    code = fatbin.Code()
    if image.machine == EM_CUDA:
        code.loadable.cubin[cubin_label(image, buffer, base, length)] += 1
        return code
    walked: list[tuple[int, int, fatbin.Counts]] = []
    searched: list[tuple[int, int, fatbin.Counts]] = []
    for section in image.sections:
        target = role(image, section)
        if target is None or section.offset >= length:
            continue
        # a size past the end of the file is damage: clip it
        size = min(section.size, length - section.offset)
        counts = code.relocatable if target == "relocatable" else code.loadable
        (walked if section.name in fatbin.FATBIN_SECTIONS else searched).append(
            (base + section.offset, size, counts)
        )
    from provision.scan import search

    pending = search.Search(
        buffer, [(start, start + size) for start, size, _counts in searched], jobs, walking=bool(walked)
    )
    for start, size, counts in walked:
        fatbin.parse(buffer, start, size, counts)
    hits = pending.result()
    for start, size, counts in searched:
        fatbin.parse(buffer, start, size, counts, hits)
    return code


# Sections whose format the toolchain fixes, never a place for a container: call-frame and exception tables and the
# GOT (addresses). Not searched: they are 13-49 MB of libtorch_cpu, libtriton and libtensorflow_cc.
TOOLCHAIN_DATA = frozenset({".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".got", ".got.plt"})


def role(image: Image, section: Section) -> str | None:
    """Where the containers of a section count: "loadable", "relocatable" (the link-input copy a shared library
    or executable keeps), or None (not looked at). Besides the two fatbin sections, containers are looked for by
    magic in data the program loads (or, in an object, carries), never in code or in the toolchain's own tables:
    cuFFT keeps its kernels in `.ldata` (CUDA 12) or `.data` (CUDA 13), cuBLASLt in `.cask_resource`, TensorFlow
    PTX in `.rodata`."""
    if section.type == SHT_NOBITS or section.size == 0 or section.name in TOOLCHAIN_DATA:
        return None
    if section.name == fatbin.RELOCATABLE_SECTION:
        return "relocatable" if image.linked else "loadable"
    if section.name == ".nv_fatbin":
        return "loadable"
    loaded_data = (
        section.type == SHT_PROGBITS and section.flags & SHF_ALLOC and not section.flags & SHF_EXECINSTR
    )
    return "loadable" if loaded_data else None


def cubin_label(image: Image, buffer: Any, base: int, length: int) -> str:
    """Return the SM of a bare cubin: bits 8-15 of e_flags from ELF ABI version 8 (bits 0-7 before), with `a`
    when e_flags or `.nv.compat` says so. Family (`f`) cubins carry no mark and are labelled plainly, as
    cuobjdump labels them."""
    if image.abi_version >= 8:
        sm, specific = (image.flags >> 8) & 0xFF, bool(image.flags & EF_CUDA_ACCELERATORS_V2)
    else:
        sm, specific = image.flags & 0xFF, bool(image.flags & EF_CUDA_ACCELERATORS)
    for section in image.sections:
        if section.name == ".nv.compat" and section.offset < length:
            data = bytes(buffer[base + section.offset : base + min(section.offset + section.size, length)])
            specific = specific or compat_attributes(data).get(COMPAT_ARCH_SPECIFIC) == 1
    return f"sm_{sm}{'a' if specific else ''}"


def compat_attributes(data: bytes) -> dict[int, int]:
    """Return {attribute: value} of a `.nv.compat` section: records of (format, attribute, value) as in `.nv.info`
    (format 1: no value, 2: a byte, 3: a u16, 4: a u16 size then that many bytes, kept as its first byte)."""
    found: dict[int, int] = {}
    offset = 0
    while offset + 4 <= len(data):
        form, attribute = data[offset], data[offset + 1]
        if form == 2:
            found[attribute] = data[offset + 2]
        elif form == 3:
            found[attribute] = int.from_bytes(data[offset + 2 : offset + 4], "little")
        elif form == 4:
            size = int.from_bytes(data[offset + 2 : offset + 4], "little")
            found[attribute] = data[offset + 4] if size and offset + 4 < len(data) else 0
            offset += size
        elif form != 1:
            break
        offset += 4
    return found
