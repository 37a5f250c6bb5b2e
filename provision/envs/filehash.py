"""File digests in RECORD's form (`sha256=<urlsafe base64, unpadded>`), remembered beside the environment: a file whose
size, mtime and inode match what was hashed before is not read again; the rest are hashed in parallel (hashlib
releases the GIL on large buffers, so threads use every core)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISLNK, S_ISREG

from provision import regular
from provision.atomic import write_atomic

CACHE_VERSION = 1
CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True, slots=True)
class Wanted:
    key: str  # the path as RECORD writes it, relative to site-packages
    path: str  # a string: a Path object per file costs more than its stat
    mode: str  # hashlib name from RECORD: sha256, sha384, ...


@dataclass(kw_only=True)
class Digests:
    """What hashing found: key -> "mode=digest", or None for a file that is not there (or not a regular file)."""

    found: dict[str, str | None] = field(default_factory=dict)
    hashed: int = 0
    hashed_bytes: int = 0
    remembered: int = 0


def record_digest(path: str | Path, mode: str) -> str:
    """Return `mode=digest` of a file the way RECORD writes it (PEP 376/427)."""
    digest = hashlib.new(mode)
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            count = handle.readinto(buffer)
            if not count:
                break
            digest.update(view[:count])
    return f"{mode}=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


class Cache:
    """key -> [size, mtime_ns, inode, "mode=digest"], one JSON file written atomically after a run that hashed."""

    def __init__(self, path: Path | None, site: Path) -> None:
        self.path, self.site = path, str(site)
        self.entries: dict[str, list[object]] = {}
        self.changed = False
        if path is not None:
            try:
                data = json.loads(regular.read_bytes(path))  # a pipe there is refused, not waited on
                # Keys are relative and entries carry the inode, so a hard-linked copy of the venv (restore's
                # staging folder) reads the same cache; `site` is kept for people reading the file.
                files = data.get("files") if data.get("version") == CACHE_VERSION else None
                self.entries = files if isinstance(files, dict) else {}
            except (OSError, ValueError, AttributeError, RecursionError):  # damaged: every file is read again
                self.entries = {}

    def remember(self, key: str, stat: os.stat_result, digest: str) -> None:
        self.entries[key] = [stat.st_size, stat.st_mtime_ns, stat.st_ino, digest]
        self.changed = True

    def keep_only(self, keys: set[str]) -> None:
        stale = set(self.entries) - keys
        for key in stale:
            del self.entries[key]
        self.changed = self.changed or bool(stale)

    def save(self) -> None:
        if self.path is not None and self.changed:
            write_atomic(
                self.path,
                json.dumps(
                    {"version": CACHE_VERSION, "site": self.site, "files": self.entries},
                    separators=(",", ":"),
                ),
            )
            self.changed = False


def digests(
    wanted: Iterable[Wanted], cache: Cache, *, inside: Callable[[str], bool] | None = None
) -> Digests:
    """Digest every wanted file: from the cache where size, mtime and inode clear it, else by reading it.

    A changed file is read too, so that what is reported is its digest. A link whose target `inside` refuses is not
    followed."""
    result = Digests()
    to_hash: list[tuple[Wanted, os.stat_result]] = []
    seen: set[str] = set()
    entries = cache.entries
    for item in wanted:
        seen.add(item.key)
        try:
            stat = os.lstat(item.path)
            if S_ISLNK(stat.st_mode):
                if inside is not None and not inside(os.path.realpath(item.path)):
                    result.found[item.key] = f"{item.mode}=(a link out of the environment: not read)"
                    continue
                stat = os.stat(item.path)
        except (OSError, ValueError):  # ValueError: a NUL byte in a damaged RECORD's path
            result.found[item.key] = None
            continue
        if not S_ISREG(stat.st_mode):
            result.found[item.key] = None
            continue
        entry = entries.get(item.key)  # Cache.lookup, inlined: it runs once per file of the environment
        try:
            remembered = (
                str(entry[3])
                if entry
                and entry[0] == stat.st_size
                and entry[1] == stat.st_mtime_ns
                and entry[2] == stat.st_ino
                else None
            )
        # a damaged cache entry (not [size, mtime, inode, digest]): read the file
        except (
            TypeError,
            IndexError,
            KeyError,
        ):
            remembered = None
        if remembered is not None and remembered.startswith(item.mode + "="):
            result.found[item.key] = remembered
            result.remembered += 1
        else:
            to_hash.append((item, stat))
    if to_hash:
        # Large files first, so that the longest jobs do not start last.
        to_hash.sort(key=lambda pair: -pair[1].st_size)
        from concurrent.futures import ThreadPoolExecutor  # a warm cache hashes nothing and starts no thread

        workers = min(32, (os.cpu_count() or 2) * 2)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            hashed = pool.map(lambda pair: _hash_or_none(pair[0]), to_hash)
            for (item, stat), digest in zip(to_hash, hashed, strict=True):
                result.found[item.key] = digest
                if digest is not None:
                    cache.remember(item.key, stat, digest)
                    result.hashed += 1
                    result.hashed_bytes += stat.st_size
    cache.keep_only(seen)
    return result


def _hash_or_none(item: Wanted) -> str | None:
    try:
        return record_digest(item.path, item.mode)
    except (OSError, ValueError):
        return None
