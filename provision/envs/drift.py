"""The drift check, decided in provision's own process: every installed file against its distribution's RECORD,
every distribution against the environment's lock (version, source), and the start-up files in site-packages that
no distribution owns. Nothing is imported from the environment, so a broken one is read as well as a sound one."""

from __future__ import annotations

import base64
import contextlib
import csv
import errno
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.utils import InvalidName, InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from provision import confined, regular
from provision.envs import filehash
from provision.envs.home import present_site_packages
from provision.envs.home import site_packages as site_packages  # one definition, used here and by restore
from provision.errors import EnvError, ProvisionError
from provision.records.checks import BY_ID
from provision.records.details import DriftDetails
from provision.records.results import DRIFT_KINDS, CheckResult, Reader
from provision.stacks import urls

if TYPE_CHECKING:
    from email.message import Message

    from packaging.pylock import Package, Pylock

    from provision.envs.records import EnvRecord, KeptFile
    from provision.stacks.lockfile import Stamp

CACHE_NAME = "drift-cache.json"  # beside the environment, in its build folder
STARTUP_NAMES = ("sitecustomize.py", "usercustomize.py", "sitecustomize", "usercustomize")
# Written by virtualenv (and older uv) into every venv it makes; owned by no distribution, known by its content.
VENV_TOOL_FILES = {"_virtualenv.pth": "import _virtualenv"}
# torch's RECORD, among the largest, is a few MB: past this, a finding, never read into memory
RECORD_LIMIT = 64 << 20
# torch's RECORD lists about 13,000 files, the largest real ones a few tens of thousands: 640,000 rows of files that are
# not there took the check 58 s and 2.7 GB
RECORD_ROWS = 100_000
HEADERS_LIMIT = 1 << 20  # a METADATA's header fields (its long description after them is never read)
# The findings a check's details (and restore's drift_before) list, in the order found; `counts` counts them all. A
# RECORD of 640,000 rows that are not there wrote 200 MB into env.json and as much onto stdout.
FINDINGS_LISTED = 1000


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    kind: str  # one of DRIFT_KINDS
    distribution: str | None  # normalized name; None for an unowned file
    path: str  # relative to site-packages ("" for a distribution that is not installed)
    expected: str = ""
    found: str = ""
    # `shared` only: every distribution whose RECORD lists the path (with different contents), and the one whose
    # bytes are on disk (None: neither's)
    distributions: tuple[str, ...] = ()
    on_disk: str | None = None
    known_good: str | None = (
        None  # "accepted" or "profile": judged by that content, not by RECORD or as unowned
    )

    def to_dict(self) -> dict[str, object]:
        found: dict[str, object] = {
            "kind": self.kind,
            "distribution": self.distribution,
            "path": self.path,
            "expected": self.expected,
            "found": self.found,
            "known_good": self.known_good,
        }
        if self.kind == "shared":
            found.update(distributions=list(self.distributions), on_disk=self.on_disk)
        return found

    def line(self) -> str:
        if self.kind == "shared":
            whose = f"{self.on_disk}'s bytes" if self.on_disk else "neither's bytes"
            return f"shared {self.path} ({' and '.join(self.distributions)}: {whose})"
        owner = f" ({self.distribution})" if self.distribution and self.path else (self.distribution or "")
        what = f"{self.path}{owner}" if self.path else owner
        detail = (
            f": {self.expected or '-'} -> {self.found or '-'}"
            if self.kind in ("other-version", "other-source")
            else ""
        )
        kept = f" [{self.known_good}]" if self.known_good else ""
        return f"{self.kind} {what}{kept}{detail}"


