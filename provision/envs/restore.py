"""`provision restore`: put an environment back to its lock. Plan from the drift check, then apply in a hard-linked copy
of the venv beside it: uv reinstalls only the drifted distributions there (from its cache when it has them),
uninstalls the extra ones, the unowned start-up files are moved into a dated folder, and the accepted and profile
files are written back from their kept copies; the copy is verified, then
swapped with the venv in one atomic rename. Interrupted at any point, the venv is as it was or as it should be."""

from __future__ import annotations

import contextlib
import csv
import ctypes
import dataclasses
import datetime
import errno
import json
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from provision import confined, proc, regular, toml
from provision.envs import drift as drifting
from provision.envs import kept, records, relocate
from provision.envs.home import Home, blocking_file, blocking_reason, write_atomic
from provision.envs.leftovers import MADE, remove_stale
from provision.envs.records import EnvRecord
from provision.errors import EnvError, ProvisionError
from provision.log import Progress
from provision.records.results import BaselineRun, CheckResult
from provision.stacks import uvtool

STAGING = (
    ".{name}.restore-"  # beside the venv: hard links need the same file system, the swap the same folder
)
ASIDE = "set-aside"  # in the build folder: ASIDE/STAMP-PID/<path in site-packages>
SUBSET = "pylock.restore-{pid}.toml"  # in the build folder: uv takes pylock.<name>.toml only


@dataclass(frozen=True, kw_only=True)
class RestoreResult:
    """The plan (a dry run) or what was done: the drift before and after, the checks, the baseline."""

    name: str
    venv: Path
    dry_run: bool
    before: drifting.Drift
    reinstall: tuple[str, ...] = ()
    uninstall: tuple[str, ...] = ()
    set_aside: tuple[str, ...] = ()
    put_back: tuple[str, ...] = ()  # accepted and profile files written back from their kept copy
    aside_folder: Path | None = None
    not_restorable: tuple[str, ...] = ()
    downloaded: bool = False  # uv's cache lacked (or held a damaged copy of) a wheel
    refreshed: tuple[str, ...] = ()
    after: drifting.Drift | None = None
    checks: list[CheckResult] = field(default_factory=list)
    baseline: BaselineRun | None = None
    baseline_before: BaselineRun | None = None  # the last baseline measured without drift
    baseline_error: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.reinstall or self.uninstall or self.set_aside or self.put_back)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "venv": str(self.venv),
            "dry_run": self.dry_run,
            "drift_before": self.before.to_dict(),
            "reinstall": list(self.reinstall),
            "uninstall": list(self.uninstall),
            "set_aside": list(self.set_aside),
            "put_back": list(self.put_back),
            "aside_folder": str(self.aside_folder) if self.aside_folder else None,
            "not_restorable": list(self.not_restorable),
            "downloaded": self.downloaded,
            "refreshed": list(self.refreshed),
            "drift_after": self.after.to_dict() if self.after else None,
            "checks": [r.to_dict() for r in self.checks],
            "baseline": {"name": self.name, **self.baseline.to_dict()} if self.baseline else None,
            "baseline_before": self.baseline_before.to_dict() if self.baseline_before else None,
            "baseline_error": self.baseline_error,
        }


def plan(home: Home, name: str) -> tuple[Path, EnvRecord, RestoreResult]:
    build = home.build_of(name)
    record = records.read(build)
    venv = record.venv_path(build).resolve()
    if not record.adopted and venv != (build / "venv").resolve():
        raise EnvError(
            f"{build / records.ENV_FILE} names the venv {venv}, but {name} was built by provision in "
            f"{build / 'venv'}: only an adopted environment's venv lives elsewhere; restore changes nothing there",
            f"fix the venv key in {build / records.ENV_FILE}, or rebuild it: provision create PROFILE --name {name} --replace",
        )
    lock = Path(record.lock) if record.lock else None
    if lock is not None:
        _readable_lock(name, build, lock)
    escape = confined.Confinement(venv).folder(str(drifting.site_packages(venv)))
    if escape is not None:  # said here, as restore's refusal, before the drift check would say it as its own
        raise confined.refusal(escape, venv, f"restore {name}", f"provision restore {name} again")
    before = drifting.scan_env(venv, build, record)
    blocking = blocking_file(venv)
    # uv (and the checks after) would wait on it forever: refused before anything changes
    if blocking is not None:
        raise EnvError(
            blocking_reason(blocking),
            f"remove it (rm {blocking}), then run provision restore {name} again; nothing was changed",
        )
    result = RestoreResult(
        name=name,
        venv=venv,
        dry_run=True,
        before=before,
        set_aside=tuple(before.unowned()),
        put_back=tuple(before.put_back()),
    )
    if lock is None:  # an adopted venv: no lock says what its files should be
        result = dataclasses.replace(result, not_restorable=tuple(before.to_reinstall()))
    else:
        unmatched = _unmatched(lock, name, venv)  # an adopted venv's distributions that matched no wheel
        result = dataclasses.replace(
            result,
            reinstall=tuple(d for d in before.to_reinstall() if d not in unmatched),
            not_restorable=tuple(d for d in before.to_reinstall() if d in unmatched),
            uninstall=tuple(before.extra()),
        )
    _refuse_links_out(name, build, result)
    return build, record, result


