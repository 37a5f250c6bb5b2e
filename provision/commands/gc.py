"""`provision gc`: what interrupted builds left in the home (envs/cleanup.py), then provision's caches pruned
(stacks/caches.py): a fetched wheel no lock in the home or in ./lockfiles/ names, and whatever was not used for
`older_than_days`. `gc --cache` prunes and shows the caches alone, the home untouched."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provision.stacks import caches as pruning
from provision.stacks.caches import OLDER_THAN_DAYS, Cache

if TYPE_CHECKING:
    from provision.envs.home import Home

SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class GcResult:
    removed: tuple[str, ...] = ()  # what was taken from the home (none with --cache)
    caches: tuple[Cache, ...] = field(default_factory=tuple)
    older_than_days: float = OLDER_THAN_DAYS
    cache_only: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "removed": list(self.removed),
            "caches": [c.to_dict() for c in self.caches],
            "older_than_days": self.older_than_days,
            "cache_only": self.cache_only,
        }


def locks_of(home: Home, lockfiles: Path = Path("lockfiles")) -> list[Path]:
    """Every lock whose wheels are kept: the home's cached locks, each build's own, and ./lockfiles/."""
    found = sorted(home.locks.glob("pylock.*.toml")) if home.locks.is_dir() else []
    found += sorted(home.builds.glob("*/pylock*.toml")) if home.builds.is_dir() else []
    found += sorted(lockfiles.glob("*.toml")) if lockfiles.is_dir() else []
    return [p for p in found if p.is_file() and not p.is_symlink()]


def gc(home: Home, *, cache_only: bool, older_than_days: float) -> GcResult:
    """Prune the home's leftovers (unless `cache_only`) and provision's caches."""
    from provision.envs import cleanup

    removed: tuple[str, ...] = ()
    if cache_only and not home.root.is_dir():  # no home here: --cache makes none
        named = pruning.named_by(locks_of(home))
    else:
        with home.locked():
            if not cache_only:
                removed = cleanup.gc(home, failed=True).removed
            named = pruning.named_by(locks_of(home))
    pruned = pruning.prune(named=named, older_than=older_than_days * pruning.DAY)
    return GcResult(
        removed=removed, caches=tuple(pruned), older_than_days=older_than_days, cache_only=cache_only
    )
