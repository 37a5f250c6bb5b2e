"""What environments there are: the rows of `provision envs`, their worst check status, their size on disk."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from provision import status as statuses
from provision.envs import records
from provision.envs.home import FAILED, Home
from provision.errors import EnvError
from provision.status import Status

if TYPE_CHECKING:
    from provision.records.results import BaselineRun, CheckResult


@dataclass(frozen=True, kw_only=True)
class EnvRow:
    """One environment as `provision envs` lists it."""

    name: str
    active: bool
    path: Path  # its build folder
    venv: str
    profile: str | None
    cuda: str | None
    python: str | None
    size_bytes: int | None
    created: str | None
    adopted: bool
    failed: bool  # a build create --keep-failed kept: never activated
    check_status: Status | None  # the worst of its last checks
    baseline: BaselineRun | None  # its last baseline run
    upgrade: dict[str, object] | None = (
        None  # the upgrade that built or moved to it (envs/upgrades.py), if any
    )

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "active": self.active,
            "path": str(self.path),
            "venv": self.venv,
            "profile": self.profile,
            "cuda": self.cuda,
            "python": self.python,
            "size_bytes": self.size_bytes,
            "created": self.created,
            "adopted": self.adopted,
            "failed": self.failed,
            "check_status": self.check_status,
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "upgrade": self.upgrade,
        }


@dataclass(frozen=True, kw_only=True)
class Listing:
    """Every environment of a home, and uv's cache they are installed from."""

    home: Path
    uv_cache: str
    environments: tuple[EnvRow, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "home": str(self.home),
            "uv_cache": self.uv_cache,
            "environments": [e.to_dict() for e in self.environments],
        }


def listing(home: Home, uv_cache: str = "") -> Listing:
    active = home.active()
    rows = []
    for name in home.names():
        try:
            build = home.build_of(name)
        # a trial's leftovers that cannot be put back: listed, and said (it vanished before)
        except EnvError as exc:
            from provision import log
            from provision.envs import links

            try:
                build = Path(links.build_of(str(home.root), name))
            except EnvError:  # removed meanwhile
                continue
            log.say(f"warning: {name}: {exc.message}\n")
        record = records.read(build)
        rows.append(
            EnvRow(
                name=name,
                active=name == active,
                path=build,
                venv=record.venv or str(build / "venv"),
                profile=record.profile,
                cuda=record.cuda,
                python=record.python,
                size_bytes=record.size_bytes,
                created=record.created,
                adopted=record.adopted,
                failed=(build / FAILED).exists(),
                check_status=worst_status(record.check_results),
                baseline=record.baselines[-1] if record.baselines else None,
                upgrade=_upgrade(build),
            )
        )
    return Listing(home=home.root, uv_cache=uv_cache, environments=tuple(rows))


def _upgrade(build: Path) -> dict[str, object] | None:
    """What `envs` shows of the upgrade record kept with `build` (a damaged one: its error, in place of it)."""
    from provision.envs import upgrades

    try:
        found = upgrades.read(build / upgrades.UPGRADE_FILE)
    except EnvError as exc:
        return {"error": exc.message}
    return found.summary() if found is not None else None


def worst_status(results: list[CheckResult]) -> Status | None:
    return statuses.worst(r.status for r in results)


def tree_size(path: Path) -> int:
    """The bytes of every file under `path` (a link counted as a link, one to a folder neither counted nor followed),
    read with scandir's entries (no path joined and looked up again per file: 49 ms for a venv of 14,000 files where
    os.walk with lstat took 74)."""
    total = 0
    folders = [str(path)]
    while folders:
        with contextlib.suppress(OSError), os.scandir(folders.pop()) as listing:
            for entry in listing:
                with contextlib.suppress(OSError):
                    # as os.walk sorts them: a link to a folder is a folder, not walked into
                    if _is_folder(entry):
                        if not entry.is_symlink():
                            folders.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
    return total


def _is_folder(entry: os.DirEntry[str]) -> bool:
    # a link whose target cannot be looked up (a loop, one through a file) is a file to os.walk, its lstat counted
    try:
        return entry.is_dir()
    except OSError:
        return False