@dataclass(kw_only=True)
class Drift:
    venv: Path
    site: Path
    lock: str | None
    findings: list[Finding] = field(default_factory=list)
    distributions: int = 0
    files: int = 0
    hashed: int = 0
    hashed_bytes: int = 0
    remembered: int = 0
    seconds: float = 0.0
    # kept path -> "name version" of the distribution listing it
    owners: dict[str, str] = field(default_factory=dict)
    # distributions from a source tree or a repository, as locked
    notes: list[str] = field(default_factory=list)
    unmatched: set[str] = field(default_factory=set)  # an adopted lock's distributions that matched no wheel

    @property
    def status(self) -> Literal["pass", "warn"]:
        return "warn" if self.findings else "pass"

    def counts(self) -> dict[str, int]:
        return {kind: sum(f.kind == kind for f in self.findings) for kind in DRIFT_KINDS}

    def to_reinstall(self) -> list[str]:
        """Distributions the lock must put back: files changed or gone, another version or source, not installed."""
        kinds = ("modified", "missing", "other-version", "other-source")
        return sorted(
            {f.distribution for f in self.findings if f.kind in kinds and f.distribution and not f.known_good}
        )

    def put_back(self) -> list[str]:
        """Accepted and profile files that differ from their kept content, or are gone."""
        return [f.path for f in self.findings if f.known_good]

    def extra(self) -> list[str]:
        return sorted({f.distribution for f in self.findings if f.kind == "extra" and f.distribution})

    def unowned(self) -> list[str]:
        return [f.path for f in self.findings if f.kind == "unowned"]

    def summary(self) -> str:
        counts = ", ".join(f"{n} {k}" for k, n in self.counts().items() if n)
        return counts or "nothing differs"

    def to_dict(self) -> dict[str, object]:
        return {
            "venv": str(self.venv),
            "site_packages": str(self.site),
            "lock": self.lock,
            "status": self.status,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings[:FINDINGS_LISTED]],
            "findings_left_out": max(0, len(self.findings) - FINDINGS_LISTED),
            "distributions": self.distributions,
            "files": self.files,
            "hashed": self.hashed,
            "hashed_bytes": self.hashed_bytes,
            "remembered": self.remembered,
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
        }


def scan(
    venv: Path,
    *,
    lock: Path | None = None,
    cache: Path | None = None,
    kept: Mapping[str, KeptFile] | None = None,
) -> Drift:
    """Compare the environment with its RECORDs, its lock and its `kept` files (accepted, the profile's: by path,
    judged by their own content); `cache` remembers what was hashed (None: nothing). Nothing outside the venv is read: site-packages (or lib, lib/pythonX.Y) as a link out of it is an EnvError naming
    the link; a distribution's folder or file that leads out is a finding, not read."""
    start = time.perf_counter()
    site = site_packages(venv)
    confinement = confined.Confinement(venv)
    escape = confinement.folder(str(site))
    if escape is not None:
        raise confined.refusal(escape, venv, "the drift check")
    present_site_packages(venv)  # never judged as an empty venv
    drift = Drift(venv=venv, site=site, lock=str(lock) if lock else None)
    installed = _installed(site, confinement, drift)
    drift.distributions = len(installed)
    locked = _read_lock(lock) if lock is not None else None
    known = locked[1].known_conflicts if locked else {}
    owned = _files(drift, installed, filehash.Cache(cache, site), confinement, kept or {}, known)
    drift.findings += _unowned_startup(site, owned, confinement)
    if lock is not None:
        drift.findings += _against_lock(venv, installed, lock, locked, drift.notes, drift.unmatched)
    drift.findings.sort(key=lambda f: (DRIFT_KINDS.index(f.kind), f.distribution or "", f.path))
    drift.seconds = time.perf_counter() - start
    return drift


@dataclass(frozen=True, kw_only=True)
class Installed:
    name: str
    version: str
    info: Path  # the .dist-info (or .egg-info) folder


