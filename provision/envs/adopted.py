"""The lock of an adopted environment (`provision adopt`, `provision lock --env NAME`): what is installed, each
distribution matched to the wheel it came from (stacks/match.py), written as PEP 751 into the environment's build
folder and named in its record, as create's lock is. Drift and restore read it as they read create's; a distribution
that matched nothing is listed under [tool.provision] `unmatched` with its reason, compared by version only, and never
reinstalled."""

from __future__ import annotations

import dataclasses
import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision import __version__
from provision.atomic import write_atomic
from provision.envs import records
from provision.envs.home import Home, present_site_packages
from provision.errors import EnvError, InputError, ProvisionError
from provision.log import Progress

if TYPE_CHECKING:
    from collections.abc import Callable

    from provision.stacks.lockfile import Stamp
    from provision.stacks.match import MatchResult
    from provision.stacks.profiles import Profile


LOCK_NAME = "pylock.adopted.toml"  # in the build folder (uv takes pylock.<name>.toml)


@dataclass(frozen=True, kw_only=True)
class AdoptLock:
    """The lock `adopt` or `lock --env` wrote for an adopted environment, and how its distributions matched."""

    name: str
    venv: Path
    lock: Path
    result: MatchResult

    def to_dict(self) -> dict[str, object]:
        r = self.result
        return {
            "lock": str(self.lock),
            "indexes": r.indexes,
            "unreachable": r.unreachable,
            "matched": [m.to_dict() for m in r.matched],
            "unmatched": [u.to_dict() for u in r.unmatched],
            "pages": r.pages,
            "records": r.records,
            "seconds": round(r.seconds, 3),
        }


@dataclass(frozen=True)
class LockError:
    """Why an adopted environment's lock could not be written (it is adopted all the same)."""

    message: str
    hint: str


@dataclass(frozen=True, kw_only=True)
class Adopted:
    """What `adopt` registered, and its lock: written, not asked for (--no-lock), or why not."""

    name: str
    venv: Path  # the venv adopted, as given (absolute)
    build: Path  # the build folder that names it
    locked: AdoptLock | None = None
    lock_error: LockError | None = None
    notes: tuple[str, ...] = ()  # the venv was registered already, under these names

    def to_dict(self) -> dict[str, object]:
        document: dict[str, object] = {
            "adopted": self.name,
            "venv": str(self.venv),
            "path": str(self.build),
            "lock": None,
            "notes": list(self.notes),
        }
        if self.locked is not None:
            document.update(self.locked.to_dict())
        if self.lock_error is not None:
            document["lock_error"] = {"message": self.lock_error.message, "hint": self.lock_error.hint}
        return document


def adopt(
    home: Home,
    name: str,
    venv: Path,
    profile: Profile | None,
    *,
    lock: bool = True,
    progress: Progress = lambda _: None,
) -> Adopted:
    """Register `venv` as `name` and, with `lock`, lock what it holds; a lock that cannot be written leaves it
    registered all the same (provision lock --env NAME does it again later)."""
    from provision.envs import lifecycle

    also = [other for other, _ in lifecycle.registered_as(home, venv)]
    build = lifecycle.register(home, name, venv, profile)
    notes = tuple(
        f"{venv} is registered as {other!r} too: both names share its files (provision remove {other} "
        "unregisters that one; the venv's files stay)"
        for other in also
    )
    adopted = Adopted(name=name, venv=venv.absolute(), build=build, notes=notes)
    if not lock:
        return adopted
    try:
        return dataclasses.replace(adopted, locked=lock_env(home, name, profile, progress=progress))
    except RemovedMeanwhile:
        raise  # nothing is adopted any more: not a lock to make later
    except ProvisionError as exc:
        return dataclasses.replace(adopted, lock_error=LockError(exc.message, exc.hint))


def indexes_for(profile: Profile | None) -> tuple[dict[str, str], dict[str, str], Callable[[], str]]:
    """(the indexes to look on, by name, in order; distributions bound to one of them; the index of the wheels uv's
    cache keeps in its `pypi` bucket). uv's default index is asked of uv (`uv pip compile --emit-index-url`: 0.12-0.15
    s) once, and only where it is needed: for a default index neither the profile nor PROVISION_INDEX_DEFAULT names,
    or for a wheel of that bucket. The bucket holds only what came from uv's built-in default: a mirror that
    UV_DEFAULT_INDEX or UV_INDEX_URL makes the default has a bucket of its own, so with one of them set, the bucket's
    index is asked again without them (its wheels were credited to the mirror, which never served them)."""
    import functools

    from provision.stacks import lock as locking
    from provision.stacks.newprofile import DEFAULT_INDEX_VARIABLES
    from provision.stacks.profiles import DEFAULT_INDEX

    uv_default = functools.cache(_uv_default)

    @functools.cache
    def uv_builtin() -> str:
        if any(os.environ.get(variable) for variable in DEFAULT_INDEX_VARIABLES):
            return _uv_default(builtin=True)
        return uv_default()

    if profile is None:
        return (
            {DEFAULT_INDEX: locking.index_variable("PROVISION_INDEX_DEFAULT") or uv_default()},
            {},
            uv_builtin,
        )
    from packaging.utils import canonicalize_name

    found = locking.effective_indexes(profile, {})
    indexes = {name: url or uv_default() for name, url in found.items() if url or name == DEFAULT_INDEX}
    bound = {str(canonicalize_name(p.name)): p.index for p in profile.packages if p.index != DEFAULT_INDEX}
    return indexes, bound, uv_builtin