def _readable_lock(name: str, build: Path, lock: Path) -> None:
    """Refuse to plan from a lock that cannot be read (not TOML, not UTF-8, not PEP 751): it says what to put back."""
    from provision.stacks import lockfile

    try:
        lockfile.read(lock)
    except ProvisionError as exc:
        raise EnvError(
            f"{name}'s lock {lock} (named in {build / records.ENV_FILE}) cannot be read: {exc.message}",
            f"nothing was changed; put that lock back, or rebuild: provision create PROFILE --name {name} --replace",
        ) from None


def _unmatched(lock: Path, name: str, venv: Path) -> set[str]:
    """The distributions an adopted environment's lock names as matching no wheel; its lock must be this one's."""
    from provision.envs import adopted
    from provision.stacks import lockfile

    try:
        _, stamp = lockfile.read(lock)
    except ProvisionError:
        return set()  # the drift check reports the lock missing
    adopted.check_binding(stamp, lock, name, venv)
    return {entry.name for entry in stamp.unmatched}


def _refuse_links_out(name: str, build: Path, result: RestoreResult) -> None:
    """Raise when what restore would move, remove or write, or a folder on its way, is a link out of the venv: the
    copy it works in keeps such a link, and uv and the set-aside would follow it out (a file may link into uv's cache,
    as uv's symlink mode makes it). The set-aside folder, in the build folder, must not lead out of that either."""
    venv, site = result.venv, result.before.site
    for folder, used in ((ASIDE, result.set_aside), (kept.STORE, result.put_back)):
        escape = confined.Confinement(build).folder(str(build / folder)) if used else None
        if escape is not None:
            raise confined.refusal(escape, build, f"restore {name}", f"provision restore {name} again")
    confinement = confined.Confinement(venv)
    also = drifting.links_allowed(venv)
    paths = [
        str(venv / "bin"),
        str(site),
        *(str(site / relative) for relative in [*result.set_aside, *result.put_back]),
    ]
    touched = set(result.reinstall) | set(result.uninstall)
    infos = {drifting.info_name(info): info for info in [*site.glob("*.dist-info"), *site.glob("*.egg-info")]}
    if touched - set(infos):  # a distribution not installed: where its files go is in the wheel, not here
        paths += [str(entry) for entry in site.iterdir()]
    for name_ in sorted(touched & set(infos)):
        info = infos[name_]
        paths += [
            str(info),
            *(os.path.join(info, entry) for entry in (os.listdir(info) if info.is_dir() else [])),
        ]
        escape = confinement.path(str(info / "RECORD"))
        if escape is not None:
            continue
        # an unreadable RECORD (a pipe, too large) is the drift check's finding already
        with (
            contextlib.suppress(csv.Error, OSError),
            regular.open_file(info / "RECORD", mode="r", errors="replace", newline="") as handle,
        ):
            if os.fstat(handle.fileno()).st_size > drifting.RECORD_LIMIT:
                continue
            for row in csv.reader(handle):
                path = os.path.normpath(os.path.join(site, row[0])) if row else ""
                if path.startswith(os.path.join(os.path.normpath(venv), "")):
                    paths.append(path)
    for path in paths:
        escape = confinement.path(path, also=also)
        if escape is not None:
            raise confined.refusal(escape, venv, f"restore {name}", f"provision restore {name} again")


def restore(
    home: Home, name: str, *, dry_run: bool = False, progress: Progress = lambda _: None
) -> tuple[Path, RestoreResult]:
    """Plan, and unless `dry_run` apply, the venv's changes in one swap; the build restored, and the result (the checks
    and the baseline after it are `provision restore`'s next steps: commands/restore.py)."""
    with home.locked():
        build = home.build_of(name)
    # The build's own lock, not HOME's, is held through the plan and the reinstall (a download can take minutes):
    # switch and rollback go on meanwhile; remove, gc and create --replace leave this build alone.
    with home.restoring(build, name):
        planned, record, result = plan(home, name)
        if planned != build:
            raise EnvError(
                f"{name} was rebuilt while its restore started", f"run provision restore {name} again"
            )
        result = dataclasses.replace(result, dry_run=dry_run)
        if dry_run or not result.changed:
            return build, result
        remove_stale(build)
        return build, _apply(build, record, result, progress)


