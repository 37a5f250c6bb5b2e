"""`provision lock`: a profile resolved through uv into a PEP 751 lockfile, every file pinned by URL and sha256,
each package attributed to the index it came from, nightlies of one date."""

from __future__ import annotations

import contextlib
import datetime
import errno
import itertools
import json
import os
import platform as host_platform
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from provision import __version__, proc, toml, wheelfacts
from provision.atomic import write_atomic
from provision.errors import IndexUnreachable, InputError, ProvisionError, ResolveError, UsageError
from provision.log import Progress
from provision.stacks import (
    ahead,
    earlyrecords,
    gitauth,
    lockfile,
    locktext,
    urls,
    uvproject,
    uvtool,
)
from provision.stacks.profiles import DEFAULT_INDEX, Package, Profile

if TYPE_CHECKING:
    from packaging import tags

    from provision.stacks import relock  # loaded once uv runs (the lock in place is read then)

INDEX_VARIABLE = "PROVISION_INDEX_{}"
FLASHINFER_FAMILY = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
_NIGHTLY = re.compile(r"^\d{8}\Z")


@dataclass(frozen=True, kw_only=True)
class Target:
    python: str
    platform: str | None  # uv's --python-platform name; None: this machine

    @property
    def arch(self) -> str:
        if self.platform is None:
            return host_platform.machine()
        return "aarch64" if "aarch64" in self.platform or "arm64" in self.platform else "x86_64"


# Where a locked file's sha256 came from: its index, provision (the index gives none); a source tree or a repository
# has none (git: judged by its commit; editable and directory: the tree is the user's).
HashSource = Literal["index", "computed", "git", "editable", "directory"]
# What `report --lock` would FAIL, said by lock at once: CUDA majors mixed, two wheels installing one path (loose: a
# stray top-level file), a RECORD that could not be read without downloading the wheel.
WarningId = Literal["cuda-mix", "conflict", "conflict-loose", "conflict-unread"]


@dataclass(frozen=True, kw_only=True)
class LockedPackage:
    name: str
    version: str
    index: str  # the index's name in the profile ("default" for uv's default registry)
    file: str
    url: str
    sha256: str
    hash_source: HashSource

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "index": self.index,
            "file": self.file,
            "url": self.url,
            "sha256": self.sha256,
            "hash_source": self.hash_source,
        }


@dataclass(frozen=True)
class LockWarning:
    id: WarningId
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class LockResult:
    path: Path
    profile: str
    target: Target
    packages: tuple[LockedPackage, ...] = ()
    nightly: str | None = None
    seconds: float = 0.0
    key: str = ""
    warnings: tuple[LockWarning, ...] = ()
    rebuild: str = ""  # the command that makes this lock again
    changes: relock.Changes | None = None  # against the lock it replaced; None when it replaced none
    preferred: str | None = None  # the lock whose versions uv kept where it could; None: resolved afresh
    unchanged: bool = False  # the lock in place was what this one is, its created time aside: left as it was

    def to_dict(self) -> dict[str, object]:
        return {
            "lockfile": str(self.path),
            "profile": self.profile,
            "python": self.target.python,
            "platform": self.target.platform,
            "nightly_date": self.nightly,
            "lock_key": self.key,
            "packages": [p.to_dict() for p in self.packages],
            "warnings": [w.to_dict() for w in self.warnings],
            "rebuild": self.rebuild,
            "changes": self.changes.to_dict() if self.changes is not None else None,
            "preferred": self.preferred,
            "unchanged": self.unchanged,
            "seconds": round(self.seconds, 3),
        }


def parse_overrides(pairs: tuple[str, ...]) -> dict[str, str]:
    overrides = {}
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://", "file://")):
            raise UsageError(
                f"--index {urls.redact(pair if sep else url or name)!r}: expected NAME=URL",
                "for example --index pytorch=https://mirror.example/whl/nightly/cu130",
            )
        from provision.stacks.profiles import index_url_problem

        problem = index_url_problem(url)
        if problem:
            raise UsageError(
                f"--index {name}=...: {problem}",
                "for example --index pytorch=https://mirror.example/whl/nightly/cu130",
            )
        overrides[name] = url
    return overrides


def effective_indexes(
    profile: Profile, overrides: dict[str, str], environ: dict[str, str] | None = None
) -> dict[str, str | None]:
    """The profile's indexes in order, `default` last, each replaced by --index or PROVISION_INDEX_<NAME>."""
    environ = dict(os.environ) if environ is None else environ
    names = [*(n for n in profile.indexes if n != DEFAULT_INDEX), DEFAULT_INDEX]
    for name in overrides:
        if name not in names:
            raise UsageError(
                f"--index {name}=...: profile {profile.name} has no index {name!r}",
                f"its indexes are: {', '.join(names)}",
            )
    result: dict[str, str | None] = {}
    for name in names:
        variable = INDEX_VARIABLE.format(name.upper().replace("-", "_"))
        result[name] = overrides.get(name) or index_variable(variable, environ) or profile.indexes.get(name)
    return result


def index_variable(variable: str, environ: dict[str, str] | None = None) -> str | None:
    """The URL in PROVISION_INDEX_<NAME>, None when it is unset or empty; a value that is not an index URL (a space,
    `not a url`, `http://[::1`, `:99999`) is an InputError naming the variable (exit 2), before anything runs, where uv
    failed later in its own words (exit 6)."""
    from provision.stacks.profiles import index_url_problem

    value = (os.environ if environ is None else environ).get(variable)
    if not value:
        return None
    problem = index_url_problem(urls.strip_credentials(value))  # a password may hold an unencoded / ? or #
    if problem:
        raise InputError(
            f"{variable}: {problem}",
            f"set {variable} to the index's URL (such as https://mirror.example/simple), or unset it",
        )
    return value