def _installed(site: Path, confinement: confined.Confinement, drift: Drift) -> dict[str, Installed]:
    found: dict[str, Installed] = {}
    for info in sorted([*site.glob("*.dist-info"), *site.glob("*.egg-info")]):
        escape = _info_escape(info, confinement)
        if escape is not None:  # its METADATA and RECORD would be read from outside the venv: named, not read
            drift.findings.append(
                Finding(
                    kind="modified",
                    distribution=info_name(info),
                    path=info.name,
                    expected="a folder in the environment",
                    found=f"{escape[0]} leads out to {escape[1]}: not read",
                )
            )
            continue
        try:
            headers = _headers(info) if info.is_dir() else None
        except OSError as exc:  # a pipe or a device where METADATA belongs: named, never waited on
            drift.findings.append(
                Finding(
                    kind="modified",
                    distribution=info_name(info),
                    path=info.name,
                    expected="a METADATA or PKG-INFO file",
                    found=f"unreadable ({exc.strerror or exc})",
                )
            )
            continue
        name = headers.get("Name") if headers else None
        if headers is None or not name:
            continue
        try:  # a name such as "-r" or "--index-url=..." would reach uv's command line as an option
            key = str(canonicalize_name(name, validate=True))
        except InvalidName:
            drift.findings.append(
                Finding(
                    kind="modified",
                    distribution=None,
                    path=f"{info.name}/METADATA",
                    expected="a distribution name (PEP 508)",
                    found=f"Name: {name[:80]!r}",
                )
            )
            continue
        found[key] = Installed(name=key, version=headers.get("Version") or "", info=info)
    return found


def _headers(info: Path) -> Message | None:
    """The metadata's header fields only, read no further than the blank line after them (HEADERS_LIMIT at most):
    parsing the whole file (a long description) costs a tenth of the warm check, and a 45 MB one would be held whole.
    Bytes that are not UTF-8 (a Latin-1 author) read as U+FFFD. OSError for a pipe or a device: never waited on."""
    from email.parser import HeaderParser  # loaded when a METADATA is read, not by every importer of drift

    for name in ("METADATA", "PKG-INFO"):
        try:
            handle = regular.open_file(info / name)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        lines, size = [], 0
        with handle:
            for line in handle:
                size += len(line)
                if not line.strip() or size > HEADERS_LIMIT:
                    break
                lines.append(line)
        head = b"".join(lines).decode("utf-8", "replace").replace("\r\n", "\n")
        return HeaderParser().parsestr(head + "\n") if head else None
    return None


def distribution_name(info: Path) -> str | None:
    """The Name a .dist-info's METADATA gives, read as drift reads it (headers only, never waited on, bytes that are
    not UTF-8 as U+FFFD); None when it has none or it cannot be read."""
    try:
        headers = _headers(info)
    except OSError:
        return None
    name = headers.get("Name") if headers is not None else None
    return str(name) if name else None


def _text(info: Path, filename: str) -> str | None:
    """A small metadata file's text (WHEEL, direct_url.json: its first MiB), None when there is none (or it is not a
    regular file: never waited on); bytes that are not UTF-8 (a Latin-1 author) read as U+FFFD."""
    try:
        return regular.read_bytes(info / filename, 1 << 20).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _record_rows(info: Path) -> Iterator[list[str]]:
    """The rows of a RECORD, read as they come (never the whole file in memory); nothing for a missing one; OSError
    for a pipe, a device, or one larger than RECORD_LIMIT."""
    try:
        handle = regular.open_file(info / "RECORD", mode="r", errors="strict", newline="")
    except (FileNotFoundError, NotADirectoryError):
        return
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > RECORD_LIMIT:
            raise OSError(errno.EFBIG, f"larger than {RECORD_LIMIT >> 20} MiB: not read")
        lines = sum(_line_ends(os.pread(handle.fileno(), 1 << 20, at)) for at in range(0, size, 1 << 20))
        if lines > RECORD_ROWS:  # counted before a row is parsed: each costs a kilobyte while the check runs
            raise OSError(errno.EFBIG, f"more than {RECORD_ROWS:,} rows: not read")
        yield from csv.reader(handle)


def _line_ends(block: bytes) -> int:
    """How many lines `block` ends, as csv reads them: at \\n, \\r or \\r\\n (a RECORD of \\r alone is rows too)."""
    return block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")