def _apply(build: Path, record: EnvRecord, result: RestoreResult, progress: Progress) -> RestoreResult:
    """Make the change in a copy, verify it, swap it in; the result with what was done."""
    venv = result.venv
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    staging = venv.parent / (STAGING.format(name=venv.name) + f"{os.getpid()}-{stamp}")
    # before anything changes
    contents = {path: kept.kept_content(build, file) for path, file in record.kept_files().items()}
    # recorded before either is made: a restore killed with -9 leaves names that the next restore or gc removes
    # exactly, never a user's folder that merely looks like one
    write_atomic(
        build / MADE,
        json.dumps({"pid": os.getpid(), "made": [str(staging), str(build / SUBSET.format(pid=os.getpid()))]}),
    )
    aside = _aside_folder(build, stamp) if result.set_aside else build / ASIDE / stamp
    # before the first move: a Ctrl-C during them undoes them
    aside_folder = aside if result.set_aside else None
    put_back = list(result.put_back)
    swapped = False
    try:
        progress(f"copying {venv} as hard links")
        done = proc.run(["cp", "-al", str(venv), str(staging)], timeout=1800, die_with_parent=True)
        if not done.ok:
            raise EnvError(
                f"could not copy {venv} beside itself: {done.tail(2)}",
                f"restore needs to write in {venv.parent}; check its permissions and free space",
            )
        site = drifting.site_packages(staging)
        for relative in result.set_aside:
            (aside / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(site / relative), str(aside / relative))
        # before uv runs the copy's python: an accepted sitecustomize.py as accepted
        _put_back(staging, site, contents, put_back)
        # an adopted venv: only start-up files are set aside
        lock = Path(record.lock) if record.lock else None
        downloaded, refreshed = (
            _reinstall(build, lock, venv, staging, result.reinstall, progress) if lock else (False, ())
        )
        if result.uninstall:
            progress(f"uninstalling {', '.join(result.uninstall)}")
            uvtool.run(
                [
                    "pip",
                    "uninstall",
                    "--python",
                    str(staging / "bin" / "python"),
                    "--quiet",
                    "--",
                    *result.uninstall,
                ]
            )
        # a reinstalled distribution's own copy of a kept file is replaced again
        _put_back(staging, site, contents, put_back)
        progress("verifying the restored copy")
        after = drifting.scan(staging, lock=lock, cache=build / drifting.CACHE_NAME, kept=record.kept_files())
        # a shared path stays as it is: reinstalling either owner only picks which one wins
        left = [
            f
            for f in after.findings
            if f.kind != "shared"
            and (f.distribution not in result.not_restorable or f.kind == "unowned" or f.known_good)
        ]
        if left:
            raise EnvError(
                f"{result.name}: after reinstalling, {after.summary()}: {left[0].line()}",
                f"nothing was changed in {venv}; run provision check {result.name} --only drift",
            )
        progress("swapping the restored copy in")
        exchange(staging, venv)
        swapped = True
        after.venv, after.site = venv, drifting.site_packages(venv)
    finally:
        if not swapped and aside_folder is not None:
            _unset_aside(aside, drifting.site_packages(venv), result.set_aside)
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)  # before the swap the copy, after it the old tree
        (build / MADE).unlink(missing_ok=True)
    return dataclasses.replace(
        result,
        aside_folder=aside_folder,
        put_back=tuple(put_back),
        downloaded=downloaded,
        refreshed=refreshed,
        after=after,
    )


def _put_back(staging: Path, site: Path, contents: dict[str, tuple[bytes, int]], put_back: list[str]) -> None:
    """Write every accepted and profile file whose content in the copy is not the kept one (a new file: the venv's
    hard link to the old one is not touched); add each written to `put_back`."""
    for path, (content, mode) in contents.items():
        target = kept.location(staging, site, path)
        try:
            same = (
                kept.same_file(target, content) and stat.S_IMODE(target.stat().st_mode) & ~kept.SAFE_BITS == 0
            )
        except OSError:
            same = False
        if not same:
            kept.put(staging, site, path, content, mode)
            if path not in put_back:
                put_back.append(path)


