"""Which lock `create` builds from, and why: the one it was given, else the profile's own in lockfiles/ (what `provision
lock` wrote and `report --lock` judged) when it is current, else provision's cached lock, else a new one. A lock from
outside HOME is copied into the build: the build owns the lock it was made from, and drift and restore read that copy
from any folder (a relative `--lock` kept as given was "missing" from anywhere else)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from provision.errors import ProvisionError
from provision.log import Progress
from provision.stacks import lockfile

if TYPE_CHECKING:
    from provision.envs.home import Home
    from provision.stacks.lock import Target
    from provision.stacks.profiles import Profile

Origin = Literal["given", "lockfiles", "cached", "locked"]
COPY_NAME = "pylock.toml"  # the build's own copy of a lock from outside HOME (PEP 751's file name)


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A lock from outside HOME to build from (`--lock`, or the profile's in lockfiles/), or why the profile's was not."""

    path: Path | None = None
    origin: Origin | None = None
    python: str | None = None  # the Python X.Y it was resolved for
    note: str | None = None  # why lockfiles/'s lock is not built from


@dataclass(frozen=True, kw_only=True)
class Chosen:
    """The lock the build installs, where it came from, and a note that says why when it is not the profile's own."""

    path: Path
    origin: Origin
    source: Path | None = None  # the lock it is a copy of (given or lockfiles)
    note: str | None = None

    @property
    def reused(self) -> bool:
        return self.origin == "cached"


def candidate(
    profile: Profile, given: Path | None, overrides: dict[str, str], *, allow_unsealed: bool = False
) -> Candidate:
    """The lock to build from when there is one outside HOME. The profile's own (lockfiles/pylock.NAME.toml, as `provision
    lock` writes it) only when it was made from the profile as it is now and no --index changes where wheels come from."""
    if given is not None:
        python = lockfile.read(given, allow_unsealed=allow_unsealed)[1].python or None
        return Candidate(path=given.absolute(), origin="given", python=python)
    own = lockfile.default_output(profile)
    if not own.is_file():
        return Candidate()
    if overrides:
        return Candidate(
            note=f"{own} not used: --index {', '.join(sorted(overrides))} was given; locked with it"
        )
    try:
        lockfile.check_binding(own, profile)
        python = lockfile.read(own)[1].python or None
    except ProvisionError as exc:
        return Candidate(note=f"{own} not used: {exc.message}")
    return Candidate(path=own.absolute(), origin="lockfiles", python=python)


def for_python(found: Candidate, version: str) -> Candidate:
    """`found`, unless it is the profile's own lock resolved for another Python than the venv is made with."""
    if found.origin == "lockfiles" and found.python and found.python != version:
        return Candidate(
            note=f"{found.path} not used: it was locked for Python {found.python}, the venv is {version}"
        )
    return found


def lock_for(
    home: Home,
    profile: Profile,
    target: Target,
    overrides: dict[str, str],
    indexes: dict[str, str | None],
    found: Candidate,
    progress: Progress,
    build: Path,
    *,
    allow_unsealed: bool = False,
) -> Chosen:
    """The lock to install into `build`: a copy of `found` in the build, else the cached lock, else a new one."""
    from provision.stacks import lock as locking

    if found.path is not None and found.origin is not None:
        # the user's --allow-unsealed is for the lock they gave
        unsealed = allow_unsealed and found.origin == "given"
        lockfile.check_binding(found.path, profile, allow_unsealed=unsealed)
        copy = build / COPY_NAME
        with home.writing("copy the lock into the build"):
            if unsealed:  # read unproven as the user asked, said on stderr; the build's copy is sealed as what was built
                lockfile.seal_copy(found.path, copy)
            else:
                shutil.copyfile(found.path, copy)
        lockfile.check_binding(copy, profile)  # the copy is what is built: checked, not the file it came from
        progress(f"building from {found.path} (copied into the build)")
        return Chosen(path=copy, origin=found.origin, source=found.path)
    key = locking.lock_key(profile, indexes, target)
    cached = home.locks / f"pylock.{profile.name}-{key}.toml"
    if found.note:
        progress(found.note)
    if cached.exists():
        try:
            lockfile.check_binding(cached, profile)
            return Chosen(path=cached, origin="cached", note=found.note)
        except ProvisionError:
            progress(f"the cached lock {cached.name} cannot be used; locking again")
            cached.unlink(missing_ok=True)
    progress(f"locking {profile.name}")
    with home.writing(f"lock {profile.name}"):  # uv's input and output are in the build
        locking.lock(
            profile, target=target, overrides=overrides, output=cached, progress=progress, work=build
        )
    return Chosen(path=cached, origin="locked", note=found.note)
