"""`provision lock`: a profile resolved through uv into a PEP 751 lockfile, every file pinned by URL and sha256,
each package attributed to the index it came from, nightlies of one date."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform as host_platform
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from packaging.pylock import Pylock, PylockValidationError
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from provision import __version__
from provision.atomic import write_atomic
from provision.errors import ResolveError, UsageError
from provision.stacks import index, uvtool
from provision.stacks.profiles import DEFAULT_INDEX, Profile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

INDEX_VARIABLE = "PROVISION_INDEX_{}"
FLASHINFER_FAMILY = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
_NIGHTLY = re.compile(r"^\d{8}$")


@dataclass(frozen=True, kw_only=True)
class Target:
    python: str
    platform: str | None  # uv's --python-platform name; None: this machine

    @property
    def arch(self) -> str:
        if self.platform is None:
            return host_platform.machine()
        return "aarch64" if "aarch64" in self.platform or "arm64" in self.platform else "x86_64"


@dataclass(frozen=True, kw_only=True)
class LockedPackage:
    name: str
    version: str
    index: str  # the index's name in the profile ("default" for uv's default registry)
    file: str
    url: str
    sha256: str
    hash_source: str  # "index" or "computed"

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass(kw_only=True)
class LockResult:
    path: Path
    profile: str
    target: Target
    packages: list[LockedPackage] = field(default_factory=list)
    nightly: str | None = None
    seconds: float = 0.0
    key: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "lockfile": str(self.path),
            "profile": self.profile,
            "python": self.target.python,
            "platform": self.target.platform,
            "nightly_date": self.nightly,
            "lock_key": self.key,
            "packages": [p.to_dict() for p in self.packages],
            "seconds": round(self.seconds, 3),
        }


def parse_overrides(pairs: tuple[str, ...]) -> dict[str, str]:
    overrides = {}
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://", "file://")):
            raise UsageError(f"--index {index.redact(pair)!r}: expected NAME=URL", "for example --index pytorch=https://mirror.example/whl/nightly/cu130")
        overrides[name] = url
    return overrides


def effective_indexes(profile: Profile, overrides: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str | None]:
    """The profile's indexes in order, `default` last, each replaced by --index or PROVISION_INDEX_<NAME>."""
    environ = dict(os.environ) if environ is None else environ
    names = [*(n for n in profile.indexes if n != DEFAULT_INDEX), DEFAULT_INDEX]
    for name in overrides:
        if name not in names:
            raise UsageError(f"--index {name}=...: profile {profile.name} has no index {name!r}",
                             f"its indexes are: {', '.join(names)}")
    result: dict[str, str | None] = {}
    for name in names:
        variable = INDEX_VARIABLE.format(name.upper().replace("-", "_"))
        result[name] = overrides.get(name) or environ.get(variable) or profile.indexes.get(name)
    return result


