"""`provision scan`: which SMs and PTX every CUDA binary carries, per file and per installed distribution."""

from __future__ import annotations

import csv
import io
import mmap
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from packaging.utils import canonicalize_name, parse_wheel_filename

from provision import compat
from provision.errors import UsageError
from provision.scan import fatbin

ELF_MAGIC = b"\x7fELF"
AR_MAGIC = b"!<arch>\n"
EM_CUDA = 190


@dataclass
class FileScan:
    path: str
    package: str | None
    counts: fatbin.Counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "package": self.package,
            **self.counts.labels(),
            "compressed_entries": self.counts.compressed,
        }


@dataclass
class PackageScan:
    name: str | None
    files: int = 0
    counts: fatbin.Counts = field(default_factory=fatbin.Counts)
    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)  # cc -> (status, reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "files": self.files,
            **self.counts.labels(),
            "require": {cc: {"status": s, "reason": r} for cc, (s, r) in self.verdicts.items()},
        }


@dataclass
class ScanResult:
    files: list[FileScan]
    packages: list[PackageScan]
    scanned: int
    seconds: float
    require: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(s == "fail" for p in self.packages for s, _ in p.verdicts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": [f.to_dict() for f in self.files],
            "packages": [p.to_dict() for p in self.packages],
            "require": list(self.require),
            "scanned_files": self.scanned,
            "seconds": round(self.seconds, 4),
            "notes": self.notes,
        }


def counts_in_elf(stream: Any, buffer: Any) -> fatbin.Counts:
    """`buffer` is anything struct.unpack_from reads: bytes, a memoryview or an mmap."""
    counts = fatbin.Counts()
    elf = ELFFile(stream)
    if elf["e_machine"] in ("EM_CUDA", EM_CUDA):
        counts.cubin[fatbin.cubin_label(elf["e_flags"], elf["e_ident"]["EI_ABIVERSION"])] += 1
        return counts
    # Most shared objects in a venv carry no device code: their section-name table says so, and reading that one
    # section is far cheaper than building every section (this is what makes a whole venv quick).
    names = elf.get_section(elf["e_shstrndx"]).data() if elf["e_shstrndx"] else b""
    if not any(name.encode() in names for name in fatbin.FATBIN_SECTIONS):
        return counts
    for section in elf.iter_sections():
        if section.name in fatbin.FATBIN_SECTIONS and section["sh_type"] != "SHT_NOBITS":
            # Read at the section-header file offset: a fatbin section need not lie in a loadable segment.
            fatbin.parse(buffer, section["sh_offset"], section["sh_size"], counts)
    return counts


def counts_in_bytes(data: bytes) -> fatbin.Counts:
    if data[:4] == ELF_MAGIC:
        return counts_in_elf(io.BytesIO(data), data)
    if data[:8] == AR_MAGIC:
        total = fatbin.Counts()
        for member in ar_members(data):
            if member[:4] == ELF_MAGIC:
                total.add(counts_in_elf(io.BytesIO(member), member))
        return total
    return fatbin.Counts()


def ar_members(data: bytes) -> Iterator[bytes]:
    """Yield the contents of each member of a Unix `ar` archive (the stdlib has no reader for it)."""
    offset = len(AR_MAGIC)
    while offset + 60 <= len(data):
        header = data[offset : offset + 60]
        size = int(header[48:58].decode().strip() or 0)
        name = header[:16].decode(errors="replace").strip()
        body = offset + 60
        if name not in ("/", "//", "/SYM64/"):
            content = data[body : body + size]
            if name.startswith("#1/"):  # BSD long name stored ahead of the content
                content = content[int(name[3:]) :]
            yield content
        offset = body + size + (size % 2)


def counts_in_file(path: Path) -> fatbin.Counts:
    with open(path, "rb") as handle:
        head = handle.read(8)
        if head[:4] != ELF_MAGIC and head != AR_MAGIC:
            return fatbin.Counts()
        if os.fstat(handle.fileno()).st_size == 0:
            return fatbin.Counts()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            if head == AR_MAGIC:
                return counts_in_bytes(mapped[:])
            handle.seek(0)
            return counts_in_elf(handle, mapped)


def _record_root(root: Path) -> Path:
    """Where the RECORD files for `root` are: its enclosing site-packages when `root` lies inside one."""
    for folder in (root.resolve(), *root.resolve().parents):
        if folder.name in ("site-packages", "dist-packages"):
            return folder
    return root


