"""`provision report --lock`: every wheel of a PEP 751 lock judged for every GPU before anything is installed. A wheel
uv has already unpacked into its cache is scanned there, in place; a missing one is fetched (sha256 checked against
the lock) and its members are read out of the zip in memory, never unpacked to disk."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from provision import knowledge, wheelfacts
from provision import status as statuses
from provision.errors import ResolveError
from provision.log import Progress
from provision.machine.facts import MachineFacts
from provision.report.lockself import LockStack
from provision.report.verdicts import Gate, Target
from provision.report.wheels import JudgedWheel as JudgedWheel
from provision.report.wheels import LockScan as LockScan
from provision.report.wheels import WheelScan as WheelScan
from provision.report.wheels import verdict as verdict
from provision.scan import binaries, fatbin, remembered
from provision.stacks import urls, uvcache

if TYPE_CHECKING:
    from packaging.pylock import Package, PackageWheel, Pylock

    from provision.stacks.lockfile import Stamp

WORKERS = 4  # downloads overlap with scans; zlib and the fatbin walk release the GIL for the large members


def _choose(wheels: Sequence[PackageWheel]) -> PackageWheel:
    """The lock's wheel for this machine where it lists several (one per platform), else its only one."""
    if len(wheels) == 1:
        return wheels[0]
    rank = {tag: i for i, tag in enumerate(sys_tags())}

    def best(wheel: PackageWheel) -> int:
        try:
            tags = parse_wheel_filename(_filename(wheel))[3]
        except InvalidWheelFilename:
            return len(rank)
        return min((rank.get(t, len(rank)) for t in tags), default=len(rank))

    return min(wheels, key=best)


def _filename(wheel: PackageWheel) -> str:
    return wheel.name or urls.filename(wheel.url or "")


def scan_lock(
    path: Path,
    *,
    fetch: bool = True,
    cache: Path | None = None,
    progress: Progress = lambda _: None,
    code: bool = True,
    allow_unsealed: bool = False,
    read: tuple[Pylock, Stamp] | None = None,
) -> LockScan:
    """Scan every wheel of the lock at `path`: from provision's scans/ cache by its sha256, else from uv's cache in
    place, else fetched (unless `fetch` is off). uv's cache is looked through only for wheels not scanned before.
    Without `code` (no GPU to judge code for) only the RECORDs are read, as `lock` reads them (by range requests where
    the wheel is nowhere here), and a wheel is fetched whole only where that fails. `read`: the lock as
    `lockfile.read` gave it already (read and validated once), else it is read here."""
    from provision.stacks import lockfile, uvtool, wheelcache, wheelrecords

    started = time.perf_counter()
    pylock, stamp = read or lockfile.read(path, allow_unsealed=allow_unsealed)
    jobs = []
    for package in pylock.packages:
        if not package.wheels:
            continue
        wheel = _choose(package.wheels)
        filename = _filename(wheel)
        name = str(canonicalize_name(package.name))
        sha256 = (wheel.hashes or {}).get("sha256", "").lower()
        # before any job starts: nothing of the lock is downloaded, nothing cached is trusted
        if not wheelcache.SHA256.match(sha256):
            raise _unhashed(path, package, wheel, stamp.profile)
        # the most a fetch of it reads
        size = wheel.size if isinstance(wheel.size, int) and wheel.size >= 0 else None
        jobs.append(
            _Job(
                name=name,
                version=str(package.version or ""),
                filename=filename,
                url=wheel.url or "",
                sha256=sha256,
                size=size,
                kept=remembered.load(sha256),
                record=wheelrecords.remembered(sha256, wheel.url or ""),
            )
        )
    unknown = {job.name for job in jobs if job.kept is None or job.record is None}
    if unknown or cache is not None:
        cache = cache or Path(uvtool.cache_dir())
    unpacked = uvcache.wheels(cache, unknown) if unknown and cache and cache.is_dir() else {}
    for job in jobs:
        cached = unpacked.get((job.name, uvcache.stem_of(job.filename)))
        digests = cached.sha256s() if cached else set()
        if cached and digests and job.sha256 not in digests:
            cached = None  # uv's copy came from another file of that name: fetch the lock's own
        job.archive = cached.archive if cached else None
    if not code:
        return _records_only(
            path, stamp.profile, jobs, cache, fetch=fetch, progress=progress, started=started
        )
    # one scan per content: two packages whose wheels share a sha256 under other file names (one fetch kept under
    # one name) each get that scan under their own name, where two fetches of one file raced and ended in exit 3
    first = {job.sha256: job for job in reversed(jobs)}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        scans = dict(
            zip(
                first,
                pool.map(lambda job: _scan_one(job, fetch=fetch, progress=progress), first.values()),
                strict=True,
            )
        )
    wheels = tuple(
        dataclasses.replace(scans[job.sha256], name=job.name, version=job.version, wheel=job.filename)
        for job in jobs
    )
    return LockScan(
        path=path,
        profile=stamp.profile or None,
        wheels=wheels,
        seconds=time.perf_counter() - started,
        cache=str(cache) if cache else "not looked in: every wheel was scanned before",
    )