def info_name(info: Path) -> str:
    """The normalized distribution name a .dist-info (or .egg-info) folder's name carries."""
    return str(canonicalize_name(info.name.rsplit(".", 1)[0].split("-", 1)[0]))


def _info_escape(info: Path, confinement: confined.Confinement) -> confined.Escape | None:
    """The link out of the venv that the metadata folder is, or that one of its files is."""
    escape = confinement.folder(str(info))
    if escape is None and info.is_dir():
        # the folder's own listing says which entry is a link: no stat per file
        with os.scandir(info) as entries:
            for entry in entries:
                if escape is None and entry.is_symlink():
                    escape = confinement.path(entry.path)
    return escape


def _files(
    drift: Drift,
    installed: dict[str, Installed],
    cache: filehash.Cache,
    confinement: confined.Confinement,
    kept: Mapping[str, KeptFile],
    known: Mapping[str, Mapping[str, str]],
) -> set[str]:
    """Check every file RECORD lists with a hash, and every kept file; return every path RECORD lists (hashed or
    not) and every kept path, normalized. A path two distributions share as the lock recorded when it was made
    (`known`: the same owners, the same hashes) is no finding while one owner's bytes are on disk: a note."""
    # key -> {distribution: the hash its RECORD gives}, in the order read
    owners: dict[str, dict[str, str]] = {}
    wanted: list[filehash.Wanted] = []
    owned: set[str] = set()
    escaped: dict[str, str] = {}  # key -> what was found instead of reading: a folder on its way leads out
    last_folder, escape = "", None  # the folder of the last row, and the link out on its way (None: none)
    site = str(drift.site)
    under_site = os.path.join(site, "")
    root = os.path.join(os.path.normpath(drift.venv), "")
    # a shake digest has no fixed length, so a RECORD cannot name one (PEP 376 asks for hashlib's fixed-size ones):
    # such a row is left unchecked, as one naming an unknown algorithm is
    algorithms = {name for name in hashlib.algorithms_available if not name.startswith("shake")}
    for name, dist in installed.items():
        # RECORD read as the CSV it is (PEP 376): importlib.metadata's `files` builds a path object per row, which
        # costs more than the whole warm check on a venv of tens of thousands of files.
        try:
            for row in _record_rows(dist.info):
                if not row:
                    continue
                raw = row[0]
                plain = _plain(raw)
                key = raw if plain else os.path.normpath(raw)
                owned.add(key)
                mode, _, value = row[1].partition("=") if len(row) > 1 else ("", "", "")
                if not value or mode not in algorithms:
                    continue
                # A plain relative path stays in site-packages; any other is normalized and must stay in the venv:
                # an absolute or ../ path out of it is never read (uv never removes one either).
                path = under_site + key if plain else os.path.normpath(os.path.join(site, key))
                if not plain and not path.startswith(root):
                    continue
                folder = path.rpartition("/")[0]
                # RECORD lists a folder's files together: one lookup per run of them
                if folder != last_folder:
                    last_folder, escape = folder, confinement.folder(folder)  # one lstat per folder
                if escape is not None:
                    escaped[key] = (
                        f"{mode}=({escape[0]} leads out of the environment to {escape[1]}: not read)"
                    )
                elif key not in owners:
                    wanted.append(filehash.Wanted(key=key, path=path, mode=mode))
                owners.setdefault(key, {})[name] = row[1]
        # a field past csv's limit, bytes that are not UTF-8
        except (
            csv.Error,
            UnicodeDecodeError,
            OSError,
        ) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            drift.findings.append(
                Finding(
                    kind="modified",
                    distribution=name,
                    path=f"{dist.info.name}/RECORD",
                    expected="a RECORD (PEP 376)",
                    found=f"unreadable ({why})",
                )
            )
    if kept:
        wanted += _kept_wanted(drift, kept, installed, owners, escaped, confinement)
        owned |= kept.keys()
    digests = filehash.digests(wanted, cache, inside=links_allowed(drift.venv))
    with contextlib.suppress(OSError):  # a read-only home still gets its answer, only slower next time
        cache.save()
    drift.files, drift.hashed, drift.hashed_bytes, drift.remembered = (
        len(wanted),
        digests.hashed,
        digests.hashed_bytes,
        digests.remembered,
    )
    for key, claims in owners.items():
        got = escaped.get(key) or digests.found.get(key)
        # two distributions install this path with other contents: one finding
        if len(set(claims.values())) > 1:
            finding = _shared(key, claims, got)
            if finding.on_disk and dict(known.get(key, {})) == claims:
                drift.notes.append(
                    f"{key} is shared by {' and '.join(finding.distributions)} (recorded in the lock when it was "
                    f"made): {finding.on_disk}'s bytes, as installed"
                )
            else:
                drift.findings.append(finding)
            continue
        owner, want = next(iter(claims.items()))  # one owner, or several that agree (nvidia/__init__.py)
        if got is None:
            drift.findings.append(Finding(kind="missing", distribution=owner, path=key, expected=want))
        elif got != want:
            drift.findings.append(
                Finding(kind="modified", distribution=owner, path=key, expected=want, found=got)
            )
    for key, file in kept.items():
        want, got = record_form(file.sha256), escaped.get(KEPT + key) or digests.found.get(KEPT + key)
        listed_by = drift.owners.get(key, "").split(" ")[0] or None
        if got is None:
            drift.findings.append(
                Finding(
                    kind="missing", distribution=listed_by, path=key, expected=want, known_good=file.origin
                )
            )
        elif got != want:
            drift.findings.append(
                Finding(
                    kind="modified",
                    distribution=listed_by,
                    path=key,
                    expected=want,
                    found=got,
                    known_good=file.origin,
                )
            )
    return owned