def record_owners(root: Path) -> dict[str, str]:
    """Map every file listed in a `.dist-info/RECORD` under `root` (or its site-packages) to its distribution,
    keyed by normalized path (no per-row resolve(): a venv's RECORD files list tens of thousands of rows)."""
    owners: dict[str, str] = {}
    for record in _record_root(root).glob("**/*.dist-info/RECORD"):
        site = record.parent.parent
        name = record.parent.name.rsplit("-", 1)[0]
        try:
            meta = (record.parent / "METADATA").read_text(errors="replace")
            name = next(line[6:].strip() for line in meta.splitlines() if line.startswith("Name: "))
        except (OSError, StopIteration):
            pass
        distribution = str(canonicalize_name(name))
        prefix = str(site)
        with open(record, newline="", errors="replace") as handle:
            for row in csv.reader(handle):
                if row:
                    owners[os.path.normpath(os.path.join(prefix, row[0]))] = distribution
    return owners


def _walk(root: Path) -> Iterator[Path]:
    """Regular files that may hold device code: shared objects, cubins, objects, archives, executables.
    Links are not followed, so a library reached twice is counted once."""
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False) and _is_candidate(entry):
                yield Path(entry.path)


def _is_candidate(entry: os.DirEntry[str]) -> bool:
    name = entry.name
    if ".so" in name or name.endswith((".cubin", ".o", ".a", ".fatbin")):
        return True
    if name.endswith((".py", ".pyc", ".pyi", ".txt", ".json", ".h", ".hpp", ".cuh", ".md")):
        return False
    try:
        return bool(entry.stat(follow_symlinks=False).st_mode & 0o111)
    except OSError:
        return False


def scan(paths: list[Path], require: tuple[str, ...] = ()) -> ScanResult:
    import time

    start = time.perf_counter()
    files: list[FileScan] = []
    notes: list[str] = []
    scanned = 0
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory", "give a shared object, cubin, wheel or folder")
        if path.is_dir():
            owners = record_owners(path)
            for file in _walk(path):
                scanned += 1
                counts = _safe(lambda f=file: counts_in_file(f), file, notes)
                if counts and not counts.empty:
                    files.append(FileScan(str(file), owners.get(os.path.normpath(file)), counts))
        elif path.suffix == ".whl":
            package = str(canonicalize_name(parse_wheel_filename(path.name)[0]))
            with zipfile.ZipFile(path) as wheel:
                for info in wheel.infolist():
                    if info.is_dir():
                        continue
                    with wheel.open(info) as member:
                        head = member.read(8)
                    if head[:4] != ELF_MAGIC and head != AR_MAGIC:
                        continue
                    scanned += 1
                    counts = _safe(lambda i=info: counts_in_bytes(wheel.read(i)), Path(info.filename), notes)
                    if counts and not counts.empty:
                        files.append(FileScan(f"{path}!{info.filename}", package, counts))
        else:
            scanned += 1
            counts = _safe(lambda p=path: counts_in_file(p), path, notes)
            if counts and not counts.empty:
                files.append(FileScan(str(path), None, counts))
    packages = _by_package(files, require)
    return ScanResult(files, packages, scanned, time.perf_counter() - start, require, notes)


def _safe(fn: Any, path: Path, notes: list[str]) -> fatbin.Counts | None:
    try:
        result: fatbin.Counts = fn()
        return result
    except (ELFError, OSError, ValueError, struct_error) as exc:
        notes.append(f"{path}: not read ({type(exc).__name__}: {exc})")
        return None


struct_error = __import__("struct").error


def _by_package(files: list[FileScan], require: tuple[str, ...]) -> list[PackageScan]:
    packages: dict[str | None, PackageScan] = {}
    for file in files:
        package = packages.setdefault(file.package, PackageScan(file.package))
        package.files += 1
        package.counts.add(file.counts)
    for package in packages.values():
        opaque = compat.opaque_kernels(package.name)
        for cc in require:
            package.verdicts[cc] = ("skip", f"not judged from headers: {opaque}") if opaque else verdict(package.counts, cc)
    return sorted(packages.values(), key=lambda p: p.name or "")


def verdict(counts: fatbin.Counts, cc: str) -> tuple[str, str]:
    """PASS: native code runs on `cc`; WARN: only PTX the driver must JIT; FAIL: "no kernel image" predicted."""
    sm = compat.sm_name(cc)
    native = sorted(label for label in counts.cubin if compat.label_runs_on(label, cc))
    if native:
        return "pass", f"native code for {sm}: {', '.join(native)}"
    ptx = sorted(label for label in counts.ptx if compat.label_runs_on(label, cc))
    if ptx:
        return "warn", f"no cubin for {sm}; the driver must JIT PTX {', '.join(ptx)} at first load (slow first run)"
    carried = ", ".join(sorted(counts.cubin) + sorted(counts.ptx)) or "nothing"
    return "fail", f"nothing runs on {sm} (carries {carried}): 'no kernel image is available for execution'"