def unused_index_variables(profile: Profile, environ: dict[str, str] | None = None) -> list[str]:
    """The PROVISION_INDEX_<NAME> variables set for an index `profile` does not have (a typo, or another profile's
    mirror): by name only, never their values (a URL may hold a password)."""
    environ = dict(os.environ) if environ is None else environ
    names = {INDEX_VARIABLE.format(n.upper().replace("-", "_")) for n in [*profile.indexes, DEFAULT_INDEX]}
    return sorted(
        v for v in environ if v.startswith(INDEX_VARIABLE.format("")) and v not in names and environ[v]
    )


def lock_key(profile: Profile, indexes: dict[str, str | None], target: Target) -> str:
    """What a lock depends on: the profile's bytes, the effective index URLs, the target Python and platform."""
    import hashlib

    material = json.dumps([profile.content_hash, indexes, target.python, target.platform], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def check_python(version: str) -> str:
    """`version` when it is a Python version X.Y (or X.Y.Z) to lock for; else a UsageError naming it."""
    if not re.fullmatch(r"3\.\d{1,3}(\.\d{1,3})?", version):
        raise UsageError(
            f"--python {version[:80]!r}: not a Python version to lock for", "write it as X.Y, such as 3.12"
        )
    return version


def target_tags(target: Target) -> frozenset[tags.Tag]:
    """Every wheel tag the target accepts (packaging.tags), most specific first as packaging orders them."""
    from packaging import tags  # a nightly is pinned, or adopt matches wheels: a plain lock reads no tags

    version = tuple(int(part) for part in target.python.split(".")[:2])
    platforms = _platforms(target)
    return frozenset(
        itertools.chain(
            tags.cpython_tags(version, platforms=platforms),
            tags.compatible_tags(version, platforms=platforms),
        )
    )


def wheel_rank(target: Target) -> Callable[[str], int]:
    """A wheel's file name -> where the target's installer ranks it among a release's wheels: the place of its best tag
    in packaging.tags' order for the target (most specific first), after every tag one it does not accept. The order
    is made at the first call, once (the lock replaced is read beside uv, in a thread of its own)."""
    order: dict[tags.Tag, int] = {}
    making = threading.Lock()
    ranked: dict[str, int] = {}  # file name -> its rank: the gate ranks the wheels jobs_of ranked

    def rank(filename: str) -> int:
        if filename not in ranked:
            ranked[filename] = _rank(filename)
        return ranked[filename]

    def _rank(filename: str) -> int:
        from packaging import tags

        with making:
            if not order:
                version = tuple(int(part) for part in target.python.split(".")[:2])
                platforms = _platforms(target)
                every = itertools.chain(
                    tags.cpython_tags(version, platforms=platforms),
                    tags.compatible_tags(version, platforms=platforms),
                )
                for n, tag in enumerate(every):
                    order.setdefault(tag, n)
        parts = filename.removesuffix(".whl").split("-")
        if len(parts) < 5:
            return len(order)
        # each tag set as packaging.tags.parse_tag reads it (lower case, split at dots), but never their product: a
        # name of 60 interpreters, ABIs and platforms made 216,000 tags (a 3 KB name, 15 million)
        sets = [set(part.lower().split(".")) for part in parts[-3:]]
        if len(sets[0]) * len(sets[1]) * len(sets[2]) <= len(order):
            found = (tags.Tag(i, a, p) for i in sets[0] for a in sets[1] for p in sets[2])
            return min((order[t] for t in found if t in order), default=len(order))
        return min(
            (
                n
                for t, n in order.items()
                if t.interpreter in sets[0] and t.abi in sets[1] and t.platform in sets[2]
            ),
            default=len(order),
        )

    return rank


def _platforms(target: Target) -> list[str]:
    """Platform tags of a uv --python-platform name; this machine's own when there is none."""
    from packaging import tags

    if target.platform is None:
        return list(tags.platform_tags())
    name, arch = target.platform, target.arch
    if "musl" in name:
        return [f"musllinux_1_{minor}_{arch}" for minor in range(2, -1, -1)] + [f"linux_{arch}"]
    if "linux" in name:
        found = re.search(r"manylinux_?(\d+)_(\d+)", name)
        glibc = (
            (int(found.group(1)), int(found.group(2)))
            if found
            else (2, 17 if "manylinux2014" in name else 28)
        )
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        result = []
        for minor in range(glibc[1], 4 if arch == "x86_64" else 16, -1):
            result.append(f"manylinux_{glibc[0]}_{minor}_{arch}")
            if minor in legacy:
                result.append(f"{legacy[minor]}_{arch}")
        return [*result, f"linux_{arch}"]
    if "darwin" in name or "macos" in name:
        return list(
            tags.mac_platforms((15, 0), "arm64" if "aarch64" in name or "arm64" in name else "x86_64")
        )
    if "windows" in name:
        return ["win_arm64" if "aarch64" in name else "win_amd64"]
    return []


def _compatible(filename: str, accepted: frozenset[tags.Tag]) -> bool:
    try:
        _, _, _, wheel_tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    return not accepted.isdisjoint(wheel_tags)


def nightly_pins(
    profile: Profile, indexes: dict[str, str | None], target: Target
) -> tuple[dict[str, str], str | None]:
    """Pin every nightly package of one index to the newest date that all of them have a wheel for."""
    pins: dict[str, str] = {}
    chosen: str | None = None
    groups: dict[str, list[Package]] = {}
    for package in profile.packages:
        if package.prerelease and package.index != DEFAULT_INDEX and indexes.get(package.index):
            groups.setdefault(package.index, []).append(package)
    if not groups:  # no nightly: neither the index client nor the target's tags are loaded before uv starts
        return pins, chosen
    from provision.stacks import index  # asked when a lock is made: create --lock reads none

    accepted = target_tags(target)
    for index_name, packages in groups.items():
        by_package: dict[str, dict[str, Version]] = {}
        for package in packages:
            spec = SpecifierSet(package.version, prereleases=True)
            dates: dict[str, Version] = {}
            for file in index.project_files(str(indexes[index_name]), package.name):
                if not _compatible(file.filename, accepted):
                    continue
                version = parse_wheel_filename(file.filename)[1]
                if version.dev is None or not _NIGHTLY.match(str(version.dev)) or version not in spec:
                    continue
                date = str(version.dev)
                dates[date] = max(dates.get(date, version), version)
            if dates:
                by_package[package.name] = dates
        if not by_package:
            continue
        common = set.intersection(*(set(d) for d in by_package.values()))
        if not common:
            newest = ", ".join(f"{n} {max(d)}" for n, d in by_package.items())
            raise ResolveError(
                f"no nightly date has every package of index {index_name!r} for Python {target.python} {target.arch} (newest: {newest})",
                "pin one package to an older nightly in the profile, or wait for the next nightly",
            )
        chosen = max(common)
        for name, dates in by_package.items():
            pins[name] = str(dates[chosen].public)
    return pins, chosen


def _project(profile: Profile, pins: dict[str, str], indexes: dict[str, str | None]) -> str:
    """The pyproject.toml uv resolves: dependencies, plus sources binding each package to its named index (and a
    package declared without one to the default index, when its URL is known). No URL is written here: the index
    options carry them, and their credentials travel by variable."""
    return uvproject.dumps(_project_doc(profile, pins, indexes))


def _project_doc(profile: Profile, pins: dict[str, str], indexes: dict[str, str | None]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    requirements = []
    for package in profile.packages:
        spec = f"=={pins[package.name]}" if package.name in pins else package.version
        if package.prerelease and package.name not in pins and not SpecifierSet(spec or "").prereleases:
            spec = ",".join(filter(None, [spec, ">=0.0.0.dev0"]))  # admit pre-releases for this package only
        extras = f"[{','.join(package.extras)}]" if package.extras else ""
        requirements.append(f"{package.name}{extras}{spec}")
    doc["project"] = {"name": "provision-lock", "version": "0", "dependencies": requirements}
    # a package of the default index is bound to it where a named index could give it too; with the default index
    # alone (uv gets no other: uvtool.environment) the binding changes nothing uv picks, and made uv ask its pages and
    # metadata one after another (docs/performance.md, figures taken out of the code)
    named = any(url for name, url in indexes.items() if name != DEFAULT_INDEX)
    sources = {
        p.name: _source(p)
        for p in profile.packages
        if p.from_source or p.index != DEFAULT_INDEX or (indexes.get(DEFAULT_INDEX) and named)
    }
    doc["tool"] = {"uv": {**({"sources": sources} if sources else {}), "workspace": OWN_WORKSPACE}}
    return doc


# uv looks for a workspace root in every folder above the project, and a root listing it as a member brings its own
# [tool.uv] sources, indexes and overrides (UV_NO_CONFIG does not stop that): the project is its own workspace's root,
# so uv looks no further up. Its folder is under $TMPDIR, which every local user can write (a planted
# /tmp/pyproject.toml with `members = ["*"]` bound a profile's package to another index).
OWN_WORKSPACE: dict[str, list[str]] = {"members": []}


def _source(package: Package) -> dict[str, str | bool]:
    """uv's source of a profile package: its source tree, its repository, or its index."""
    if package.path:
        return {"path": package.path, **({"editable": True} if package.editable else {})}
    if package.git:
        # its password: by helper
        return {
            "git": gitauth.bare(package.git),
            **({"rev": package.rev} if package.rev else {}),
        }
    return {"index": package.index}


def _resolve_explicit(
    folder: Path,
    profile: Profile,
    pins: dict[str, str],
    indexes: dict[str, str | None],
    target: Target,
    first: dict[str, Any],
    origin: dict[str, str],
) -> str:
    """Resolve again with every named index explicit (uv takes from it only what a source names): the profile's bound
    packages, and each dependency the first pass found on a named index, pinned to the version found there. A package
    declared without an index can then come from the default index only. Returns uv's lock text."""
    declared = {str(canonicalize_name(p.name)) for p in profile.packages}
    carried = {
        str(canonicalize_name(p["name"])): (
            str(p.get("version", "")),
            origin[str(canonicalize_name(p["name"]))],
        )
        for p in first.get("packages", [])
        if str(canonicalize_name(p["name"])) not in declared
        and origin.get(str(canonicalize_name(p["name"])), DEFAULT_INDEX) != DEFAULT_INDEX
    }
    doc = _project_doc(profile, pins, indexes)
    doc["project"]["dependencies"].extend(
        f"{name}=={version}" for name, (version, _) in sorted(carried.items())
    )
    sources = {p.name: _source(p) for p in profile.packages if p.from_source or p.index != DEFAULT_INDEX}
    sources.update({name: {"index": where} for name, (_, where) in carried.items()})
    named = {n: u for n, u in indexes.items() if n != DEFAULT_INDEX and u}
    doc["tool"] = {
        "uv": {
            "sources": sources,
            "index": [
                {"name": n, "url": urls.strip_credentials(str(u)), "explicit": True} for n, u in named.items()
            ],
            "workspace": OWN_WORKSPACE,
        }
    }
    (folder / "pyproject.toml").write_text(uvproject.dumps(doc))
    # the named indexes are in pyproject.toml here (explicit): only the default one by variable, and every credential
    variables = uvtool.index_options(indexes)[1] | gitauth.variables(p.git for p in profile.packages)
    variables.pop("UV_INDEX", None)
    uvtool.run(_uv_compile_args(target, "pylock.toml"), cwd=folder, env=variables)
    return (folder / "pylock.toml").read_text()


# uv's log of what it fetches (its HTTP cache's: "Sending fresh HEAD request for: URL"): the wheels whose metadata it
# reads are the wheels the lock will hold, or candidates on the way to it. Their RECORDs are read from then on, while uv
# resolves; a uv that logs otherwise only leaves them to be read once it is done.
UV_FETCHES = "uv_client::cached_client=debug"
_UV_FETCH = re.compile(r"DEBUG .* for: (https?://\S+?\.whl)(?:\.metadata)?\s*$")


# uv's error where a TOML file it reads does not read as what it expects: of what provision gives it, only the lock
# replaced can be that (pyproject.toml is provision's own); uv's message names neither the file nor the key
_UV_TOML_ERROR = "TOML parse error"


def _wheels_seen(early: earlyrecords.EarlyReads) -> Callable[[str], None]:
    def seen(line: str) -> None:
        found = _UV_FETCH.match(line)
        if found:
            early.ahead(urls.strip_credentials(found.group(1)))

    return seen


def _uv_input(
    profile: Profile,
    indexes: dict[str, str | None],
    target: Target,
    preferences: Preferences,
    made_again: bool,
) -> tuple[list[str], dict[str, str]]:
    """uv's arguments for a lock, and the variables provision gives it: the indexes, the git credentials, and uv's log
    of what it fetches unless the lock is made again (`Preferences.same_key`)."""
    return (
        _uv_compile_args(target, "pylock.toml") + preferences.arguments(),
        uvtool.index_options(indexes)[1]
        | gitauth.variables(p.git for p in profile.packages)
        | ({} if made_again else {"RUST_LOG": UV_FETCHES}),
    )


def _remember(
    profile: Profile,
    indexes: dict[str, str | None],
    target: Target,
    project: str,
    output: Path,
    preferences: Preferences,
    key: str,
) -> None:
    """Keep the uv the same command line will run next time, the lock now in place being its preferences, so that it
    starts ahead (stacks/ahead): worked out as that run will, from the same functions."""
    following = Preferences.of(
        output, _in_place(output), upgrade=preferences.upgrade, packages=preferences.upgrade_packages
    )
    args, env = _uv_input(profile, indexes, target, following, following.same_key(lambda: key))
    ahead.remember(
        [uvtool.located(), *args],
        uvtool.environment(env),
        {"pyproject.toml": project.encode()},
        inputs=[profile.path, output],
        from_inputs={"pylock.toml": output} if following.source is not None else {},
    )


def _uv_compile_args(target: Target, output: str) -> list[str]:
    # --python names the interpreter uv may use for builds: it skips a search of every Python on PATH.
    args = [
        "pip",
        "compile",
        "pyproject.toml",
        "--no-config",
        "--quiet",
        "-o",
        output,
        "--format",
        "pylock.toml",
        "--python-version",
        target.python,
        "--no-header",
        "--python",
        sys.executable,
    ]
    if target.platform:
        args += ["--python-platform", target.platform]
    return args


def attribution(
    packages: list[dict[str, Any]], profile: Profile, indexes: dict[str, str | None]
) -> dict[str, str]:
    """Which index each locked package came from. A package bound by a source is from its index (uv guarantees
    it); any other from the named index whose page lists the very file locked, else the default index. The pages
    are read in parallel over kept-alive connections; a lock that involves only the default index reads none."""
    from concurrent.futures import ThreadPoolExecutor

    bound = {
        str(canonicalize_name(p.name)): p.index
        for p in profile.packages
        if p.index != DEFAULT_INDEX or indexes.get(DEFAULT_INDEX)
    }
    # an index whose URL an earlier one (or the default index) already has adds nothing to ask: each URL is read once
    seen = {urls.strip_credentials(str(indexes[DEFAULT_INDEX]))} if indexes.get(DEFAULT_INDEX) else set()
    named = []
    for name, url in indexes.items():
        if name != DEFAULT_INDEX and url and urls.strip_credentials(url) not in seen:
            seen.add(urls.strip_credentials(url))
            named.append(name)
    locked = {
        str(canonicalize_name(p["name"])): {urls.strip_credentials(w.get("url", "")) for w in _files(p)}
        for p in packages
    }
    asked = [(name, index_name) for name in locked if name not in bound for index_name in named]

    def listed(pair: tuple[str, str]) -> bool:
        from provision.stacks import index  # loaded where a page is read

        files = index.project_files(str(indexes[pair[1]]), pair[0])
        return not locked[pair[0]].isdisjoint(urls.strip_credentials(f.url) for f in files)

    with ThreadPoolExecutor(max_workers=16) as pool:
        found = dict(zip(asked, pool.map(listed, asked), strict=True)) if asked else {}
    return {
        name: bound.get(name) or next((n for n in named if found.get((name, n))), DEFAULT_INDEX)
        for name in locked
    }


def _files(package: dict[str, Any]) -> list[dict[str, Any]]:
    return [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]


def lock(
    profile: Profile,
    *,
    target: Target,
    overrides: dict[str, str],
    output: Path,
    progress: Progress = lambda _: None,
    work: Path | None = None,
    meanwhile: Callable[[], object] = lambda: None,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
) -> LockResult:
    """Resolve `profile` with uv into a PEP 751 lock at `output`. uv works in a private folder: under `work` when
    given (create's build folder, which gc removes whole after a kill -9), else in TMPDIR. A lock that `output`
    replaces is uv's preferences (as `uv pip compile -o` and `uv lock` keep what they locked before): the versions it
    holds stay where the profile still allows them, unless `upgrade` (resolve afresh) or `upgrade_packages` (those
    afresh). While uv resolves, what the rest needs is loaded off the main thread (the main thread only waits for uv):
    this module's later imports, and the caller's `meanwhile` (the CLI's rendering)."""
    import time

    start = time.perf_counter()
    _writable(output)
    uvtool.check_settings()
    indexes = effective_indexes(profile, overrides)
    unused = unused_index_variables(profile)
    if unused:
        from provision import log

        names = ", ".join(indexes)  # the profile's, default last
        for variable in unused:
            log.info(
                f"note: {variable} is set, but profile {profile.name} has no index of that name (its indexes: {names}): "
                "not used"
            )
    from provision.stacks import mirrors

    note = mirrors.mirror_note(profile, indexes)
    if note:  # said before uv resolves: the lock would stop after it otherwise
        from provision import log

        log.info(f"note: {note}")
    if any(p.prerelease and p.index != DEFAULT_INDEX and indexes.get(p.index) for p in profile.packages):
        progress("finding the newest complete nightly")
    early = earlyrecords.EarlyReads(lambda: Path(uvtool.cache_dir() or "."), wheel_rank(target))
    in_place = _in_place(output)
    try:
        return _lock(
            profile,
            target,
            overrides,
            output,
            progress,
            work,
            indexes,
            early,
            start,
            _Meanwhile(output, in_place, early, meanwhile),
            Preferences.of(output, in_place, upgrade=upgrade, packages=upgrade_packages),
        )
    finally:
        early.keep_only(set())  # what the gate needed was read; nothing more is started
        records = sys.modules.get("provision.stacks.wheelrecords")  # loaded where a read started
        if records is not None:
            records.drop_ahead()
        wheelfacts.settle()  # the RECORDs and the verdict kept, written while the lock was judged and written


def _lock(
    profile: Profile,
    target: Target,
    overrides: dict[str, str],
    output: Path,
    progress: Progress,
    work: Path | None,
    indexes: dict[str, str | None],
    early: earlyrecords.EarlyReads,
    start: float,
    before: _Meanwhile,
    preferences: Preferences,
) -> LockResult:
    import time

    pins, nightly = nightly_pins(profile, indexes, target)
    project = _project(profile, pins, indexes)
    with _work_folder(work) as folder:
        (folder / "pyproject.toml").write_text(project)
        preferences.place(folder / "pylock.toml")
        progress("resolving with uv")
        # uv's log of what it fetches names the wheels whose RECORDs are read while it resolves. A lock made again for
        # the same key (the profile's content, indexes, Python and platform) keeps its versions (uv's preferences), and
        # its wheels' RECORDs were read when it was made: the log would name nothing new, and reading it slowed uv by
        # 25-45 ms (docs/performance.md). A wheel it names anyway is read after uv.
        made_again = preferences.same_key(lambda: lock_key(profile, indexes, target))

        def compile_(preferences: Preferences, started: Callable[[], None] = lambda: None) -> None:
            # uv runs: what waited for it starts (the lock replaced parsed, its wheels' RECORDs read: only now, read
            # before, it took the interpreter from what leads to uv)
            args, env = _uv_input(profile, indexes, target, preferences, made_again)
            uvtool.run(
                args,
                cwd=folder,
                env=env,
                started=started,
                on_line=_wheels_seen(early),
                version_after=True,
                # a lock of the command line's own (not create's) is started ahead when made again (stacks/ahead)
                ahead=work is None and bool(profile.source),
            )

        try:
            try:
                compile_(preferences, before.start)
            except ProvisionError as exc:
                if preferences.source is None:
                    raise
                if before.ident is not None:
                    before.join()
                if before.previous() is not None and not exc.message.startswith(_UV_TOML_ERROR):
                    raise  # the lock replaced reads well, to provision and to uv: uv's error is the profile's
                (folder / "pylock.toml").unlink(missing_ok=True)  # not a lock: no preference, and replaced
                preferences = Preferences(None)
                compile_(preferences)
        except IndexUnreachable as exc:
            from provision.stacks import mirrors

            hint = mirrors.same_build_hint(profile, indexes, exc, target.python, target.platform, folder)
            if hint:
                raise IndexUnreachable(exc.message, hint) from exc
            raise
        finally:
            if before.ident is not None:  # started: uv ran
                before.join()
        # uv's own text: kept where provision changes no package
        written = (folder / "pylock.toml").read_text()
        previous = before.previous()
        # where uv wrote exactly the packages of the lock in place, they are taken from it (parsed while uv ran)
        kept_tool = (
            locktext.proven(previous.text, written, previous.raw.get("packages", []))
            if previous is not None
            else None
        )
        if previous is not None and kept_tool is not None:
            raw = {k: v for k, v in previous.raw.items() if k != "tool"}
        else:
            raw = toml.loads(written)
            early.add(earlyrecords.jobs_of(raw.get("packages", []), early.rank))  # read while attributed
        progress("attributing each package to its index")
        origin = attribution(raw.get("packages", []), profile, indexes)
        strays = [
            p.name
            for p in profile.packages
            if p.index == DEFAULT_INDEX
            and origin.get(str(canonicalize_name(p.name)), DEFAULT_INDEX) != DEFAULT_INDEX
        ]
        # uv's own default index has no name to bind them to: resolve again with the named ones explicit
        if strays:
            progress(
                f"{', '.join(strays)} came from a named index; resolving again with the named indexes explicit"
            )
            written = _resolve_explicit(folder, profile, pins, indexes, target, raw, origin)
            raw, kept_tool = toml.loads(written), None
            early.add(earlyrecords.jobs_of(raw.get("packages", []), early.rank))
            origin = attribution(raw.get("packages", []), profile, indexes)
    from provision.stacks import relock

    stamp = _Stamp(
        key=lock_key(profile, indexes, target),
        nightly=nightly,
        rebuild=relock.rebuild_command(
            profile, python=target.python, platform=target.platform, overrides=overrides, output=output
        ),
    )
    packages = _packages(raw, indexes, origin, progress)
    _check_bindings(profile, packages)
    _check_flashinfer(packages)
    # a lock that changes is validated now, while the gate's last RECORD reads are on the network (32 ms of 207
    # packages, taken out of the wait); one that comes out as the lock in place is not written, nor validated
    validated = kept_tool is None and _validate(raw)
    warnings, known = _warnings(packages, progress, early)
    raw.setdefault("tool", {})["provision"] = _provision_table(
        raw, profile, indexes, target, stamp, packages, known
    )
    header = locktext.header(profile.name, stamp.rebuild)
    kept = (
        kept_tool is not None
        and previous is not None
        and locktext.unchanged(
            previous.text, header, locktext.packages_text(written, raw["packages"]), raw["tool"], kept_tool
        )
        and _in_place(output) == before.in_place  # and still is
    )
    if not kept:  # else the lock in place is what would be written, its created time aside: left as it is
        try:
            write_atomic(output, header + _document(raw, written, validated=validated))
        except OSError as exc:
            raise InputError(
                f"cannot write the lock to {output}: {exc.strerror or exc}",
                "free space on that disk (the lock in place is as it was), or choose -o on another"
                if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                else "choose -o in a folder you can write",
            ) from exc
    if work is None and profile.source:
        _remember(profile, indexes, target, project, output, preferences, stamp.key)
    changes = relock.changes(
        previous.versions if previous is not None else None, {p.name: p.version for p in packages}
    )
    return LockResult(
        path=output,
        profile=profile.name,
        target=target,
        packages=packages,
        nightly=nightly,
        seconds=time.perf_counter() - start,
        key=stamp.key,
        warnings=warnings,
        rebuild=stamp.rebuild,
        changes=changes,
        preferred=preferences.source,
        unchanged=kept,
    )


def _writable(output: Path) -> None:
    """Refuse an output that cannot be written before anything is resolved: a file where a folder should be, no rights."""
    folder = output.absolute().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot write the lock to {output}: {folder}: {exc.strerror or exc}",
            "choose -o in a folder you can write",
        ) from exc
    if output.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        problem = "is a folder" if output.is_dir() else f"{folder} is not writable"
        raise InputError(
            f"cannot write the lock to {output}: {problem}", "choose -o in a folder you can write"
        )


WORK_PREFIX = ahead.WORK_PREFIX
_WORK_NAME = re.compile(re.escape(WORK_PREFIX) + r"(\d+)-[a-z0-9_]{8}")  # mkdtemp's shape, and nothing else


@contextlib.contextmanager
def _work_folder(parent: Path | None = None) -> Iterator[Path]:
    """A private folder for uv's input and output. In `parent` when given: its owner removes it with the rest. In
    TMPDIR otherwise, named with our pid, so a later run removes what a killed one left: only names of exactly the
    shape this makes, owned by this user, whose process is gone."""
    if parent is not None:
        folder = parent / "lock-work"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    else:
        base = Path(tempfile.gettempdir())
        for leftover in base.glob(f"{WORK_PREFIX}*-*"):
            shape = _WORK_NAME.fullmatch(leftover.name)
            with contextlib.suppress(OSError):
                if (
                    shape
                    and not leftover.is_symlink()
                    and leftover.is_dir()
                    and leftover.stat().st_uid == os.getuid()
                    and not proc.pid_alive(int(shape.group(1)))
                ):
                    shutil.rmtree(leftover, ignore_errors=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _in_place(output: Path) -> bytes | None:
    """The bytes of the lock at `output`, read before uv runs (what it is given as preferences, what the new lock's
    changes are told against, what a lock made again may leave as it is); None where there is none to read: nothing
    there, a link (uv quotes the line it cannot parse, and a lockfile committed as a link to a file of secrets,
    ~/.netrc, had its lines shown by -v), a folder, a pipe, a file past a lock's size."""
    from provision import regular

    try:
        data = regular.read_bytes(output, lockfile.MAX_BYTES + 1, follow=False)
    except OSError:
        return None
    return data if len(data) <= lockfile.MAX_BYTES else None


class _Meanwhile(threading.Thread):
    """What the lock needs after uv, done while uv resolves (started once uv runs: the main thread then waits in poll,
    holding no GIL): the lock in place parsed (relock.Previous) and its wheels' RECORDs read (EarlyReads.start_from),
    the modules imported that write and check the lock, and the caller's `meanwhile`."""

    def __init__(
        self,
        output: Path,
        in_place: bytes | None,
        early: earlyrecords.EarlyReads,
        meanwhile: Callable[[], object],
    ) -> None:
        super().__init__(name="lock-meanwhile")
        self.output, self.in_place, self.early, self.meanwhile = output, in_place, early, meanwhile
        self._previous: relock.Previous | None = None
        self._failed: BaseException | None = None
        self._parsed = False

    def run(self) -> None:
        import importlib

        earlyrecords.behind_uv()  # uv, whose answer the lock waits for, first: this has till uv ends
        try:
            self._parse()
        except BaseException as exc:
            self._failed = exc
        finally:
            self.early.start_from(self._previous.raw.get("packages", []) if self._previous else [])
        with contextlib.suppress(Exception):
            for module in (
                "packaging.pylock",
                "tomlkit",
                "provision.stacks.lockcheck",
                "provision.stacks.wheelrecords",
                "requests",
            ):
                importlib.import_module(module)
            self.meanwhile()

    def _parse(self) -> None:
        if not self._parsed and self.in_place is not None:
            from provision.stacks import relock

            self._previous = relock.Previous.parse(self.in_place, self.output)
        self._parsed = True

    def previous(self) -> relock.Previous | None:
        """The lock replaced, once joined (or parsed here where uv never ran); None when it is none provision reads as
        a lock."""
        if self.ident is None:
            self._parse()
        if self._failed is not None:
            raise self._failed
        return self._previous


@dataclass(frozen=True)
class Preferences:
    """The lock `output` replaces, as uv's preferences: uv reads an existing output file's versions and keeps them
    where the requirements allow (`uv pip compile -o`), which also spares it most of the search."""

    source: str | None  # the lock given to uv as preferences; None when none was (none there, or --upgrade)
    text: bytes = b""
    upgrade_packages: tuple[str, ...] = ()
    upgrade: bool = False  # --upgrade: none is given, whatever is there

    @classmethod
    def of(
        cls, output: Path, in_place: bytes | None, *, upgrade: bool, packages: tuple[str, ...]
    ) -> Preferences:
        """The lock in place (`_in_place`: one uv cannot read is no preference, `_lock` resolves again without it)."""
        if upgrade or in_place is None:
            return cls(None, upgrade=upgrade)
        return cls(str(output), in_place, packages)

    def same_key(self, key: Callable[[], str]) -> bool:
        """Whether the lock given as preferences was made for `key()` (lock_key, asked only where there is one: a
        first lock loads no hashlib before uv), every package's version held: its text says so (not parsed: this is
        before uv runs, and only how much is read ahead depends on it)."""
        return (
            self.source is not None
            and not self.upgrade_packages
            and f'\nlock_key = "{key()}"\n'.encode() in self.text
        )

    def place(self, path: Path) -> None:
        if self.source is not None:
            path.write_bytes(self.text)

    def arguments(self) -> list[str]:
        return [a for name in self.upgrade_packages for a in ("--upgrade-package", name)]


@dataclass(frozen=True, kw_only=True)
class _Stamp:
    """What a lock says of itself beside its packages: its key, its nightly date, the command that makes it again."""

    key: str
    nightly: str | None
    rebuild: str


def _packages(
    raw: dict[str, Any], indexes: dict[str, str | None], origin: dict[str, str], progress: Progress
) -> tuple[LockedPackage, ...]:
    """Every file uv locked, each with its index and a sha256 (computed where its index gives none), put into `raw`
    too (each package's `index`, each file's URL without credentials and its hashes): what is written."""
    locked: list[LockedPackage] = []
    unhashed = [
        urls.strip_credentials(w.get("url", ""))
        for p in raw.get("packages", [])
        for w in _files(p)
        if not w.get("hashes")
    ]
    for file_url in unhashed:
        progress(f"hashing {urls.filename(file_url)} (its index gives no hash)")
    digests: dict[str, str] = {}
    if unhashed:  # the index client is loaded where a file is downloaded
        from concurrent.futures import ThreadPoolExecutor

        from provision.stacks import index

        # downloads of one file each: in parallel, not one after another
        with ThreadPoolExecutor(max_workers=8) as pool:
            digests = dict(zip(unhashed, pool.map(index.sha256_of, unhashed), strict=True))
    shown = {name: urls.shown(url) for name, url in indexes.items() if url}
    for package in raw.get("packages", []):
        name = str(canonicalize_name(package["name"]))
        index_name = origin.get(name, DEFAULT_INDEX)
        if index_name in shown and _files(package):  # a source tree or a repository comes from no index
            package["index"] = shown[index_name]
        if "directory" in package or "vcs" in package:
            locked.append(_from_source(name, package))
        for wheel in package.get("wheels", []) + ([package["sdist"]] if "sdist" in package else []):
            wheel["url"] = urls.strip_credentials(wheel.get("url", ""))
            source: HashSource = "index"
            if not wheel.get("hashes"):
                wheel["hashes"] = {"sha256": digests[wheel["url"]]}
                source = "computed"
            locked.append(
                LockedPackage(
                    name=name,
                    version=str(package.get("version", "")),
                    index=index_name,
                    file=wheel.get("name") or urls.filename(wheel["url"]),
                    url=wheel["url"],
                    sha256=wheel["hashes"].get("sha256", ""),
                    hash_source=source,
                )
            )
    return tuple(locked)


def _provision_table(
    raw: dict[str, Any],
    profile: Profile,
    indexes: dict[str, str | None],
    target: Target,
    stamp: _Stamp,
    packages: tuple[LockedPackage, ...],
    known: list[dict[str, object]],
) -> dict[str, Any]:
    """The lock's [tool.provision]: what it says of itself beside uv's packages."""
    computed = [urls.filename(p.url) for p in packages if p.hash_source == "computed"]
    return {
        "profile": profile.name,
        "profile_hash": profile.content_hash,
        "lock_key": stamp.key,
        "cuda": profile.cuda,  # the lock describes itself: report --lock judges it without its profile
        "compiler_cuda": profile.compiler_cuda() or "",
        "flashinfer_arch_list": profile.env.get("FLASHINFER_CUDA_ARCH_LIST", ""),
        **(
            {"serves": list(profile.serves)} if profile.serves else {}
        ),  # report --lock judges the feature wheels by it
        "python": target.python,
        "platform": target.platform or f"this machine ({host_platform.machine()})",
        "indexes": {n: urls.shown(u) for n, u in indexes.items() if u},
        "nightly_date": stamp.nightly or "",
        "computed_hashes": computed,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "provision_version": __version__,
        # paths two wheels install with different contents, seen now: drift judges an untouched build by them
        **({"known_conflicts": known} if known else {}),
        # what provision wrote, checked by every reader: a hash flipped or a package added by hand is refused
        "packages_sha256": lockfile.packages_digest(raw.get("packages", []), known),
    }


def _document(raw: dict[str, Any], written: str, *, validated: bool = False) -> str:
    """The lock's text (its header aside): `raw` with provision's `created-by`, validated by packaging.pylock (unless
    `validated` already, its [tool] table aside: PEP 751 leaves that table to its tools)."""
    if not validated:
        _validate(raw)
    return locktext.dumps(raw, written)


def _validate(raw: dict[str, Any]) -> bool:
    """`raw`, with provision's `created-by`, as packaging.pylock reads it; a ResolveError where PEP 751 rejects it."""
    raw["created-by"] = locktext.CREATED_BY
    from packaging.pylock import Pylock, PylockValidationError

    try:
        Pylock.from_dict(raw)  # from_dict validates (validate() would only convert it back and again)
    except (PylockValidationError, InvalidVersion) as exc:
        raise ResolveError(
            f"uv produced a lock that PEP 751 rejects: {exc}", "report this with the profile"
        ) from exc
    return True


def _from_source(name: str, package: dict[str, Any]) -> LockedPackage:
    """A package locked from a source tree (directory) or a repository (vcs, at its commit): no file, no hash."""
    if "vcs" in package:
        vcs = package["vcs"]
        url = f"{urls.strip_credentials(str(vcs.get('url', '')))}@{vcs.get('commit-id', '')}"
        return LockedPackage(
            name=name,
            version=str(package.get("version", "")),
            index="",
            file="",
            url=url,
            sha256="",
            hash_source="git",
        )
    directory = package["directory"]
    kind: HashSource = "editable" if directory.get("editable") else "directory"
    return LockedPackage(
        name=name,
        version=str(package.get("version", "")),
        index="",
        file="",
        url=str(directory.get("path", "")),
        sha256="",
        hash_source=kind,
    )


def _check_bindings(profile: Profile, packages: tuple[LockedPackage, ...]) -> None:
    for package in profile.packages:
        if package.from_source:
            continue
        name = str(canonicalize_name(package.name))
        for locked in packages:
            if locked.name == name and locked.index != package.index:
                hint = (
                    (
                        "name the default index's URL (indexes.default in the profile, --index default=URL or "
                        "PROVISION_INDEX_DEFAULT) so that provision can bind the package to it, or bind it to "
                        f"index {locked.index!r} in the profile"
                    )
                    if package.index == DEFAULT_INDEX
                    else "check the index URLs: a package bound to an index must come from it alone"
                )
                raise ResolveError(
                    f"{name} came from index {locked.index!r}, but the profile binds it to {package.index!r}",
                    hint,
                )


def _warnings(
    packages: tuple[LockedPackage, ...], progress: Progress, early: earlyrecords.EarlyReads
) -> tuple[tuple[LockWarning, ...], list[dict[str, object]]]:
    """What `report --lock` would FAIL, said at once: NVIDIA libraries of two CUDA majors, two wheels installing one
    path (from their RECORDs, read without downloading the wheels; one that cannot be read is said); and the paths
    shared, for the lock to record (`lockcheck.known`)."""
    from provision.stacks import lockcheck, wheelrecords

    found: list[LockWarning] = []
    first: dict[str, LockedPackage] = {}
    for package in packages:  # the wheel the target's installer takes (earlyrecords.jobs_of's choice)
        if package.file.endswith(".whl") and (
            package.name not in first or early.rank(package.file) < early.rank(first[package.name].file)
        ):
            first[package.name] = package
    mixed = lockcheck.cuda_mix([(p.name, p.version) for p in first.values()])
    if mixed:
        found.append(LockWarning("cuda-mix", f"{mixed}: libraries of two CUDA majors load into one process"))
    jobs = [(p.name, p.file, p.url, p.sha256) for p in first.values()]
    early.keep_only({p.sha256 for p in first.values()})  # the reads started early for other wheels stop
    judged = wheelrecords.verdict(jobs, lambda: Path(uvtool.cache_dir() or "."), progress)
    conflicts = judged.conflicts
    if conflicts:
        found.append(
            LockWarning(
                "conflict-loose" if conflicts[0].loose else "conflict",
                conflicts[0].message() + (f"; {len(conflicts) - 1} more pairs" if len(conflicts) > 1 else ""),
            )
        )
    unread = judged.unread
    if unread:
        found.append(
            LockWarning(
                "conflict-unread",
                f"the RECORD of {len(unread)} wheels could not be read without downloading them "
                f"(e.g. {unread[0]}): provision report --lock reads them",
            )
        )
    return tuple(found), list(judged.known)


def _check_flashinfer(packages: tuple[LockedPackage, ...]) -> None:
    versions = {p.name: Version(p.version).public for p in packages if p.name in FLASHINFER_FAMILY}
    if len(set(versions.values())) > 1:
        found = ", ".join(f"{n} {v}" for n, v in sorted(versions.items()))
        raise ResolveError(
            f"FlashInfer packages disagree ({found}); flashinfer raises at import unless they match",
            "pin flashinfer-python, flashinfer-cubin and flashinfer-jit-cache to one version in the profile",
        )