KEPT = "\0kept:"  # a kept file's key among RECORD's (no path holds a NUL byte), hashed as sha256 whatever RECORD says


def _kept_wanted(
    drift: Drift,
    kept: Mapping[str, KeptFile],
    installed: dict[str, Installed],
    owners: dict[str, dict[str, str]],
    escaped: dict[str, str],
    confinement: confined.Confinement,
) -> list[filehash.Wanted]:
    """The kept files to hash; each is taken out of its RECORDs' judgement, its owner noted."""
    wanted = []
    root = os.path.join(os.path.normpath(drift.venv), "")
    for key in kept:
        claims = owners.pop(key, None)
        if claims:  # several distributions may list it: the first read names it
            owner = next(iter(claims))
            drift.owners[key] = f"{owner} {installed[owner].version}"
            escaped.pop(key, None)
        path = os.path.normpath(os.path.join(drift.site, key))
        escape = (
            confinement.folder(os.path.dirname(path)) if path.startswith(root) else (key, "outside the venv")
        )
        if escape is not None:
            escaped[KEPT + key] = (
                f"sha256=({escape[0]} leads out of the environment to {escape[1]}: not read)"
            )
        else:
            wanted.append(filehash.Wanted(key=KEPT + key, path=path, mode="sha256"))
    return wanted


def record_form(hex_digest: str) -> str:
    """A hex sha256 as RECORD writes a digest (`sha256=<urlsafe base64, unpadded>`)."""
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).rstrip(b"=").decode()


def _shared(key: str, claims: dict[str, str], got: str | None) -> Finding:
    """A path two distributions install with different contents: whichever was installed last wrote it, and removing
    or reinstalling either changes the other. Says whose bytes are on disk (one of them, or neither)."""
    names = tuple(sorted(claims))
    on_disk = next((name for name in names if claims[name] == got), None)
    return Finding(
        kind="shared",
        distribution=on_disk or names[0],
        path=key,
        expected="; ".join(f"{name} {claims[name]}" for name in names),
        found=got or "",
        distributions=names,
        on_disk=on_disk,
    )


