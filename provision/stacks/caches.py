"""provision's own caches under `$XDG_CACHE_HOME/provision/` (else `~/.cache/provision/`), what `provision gc`
prunes and `gc --cache` shows: `wheels/` (wheels `report --lock` fetched, by sha256: the largest, several GB for a
serving stack), `scans/`, `records/` and `metadata/` (what a wheel's bytes determine, by its sha256, each bounded:
provision/wheelfacts.py). A wheel no lock names (in the home, in lockfiles/) goes, and so does any wheel or entry not
used for `older_than` seconds; each can always be fetched or computed again."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from provision import wheelfacts
from provision.errors import ProvisionError
from provision.stacks import wheelcache

DAY = 86400.0
OLDER_THAN_DAYS = 30  # gc's default: what was not used for this long goes
TEMP_AGE = (
    3600.0  # a fetch's temporary folder (`.<sha256 prefix>-...`) older than this was left by a killed fetch
)


@dataclass(frozen=True, kw_only=True)
class Cache:
    """One of provision's caches: where it lives, what it holds after gc, what gc removed from it."""

    name: str
    path: str
    entries: int
    bytes: int
    removed: int = 0
    removed_bytes: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": self.path,
            "entries": self.entries,
            "bytes": self.bytes,
            "removed": self.removed,
            "removed_bytes": self.removed_bytes,
        }


def named_by(locks: Iterable[Path]) -> set[str]:
    """The sha256 of every wheel the locks at these paths name (a lock that cannot be read names none)."""
    from provision.stacks import lockfile

    named: set[str] = set()
    for path in locks:
        try:
            named |= lockfile.wheel_sha256s(path)
        except (ProvisionError, OSError):
            continue
    return named


def prune(*, named: set[str] | None, older_than: float | None) -> list[Cache]:
    """Prune every cache (`named` None: keep every wheel a lock might name, prune by age alone; `older_than` None:
    by naming alone) and say what each holds after."""
    found = [_prune_wheels(named, older_than)]
    for kind in wheelfacts.KINDS:
        count, size = wheelfacts.prune(kind, older_than=older_than)
        entries, held = wheelfacts.usage(kind)
        found.append(
            Cache(
                name=kind,
                path=wheelfacts.folder(kind),
                entries=entries,
                bytes=held,
                removed=count,
                removed_bytes=size,
            )
        )
    return found


def _prune_wheels(named: set[str] | None, older_than: float | None) -> Cache:
    folder = wheelcache.folder()
    now, removed, removed_bytes, entries, held = time.time(), 0, 0, 0, 0
    try:
        listing = list(os.scandir(folder))
    except OSError:
        listing = []
    for entry in listing:
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        size = _size(entry.path) if stat.S_ISDIR(status.st_mode) else 0
        used = _last_used(entry.path, status.st_mtime)
        if entry.name.startswith("."):
            stale = wheelfacts.age(now, status.st_mtime) > TEMP_AGE  # a fetch in progress is newer
        elif not stat.S_ISDIR(status.st_mode) or not wheelcache.SHA256.match(entry.name):
            stale = True  # a link, a file, a foreign name: no wheel provision kept
        else:
            stale = (named is not None and entry.name not in named) or (
                older_than is not None and wheelfacts.age(now, used) > older_than
            )
        if stale:
            if stat.S_ISDIR(status.st_mode):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            stale = not os.path.lexists(entry.path)  # a read-only cache keeps it: not said to be removed
        if stale:
            removed, removed_bytes = removed + 1, removed_bytes + size
        else:
            entries, held = entries + 1, held + size
    return Cache(
        name="wheels",
        path=str(folder),
        entries=entries,
        bytes=held,
        removed=removed,
        removed_bytes=removed_bytes,
    )


def _last_used(path: str, fallback: float) -> float:
    """When a kept wheel was last checked or fetched: its `checked` stamp's time."""
    try:
        return os.stat(os.path.join(path, "checked"), follow_symlinks=False).st_mtime
    except OSError:
        return fallback


def _size(path: str) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total
