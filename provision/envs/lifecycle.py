"""Environments are made here: built beside the others from a lock, checked, then named in one atomic step
(`provision create`), or registered from a venv provision did not build (`provision adopt`)."""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provision import log, proc
from provision.envs import kept as keeping
from provision.envs import records, toolkit_home
from provision.envs.cleanup import gc
from provision.envs.home import (
    BUILDING,
    FAILED,
    Home,
    check_name,
    deferred_interrupt,
    remove_tree,
    site_packages,
)
from provision.envs.interpreters import find_python
from provision.envs.inventory import tree_size
from provision.envs.records import EnvRecord, KeptFile
from provision.envs.variables import env_template, resolve_env
from provision.errors import EnvError, InputError, ProvisionError
from provision.log import Progress
from provision.records.results import CheckResult

if TYPE_CHECKING:
    from provision.envs.accept import NotCarried
    from provision.stacks.profiles import Profile



@dataclass(frozen=True, kw_only=True)
class CreateResult:
    """What `create` built: where, whether its checks passed and it became active, or the name it is kept under."""

    name: str
    path: Path
    activated: bool
    passed: bool
    checks: list[CheckResult] = field(default_factory=list)
    lock: str = ""
    lock_reused: bool = False
    lock_origin: str = ""  # given | lockfiles | cached | locked (envs/lockchoice.py)
    lock_source: str | None = None  # the lock that `lock` is a copy of (given, or the profile's in lockfiles/)
    lock_note: str | None = None  # why the profile's lock in lockfiles/ was not the one built
    seconds: dict[str, float] = field(default_factory=dict)
    kept_as: str | None = None  # --keep-failed: the name the failed build is kept under
    accepted_reapplied: tuple[str, ...] = ()  # --replace: the old build's accepted files, written again
    accepted_dropped: tuple[NotCarried, ...] = ()  # --replace: those left out, each with why

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "path": str(self.path), "activated": self.activated, "passed": self.passed,
                "lock": self.lock, "lock_reused": self.lock_reused, "lock_origin": self.lock_origin,
                "lock_source": self.lock_source, "lock_note": self.lock_note, "checks": [r.to_dict() for r in self.checks],
                "accepted_reapplied": list(self.accepted_reapplied),
                "accepted_dropped": [d.to_dict() for d in self.accepted_dropped],
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}, "kept_as": self.kept_as}


def _refuse_existing(home: Home, name: str, replace: bool) -> Path | None:
    """The build `name` points at now, if any; an error unless `replace` was asked for."""
    if name not in home.names():
        return None
    if not replace:
        raise EnvError(f"an environment named {name!r} exists already",
                       "pass --replace to build a new one in its place (its baselines are kept), or choose another --name")
    return home.build_of(name)


