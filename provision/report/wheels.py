"""A lock's wheels as `report --lock` read them (`WheelScan`, `LockScan`) and judged per GPU (`JudgedWheel`): data that
the report's targets carry and its lock gates read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.scan import binaries, fatbin


@dataclass(frozen=True, kw_only=True)
class WheelScan:
    """One wheel of a lock: where it was read from and the code it carries."""

    name: str
    version: str
    wheel: str
    origin: str  # "uv cache", "provision cache", "fetched", or why it was not scanned
    counts: fatbin.Counts = field(default_factory=fatbin.Counts)
    seconds: float = 0.0
    record: dict[str, str] | None = None  # what its RECORD installs (path -> hash); None: not read

    @property
    def cuda(self) -> bool:
        return not self.counts.empty


@dataclass(frozen=True, kw_only=True)
class JudgedWheel:
    """A lock's CUDA wheel on one machine: what it carries and its verdict per GPU (`packages` in the JSON)."""

    scan: WheelScan
    ccs: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        w = self.scan
        return {
            "name": w.name,
            "version": w.version,
            "wheel": w.wheel,
            "origin": w.origin,
            **w.counts.labels(),
            "seconds": round(w.seconds, 3),
            "require": {cc: dict(zip(("status", "reason"), verdict(w, cc), strict=True)) for cc in self.ccs},
        }


@dataclass(frozen=True, kw_only=True)
class LockScan:
    path: Path
    profile: str | None
    wheels: tuple[WheelScan, ...]
    seconds: float
    cache: str

    def by_name(self, name: str) -> WheelScan | None:
        return next((w for w in self.wheels if w.name == name), None)


def verdict(wheel: WheelScan, cc: str) -> tuple[str, str]:
    return binaries.verdict(wheel.counts, cc)