def _plain(path: str) -> bool:
    """Whether a RECORD path is already normal and relative (no /, ., .. or empty part): most are, and normpath on
    each of tens of thousands costs a third of the warm check."""
    return bool(path) and path[0] not in "/." and "/." not in path and "//" not in path and path[-1] != "/"


def links_allowed(venv: Path) -> Callable[[str], bool]:
    """Where a link in site-packages may lead and still be read: into the venv, or into uv's cache (UV_LINK_MODE=symlink)."""
    roots = [os.path.join(os.path.realpath(venv), "")]

    def allowed(target: str) -> bool:
        # uv's cache asked once, and only when a link leads out
        if len(roots) == 1 and not target.startswith(roots[0]):
            from provision.stacks import uvtool

            try:
                cache = uvtool.cache_dir()
            except ProvisionError:
                cache = ""
            roots.append(os.path.join(os.path.realpath(cache), "") if cache else "\0")
        return any(target.startswith(root) for root in roots)

    return allowed


def _unowned_startup(site: Path, owned: set[str], confinement: confined.Confinement) -> list[Finding]:
    """Files in site-packages that Python runs at start-up and that no RECORD lists."""
    findings = []
    for entry in sorted(os.listdir(site)) if site.is_dir() else []:
        if not (entry.endswith(".pth") or entry in STARTUP_NAMES) or entry in owned:
            continue
        if entry in VENV_TOOL_FILES and confinement.path(str(site / entry)) is None:
            try:  # never a pipe waited on, never more than a line read
                if regular.read_text(site / entry, 1024, errors="replace").strip() == VENV_TOOL_FILES[entry]:
                    continue
            except OSError:
                pass
        findings.append(Finding(kind="unowned", distribution=None, path=entry))
    return findings


def marker_environment(venv: Path) -> dict[str, str]:
    """Marker values for the venv: this machine's platform, the venv's Python version (its pyvenv.cfg)."""
    from packaging.markers import default_environment  # a lock is read: packaging.pylock loads it too

    environment: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
    try:
        lines = regular.read_text(venv / "pyvenv.cfg", 1 << 16, follow=False, errors="replace").splitlines()
    except OSError:
        lines = []
    config = {key.strip(): value.strip() for key, _, value in (line.partition("=") for line in lines)}
    version = config.get("version_info") or config.get("version") or ""
    if version:
        environment["python_full_version"] = version
        environment["python_version"] = ".".join(version.split(".")[:2])
    return environment


def _read_lock(lock_path: Path) -> tuple[Pylock, Stamp] | None:
    """The environment's lock and its [tool.provision], read once; None when it cannot be read (a finding)."""
    from provision.stacks import lockfile as locking

    try:
        return locking.read(lock_path)
    except ProvisionError:
        return None


def _against_lock(
    venv: Path,
    installed: dict[str, Installed],
    lock_path: Path,
    locked: tuple[Pylock, Stamp] | None,
    notes: list[str],
    unmatched: set[str],
) -> list[Finding]:
    if locked is None:
        return [
            Finding(kind="missing", distribution=None, path=str(lock_path), expected="the environment's lock")
        ]
    pylock, stamp = locked
    environment = marker_environment(venv)
    findings = []
    locked_names = set()
    for package in pylock.packages:
        name = str(canonicalize_name(package.name))
        if package.marker is not None and not package.marker.evaluate(environment):
            continue
        locked_names.add(name)
        want = str(package.version or "")
        dist = installed.get(name)
        if dist is None:
            findings.append(Finding(kind="missing", distribution=name, path="", expected=want))
        elif package.directory is not None or package.vcs is not None:
            findings += _from_source(name, dist, package, notes)
        elif not _same_version(want, dist.version):
            findings.append(
                Finding(
                    kind="other-version",
                    distribution=name,
                    path=dist.info.name,
                    expected=want,
                    found=dist.version,
                )
            )
        else:
            other = _other_source(dist, [w.name or urls.filename(w.url or "") for w in package.wheels or []])
            if other:
                findings.append(
                    Finding(
                        kind="other-source",
                        distribution=name,
                        path=dist.info.name,
                        expected=other[0],
                        found=other[1],
                    )
                )
    # an adopted environment's distributions that matched no wheel: in its lock by name and version only
    for entry in stamp.unmatched:
        name, want = entry.name, entry.version
        dist = installed.get(name)
        if name in locked_names:
            continue
        locked_names.add(name)
        unmatched.add(name)
        if dist is None:
            findings.append(Finding(kind="missing", distribution=name, path="", expected=want))
        elif not _same_version(want, dist.version):
            findings.append(
                Finding(
                    kind="other-version",
                    distribution=name,
                    path=dist.info.name,
                    expected=want,
                    found=dist.version,
                )
            )
    for name, dist in installed.items():
        if name not in locked_names:
            findings.append(Finding(kind="extra", distribution=name, path=dist.info.name, found=dist.version))
    return findings