def create(home: Home, profile: Profile, *, name: str | None = None, python: str | None = None,
           lock_path: Path | None = None, overrides: dict[str, str] | None = None, activate: bool = True,
           replace: bool = False, run_checks: Callable[[Path, EnvRecord], list[CheckResult]] | None = None,
           keep_failed: bool = False, progress: Progress = lambda _: None, allow_unsealed: bool = False) -> CreateResult:
    """Build, check and name an environment (from `lock_path` when given: refused without its seal unless
    `allow_unsealed`). HOME's lock is held only to start and to finish (the swap), never
    through the install and the checks: a rollback in an emergency does not wait for a build."""
    import time

    from provision.envs import accept as accepting
    from provision.envs import (
        lockchoice,  # the lock's readers (packaging): not for adopt, which registers here too
    )
    from provision.stacks import lock as locking
    from provision.stacks import uvtool

    name = check_name(name or profile.name)
    uvtool.check_settings()  # before anything is made: uv venv reads them too
    locking.effective_indexes(profile, overrides or {})  # a PROVISION_INDEX_<NAME> that is no URL: refused before too
    from provision import durations

    durations.check_timeout()  # the checks read it after the install: a wrong one is refused before
    timings: dict[str, float] = {}
    build: Path | None = None  # named before it is made: a Ctrl-C at any point after the mkdir removes it (below)
    try:
        with home.locked():
            gc(home)
            previous = _refuse_existing(home, name, replace)
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            build = home.builds / f"{name}-{stamp}-{os.urandom(3).hex()}"
            with home.writing(f"start building {name}"):
                build.mkdir(parents=True)
                (build / BUILDING).write_text(str(os.getpid()))
        found = lockchoice.candidate(profile, lock_path, overrides or {}, allow_unsealed=allow_unsealed)
        interpreter, version = find_python(python or found.python or profile.python
                                           or f"{sys.version_info[0]}.{sys.version_info[1]}")
        found = lockchoice.for_python(found, version)
        started = time.perf_counter()
        indexes = locking.effective_indexes(profile, overrides or {})
        target = locking.Target(python=version, platform=None)
        chosen = lockchoice.lock_for(home, profile, target, overrides or {}, indexes, found, progress, build,
                                     allow_unsealed=allow_unsealed)
        lock_file = chosen.path
        timings["lock"] = time.perf_counter() - started
        started = time.perf_counter()
        with home.writing(f"build {name}"):
            record = _install(build, profile, name, interpreter, version, lock_file, indexes, progress)
            carried = accepting.carry_over(previous, build, Path(record.venv or build / "venv")) if previous else None
            record = records.read(build) if carried else record
        timings["install"] = time.perf_counter() - started
        started = time.perf_counter()
        results = run_checks(build, record) if run_checks else []
        timings["checks"] = time.perf_counter() - started
        with home.writing(f"record {name}'s checks"):
            records.add_checks(build, results, record.created or "")
        passed = not any(r.failed for r in results)
        kept_as = None
        if passed:
            _commit(home, name, build, activate=activate, replace=replace, progress=progress)
        elif keep_failed:
            kept_as = keep(home, name, profile, build)
        else:
            home.delete_build(build)
        return CreateResult(name=name, path=build, activated=passed and activate, passed=passed, checks=results,
                            lock=str(lock_file), lock_reused=chosen.reused, lock_origin=chosen.origin,
                            lock_source=str(chosen.source) if chosen.source else None, lock_note=chosen.note, seconds=timings, kept_as=kept_as,
                            accepted_reapplied=tuple(f.path for f in carried[0]) if carried else (),
                            accepted_dropped=tuple(carried[1]) if carried else ())
    except BaseException as exc:
        if (keep_failed and isinstance(exc, ProvisionError) and build is not None and (build / "venv").is_dir()
                and not _is_live(home, name, build)):
            kept = keep(home, name, profile, build)
            exc.hint = f"the failed build is kept as {kept} (provision remove {kept}); " + exc.hint
            raise
        if build is not None and build.exists() and not _is_live(home, name, build):
            remove_tree(build)  # Ctrl-C or a failure: nothing half-made stays; kill -9 is cleaned by the next gc
        raise