def _reinstall(
    build: Path, lock: Path, venv: Path, staging: Path, reinstall: tuple[str, ...], progress: Progress
) -> tuple[bool, tuple[str, ...]]:
    """Reinstall `reinstall` from the lock into the copy, from uv's cache where it can; (whether anything was
    downloaded, the distributions whose cached wheel had been changed and was fetched again)."""
    if not reinstall:
        return False, ()
    downloaded = False
    subset = build / SUBSET.format(pid=os.getpid())
    write_atomic(subset, _subset_lock(lock, reinstall))
    # uv runs the copy's python, whose start-up files are set aside already: a sitecustomize.py that prints or
    # exits cannot upset uv's look at the interpreter. The scripts it writes name that python; relocated below.
    args = [
        "pip",
        "install",
        "--python",
        str(staging / "bin" / "python"),
        "--no-deps",
        "--quiet",
        *uvtool.link_mode(staging / "bin" / "python"),
        "-r",
        str(subset),
        *(f"--reinstall-package={dist}" for dist in reinstall),
    ]
    _drop_damaged_direct_urls(drifting.site_packages(staging), reinstall)
    try:
        progress(f"reinstalling {', '.join(reinstall)} from uv's cache")
        try:
            uvtool.run([*args, "--offline"])
        except ProvisionError as exc:
            if not any(
                word in exc.message
                for word in ("offline", "connectivity is disabled", "not found in the cache")
            ):
                raise
            progress("not all in uv's cache: downloading")
            uvtool.run(args)
            downloaded = True
        damaged = sorted(
            {
                f.distribution
                for f in drifting.scan(staging, lock=lock, cache=build / drifting.CACHE_NAME).findings
                if f.kind == "modified" and f.distribution in reinstall
            }
        )
        if damaged:
            # uv links files from its cache; a file patched in place patched the cache's copy too. Fetch it again.
            progress(f"uv's cached copy of {', '.join(damaged)} was changed too: downloading it again")
            uvtool.run([*args, *(f"--refresh-package={dist}" for dist in damaged)])
            downloaded = True
        relocate.scripts(staging, venv, list(reinstall))
        return downloaded, tuple(damaged)
    finally:
        subset.unlink(missing_ok=True)


def _drop_damaged_direct_urls(site: Path, names: Sequence[str]) -> None:
    """In the copy, a reinstalled distribution's direct_url.json not of PEP 610's shape goes: uv refuses to read
    the installed metadata past it (and reinstalling writes the metadata anew). The venv's own file is a hard link."""
    wanted = set(names)
    for info in site.glob("*.dist-info"):
        direct = info / "direct_url.json"
        if drifting.info_name(info) not in wanted or not direct.is_file() or direct.is_symlink():
            continue
        try:
            data = json.loads(regular.read_bytes(direct, 1 << 20))
        except (OSError, ValueError, RecursionError):
            data = None
        if not _direct_url_shape(data):
            direct.unlink()


def _direct_url_shape(data: object) -> bool:
    """Whether `data` has PEP 610's shape: an object with a string url and one of archive_info, dir_info, vcs_info."""
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return False
    return sum(isinstance(data.get(key), dict) for key in ("archive_info", "dir_info", "vcs_info")) == 1


def _subset_lock(lock: Path, names: Sequence[str]) -> str:
    """The lock with only `names` in it: the same URLs and hashes, so uv finds the same files in its cache."""
    import tomlkit
    from packaging.utils import canonicalize_name

    raw = toml.loads(regular.read_text(lock))  # a pipe named as the lock is refused, never waited on
    wanted = set(names)
    raw["packages"] = [p for p in raw.get("packages", []) if str(canonicalize_name(p["name"])) in wanted]
    raw.pop("tool", None)
    return tomlkit.dumps(raw)


RENAME_EXCHANGE = 2  # linux/fs.h


def exchange(first: Path, second: Path) -> None:
    """Swap two directories in one step (renameat2 RENAME_EXCHANGE): a reader sees one tree or the other, never none.
    Where the file system cannot, two renames, with a window of microseconds where `second` is absent."""
    libc = ctypes.CDLL(None, use_errno=True)
    function = getattr(libc, "renameat2", None)
    if function is not None:
        at_fdcwd = -100
        if function(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), RENAME_EXCHANGE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(second))
    temporary = second.with_name(second.name + f".swap-{os.getpid()}")
    os.rename(second, temporary)
    os.rename(first, second)
    os.rename(temporary, first)


def _unset_aside(aside: Path, site: Path, moved: Sequence[str]) -> None:
    """Undo the set-aside of an attempt that never reached the swap: the venv still has these files, the copy goes."""
    for relative in moved:
        if (aside / relative).exists() and (site / relative).exists():
            (aside / relative).unlink()
    with contextlib.suppress(OSError):
        for folder in sorted({p for p in aside.rglob("*") if p.is_dir()}, reverse=True):
            folder.rmdir()
        aside.rmdir()
        aside.parent.rmdir()


def _aside_folder(build: Path, stamp: str) -> Path:
    """A new folder for this restore's set-aside files: never one a killed restore left in the same second (moving a
    file onto its own hard link there does nothing, and the file would stay in the copy)."""
    parent = build / ASIDE
    parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1000):
        folder = parent / (f"{stamp}-{os.getpid()}" + (f"-{attempt}" if attempt else ""))
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise EnvError(
        f"{parent} holds too many set-aside folders",
        f"move the old ones in {parent} away, then restore again",
    )
