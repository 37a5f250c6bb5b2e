"""Files under a folder that may hold device code, and the installed distribution (name, version) owning each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from provision import regular


def _record_root(root: Path) -> Path:
    """Where the RECORD files for `root` are: its enclosing site-packages when `root` lies inside one."""
    for folder in (root.resolve(), *root.resolve().parents):
        if folder.name in ("site-packages", "dist-packages"):
            return folder
    return root


def record_owners(root: Path) -> dict[str, tuple[str, str | None]]:
    """Map every file listed in a `.dist-info/RECORD` under `root` (or its site-packages) to its distribution's
    (name, version), keyed by normalized path (no per-row resolve(): a venv's RECORD files list tens of thousands)."""
    import csv

    from packaging.utils import canonicalize_name

    owners: dict[str, tuple[str, str | None]] = {}
    for record in _record_root(root).glob("**/*.dist-info/RECORD"):
        site = record.parent.parent
        stem = record.parent.name.removesuffix(".dist-info")
        name, _, version = stem.partition("-")
        metadata = _metadata(record.parent / "METADATA")
        owner = (
            str(canonicalize_name(metadata.get("Name") or name)),
            metadata.get("Version") or version or None,
        )
        prefix = str(site)
        try:
            with _open_regular(record, newline="") as handle:
                for row in csv.reader(handle):
                    if row:
                        owners[os.path.normpath(os.path.join(prefix, row[0]))] = owner
        except (OSError, csv.Error):
            continue
    return owners


def _metadata(path: Path) -> dict[str, str]:
    """Name and Version from a METADATA file's header (empty when it cannot be read)."""
    found: dict[str, str] = {}
    try:
        with _open_regular(path) as handle:
            for line in handle:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key in ("Name", "Version"):
                    found[key] = value.strip()
    except OSError:
        pass
    return found


def _open_regular(path: Path, newline: str | None = None) -> IO[str]:
    """A RECORD or METADATA opened for reading as text; OSError unless it is a regular file (a FIFO named RECORD in
    the scanned folder would otherwise block the scan forever)."""
    return os.fdopen(regular.open_fd(path), newline=newline, errors="replace")


def walk(root: Path) -> Iterator[Path]:
    """Regular files that may hold device code: shared objects, cubins, objects, archives, executables, wheels.
    Links are not followed, so a library reached twice is counted once; FIFOs and devices are never opened."""
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
    if ".so" in name or name.endswith((".cubin", ".o", ".a", ".fatbin", ".whl")):
        return True
    if name.endswith((".py", ".pyc", ".pyi", ".txt", ".json", ".h", ".hpp", ".cuh", ".md")):
        return False
    try:
        return bool(entry.stat(follow_symlinks=False).st_mode & 0o111)
    except OSError:
        return False