def keep(home: Home, name: str, profile: Profile, build: Path) -> str:
    """Name a failed build `NAME-failed-STAMP` (create --keep-failed): listed by envs, removed by remove or gc,
    never activated (its FAILED marker says why)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    with home.locked(), home.writing(f"keep the failed build of {name}"):
        taken = set(home.names())  # another build of that name failed within the same second: -2, -3, ...
        kept = next(n for n in (check_name(f"{name[:40]}-failed-{stamp}{f'-{i}' if i > 1 else ''}") for i in range(1, 10_000))
                    if n not in taken)
        if not (build / records.ENV_FILE).exists():  # failed before its record was written: say what it was
            records.write(build, EnvRecord(name=kept, profile=profile.name, cuda=profile.cuda, venv=str(build / "venv")))
        (build / FAILED).write_text(f"create {name} failed; kept by --keep-failed\n")
        (build / BUILDING).unlink(missing_ok=True)
        home.point(home.envs / kept, f"../builds/{build.name}")
    return kept


def _install(build: Path, profile: Profile, name: str, interpreter: Path, version: str, lock_file: Path,
             indexes: dict[str, str | None], progress: Progress) -> EnvRecord:
    """Make the venv, install the lock into it, lay out the toolkit; return the environment's record."""
    from provision.stacks import uvtool

    progress(f"creating the venv with Python {version}")
    uvtool.run(["venv", str(build / "venv"), "--python", str(interpreter), "--quiet", "--no-project"])
    progress("installing the lock (hashes verified)")
    with log.ticking(progress, _installing(build / "venv", uvtool.cache_dir())):  # uv is silent while it downloads
        uvtool.sync(lock_file, build / "venv" / "bin" / "python", indexes, progress=progress,  # what uv installs, as it goes
                    git=[p.git for p in profile.packages if p.git])
    if profile.toolkit:
        progress("laying out the environment's CUDA toolkit")
        toolkit_home.make(build / "cuda", site_packages(build / "venv") / profile.toolkit)
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    carried = []
    for file in profile.files:  # the team's own patches, from the profile: every machine of a fleet gets the same
        progress(f"writing {file.path} from {file.source}")
        keeping.keep(build, file.content, file.mode)
        keeping.put(build / "venv", site_packages(build / "venv"), file.path, file.content, file.mode)
        carried.append(KeptFile(path=file.path, sha256=file.sha256, at=created, source=str(file.source)))
    record = EnvRecord(
        name=name, profile=profile.name, profile_hash=profile.content_hash, profile_path=str(profile.path),
        cuda=profile.cuda, python=version, interpreter=str(interpreter), lock=str(lock_file), created=created,
        adopted=False, venv=str(build / "venv"),
        env=resolve_env(profile.env, build, nvcc=profile.compiler_cuda() or profile.cuda), env_template=env_template(profile),
        packages=[p.name for p in profile.packages], checks_required=list(profile.checks or []),
        size_bytes=tree_size(build / "venv"), baseline=profile.baseline, profile_files=carried,
    )
    records.write(build, record)
    return record


def _installing(venv: Path, cache: str | Path) -> Callable[[float], str]:
    """What an install under way has done so far: its time, and what more the disks of uv's cache and the venv hold
    (uv downloads everything into its cache, then links or copies it into the venv)."""
    import shutil

    def used() -> int:
        disks = {os.stat(f).st_dev: f for f in (Path(cache), venv) if f.exists()}  # one disk counted once
        return sum(shutil.disk_usage(f).used for f in disks.values())

    before = used()

    def said(seconds: float) -> str:
        grown = max(used() - before, 0)
        return f"installing the lock: {seconds:.0f} s so far, {grown / 2**30:.1f} GiB more on the disks of uv's cache and the venv"

    return said


def _commit(home: Home, name: str, build: Path, *, activate: bool, replace: bool, progress: Progress) -> None:
    """Let `name` point at the checked build (and make it active): begun, this step is finished, Ctrl-C or not."""
    with home.locked(), deferred_interrupt() as interrupted:
        previous = _refuse_existing(home, name, replace)  # another create may have taken the name meanwhile
        if previous is not None:  # what was measured of the old build is kept with the new one
            kept = records.read(previous)
            with home.writing(f"record {name}'s measurements"):
                records.write(build, dataclasses.replace(records.read(build), baselines=kept.baselines, allreduce=kept.allreduce))
        (build / BUILDING).unlink()
        home.point(home.envs / name, f"../builds/{build.name}")
        if (previous is not None and previous != build and previous not in home.referenced() and home.owns(previous)
                and home.restorer(previous) is None):  # one a restore holds is left to the next gc
            home.delete_build(previous)  # the old build stays until the new one has passed
        if activate:
            home.activate(name)
    if interrupted:
        progress(f"Ctrl-C came after {name} was complete; it was finished rather than left half-made")


def _is_live(home: Home, name: str, build: Path) -> bool:
    """Whether `name` already points at `build` (a failure after the swap must not delete what is in use)."""
    link = home.envs / name
    return link.is_symlink() and (home.envs / os.readlink(link)).resolve() == build.resolve()