@dataclass(kw_only=True)
class _Job:
    """One wheel of the lock to scan, with what provision's caches already hold of it."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int | None
    kept: tuple[int, remembered.Members, remembered.Problems] | None  # its scan, from scans/
    record: dict[str, str] | None  # what its RECORD installs, from records/
    archive: Path | None = None  # uv's unpacked copy of it


RECORD_ONLY = "RECORD only (no GPU read: its code would judge nothing)"


def _records_only(
    path: Path,
    profile: str,
    jobs: list[_Job],
    cache: Path | None,
    *,
    fetch: bool,
    progress: Progress,
    started: float,
) -> LockScan:
    """The lock's wheels with their RECORDs and no code scanned: what the conflict gate needs, and all that a machine
    without a GPU can be told about them (records/ first, then by range requests)."""
    from provision.stacks import wheelrecords

    unread = [(j.name, j.filename, j.url, j.sha256) for j in jobs if j.record is None]
    records = wheelrecords.read_all(unread, lambda: cache, progress) if unread else {}
    wheels = []
    for job in jobs:
        record = job.record or records.get(job.filename)
        # no range requests answered, nothing cached: the whole wheel, its code left unread
        if record is None:
            whole = _scan_one(job, fetch=fetch, progress=progress, code=False)
            wheels.append(whole if whole.record is None else dataclasses.replace(whole, origin=RECORD_ONLY))
        else:
            wheels.append(
                WheelScan(
                    name=job.name, version=job.version, wheel=job.filename, origin=RECORD_ONLY, record=record
                )
            )
    return LockScan(
        path=path,
        profile=profile or None,
        wheels=tuple(wheels),
        seconds=time.perf_counter() - started,
        cache=str(cache) if cache else "not looked in: every RECORD was read before",
    )


def _unhashed(path: Path, package: Package, wheel: PackageWheel, named: str) -> ResolveError:
    """The refusal of a wheel the lock gives no sha256 for: packaging.pylock requires `hashes` (PEP 751), but not sha256,
    the one this check and `provision lock` use; scanning the file without it would judge whatever the URL serves. A
    sha256 that is not 64 hex digits is none: no file has it, and it would name the folder the wheel is kept in."""
    from provision.names import NAME_RULE

    others = ", ".join(sorted(wheel.hashes or {}))
    where = urls.redact(wheel.url) if wheel.url else _filename(wheel)
    profile = named if NAME_RULE.match(named) else "PROFILE"
    problem = (
        "has a sha256 that is not 64 hex digits in the lock"
        if "sha256" in (wheel.hashes or {})
        else f"has no sha256 in the lock{f' (only {others})' if others else ''}"
    )
    message = f"{path}: {package.name}{f' {package.version}' if package.version else ''}: the wheel {where} {problem}; nothing was downloaded"
    return ResolveError(
        re.sub(
            r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", message
        ),  # one line, whatever the lock holds
        f"re-lock it: provision lock {profile} (it records every wheel's sha256)",
    )


def _scan_one(job: _Job, *, fetch: bool, progress: Progress, code: bool = True) -> WheelScan:
    from provision.stacks import wheelcache, wheelrecords

    started = time.perf_counter()
    origin, counts, record = "uv cache", fatbin.Counts(), job.record
    kept = (
        wheelcache.cached(job.sha256, job.filename)
        if job.archive is None and (job.kept is None or record is None)
        else None
    )
    if job.kept is not None:
        origin, counts = "scan cache", remembered.total(job.kept[1])
        if record is None and job.archive is not None:
            record = _keep_record(job.sha256, wheelrecords.text_in_folder(job.archive), "uv cache")
        elif record is None and kept is not None:
            record = _keep_record(job.sha256, wheelrecords.text_in_wheel(kept), "provision cache")
        # its RECORD alone, by range requests where the index answers them: never the whole wheel
        elif record is None:
            record = wheelrecords.read_all([(job.name, job.filename, job.url, job.sha256)], lambda: None)[
                job.filename
            ]
    elif job.archive is not None:
        counts = _in_folder(job.archive, job.sha256) if code else counts
        record = record or _keep_record(job.sha256, wheelrecords.text_in_folder(job.archive), "uv cache")
    elif kept is not None:
        origin = "provision cache"
        counts = _in_wheel(kept, job.sha256) if code else counts
        record = record or _keep_record(job.sha256, wheelrecords.text_in_wheel(kept), "provision cache")
    elif not fetch or not job.url:
        origin = "not in uv's cache (--no-fetch)" if job.url else "no URL in the lock"
    # file://, ftp://: never read from this machine's disk
    elif not job.url.lower().startswith(("http://", "https://")):
        origin = "not fetched (only http and https URLs are)"
    else:
        origin = "fetched"
        with wheelcache.fetched(
            job.url,
            job.sha256,
            job.filename,
            size=job.size,
            progress=progress,
            hint="the file changed on the index since the lock was made, or the index is down; re-lock and check the index",
        ) as local:
            counts = _in_wheel(local, job.sha256) if code else counts
            record = record or _keep_record(job.sha256, wheelrecords.text_in_wheel(local), "provision cache")
    return WheelScan(
        name=job.name,
        version=job.version,
        wheel=job.filename,
        origin=origin,
        counts=counts,
        record=record,
        seconds=time.perf_counter() - started,
    )


def _keep_record(sha256: str, text: str | None, source: str) -> dict[str, str] | None:
    from provision.stacks import wheelrecords

    return wheelrecords.keep(sha256, text, source) if text is not None else None


def _in_folder(archive: Path, sha256: str) -> fatbin.Counts:
    """What uv's unpacked copy of the wheel carries, kept in scans/ by the wheel's sha256 (uv's own, checked above)."""
    scanned = binaries.scan([archive])
    members = [(os.path.relpath(f.path, archive), f.code) for f in scanned.files]
    problems = []
    for note in scanned.notes:  # "PATH: not read (why)", as binaries.scan says it
        where, _, why = note.partition(": not read (")
        problems.append((os.path.relpath(where, archive), why.removesuffix(")")))
    remembered.keep(sha256, scanned.scanned, members, problems, "uv cache")
    return remembered.total(members)


def _in_wheel(wheel: Path, sha256: str) -> fatbin.Counts:
    """What a wheel file whose sha256 was checked carries: from scans/, else scanned and kept there."""
    files, _ = binaries.wheel_code(str(wheel), sha256)
    return _total_of(files)


def _total_of(files: Sequence[binaries.FileScan]) -> fatbin.Counts:
    # what the driver can load; relocatable link input is never judged (scan/binaries.py)
    total = fatbin.Counts()
    for file in files:
        total.add(file.code.loadable)
    return total


def judge(facts: MachineFacts, scanned: LockScan, stack: LockStack, uv_cache: Path | None = None) -> Target:
    """The lock against one machine: the gates of the stack it describes (its own [tool.provision], else its profile,
    else its wheels), each CUDA wheel per GPU, and the torch-wheels gate from the scanned torch wheel."""
    from provision.report import features, featurewheels, gates, kernels, lockgates, ptxjit
    from provision.stacks import wheelcache

    profile = stack.profile
    served = profile.serves if profile else ()
    cuda = profile.cuda if profile else "?"
    ccs = sorted({g.compute_capability for g in facts.gpus if g.compute_capability}, key=knowledge.parse_cc)
    torch = scanned.by_name("torch")
    torch_gate = gates.torch_wheels(
        facts,
        cuda,
        has_torch=torch is not None,
        scanned=dict(torch.counts.cubin) if torch and torch.origin in SCANNED else None,
        wheel=torch.wheel if torch else "",
    )
    versions = gates.Versions(found={w.name: w.version for w in scanned.wheels}, origin="lock")
    as_profile = gates.judge(facts, profile, uv_cache, versions) if profile else None
    if as_profile:
        base = [g if g.id != "torch-wheels" else torch_gate for g in as_profile.gates]
        base[0] = dataclasses.replace(base[0], reason=f"{base[0].reason} (CUDA {cuda} from {stack.source})")
    else:
        base = [
            _unknown_cuda(scanned),
            torch_gate,
            *filter(None, [gates.fabric_gate(facts), features.newer_than_known(versions)]),
            *gates.machine_gates(facts, versions),
        ]
    nvcc = (
        versions.of("nvidia-cuda-nvcc")
        or (profile.compiler_cuda() if profile else None)
        or max(
            (t.version for t in facts.toolkits),
            key=lambda v: tuple(int(p) for p in v.split(".") if p.isdigit()),
            default=None,
        )
    )
    found_kernels = kernels.flashinfer_kernels(
        versions,
        nvcc=".".join(nvcc.split(".")[:2]) if nvcc else None,
        offline=bool(profile and profile.offline),
    )
    base[3:3] = [found_kernels] if found_kernels else []
    cuda_wheels = [w for w in scanned.wheels if w.cuda]
    origins = {o: sum(w.origin == o for w in scanned.wheels) for o in SCANNED}
    only = sum(w.origin == RECORD_ONLY for w in scanned.wheels)
    summary = (
        Gate(
            id="lock-scan",
            title="wheels scanned",
            status="info",
            kind="feature",
            source="provision/report/lockscan.py",
            reason=f"no GPU read: checked the lock's seal and sha256s, its {only} wheels' RECORDs (conflict; read as "
            "`provision lock` reads them: by range requests, unchecked against the sha256, where a wheel is nowhere here), their names and "
            "versions (cuda-mix), and the driver and compiler gates; their code was not scanned, as it judges "
            f"nothing without a GPU (record a GPU machine with probe --json, then --machine); {scanned.seconds:.1f} s",
        )
        if only
        else Gate(
            id="lock-scan",
            title="wheels scanned",
            status="info",
            kind="feature",
            source="provision/report/lockscan.py",
            reason=f"{len(scanned.wheels)} wheels, {len(cuda_wheels)} with CUDA code; "
            f"{origins['scan cache']} scanned before ({wheelfacts.folder('scans')}), "
            f"{origins['uv cache']} from uv's cache ({scanned.cache}), {origins['provision cache']} from "
            f"provision's ({wheelcache.folder()}), {origins['fetched']} fetched, "
            f"{len(scanned.wheels) - sum(origins.values())} not scanned; {scanned.seconds:.1f} s",
        )
    )
    target = Target(
        kind="lock",
        name=scanned.path.name,
        cuda=cuda,
        packages=tuple(JudgedWheel(scan=w, ccs=tuple(ccs)) for w in cuda_wheels),
        gates=(
            *base[:3],
            lockgates.conflict(scanned.wheels),
            lockgates.cuda_mix(scanned.wheels),
            *(
                featurewheels.judged(_wheel_gate(w, ccs), w.name, served)
                for w in scanned.wheels
                if w.cuda or w.origin not in (*SCANNED, RECORD_ONLY)
            ),
            *filter(
                None,
                [
                    ptxjit.gate(
                        facts,
                        (
                            (w.name, w.version, cc)
                            for w in cuda_wheels
                            for cc in ccs
                            if verdict(w, cc)[0] == "warn"
                        ),
                        cuda,
                    )
                ],
            ),
            *base[3:],
            summary,
        ),
    )
    return dataclasses.replace(target, gates=(*target.gates, *_versus(target, as_profile)))


def _versus(lock: Target, profile: Target | None) -> list[Gate]:
    """Why `provision report` of the lock's profile and this report of its lock give other verdicts, when they do: the
    profile is judged from tables, the lock from what its wheels carry."""
    if profile is None or profile.verdict == lock.verdict:
        return []
    theirs = {g.id: g.status for g in profile.gates}
    differ = [
        g
        for g in lock.gates
        if g.kind == "stack" and g.status == lock.verdict and theirs.get(g.id) != g.status
    ]
    because = ", ".join(f"{g.id} {g.status.upper()}" for g in differ[:6]) + (
        " ..." if len(differ) > 6 else ""
    )
    return [
        Gate(
            id="versus-profile",
            title="why `provision report` of the profile says otherwise",
            status="info",
            source="provision/report/lockscan.py",
            reason=f"provision report judges profile {profile.name} {profile.verdict.upper()} from its tables (the "
            f"wheels unread); this lock is {lock.verdict.upper()} from what its wheels hold: {because or '-'}",
        )
    ]


def _unknown_cuda(scanned: LockScan) -> Gate:
    """A lock whose CUDA release cannot be known is never a PASS: nothing can judge the driver for it."""
    profile = (
        f"its profile {scanned.profile!r} is not found here" if scanned.profile else "it names no profile"
    )
    return Gate(
        id="driver",
        title="driver supports the lock's CUDA release",
        status="warn",
        source="provision/report/lockself.py",
        reason=f"the lock does not say which CUDA release it is built for, {profile}, and no wheel of it says: "
        "the driver cannot be judged; re-lock it with this provision (its [tool.provision] then carries cuda)",
    )


SCANNED = ("scan cache", "uv cache", "provision cache", "fetched")


def _wheel_gate(wheel: WheelScan, ccs: list[str]) -> Gate:
    title = f"{wheel.name} {wheel.version} carries code for every GPU"
    source = "fatbin entry headers (docs/fatbin.md); provision/knowledge.toml [[sm_rule]]"
    if wheel.origin not in SCANNED:
        return Gate(
            id=f"wheel:{wheel.name}",
            title=title,
            status="skip",
            reason=f"{wheel.wheel}: {wheel.origin}",
            source=source,
        )
    found = " ".join(sorted(wheel.counts.cubin, key=_order)) or "no cubin"
    ptx = " ".join(sorted(wheel.counts.ptx, key=_order))
    carried = f"{found}" + (f"; PTX {ptx}" if ptx else "")
    if not ccs:
        return Gate(
            id=f"wheel:{wheel.name}",
            title=title,
            status="skip",
            reason=f"no GPUs read; carries {carried}",
            source=source,
        )
    verdicts = {cc: verdict(wheel, cc) for cc in ccs}
    worst = statuses.worst(s for s, _ in verdicts.values()) or "skip"
    if worst == "pass":
        reason = f"native code for {', '.join(knowledge.sm_name(cc) for cc in ccs)}; carries {carried}"
    else:
        reason = "; ".join(f"{knowledge.sm_name(cc)}: {r}" for cc, (s, r) in verdicts.items() if s == worst)
    return Gate(id=f"wheel:{wheel.name}", title=title, status=worst, reason=reason[:600], source=source)


def _order(label: str) -> tuple[int, str]:
    digits = "".join(ch for ch in label if ch.isdigit())
    return int(digits or 0), label


def read_lock(
    path: Path,
    *,
    fetch: bool,
    uv_cache: Path | None,
    progress: Progress = lambda _: None,
    code: bool = True,
    allow_unsealed: bool = False,
) -> tuple[LockScan, LockStack]:
    """Scan a lock's wheels once, and read the stack it describes, to judge it on every machine (`judge`); without
    `code` (no machine has a GPU) only their RECORDs."""
    from provision.errors import ProfileError
    from provision.report import lockself
    from provision.stacks import lockfile, profiles

    # once: the scan and the stack read the same
    pylock, stamp = lockfile.read(path, allow_unsealed=allow_unsealed)
    scanned = scan_lock(path, fetch=fetch, cache=uv_cache, progress=progress, code=code, read=(pylock, stamp))
    try:
        found = profiles.load(scanned.profile) if scanned.profile else None
    except ProfileError:
        found = None  # a lock of a profile this machine does not have: it describes itself
    return scanned, lockself.describe(path, pylock, stamp, found)
