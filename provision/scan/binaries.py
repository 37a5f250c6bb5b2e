"""`provision scan`: which SMs and PTX every CUDA binary carries, per file and per installed distribution version.

Imports are kept to what a one-file scan needs (a whole `provision scan --json FILE` is a short process): packaging,
csv, zipfile and the knowledge tables load only when a folder, a wheel or `--require` asks for them.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from provision import regular
from provision.errors import InputError
from provision.scan import archives, elf, fatbin

if TYPE_CHECKING:
    from pathlib import Path


# named tuples and a plain class: no dataclass generated at import (fatbin.Counts)
class FileScan(NamedTuple):
    path: str
    package: str | None
    code: fatbin.Code
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "package": self.package,
            "version": self.version,
            **self.code.loadable.labels(),
            "compressed_entries": self.code.loadable.compressed,
            "relocatable": self.code.relocatable.labels(),
        }


class PackageScan:
    """One distribution version: its files' code added up, and its verdict on each SM required."""

    def __init__(self, name: str | None, version: str | None = None) -> None:
        self.name, self.version, self.files = name, version, 0
        self.code = fatbin.Code()
        self.verdicts: dict[str, tuple[str, str]] = {}  # cc -> (status, reason)

    @property
    def counts(self) -> fatbin.Counts:
        """The code the driver can load: what verdicts are made of."""
        return self.code.loadable

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "files": self.files,
            **self.code.loadable.labels(),
            "relocatable": self.code.relocatable.labels(),
            "require": {cc: {"status": s, "reason": r} for cc, (s, r) in self.verdicts.items()},
        }


class ScanResult(NamedTuple):
    files: list[FileScan]
    packages: list[PackageScan]
    scanned: int
    seconds: float
    require: tuple[str, ...]
    notes: list[str]

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


def code_in_file(path: str | os.PathLike[str]) -> fatbin.Code:
    """The device code of one file on disk: an ELF file, an ar archive, or nothing."""
    with os.fdopen(regular.open_fd(path), "rb") as handle:
        head = handle.read(8)
        if head[:4] != elf.ELF_MAGIC and head != archives.AR_MAGIC:
            return fatbin.Code()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            if head != archives.AR_MAGIC:
                return elf.code_in_image(mapped, jobs=len(os.sched_getaffinity(0)))
            total = fatbin.Code()
            for _name, offset, size in archives.members(mapped):
                if mapped[offset : offset + 4] == elf.ELF_MAGIC:
                    total.add(elf.code_in_image(mapped, offset, size))
            return total


def counts_in_file(path: str | os.PathLike[str]) -> fatbin.Counts:
    """The code the driver can load from one file (what `check flashinfer-jit` judges a JIT build by)."""
    return code_in_file(path).loadable


def scan(
    paths: Sequence[str | os.PathLike[str]], require: tuple[str, ...] = (), jobs: int | None = None
) -> ScanResult:
    """Scan files, wheels (in place, over `jobs` processes) and folders; judge each package version on `require`.
    Paths are read as strings (os.path): a one-file scan loads no pathlib (cli/scan.py says why)."""
    start = time.perf_counter()
    files: list[FileScan] = []
    notes: list[str] = []
    scanned = 0
    for given in paths:
        path = os.fspath(given)
        try:
            os.lstat(path)
        except OSError as exc:  # `lib.so/` is not a directory (ENOTDIR), as ls says: not "no such file"
            raise InputError(
                f"{path}: {(exc.strerror or 'cannot be read').lower()}",
                "give a shared object, cubin, wheel or folder",
            ) from None
        # said, not a note of a scan that "found nothing" (exit 0)
        if os.path.islink(path) and not os.path.exists(path):
            raise InputError(
                f"{path} is a link to {os.readlink(path)}, which does not exist (a dangling link)",
                "give the file it should point to, or fix the link",
            )
        if os.path.isdir(path):
            found = _scan_folder(path, notes, jobs)
            scanned += found[0]
            files.extend(found[1])
        elif _is_wheel_name(path) and os.path.isfile(path):
            found = _scan_wheel(path, notes, jobs)
            scanned += found[0]
            files.extend(found[1])
        else:
            scanned += 1
            code = _safe(code_in_file, path, notes)
            if code is not None and not code.empty:
                files.append(FileScan(path, None, code))
    packages = _by_package(files, require)
    return ScanResult(files, packages, scanned, time.perf_counter() - start, require, notes)


def _is_wheel_name(path: str) -> bool:
    """A name with the suffix .whl as pathlib (and so a folder's walk) reads it: a file named `.whl` has none."""
    name = os.path.basename(path)
    return name.endswith(".whl") and name != ".whl"


def _scan_folder(folder: str, notes: list[str], jobs: int | None) -> tuple[int, list[FileScan]]:
    """Every file under `folder` (a venv, a wheelhouse): its owner and version from the RECORDs found there."""
    from pathlib import Path

    from provision.scan import installed

    root = Path(folder)
    owners = installed.record_owners(root)
    files: list[FileScan] = []
    scanned = 0
    for file in installed.walk(root):
        if file.suffix == ".whl":  # a wheelhouse: each wheel read in place, a bad one a note, not the end
            try:
                found = _scan_wheel(str(file), notes, jobs)
            except InputError as exc:
                notes.append(exc.message)
                continue
            scanned += found[0]
            files.extend(found[1])
            continue
        scanned += 1
        code = _safe(code_in_file, file, notes)
        if code is not None and not code.empty:
            name, version = owners.get(os.path.normpath(file), (None, None))
            files.append(FileScan(str(file), name, code, version))
    return scanned, files