def lock_key(profile: Profile, indexes: dict[str, str | None], target: Target) -> str:
    """What a lock depends on: the profile's bytes, the effective index URLs, the target Python and platform."""
    material = json.dumps([profile.content_hash, indexes, target.python, target.platform], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _compatible(filename: str, target: Target) -> bool:
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    want = "cp" + target.python.replace(".", "")
    minor = int(target.python.split(".")[1])
    for tag in tags:
        python_ok = tag.interpreter in (want, "py3", f"py{target.python.replace('.', '')}") or (
            tag.abi == "abi3" and tag.interpreter.startswith("cp3") and int(tag.interpreter[3:] or 0) <= minor
        )
        if python_ok and (tag.platform == "any" or target.arch in tag.platform):
            return True
    return False


def nightly_pins(profile: Profile, indexes: dict[str, str | None], target: Target) -> tuple[dict[str, str], str | None]:
    """Pin every nightly package of one index to the newest date that all of them have a wheel for."""
    pins: dict[str, str] = {}
    chosen: str | None = None
    groups: dict[str, list[Any]] = {}
    for package in profile.packages:
        if package.prerelease and package.index != DEFAULT_INDEX and indexes.get(package.index):
            groups.setdefault(package.index, []).append(package)
    for index_name, packages in groups.items():
        by_package: dict[str, dict[str, Version]] = {}
        for package in packages:
            spec = SpecifierSet(package.version, prereleases=True)
            dates: dict[str, Version] = {}
            for file in index.project_files(str(indexes[index_name]), package.name):
                if not _compatible(file.filename, target):
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
            raise ResolveError(f"no nightly date has every package of index {index_name!r} for Python {target.python} {target.arch} (newest: {newest})",
                               "pin one package to an older nightly in the profile, or wait for the next nightly")
        chosen = max(common)
        for name, dates in by_package.items():
            pins[name] = str(dates[chosen].public)
    return pins, chosen


def _project(profile: Profile, pins: dict[str, str], indexes: dict[str, str | None]) -> str:
    """The pyproject.toml uv resolves: dependencies, plus sources binding each package to its named index."""
    doc = tomlkit.document()
    requirements = []
    for package in profile.packages:
        spec = f"=={pins[package.name]}" if package.name in pins else package.version
        if package.prerelease and package.name not in pins and not SpecifierSet(spec or "").prereleases:
            spec = ",".join(filter(None, [spec, ">=0.0.0.dev0"]))  # admit pre-releases for this package only
        extras = f"[{','.join(package.extras)}]" if package.extras else ""
        requirements.append(f"{package.name}{extras}{spec}")
    doc["project"] = {"name": "provision-lock", "version": "0", "dependencies": requirements}
    sources = {p.name: {"index": p.index} for p in profile.packages if p.index != DEFAULT_INDEX}
    uv_indexes = [{"name": n, "url": u} for n, u in indexes.items() if n != DEFAULT_INDEX and u]
    doc["tool"] = {"uv": {"sources": sources, "index": uv_indexes}} if sources else {"uv": {"index": uv_indexes}}
    return tomlkit.dumps(doc)


def _uv_compile_args(indexes: dict[str, str | None], target: Target, output: str) -> list[str]:
    # --python names the interpreter uv may use for builds: it skips a search of every Python on PATH.
    args = ["pip", "compile", "pyproject.toml", "--no-config", "--quiet", "-o", output, "--format", "pylock.toml",
            "--python-version", target.python, "--no-header", "--python", sys.executable]
    if target.platform:
        args += ["--python-platform", target.platform]
    for name, url in indexes.items():
        if name != DEFAULT_INDEX and url:
            args += ["--index", f"{name}={url}"]
    if indexes.get(DEFAULT_INDEX):
        args += ["--default-index", str(indexes[DEFAULT_INDEX])]
    return args


def attribution(names: list[str], profile: Profile, indexes: dict[str, str | None]) -> dict[str, str]:
    """Which index each locked package came from: a bound package from its own index (uv's sources guarantee it);
    any other from the first named index whose page lists it (uv's first-index rule), else the default index.
    The pages are read in parallel; a lock that involves only the default index reads none."""
    from concurrent.futures import ThreadPoolExecutor

    bound = {str(canonicalize_name(p.name)): p.index for p in profile.packages}
    named = [n for n, url in indexes.items() if n != DEFAULT_INDEX and url]

    def origin(name: str) -> str:
        if name in bound:
            return bound[name]
        for index_name in named:
            if index.project_files(str(indexes[index_name]), name):
                return index_name
        return DEFAULT_INDEX

    if not named:
        return {name: bound.get(name, DEFAULT_INDEX) for name in names}
    with ThreadPoolExecutor(max_workers=16) as pool:
        return dict(zip(names, pool.map(origin, names), strict=True))


def lock(profile: Profile, *, target: Target, overrides: dict[str, str], output: Path,
         progress: Callable[[str], None] = lambda _: None) -> LockResult:
    import time

    start = time.perf_counter()
    indexes = effective_indexes(profile, overrides)
    progress("finding the newest complete nightly")
    pins, nightly = nightly_pins(profile, indexes, target)
    with tempfile.TemporaryDirectory(prefix="provision-lock-") as work:
        folder = Path(work)
        (folder / "pyproject.toml").write_text(_project(profile, pins, indexes))
        progress("resolving with uv")
        uvtool.run(_uv_compile_args(indexes, target, "pylock.toml"), cwd=folder)
        raw = tomllib.loads((folder / "pylock.toml").read_text())
    progress("attributing each package to its index")
    origin = attribution([str(canonicalize_name(p["name"])) for p in raw.get("packages", [])], profile, indexes)
    result = LockResult(path=output, profile=profile.name, target=target, nightly=nightly,
                        key=lock_key(profile, indexes, target))
    document = _finish(raw, profile, indexes, origin, target, result, progress)
    _check_bindings(profile, result.packages)
    _check_flashinfer(result.packages)
    write_atomic(output, document)
    result.seconds = time.perf_counter() - start
    return result


def _finish(raw: dict[str, Any], profile: Profile, indexes: dict[str, str | None], origin: dict[str, str],
            target: Target, result: LockResult, progress: Callable[[str], None]) -> str:
    computed = []
    for package in raw.get("packages", []):
        name = str(canonicalize_name(package["name"]))
        index_name = origin.get(name, DEFAULT_INDEX)
        url = indexes.get(index_name)
        if url:
            package["index"] = index.strip_credentials(url)
        for wheel in package.get("wheels", []) + ([package["sdist"]] if "sdist" in package else []):
            wheel["url"] = index.strip_credentials(wheel.get("url", ""))
            source = "index"
            if not wheel.get("hashes"):
                progress(f"hashing {wheel['url'].rsplit('/', 1)[-1]} (its index gives no hash)")
                wheel["hashes"] = {"sha256": index.sha256_of(wheel["url"])}
                computed.append(wheel["url"].rsplit("/", 1)[-1])
                source = "computed"
            result.packages.append(LockedPackage(
                name=name, version=str(package.get("version", "")), index=index_name,
                file=wheel.get("name") or wheel["url"].rsplit("/", 1)[-1], url=wheel["url"],
                sha256=wheel["hashes"].get("sha256", ""), hash_source=source))
    raw["created-by"] = "provision (uv pip compile)"
    raw.setdefault("tool", {})["provision"] = {
        "profile": profile.name,
        "profile_hash": profile.content_hash,
        "lock_key": result.key,
        "python": target.python,
        "platform": target.platform or f"this machine ({host_platform.machine()})",
        "indexes": {n: index.strip_credentials(u) for n, u in indexes.items() if u},
        "nightly_date": result.nightly or "",
        "computed_hashes": computed,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "provision_version": __version__,
    }
    try:
        Pylock.from_dict(raw).validate()
    except (PylockValidationError, InvalidVersion) as exc:
        raise ResolveError(f"uv produced a lock that PEP 751 rejects: {exc}", "report this with the profile") from exc
    header = f"# PEP 751 lock of profile {profile.name!r}, written by provision {__version__}. Rebuild: provision lock {profile.name}\n"
    return header + tomlkit.dumps(raw)


def _check_bindings(profile: Profile, packages: list[LockedPackage]) -> None:
    for package in profile.packages:
        name = str(canonicalize_name(package.name))
        for locked in packages:
            if locked.name == name and locked.index != package.index:
                raise ResolveError(f"{name} came from index {locked.index!r}, but the profile binds it to {package.index!r}",
                                   "check the index URLs: a package bound to an index must come from it alone")


def _check_flashinfer(packages: list[LockedPackage]) -> None:
    versions = {p.name: Version(p.version).public for p in packages if p.name in FLASHINFER_FAMILY}
    if len(set(versions.values())) > 1:
        found = ", ".join(f"{n} {v}" for n, v in sorted(versions.items()))
        raise ResolveError(f"FlashInfer packages disagree ({found}); flashinfer raises at import unless they match",
                           "pin flashinfer-python, flashinfer-cubin and flashinfer-jit-cache to one version in the profile")


def read(path: Path) -> tuple[Pylock, dict[str, Any]]:
    """Return a lock (validated by packaging.pylock) and its [tool.provision] table."""
    try:
        raw = tomllib.loads(path.read_text())
        pylock = Pylock.from_dict(raw)
    except (OSError, tomllib.TOMLDecodeError, PylockValidationError) as exc:
        raise UsageError(f"{path}: not a readable PEP 751 lock ({exc})", "make one with: provision lock PROFILE") from exc
    return pylock, dict((raw.get("tool") or {}).get("provision") or {})


def default_output(profile: Profile) -> Path:
    return Path("lockfiles") / f"pylock.{profile.name}.toml"