def _uv_default(*, builtin: bool = False) -> str:
    """uv's default index (with `builtin`, its built-in one), as uv says it; where uv cannot, an error that says which
    question failed and how to answer it instead (uv's own words alone, such as a cache it could not lock, named
    neither)."""
    from provision.stacks import newprofile

    try:
        return newprofile.default_index(builtin=builtin)
    except ProvisionError as exc:
        raise type(exc)(
            f"uv could not say its default index: {exc.message}",
            "set PROVISION_INDEX_DEFAULT to the index's URL, or give the profile's default index one",
        ) from exc


def lock_env(
    home: Home, name: str, profile: Profile | None, progress: Progress = lambda _: None
) -> AdoptLock:
    """Match what `name`'s venv holds to wheels and write its lock; the record then names it."""
    from provision.stacks import match, uvtool

    build = home.build_of(name)
    record = records.read(build)
    if not record.adopted:
        raise EnvError(
            f"{name} was built by provision from its own lock ({record.lock})",
            f"lock --env is for adopted environments; provision restore {name} uses that lock",
        )
    venv = record.venv_path(build).resolve()
    site = present_site_packages(venv)  # a venv that is gone is refused, never locked as an empty one
    try:  # the lock names the venv, and a lock is UTF-8: a folder's byte that is not (0xff) cannot be written there
        str(venv).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            f"{venv!a}: its path holds a byte that is not UTF-8, which a lock (UTF-8) cannot name",
            f"rename that folder to a UTF-8 name, then lock it: provision lock --env {name}",
        ) from None
    uvtool.check_settings()  # uv's settings and the CA bundle: one line, not one failure per distribution
    indexes, bound, pypi_index = indexes_for(profile)
    try:
        cache = Path(uvtool.cache_dir())
    except ProvisionError:
        cache = None
    result = match.match(
        site, venv, indexes, bound=bound, cache=cache, pypi_index=pypi_index, progress=progress
    )
    path = build / LOCK_NAME
    text = render(result, name=name, venv=venv, profile=profile)
    # the matching ran without it: a remove meanwhile took the build, never to be made again here
    with home.locked():
        if name not in home.names() or home.build_of(name) != build:
            raise RemovedMeanwhile(
                f"{name} was removed while its lock was being made; nothing was written",
                f"adopt it again if it is still wanted: provision adopt {name} {venv}",
            )
        with home.writing(f"write {name}'s lock"):  # adopt keeps the venv registered, lock --env says why
            write_atomic(path, text)
            records.set_lock(build, path)
    return AdoptLock(name=name, venv=venv, lock=path, result=result)


class RemovedMeanwhile(EnvError):
    """The adopted environment whose lock was being made was removed (or replaced) meanwhile."""


def render(result: MatchResult, *, name: str, venv: Path, profile: Profile | None) -> str:
    """The PEP 751 lock of what matched, bound to the environment, with what did not under [tool.provision]."""
    import tomlkit  # written here only: restore and drift read an adopted lock's stamp without it
    from packaging.pylock import Pylock, PylockValidationError
    from packaging.version import InvalidVersion

    from provision import toml
    from provision.stacks import lockfile

    packages = [
        {
            "name": m.name,
            "version": m.version,
            "index": m.index_url,
            "wheels": [{"name": m.filename, "url": m.url, "hashes": {"sha256": m.sha256}}],
        }
        for m in result.matched
    ]
    raw: dict[str, Any] = {
        "lock-version": "1.0",
        "created-by": "provision adopt",
        "packages": packages,
        "tool": {
            "provision": {
                "environment": name,
                "venv": str(venv),
                "adopted": True,
                "profile": profile.name if profile else "",
                "profile_hash": profile.content_hash if profile else "",
                "indexes": result.indexes,
                "unreachable": result.unreachable,
                "unmatched": [u.to_dict() for u in result.unmatched],
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "provision_version": __version__,
                lockfile.SEAL: lockfile.packages_digest(
                    packages
                ),  # its seal, checked by every reader, as `lock` writes it
            }
        },
    }
    # from plain data: a tomlkit document built item by item costs seconds for 200 packages
    text = tomlkit.dumps(raw)
    try:
        Pylock.from_dict(toml.loads(text))  # what is written is read back as PEP 751 (from_dict validates)
    except (toml.TOMLDecodeError, PylockValidationError, InvalidVersion) as exc:
        raise EnvError(
            f"the lock of {name} would not be PEP 751: {exc}", "report this with the venv's distribution list"
        ) from exc
    from provision.log import one_line

    # one line each: a TOML comment ends at a newline, and a venv's path may hold one
    header = (
        f"# PEP 751 lock of the adopted environment {name!r} ({one_line(str(venv))}), written by provision {__version__}.\n"
        f"# Rebuild: provision lock --env {name}\n"
    )
    return header + text


def check_binding(stamp: Stamp, path: Path, name: str, venv: Path) -> None:
    """Refuse a lock written for another adopted environment or venv."""
    if not stamp.adopted:
        return
    if stamp.environment != name or Path(stamp.venv) != venv:
        raise EnvError(
            f"{path} was written for {stamp.environment!r} at {stamp.venv}, not {name} at {venv}",
            f"lock it again: provision lock --env {name}",
        )