def _scan_wheel(
    path: str, notes: list[str], jobs: int | None, sha256: str | None = None
) -> tuple[int, list[FileScan]]:
    """Every member of the wheel at `path` with device code: from provision's scans/ cache by the wheel's sha256 (given
    where the caller checked it, else computed: hashing costs a fraction of inflating), else scanned and kept there."""
    import zipfile
    import zlib
    from pathlib import Path

    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    from provision.scan import remembered, wheels

    try:
        name, version, _build, _tags = parse_wheel_filename(os.path.basename(path))
    except InvalidWheelFilename as exc:
        raise InputError(
            f"{path}: not a wheel file name ({exc})",
            "a wheel is named NAME-VERSION-PYTHON-ABI-PLATFORM.whl; rename it as downloaded",
        ) from None
    project = str(canonicalize_name(name))
    members: remembered.Members = []
    problems: remembered.Problems = []
    scanned = 0
    try:
        digest = sha256 or _sha256(path)  # opened as a regular file first: a FIFO named x.whl must not block
        kept = remembered.load(digest)
        if kept is not None:
            scanned, members, problems = kept
        else:
            for member, code, problem in wheels.scan_wheel(Path(path), jobs):
                scanned += 1
                if problem:
                    problems.append((member, problem))
                elif code is not None and not code.empty:
                    members.append((member, code))
            remembered.keep(digest, scanned, members, problems, "wheel")
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise InputError(
            f"{path}: not a readable wheel ({type(exc).__name__}: {exc})",
            "download the wheel again (pip and uv check its hash), or scan the unpacked folder",
        ) from None
    notes.extend(f"{path}!{member}: not read ({problem})" for member, problem in problems)
    return scanned, [FileScan(f"{path}!{member}", project, code, str(version)) for member, code in members]


def _sha256(path: str) -> str:
    import hashlib

    digest = hashlib.sha256()
    with os.fdopen(regular.open_fd(path), "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def wheel_code(path: str, sha256: str) -> tuple[list[FileScan], list[str]]:
    """The members with device code of a wheel whose sha256 the caller checked (`report --lock`), and its notes."""
    notes: list[str] = []
    return _scan_wheel(path, notes, None, sha256)[1], notes


def _safe(fn: Any, path: str | Path, notes: list[str]) -> fatbin.Code | None:
    """fn(path), or None with a note: a damaged or hostile file is reported, never the end of the scan."""
    try:
        result: fatbin.Code = fn(path)
        return result
    except Exception as exc:
        notes.append(f"{path}: not read ({type(exc).__name__}: {exc})"[:400])
        return None


def _by_package(files: list[FileScan], require: tuple[str, ...]) -> list[PackageScan]:
    """One row per distribution version (torch 2.8.0 and 2.14.1 scanned together stay two rows)."""
    packages: dict[tuple[str | None, str | None], PackageScan] = {}
    for file in files:
        package = packages.setdefault((file.package, file.version), PackageScan(file.package, file.version))
        package.files += 1
        package.code.add(file.code)
    for package in packages.values():
        for cc in require:
            package.verdicts[cc] = verdict(package.code, cc)
    return sorted(packages.values(), key=lambda p: (p.name or "", p.version or ""))


def verdict(code: fatbin.Code | fatbin.Counts, cc: str) -> tuple[str, str]:
    """PASS: native code runs on `cc`; WARN: only PTX the driver must JIT; FAIL: "no kernel image" predicted.
    Only loadable code counts: a shared library's relocatable copy is link input the driver never loads."""
    from provision import knowledge

    counts = code.loadable if isinstance(code, fatbin.Code) else code
    sm = knowledge.sm_name(cc)
    native = sorted(label for label in counts.cubin if _runs_on(label, cc))
    if native:
        return "pass", f"native code for {sm}: {', '.join(native)}"
    ptx = sorted(label for label in counts.ptx if _runs_on(label, cc))
    if ptx:
        return (
            "warn",
            f"no cubin for {sm}; the driver must JIT PTX {', '.join(ptx)} at first load (slow first run)",
        )
    carried = ", ".join(sorted(counts.cubin) + sorted(counts.ptx)) or "nothing"
    linked_only = isinstance(code, fatbin.Code) and not code.relocatable.empty
    extra = " and relocatable code the driver never loads" if linked_only else ""
    return (
        "fail",
        f"nothing runs on {sm} (carries {carried}{extra}): 'no kernel image is available for execution'",
    )


def _runs_on(label: str, cc: str) -> bool:
    from provision import knowledge

    try:
        return knowledge.label_runs_on(label, cc)
    except ValueError:  # a label no GPU has (sm_7 from a damaged header): it runs nowhere
        return False