def _from_source(name: str, dist: Installed, package: Package, notes: list[str]) -> list[Finding]:
    """A distribution the lock takes from a source tree or a repository: an editable one is the user's own tree, not
    hashed (said in `notes`); a git one is judged by its commit (direct_url.json, PEP 610)."""
    import json

    try:
        direct = json.loads(_text(dist.info, "direct_url.json") or "null")
    except (ValueError, RecursionError):
        direct = None
    direct = direct if isinstance(direct, dict) else {}
    if package.directory is not None:
        where = str(package.directory.path)
        if package.directory.editable:
            notes.append(f"{name} is editable from {where}: its source tree is the user's, not hashed")
        return []
    if package.vcs is None:  # neither: the caller passes only these two
        return []
    commit = str(package.vcs.commit_id or "")
    url = str(package.vcs.url or "")
    info = direct.get("vcs_info") if isinstance(direct.get("vcs_info"), dict) else {}
    found = str(info.get("commit_id") or "") if info else ""
    if found != commit:
        return [
            Finding(
                kind="other-source",
                distribution=name,
                path=dist.info.name,
                expected=f"git {url}@{commit}",
                found=f"git {direct.get('url', '?')}@{found}" if found else "not from git",
            )
        ]
    notes.append(f"{name} from git {url} at commit {commit[:12]}, as locked")
    return []


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _other_source(dist: Installed, wheel_names: list[str]) -> tuple[str, str] | None:
    """(what the lock has, what is installed) when the distribution came from elsewhere: a direct URL or path
    (direct_url.json, PEP 610), or a wheel whose tags none of the lock's wheels carry (another build)."""
    direct = _text(dist.info, "direct_url.json")
    if direct:
        import json

        try:
            data = json.loads(direct)
        except (ValueError, RecursionError):
            data = None
        url = data.get("url") if isinstance(data, dict) else None
        return "the lock's index", url if isinstance(url, str) else "a direct URL"
    wheel = _text(dist.info, "WHEEL")
    if not wheel or not wheel_names:
        return None
    from email.parser import HeaderParser

    installed_tags = _tags(
        [str(value) for key, value in HeaderParser().parsestr(wheel).items() if key == "Tag"]
    )
    locked: set[str] = set()
    for filename in wheel_names:
        try:
            locked |= {str(tag) for tag in parse_wheel_filename(filename)[3]}
        except InvalidWheelFilename:
            return None
    if installed_tags and not installed_tags & (locked | _unrenamed(locked)):
        return ", ".join(sorted(locked)), ", ".join(sorted(installed_tags))
    return None


def scan_env(venv: Path, build: Path, record: EnvRecord) -> Drift:
    """The environment against everything its record says it should be: its lock, its accepted and profile files."""
    return scan(
        venv,
        lock=Path(record.lock) if record.lock else None,
        cache=build / CACHE_NAME,
        kept=record.kept_files(),
    )


