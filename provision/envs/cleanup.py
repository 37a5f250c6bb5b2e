"""What is taken away: an environment by name (`provision remove`), and what interrupted or killed runs left
(`provision gc`): builds no name points at, dangling names, temporary links, unreadable cached locks."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from provision import regular
from provision.envs.home import BUILDING, FAILED, Home
from provision.errors import EnvError, ProvisionError
from provision.log import Progress
from provision.proc import pid_alive

REMOVING = ".removing-"  # a build that `remove` set aside and is deleting
TEMP = re.compile(r"\..+\.\d+\.\d+\.tmp")  # atomic.write_atomic's and links.point's temporary names


@dataclass(frozen=True)
class Removed:
    """What `remove` took away: the environment's name (its build too, unless another name uses it)."""

    name: str

    def to_dict(self) -> dict[str, str]:
        return {"removed": self.name}


@dataclass(frozen=True)
class Collected:
    """What `gc` took away, each as a path under HOME with why where it is not plain."""

    removed: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        return {"removed": list(self.removed)}


def stale_builds(home: Home) -> list[Path]:
    """Builds no link points at whose builder is gone: what an interrupted or killed create left behind."""
    referenced = home.referenced()
    stale = []
    for build in sorted(home.builds.iterdir()) if home.builds.is_dir() else []:
        if build.resolve() in referenced or not home.owns(build):
            continue
        marker = build / BUILDING
        try:
            # never a pipe waited on
            pid = int(regular.read_text(marker, 64, follow=False).strip()) if marker.exists() else 0
        except (OSError, ValueError):
            pid = 0
        if (
            (pid == 0 or not pid_alive(pid) or pid == os.getpid())
            and not in_use(build)
            and home.restorer(build) is None
        ):
            stale.append(build)
    return stale


def in_use(build: Path) -> bool:
    """Whether a live process runs from `build` (a check payload its killed creator left): gc must not pull it away."""
    needle = os.fsencode(str(build.resolve()) + os.sep)
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if needle in (entry / "cmdline").read_bytes().replace(b"\0", b" ") and entry.name != str(
                os.getpid()
            ):
                return True
    return False


def gc(home: Home, *, failed: bool = False) -> Collected:
    """Remove leftovers: unreferenced builds, dangling names, temporary links, unreadable cached locks, the copies
    killed restores left; with `failed` (the gc command, not the one create runs first) the failed builds that
    create --keep-failed kept."""
    home.own_folders()
    removed = _kept_failed(home) if failed else []
    for link in sorted(home.envs.iterdir()) if home.envs.is_dir() else []:
        if link.is_symlink() and not link.name.startswith(".") and not link.exists():
            link.unlink()
            removed.append(f"envs/{link.name} (pointed at a missing build)")
    for build in stale_builds(home):
        home.delete_build(build)
        removed.append(f"builds/{build.name}")
    for folder in (home.root, home.envs):
        for temp in folder.glob(".*.tmp"):
            if TEMP.fullmatch(temp.name) is None or temp.is_dir() and not temp.is_symlink():
                continue  # not a temporary file or link provision makes (.NAME.PID.NS.tmp): not gc's to delete
            temp.unlink(missing_ok=True)
            removed.append(str(temp.relative_to(home.root)))
    removed += _unreadable_locks(home)
    removed += _killed_restores(home)
    return Collected(tuple(removed))


def _named_builds(home: Home) -> Iterator[tuple[str, Path]]:
    """Each environment name with its build folder; a name whose link is damaged is passed over."""
    for name in home.names():
        try:
            yield name, home.build_of(name)
        except (ProvisionError, OSError):
            continue


def _kept_failed(home: Home) -> list[str]:
    removed = []
    for name, build in _named_builds(home):
        if (build / FAILED).exists() and home.owns(build):
            (home.envs / name).unlink()
            if build not in home.referenced():
                home.delete_build(build)
            removed.append(
                f"envs/{name} and builds/{build.name} (a failed build kept by create --keep-failed)"
            )
    return removed


def _killed_restores(home: Home) -> list[str]:
    """What a restore killed with -9 made (its staging copy beside the venv, its subset lock), by the exact names it
    recorded; nothing of a restore running."""
    from provision.envs import leftovers

    removed = []
    for _, build in _named_builds(home):
        if home.restorer(build) is None:
            removed += [
                f"{leftover} (left by a killed restore)" for leftover in leftovers.remove_stale(build)
            ]
    return removed


def _unreadable_locks(home: Home) -> list[str]:
    from provision.stacks import lockfile as locking

    removed = []
    for cached in sorted(home.locks.glob("pylock.*.toml")) if home.locks.is_dir() else []:
        if cached.is_dir() and not cached.is_symlink():
            continue  # no lock create cached: not gc's to delete (and unlink cannot)
        try:
            locking.read(cached)
        except ProvisionError:
            cached.unlink(missing_ok=True)
            removed.append(f"locks/{cached.name} (unreadable)")
    return removed


def remove(home: Home, name: str, force: bool = False, progress: Progress = lambda _: None) -> Removed:
    """Remove `name`'s link and its own build: never a build another name uses, nothing outside HOME.

    Under HOME's lock the name goes and the build is renamed aside (`builds/.removing-...`, marked with our pid); the
    files are deleted after the lock is released, so a switch or rollback in an emergency never waits for a large
    environment's deletion. A remove killed midway leaves the aside folder to the next gc."""
    aside: Path | None = None
    with home.locked():
        home.own_folders()
        build = home.build_of(name)
        restorer = home.restorer(build)
        if restorer is not None:
            raise EnvError(
                f"{name} is being restored (pid {restorer})",
                "wait for that restore to finish, then remove it",
            )
        if home.active() == name:
            if not force:
                raise EnvError(
                    f"{name!r} is the active environment", "switch to another first, or pass --force"
                )
            home.active_link.unlink()
        (home.envs / name).unlink()
        if build not in home.referenced() and home.owns(build):
            aside = build.with_name(f"{REMOVING}{build.name}")
            with home.writing(f"set {name}'s build aside"):
                with contextlib.suppress(OSError):  # a full disk: a gc meanwhile deletes it too, as asked
                    (build / BUILDING).write_text(str(os.getpid()))  # gc leaves it to us while we live
                os.rename(build, aside)
    if aside is not None:
        progress(f"deleting {name}'s files ({aside})")
        home.delete_build(aside)
    return Removed(name)
