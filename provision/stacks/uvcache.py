"""uv's cache as it lies on disk, read without running uv: which wheels it has unpacked, where, and with which sha256.
uv keeps each wheel unpacked in archive-v0/<id>/ and points at it from wheels-v*/<kind>/[<index hash>/]<project>/
<version-tags> (a link), with the wheel's hash in the pointer files beside that link (.http, .msgpack, .rev)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from provision import regular

_SHA256 = re.compile(rb"[0-9a-f]{64}")


@dataclass(frozen=True, kw_only=True)
class CachedWheel:
    project: str  # canonical name
    stem: str  # "<version>-<tags>", the wheel's file name without project and .whl
    archive: Path  # the unpacked wheel
    link: Path

    def sha256s(self) -> set[str]:
        """The sha256 digests uv wrote beside the link: the wheel's, where the index or the lock gave one."""
        found: set[str] = set()
        for suffix in (".http", ".msgpack", ".rev"):
            try:
                found.update(
                    m.decode()
                    for m in _SHA256.findall(
                        regular.read_bytes(self.link.with_name(self.link.name + suffix), 16 << 20)
                    )
                )
            except OSError:
                continue
        return found


def wheels(cache: Path, projects: set[str] | None = None) -> dict[tuple[str, str], CachedWheel]:
    """The unpacked wheels in uv's cache at `cache` (of `projects` only, canonical names, when given), by
    (project, "version-tags"); newer cache layouts first. Only the links of those projects are resolved."""
    found: dict[tuple[str, str], CachedWheel] = {}
    for bucket in sorted(cache.glob("wheels-v*"), reverse=True):
        if projects is None:
            folders = [f for f in bucket.glob("*/*") if f.is_dir()] + [
                f for f in bucket.glob("*/*/*") if f.is_dir()
            ]
        else:  # <kind>/<project> (pypi) or <kind>/<index or url hash>/<project>: each place listed once
            folders = [
                Path(entry.path)
                for place in _places(bucket)
                for entry in _entries(place)
                if entry.name in projects and entry.is_dir()
            ]
        for folder in folders:
            project = str(canonicalize_name(folder.name))
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                key = (project, entry.name)
                if not entry.is_symlink() or key in found:
                    continue
                target = Path(entry.path).resolve()
                if target.is_dir():
                    found[key] = CachedWheel(
                        project=project, stem=entry.name, archive=target, link=Path(entry.path)
                    )
    return found


def _places(bucket: Path) -> list[str]:
    """Every folder of a wheels bucket that may hold project folders: each kind, and each index or URL hash in it."""
    places = []
    for kind in _subfolders(str(bucket)):
        places.append(kind)
        places += _subfolders(kind)
    return places


def _subfolders(folder: str) -> list[str]:
    return [entry.path for entry in _entries(folder) if entry.is_dir(follow_symlinks=False)]


def _entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as listing:
            return sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return []


def stem_of(filename: str) -> str:
    """ "2.9.1+cu128-cp312-cp312-manylinux_2_28_x86_64" for torch-2.9.1+cu128-cp312-cp312-manylinux_2_28_x86_64.whl."""
    return filename.removesuffix(".whl").split("-", 1)[1] if "-" in filename else filename
