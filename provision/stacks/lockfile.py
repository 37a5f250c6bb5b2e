"""A lockfile on disk: read and validated (PEP 751, packaging.pylock), bound to the profile it was made from, and where
`provision lock` writes it by default. Light on purpose: the drift check, gc and create read locks without the resolver."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from provision import regular, toml
from provision.errors import EnvError, InputError
from provision.stacks import urls
from provision.stacks.profiles import Profile

if TYPE_CHECKING:
    from packaging.pylock import Pylock

MAX_BYTES = 64 << 20  # a lock of a large CUDA stack is well under 1 MiB


@dataclass(frozen=True)
class Unlisted:
    """A distribution of an adopted environment that matched no wheel: in its lock by name and version only."""

    name: str
    version: str


@dataclass(frozen=True, kw_only=True)
class Stamp:
    """What a lock says of itself in [tool.provision] (docs/json.md names its keys), read once: a key of another type than
    provision writes reads as absent. `provision lock` writes the profile's side, `adopt` the environment's."""

    profile: str = ""  # the profile it was made from, by name, and that profile's content hash
    profile_hash: str = ""
    cuda: str = (
        ""  # the profile's CUDA release, its compiler's, and its FlashInfer arch list: report --lock's gates
    )
    compiler_cuda: str = ""
    flashinfer_arch_list: str = ""
    python: str = ""  # the Python X.Y it was resolved for
    serves: tuple[str, ...] = ()  # the profile's `serves`: the optional features its served path needs
    adopted: bool = False  # written by adopt (lock --env) for the environment at `venv`
    environment: str = ""
    venv: str = ""
    unmatched: tuple[Unlisted, ...] = ()
    # paths two wheels of the lock install with different contents, seen when it was made: path -> {distribution: hash}
    known_conflicts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_table(cls, table: Mapping[str, object]) -> Stamp:
        def text(key: str) -> str:
            value = table.get(key)
            return value if isinstance(value, str) else ""

        listed = table.get("unmatched")
        unmatched = tuple(
            Unlisted(entry["name"], str(entry.get("version") or ""))
            for entry in (listed if isinstance(listed, list) else [])
            if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]
        )
        listed = table.get("known_conflicts")
        known = {
            entry["path"]: {str(k): str(v) for k, v in entry["installs"].items()}
            for entry in (listed if isinstance(listed, list) else [])
            if isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("installs"), dict)
        }
        return cls(
            profile=text("profile"),
            profile_hash=text("profile_hash"),
            cuda=text("cuda"),
            compiler_cuda=text("compiler_cuda"),
            flashinfer_arch_list=text("flashinfer_arch_list"),
            python=text("python"),
            adopted=table.get("adopted") is True,
            environment=text("environment"),
            venv=text("venv"),
            unmatched=unmatched,
            known_conflicts=known,
            serves=tuple(f for f in served if isinstance(f, str))
            if isinstance(served := table.get("serves"), list)
            else (),
        )


SEAL = "packages_sha256"
UNSEALED_OPTION = "--allow-unsealed"


def read(path: Path, *, allow_unsealed: bool = False) -> tuple[Pylock, Stamp]:
    """Return a lock (validated by packaging.pylock) and what its [tool.provision] says. Its seal (packages_sha256, the
    digest of its [[packages]] as provision wrote them) must be there and match: a lock without one (the line deleted,
    [tool.provision] turned into dotted keys of the last package, a lock of an older provision or another tool) is
    refused, or with `allow_unsealed` (the user's --allow-unsealed) read with a warning that nothing proves its hashes."""
    raw, pylock, tool = _parse(path)
    _check_entries(path, raw.get("packages"))
    recorded = tool.get(SEAL)
    if not isinstance(recorded, str):
        _unsealed(path, raw, allow_unsealed)
    elif recorded != packages_digest(raw.get("packages", []), tool.get("known_conflicts")):
        raise InputError(
            f"{path}: its packages were changed after provision locked them (a hash, a URL, a package "
            "added or removed: [tool.provision] packages_sha256 no longer matches)",
            "lock again with provision lock PROFILE; never edit a lock by hand",
        )
    stamp = Stamp.from_table(tool)
    # create makes the venv with it: never a path
    if stamp.python and not re.fullmatch(r"\d+\.\d+(\.\d+)?", stamp.python):
        raise InputError(
            f"{path}: [tool.provision] python {stamp.python[:60]!r} is not a Python version X.Y",
            "lock again with provision lock PROFILE; never edit a lock by hand",
        )
    return pylock, stamp


def _parse(path: Path) -> tuple[dict[str, Any], Pylock, dict[str, Any]]:
    """(the lock's TOML, it as packaging.pylock reads it, its [tool.provision] table), or an InputError naming the file."""
    try:
        data = regular.read_bytes(path, MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(
            f"{path}: not a readable PEP 751 lock ({exc})", "make one with: provision lock PROFILE"
        ) from exc
    return parse_bytes(data, path)


def parse_bytes(data: bytes, path: Path) -> tuple[dict[str, Any], Pylock, dict[str, Any]]:
    """`_parse` of a lock's bytes read already (`path` names it in the error)."""
    # markers and tags: loaded where a lock is read, not where one is named
    from packaging.pylock import Pylock, PylockValidationError

    # read whole, an 8 GB file (a sparse one, a wrong path) took the machine's memory
    if len(data) > MAX_BYTES:
        raise InputError(
            f"{path}: not a PEP 751 lock (larger than {MAX_BYTES >> 20} MiB)",
            "make one with: provision lock PROFILE",
        )
    try:
        raw = toml.loads(data.decode("utf-8"))
        pylock = Pylock.from_dict(raw)
        tool = (raw.get("tool") or {}).get("provision") or {}
        if not isinstance(tool, dict):
            raise PylockValidationError("[tool.provision] is not a table")
    except (
        UnicodeDecodeError,
        RecursionError,
        toml.TOMLDecodeError,
        PylockValidationError,
        InvalidVersion,
        AttributeError,
    ) as exc:
        raise InputError(
            f"{path}: not a readable PEP 751 lock ({exc})", "make one with: provision lock PROFILE"
        ) from exc
    return raw, pylock, tool


def wheel_sha256s(path: Path) -> set[str]:
    """The sha256 of every wheel the lock at `path` names, its seal unchecked: what `gc` keeps in provision's wheel
    cache (an unsealed lock keeps its wheels too: keeping more is safe, and gc says nothing of seals)."""
    _, pylock, _ = _parse(path)
    return {str((w.hashes or {}).get("sha256", "")).lower() for p in pylock.packages for w in p.wheels or []}


def seal_copy(source: Path, copy: Path) -> None:
    """Write `source`, a lock read unsealed by the user's --allow-unsealed (said on stderr), to `copy` with its seal:
    the build's copy is what was built, and drift, restore and check read it later without the option."""
    import tomlkit

    raw, _, tool = _parse(source)
    document = tomlkit.parse(regular.read_bytes(source, MAX_BYTES).decode("utf-8"))
    document.setdefault("tool", tomlkit.table()).setdefault("provision", tomlkit.table())[SEAL] = (
        packages_digest(raw.get("packages", []), tool.get("known_conflicts"))
    )
    copy.write_text(tomlkit.dumps(document))


# the unsealed locks already said in this process (create and report read a lock twice)
_warned: set[str] = set()


def _unsealed(path: Path, raw: dict[str, object], allowed: bool) -> None:
    """Refuse a lock without its seal; with --allow-unsealed, say on stderr (even under -q) that it is read unproven."""
    from provision import log

    shown = log.one_line(str(path))
    if allowed:
        if shown in _warned:
            return
        _warned.add(shown)
        log.say(
            f"warning: {shown} has no seal ([tool.provision] {SEAL}): read as it is because of {UNSEALED_OPTION}; "
            "nothing proves its hashes and URLs are the ones a resolver chose\n"
        )
        return
    by_provision = str(raw.get("created-by", "")).startswith("provision")
    why = (
        (
            "provision writes one into every lock: the line was removed or [tool.provision] moved, or an older provision "
            "wrote it"
        )
        if by_provision
        else "it was not written by this provision"
    )
    raise InputError(
        f"{shown}: the lock has no seal ([tool.provision] {SEAL}; {why}), so a changed hash or URL "
        "could not be told",
        f"re-lock it (provision lock PROFILE, or provision lock --env NAME for an adopted "
        f"environment), or read it unproven with {UNSEALED_OPTION}",
    )


def _check_entries(path: Path, packages: object) -> None:
    """What packaging.pylock lets through and uv refuses only after create made the venv: a package listed twice with
    no marker on either entry (uv: "Multiple active package entries"), a wheel or sdist of negative size."""
    unmarked: set[str] = set()
    for position, package in enumerate(packages if isinstance(packages, list) else []):
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            continue
        name = str(canonicalize_name(package["name"]))
        if "marker" not in package:
            if name in unmarked:
                raise InputError(
                    f"{path}: not a usable PEP 751 lock (packages[{position}]: {name} is listed twice, "
                    "with no marker to tell the entries apart)",
                    "make one with: provision lock PROFILE",
                )
            unmarked.add(name)
        vcs = package.get("vcs")
        if (
            isinstance(vcs, dict)
            and isinstance(vcs.get("url"), str)
            and urls.credentials(vcs["url"]) != ("", "")
            and vcs["url"].startswith(("http://", "https://"))
        ):
            raise InputError(
                f"{path}: packages[{position}]: {name}'s git URL holds a user name or password (uv would put "
                "it on git's command line, which every local user can read)",
                "lock again with provision lock PROFILE: the lock records the URL without them, and git gets them by helper",
            )
        files = [*(package.get("wheels") or []), package.get("sdist") or {}]
        if any(isinstance(f, dict) and isinstance(f.get("size"), int) and f["size"] < 0 for f in files):
            raise InputError(
                f"{path}: not a usable PEP 751 lock (packages[{position}]: {name} has a file of negative size)",
                "make one with: provision lock PROFILE",
            )


def packages_digest(packages: object, known_conflicts: object = None) -> str:
    """The sha256 of a lock's [[packages]] as read (keys sorted), and of its `known_conflicts` where it records some
    (drift forgives what they name, so they are sealed with the packages): what provision wrote, checked on each read."""
    sealed = packages if not known_conflicts else {"packages": packages, "known_conflicts": known_conflicts}
    text = json.dumps(sealed, sort_keys=True, default=str, separators=(",", ":"))
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def check_binding(path: Path, profile: Profile, *, allow_unsealed: bool = False) -> None:
    """Refuse a lock that was not made from `profile` as it is now, or whose packages the profile does not allow."""
    pylock, stamp = read(path, allow_unsealed=allow_unsealed)
    made_from, made_hash = stamp.profile, stamp.profile_hash
    if not made_from or not made_hash:
        raise EnvError(
            f"{path} carries no [tool.provision] binding (profile, profile_hash): nothing says which "
            "profile it was made from",
            f"lock it with provision: provision lock {profile.name}",
        )
    if made_from != profile.name:
        raise EnvError(
            f"{path} was locked from profile {made_from!r}, not {profile.name!r}",
            f"give it to the profile it was made from, or lock this one: provision lock {profile.name}",
        )
    if made_hash != profile.content_hash:
        changed = f"{profile.path} or a file its [files] carries" if profile.files else str(profile.path)
        raise EnvError(
            f"{path} was locked from another version of profile {profile.name} ({changed} changed since)",
            f"re-lock it: provision lock {profile.name}",
        )
    locked = {str(canonicalize_name(p.name)): p.version for p in pylock.packages}
    for package in profile.packages:
        name = str(canonicalize_name(package.name))
        if name not in locked:
            raise EnvError(
                f"{path} has no {name}, which profile {profile.name} asks for",
                f"re-lock it: provision lock {profile.name}",
            )
        version = locked[name]
        if package.version and (
            version is None or not SpecifierSet(package.version).contains(version, prereleases=True)
        ):
            raise EnvError(
                f"{path} has {name} {version or '(no version)'}, which the profile's {package.version!r} does not allow",
                f"re-lock it: provision lock {profile.name}",
            )


_NAMED = re.compile(r"pylock\.[^.]+\.toml")


def is_lock_name(path: Path) -> bool:
    """Whether PEP 751 names a lock `path` (pylock.toml or pylock.NAME.toml): packaging.pylock's is_valid_pylock_path
    (tests/lock/test_lock_arguments.py holds them equal), asked before a lock is made without loading packaging.pylock."""
    return path.name == "pylock.toml" or _NAMED.fullmatch(path.name) is not None


def default_output(profile: Profile) -> Path:
    return Path("lockfiles") / f"pylock.{profile.name}.toml"
