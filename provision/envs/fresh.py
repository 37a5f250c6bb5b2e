"""What `create` installed, against the lock's RECORDs: the drift check of a build made this minute.

uv installs from its cache, and trusts what it unpacked there: a file edited in uv's cache (and its RECORD with it)
reached the new venv, create exited 0, and the drift check, comparing the venv's files with the venv's own RECORD,
found nothing. Here each installed file is compared with the RECORD of the very wheel the lock pins, as provision
holds it by that wheel's sha256 (read by range requests when the lock was made, or from a kept wheel; never from uv's
unpacked copy), and any
difference at create time is a FAIL. Cheap: the RECORDs are small files read from provision's cache, and the files'
digests are the ones the drift check has just computed (its memo beside the build).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from provision import regular
from provision.envs import drift as drifting
from provision.envs import filehash
from provision.envs.drift import CACHE_NAME, Finding, links_allowed, site_packages
from provision.errors import EnvError, ProvisionError
from provision.records.checks import BY_ID
from provision.records.details import DriftDetails
from provision.records.results import CheckResult, Reader

if TYPE_CHECKING:
    from packaging.pylock import PackageWheel

    from provision.envs.records import EnvRecord

# what makes the drift check of a fresh build FAIL: files not what was locked
FAILING = (
    "modified",
    "missing",
)


def check(venv: Path, build: Path, record: EnvRecord) -> CheckResult:
    """The drift check of a build `create` made this minute: its files against the venv's RECORDs and the lock's too,
    and a file that is not what was locked is a FAIL (else the drift check's own PASS or WARN)."""
    lock = Path(record.lock) if record.lock else None
    if lock is None:
        return drifting.check(venv, build, record)
    try:
        drift = drifting.scan_env(venv, build, record)
    except EnvError as exc:
        return drifting.unreadable(exc)
    seen = {(f.distribution, f.path) for f in drift.findings}
    extra, _ = against_lock(venv, build, lock, record.kept_files())
    drift.findings += [f for f in extra if (f.distribution, f.path) not in seen]
    failing = [f for f in drift.findings if f.kind in FAILING and not f.known_good]
    if not failing:
        return drifting.judged(drift, record)
    shown = "; ".join(f.line() for f in failing[:8]) + (
        f"; and {len(failing) - 8} more" if len(failing) > 8 else ""
    )
    said = BY_ID["drift"]
    return CheckResult(
        id=said.id,
        title=said.title,
        status="fail",
        details=DriftDetails.parse(Reader(drift.to_dict(), "details")),
        reason=f"files of the build made this minute are not what the lock pins: {shown}; uv's "
        "cache may hold an edited copy of a wheel: uv cache clean PACKAGE, then create again",
    )


def against_lock(venv: Path, build: Path, lock: Path, skip: Iterable[str] = ()) -> tuple[list[Finding], int]:
    """(the installed files that differ from their wheel's RECORD in the lock, how many wheels' RECORDs were known).
    Paths in `skip` (the profile's [files], written over what a wheel installed) are not compared."""
    from provision.stacks import lockfile, wheelrecords

    try:
        pylock, stamp = lockfile.read(lock, allow_unsealed=True)  # create read it already, seal and all
    except ProvisionError:
        return [], 0
    site = site_packages(venv)
    algorithms = {name for name in hashlib.algorithms_available if not name.startswith("shake")}
    skipped = set(skip)
    wanted: list[filehash.Wanted] = []
    expected: dict[str, tuple[str, str]] = {}  # key -> (distribution, the lock's RECORD hash)
    known = 0
    for package in pylock.packages:
        wheels = list(package.wheels or ())
        installed = _installed_wheel(wheels, site)
        known_rows = [
            wheelrecords.known((w.hashes or {}).get("sha256", "").lower(), w.name or "", w.url or "")
            for w in ([installed] if installed is not None else wheels)
        ]
        record = _installed_one([_in_site(rows) for rows in known_rows if rows], site)
        if record is None:
            continue
        known += 1
        name = str(canonicalize_name(package.name))
        for key, digest in record.items():
            mode, _, value = digest.partition("=")
            if not value or mode not in algorithms or key in skipped or key in expected:
                continue
            expected[key] = (name, digest)
            wanted.append(filehash.Wanted(key=key, path=str(site / key), mode=mode))
    found = filehash.digests(
        wanted, filehash.Cache(build / CACHE_NAME, site), inside=links_allowed(venv)
    ).found
    findings = []  # the memo is not saved: it holds the drift check's whole run, and this asked for part of it
    for key, (name, want) in expected.items():
        got = found.get(key)
        if got is None:
            findings.append(
                Finding(kind="missing", distribution=name, path=key, expected=f"{want} (the lock's RECORD)")
            )
        elif got != want and got not in stamp.known_conflicts.get(key, {}).values():
            # (a path the lock knows two wheels install with different contents holds either one's: drift says shared)
            findings.append(
                Finding(
                    kind="modified",
                    distribution=name,
                    path=key,
                    expected=f"{want} (the lock's RECORD)",
                    found=got,
                )
            )
    return findings, known


def _in_site(rows: list[list[str]]) -> dict[str, str]:
    """path -> hash of each file a wheel's RECORD puts in site-packages as it is (purelib and platlib included), a plain
    relative path; its .dist-info (uv adds to RECORD and INSTALLER), scripts (their first line rewritten), headers and
    data are left out."""
    found: dict[str, str] = {}
    for row in rows:
        if len(row) < 2 or not row[0] or not row[1]:
            continue
        parts = row[0].split("/")
        if parts[0].endswith(".dist-info") or any(part in ("", ".", "..") for part in parts):
            continue
        if parts[0].endswith(".data"):
            if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                continue
            parts = parts[2:]
        found["/".join(parts)] = row[1]
    return found


def _installed_wheel(wheels: list[PackageWheel], site: Path) -> PackageWheel | None:
    """Of a package's wheels in the lock, the one installed: the one whose tags its installed WHEEL file names (the
    installer copies that file from the wheel); None where that cannot be told. A sibling wheel's RECORD (another
    manylinux, kept by an earlier lock) is never taken for the installed one's: its binaries differ."""
    from packaging.tags import parse_tag

    if len(wheels) < 2:
        return None
    for wheel in wheels:
        filename = wheel.name or (wheel.url or "").rpartition("/")[2]
        parts = filename.removesuffix(".whl").split("-")
        if len(parts) < 5 or len(filename) > 255:  # a file name that no file has: nothing told
            return None
        try:
            text = regular.read_text(
                site / f"{parts[0]}-{parts[1]}.dist-info" / "WHEEL", 1 << 16, errors="replace"
            )
            said = {line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("Tag:")}
            named = {str(tag) for tag in parse_tag("-".join(parts[-3:]))}
        except (OSError, ValueError):
            return None
        if said == named:
            return wheel
    return None


def _installed_one(records: list[dict[str, str]], site: Path) -> dict[str, str] | None:
    """Of a package's wheels (one per platform), the RECORD of the one installed: the one most of whose files are there."""
    if len(records) <= 1:
        return records[0] if records else None
    return max(records, key=lambda record: sum(os.path.lexists(site / key) for key in record))