def _tags(lines: list[str]) -> set[str]:
    """Every tag of a WHEEL file's Tag lines, compressed tag sets expanded (openai-harmony 0.0.4 writes
    `cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64` in one line)."""
    from packaging.tags import parse_tag

    found: set[str] = set()
    for line in lines:
        try:
            found |= {str(tag) for tag in parse_tag(line.strip())}
        except ValueError:
            found.add(line.strip())
    return found


def _unrenamed(locked: set[str]) -> set[str]:
    """The `linux_<arch>` tag a manylinux wheel's WHEEL file keeps when the wheel was renamed without rewriting it
    (torchvision 0.29.2: file py3-none-manylinux_2_28_x86_64, WHEEL py3-none-linux_x86_64)."""
    return {
        re.sub(r"-manylinux[\w]*?_(x86_64|aarch64)$", r"-linux_\1", tag)
        for tag in locked
        if "-manylinux" in tag
    }


def check(venv: Path, build: Path, record: EnvRecord) -> CheckResult:
    """The check's result: PASS when nothing differs, WARN listing each finding with its path and distribution (a
    build made this minute is judged by envs/fresh.py, which adds the lock's RECORDs and FAILs)."""
    try:
        drift = scan_env(venv, build, record)
    except EnvError as exc:  # site-packages leads out of the venv: nothing there is read
        return unreadable(exc)
    return judged(drift, record)


def unreadable(exc: EnvError) -> CheckResult:
    said = BY_ID["drift"]
    return CheckResult(id=said.id, title=said.title, status="error", reason=f"{exc.message}; {exc.hint}")


def judged(drift: Drift, record: EnvRecord) -> CheckResult:
    """PASS when `drift` found nothing, else WARN listing each finding with its path and distribution."""
    said = BY_ID["drift"]
    lock = Path(record.lock) if record.lock else None
    # the same JSON as restore's drift_before
    details = DriftDetails.parse(Reader(drift.to_dict(), "details"))
    without_lock = "" if lock else "; no lock (adopted): distributions not compared"
    if not drift.findings:
        kept = len(record.kept_files())
        reason = (
            f"{drift.files} files of {drift.distributions} distributions match their RECORD"
            + (" and the lock" if lock else "")
            + (f", {kept} accepted or profile files their kept content" if kept else "")
            + without_lock
            + "".join(f"; {note}" for note in drift.notes)
        )
        return CheckResult(id=said.id, title=said.title, status="pass", reason=reason, details=details)
    shown = "; ".join(f.line() for f in drift.findings[:8]) + (
        f"; and {len(drift.findings) - 8} more" if len(drift.findings) > 8 else ""
    )
    notes = "".join(f"; {note}" for note in drift.notes)
    return CheckResult(
        id=said.id,
        title=said.title,
        status="warn",
        details=details,
        reason=f"{drift.summary()}: {shown}{without_lock}{notes}; {_restore_hint(drift)}",
    )


def _restore_hint(drift: Drift) -> str:
    """What `provision restore` will do about these findings, and nothing it will not: an adopted distribution that
    matched no wheel when it was locked cannot be reinstalled, and a shared path stays as it is (reinstalling either
    owner only picks which one wins)."""
    stuck = sorted(set(drift.to_reinstall()) & drift.unmatched)
    shared = [f.path for f in drift.findings if f.kind == "shared"]
    restorable = [f for f in drift.findings if f.kind != "shared"]
    said = []
    if restorable and not stuck:
        said.append("provision restore puts the rest back" if shared else "provision restore puts it back")
    if stuck:
        said.append(
            f"provision restore cannot put back {', '.join(stuck)} (no wheel matched when the environment was "
            "locked: provision lock --env NAME once an index has them)"
        )
    if shared:
        said.append(
            f"restore leaves {shared[0]}{' and the other shared paths' if len(shared) > 1 else ''} as it is "
            "(reinstalling either owner only picks which one wins): keep what is there with provision accept "
            f"NAME {shared[0]}, or drop one of the two distributions from the profile"
        )
    return "; ".join(said)