def torch_cuda(venv: Path, python: Path) -> str | None:
    """The CUDA release the venv's torch is built for (`torch.version.cuda`), read from its torch/version.py without
    importing torch (seconds of CPU, and every CUDA library loaded, on a GPU venv). torch is imported only where the
    venv's own site-packages has no torch (a venv that sees the system's packages); None for a CPU build or no torch."""
    import ast

    from provision import regular

    try:
        tree = ast.parse(regular.read_text(site_packages(venv) / "torch" / "version.py", 1 << 20))
    except FileNotFoundError:
        done = proc.run([python, "-c", "import torch; print('torch.version.cuda=' + (torch.version.cuda or ''))"], timeout=120)
        # the answer is its own line: what site hooks or torch's import printed before it is not part of it
        answer = next((line for line in reversed(done.stdout.splitlines()) if line.startswith("torch.version.cuda=")), "")
        return (answer.partition("=")[2].strip() or None) if done.ok else None
    except (OSError, ValueError, SyntaxError, RecursionError):
        return None
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(value, ast.Constant):
            return value.value if isinstance(value.value, str) else None
    return None


def registered_as(home: Home, venv: Path) -> list[tuple[str, bool]]:
    """Every environment of `home` whose venv is `venv`, with whether it was adopted (else provision built it). Read
    from each build's `venv` (a link to an adopted venv, the venv itself in a build), not its record: adopt loads
    nothing more for it."""
    target = venv.resolve()
    found = []
    for other in home.names():
        try:
            link = home.build_of(other) / "venv"
            if link.resolve() == target:
                found.append((other, link.is_symlink()))
        except (ProvisionError, OSError, RuntimeError):  # a damaged or half-removed one is not this venv's
            continue
    return found


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve()) if folder.exists() else False


def register(home: Home, name: str, venv: Path, profile: Profile | None = None) -> Path:
    """Register an existing venv under `name` (`adopt`; its lock: envs/adopted.py); its build folder. The venv's files
    are never deleted by provision."""
    check_name(name)
    python = venv / "bin" / "python"
    if not python.exists():
        raise InputError(f"{venv}: no bin/python in it", "give the folder of a virtual environment (the one holding bin/python)")
    _, version = find_python(str(python))
    cuda = profile.cuda if profile and profile.cuda else torch_cuda(venv, python)
    with home.locked():
        if name in home.names():
            raise EnvError(f"an environment named {name!r} exists already", "choose another name or provision remove it first")
        built = [other for other, adopted in registered_as(home, venv) if not adopted]
        if built or _inside(venv, home.builds):  # its files go when that build is removed: the new name would dangle
            raise EnvError(f"{venv} was built by provision" + (f" as {built[0]!r}" if built else f" (under {home.builds})")
                           + ": it is an environment already", f"use it by that name (provision switch {built[0] if built else 'NAME'}), "
                           "or build another: provision create PROFILE --name " + name)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        build = home.builds / f"{name}-adopted-{stamp}"
        build.mkdir(parents=True)
        os.symlink(venv.absolute(), build / "venv")
        if profile and profile.toolkit:
            toolkit_home.make(build / "cuda", site_packages(venv) / profile.toolkit)
        records.write(build, EnvRecord(
            name=name, profile=profile.name if profile else None, profile_hash=profile.content_hash if profile else None,
            profile_path=str(profile.path) if profile else None,
            cuda=cuda or None,
            python=version, adopted=True, venv=str(venv.absolute()),
            env=resolve_env(profile.env, build, nvcc=profile.compiler_cuda() or profile.cuda) if profile else {},
            env_template=env_template(profile) if profile else None,
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            packages=[p.name for p in profile.packages] if profile else [], size_bytes=tree_size(venv),
            checks_required=list(profile.checks or []) if profile else [],
            baseline=profile.baseline if profile else None))
        home.point(home.envs / name, f"../builds/{build.name}")
    return build


