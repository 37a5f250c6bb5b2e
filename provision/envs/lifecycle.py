"""The steps an environment is made of: a build folder started beside the others, the lock installed into it, its
checks recorded, then named in one atomic step (`provision create` composes them: commands/create.py), or a venv
provision did not build registered (`provision adopt`)."""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from provision import log, proc
from provision.envs import kept as keeping
from provision.envs import records, toolkit_home
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
    from provision.envs.lockchoice import Chosen
    from provision.stacks.profiles import Profile


def _refuse_existing(home: Home, name: str, replace: bool) -> Path | None:
    """The build `name` points at now, if any; an error unless `replace` was asked for."""
    if name not in home.names():
        return None
    if not replace:
        raise EnvError(
            f"an environment named {name!r} exists already",
            "pass --replace to build a new one in its place (its baselines are kept), or choose another --name",
        )
    return home.build_of(name)


def refuse_early(profile: Profile, overrides: dict[str, str]) -> None:
    """What `create` refuses before anything is made: uv's settings (uv venv reads them too), a PROVISION_INDEX_<NAME>
    that is no URL, a check timeout that is no number (the checks read it after the install)."""
    from provision import durations
    from provision.stacks import lock as locking
    from provision.stacks import uvtool

    uvtool.check_settings()
    locking.effective_indexes(profile, overrides)
    durations.check_timeout()


def start(home: Home, name: str, *, replace: bool) -> tuple[Path, Path | None]:
    """A new build folder for `name`, marked as building with this pid, and the build `name` points at now (refused
    unless `replace`). Called with HOME's lock held; a failure or Ctrl-C after the mkdir removes the folder."""
    previous = _refuse_existing(home, name, replace)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    build = home.builds / f"{name}-{stamp}-{os.urandom(3).hex()}"
    try:
        with home.writing(f"start building {name}"):
            build.mkdir(parents=True)
            (build / BUILDING).write_text(str(os.getpid()))
    except BaseException:
        if build.exists():
            remove_tree(build)
        raise
    return build, previous


@dataclass(frozen=True, kw_only=True)
class Installed:
    """A build's venv made from its lock: the record written, the lock chosen, what --replace carried over."""

    record: EnvRecord
    chosen: Chosen
    carried: tuple[list[KeptFile], list[NotCarried]] | None
    seconds: dict[str, float]


def install(
    home: Home,
    profile: Profile,
    name: str,
    build: Path,
    previous: Path | None,
    *,
    python: str | None,
    lock_path: Path | None,
    overrides: dict[str, str],
    allow_unsealed: bool,
    progress: Progress,
) -> Installed:
    """Choose or make the lock (`lock_path` when given: refused without its seal unless `allow_unsealed`), make the
    venv and install it, write the record; with a `previous` build, carry its accepted files over."""
    import time

    from provision.envs import accept as accepting
    from provision.envs import (
        lockchoice,  # the lock's readers (packaging): not for adopt, which registers here too
    )
    from provision.stacks import lock as locking

    timings: dict[str, float] = {}
    found = lockchoice.candidate(profile, lock_path, overrides, allow_unsealed=allow_unsealed)
    interpreter, version = find_python(
        python or found.python or profile.python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    )
    found = lockchoice.for_python(found, version)
    started = time.perf_counter()
    indexes = locking.effective_indexes(profile, overrides)
    target = locking.Target(python=version, platform=None)
    chosen = lockchoice.lock_for(
        home, profile, target, overrides, indexes, found, progress, build, allow_unsealed=allow_unsealed
    )
    timings["lock"] = time.perf_counter() - started
    started = time.perf_counter()
    with home.writing(f"build {name}"):
        record = _install(build, profile, name, interpreter, version, chosen.path, indexes, progress)
        carried = (
            accepting.carry_over(previous, build, Path(record.venv or build / "venv")) if previous else None
        )
        record = records.read(build) if carried else record
    timings["install"] = time.perf_counter() - started
    return Installed(record=record, chosen=chosen, carried=carried, seconds=timings)


def record_checks(home: Home, name: str, build: Path, results: list[CheckResult], record: EnvRecord) -> None:
    """Store the checks a new build ran, as of its creation."""
    with home.writing(f"record {name}'s checks"):
        records.add_checks(build, results, record.created or "")


def abandon(
    home: Home, name: str, profile: Profile, build: Path | None, error: BaseException, *, keep_failed: bool
) -> None:
    """After a failure or Ctrl-C while `build` was made: keep it as NAME-failed-STAMP (`keep_failed`, a venv there,
    a provision error), else remove it; never one `name` already points at. The caller raises `error` again."""
    if build is None or not build.exists() or _is_live(home, name, build):
        return
    if keep_failed and isinstance(error, ProvisionError) and (build / "venv").is_dir():
        kept = keep(home, name, profile, build)
        error.hint = f"the failed build is kept as {kept} (provision remove {kept}); " + error.hint
        return
    remove_tree(build)  # nothing half-made stays; kill -9 is cleaned by the next gc


def keep(home: Home, name: str, profile: Profile, build: Path) -> str:
    """Name a failed build `NAME-failed-STAMP` (create --keep-failed): listed by envs, removed by remove or gc,
    never activated (its FAILED marker says why)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    with home.locked(), home.writing(f"keep the failed build of {name}"):
        taken = set(home.names())  # another build of that name failed within the same second: -2, -3, ...
        kept = next(
            n
            for n in (
                check_name(f"{name[:40]}-failed-{stamp}{f'-{i}' if i > 1 else ''}") for i in range(1, 10_000)
            )
            if n not in taken
        )
        if not (build / records.ENV_FILE).exists():  # failed before its record was written: say what it was
            records.write(
                build, EnvRecord(name=kept, profile=profile.name, cuda=profile.cuda, venv=str(build / "venv"))
            )
        (build / FAILED).write_text(f"create {name} failed; kept by --keep-failed\n")
        (build / BUILDING).unlink(missing_ok=True)
        home.point(home.envs / kept, f"../builds/{build.name}")
    return kept


def _install(
    build: Path,
    profile: Profile,
    name: str,
    interpreter: Path,
    version: str,
    lock_file: Path,
    indexes: dict[str, str | None],
    progress: Progress,
) -> EnvRecord:
    """Make the venv, install the lock into it, lay out the toolkit; return the environment's record."""
    from provision.stacks import uvtool

    progress(f"creating the venv with Python {version}")
    uvtool.run(["venv", str(build / "venv"), "--python", str(interpreter), "--quiet", "--no-project"])
    progress("installing the lock (hashes verified)")
    # uv is silent while it downloads
    with log.ticking(progress, _installing(build / "venv", uvtool.cache_dir())):
        uvtool.sync(
            lock_file,
            build / "venv" / "bin" / "python",
            indexes,
            progress=progress,  # what uv installs, as it goes
            git=[p.git for p in profile.packages if p.git],
        )
    if profile.toolkit:
        progress("laying out the environment's CUDA toolkit")
        toolkit_home.make(build / "cuda", site_packages(build / "venv") / profile.toolkit)
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    carried = []
    # the team's own patches, from the profile: every machine of a fleet gets the same
    for file in profile.files:
        progress(f"writing {file.path} from {file.source}")
        keeping.keep(build, file.content, file.mode)
        keeping.put(build / "venv", site_packages(build / "venv"), file.path, file.content, file.mode)
        carried.append(KeptFile(path=file.path, sha256=file.sha256, at=created, source=str(file.source)))
    record = EnvRecord(
        name=name,
        profile=profile.name,
        profile_hash=profile.content_hash,
        profile_path=str(profile.path),
        cuda=profile.cuda,
        python=version,
        interpreter=str(interpreter),
        lock=str(lock_file),
        created=created,
        adopted=False,
        venv=str(build / "venv"),
        env=resolve_env(profile.env, build, nvcc=profile.compiler_cuda() or profile.cuda),
        env_template=env_template(profile),
        packages=[p.name for p in profile.packages],
        checks_required=list(profile.checks or []),
        size_bytes=tree_size(build / "venv"),
        baseline=profile.baseline,
        profile_files=carried,
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


def commit(home: Home, name: str, build: Path, *, activate: bool, replace: bool, progress: Progress) -> None:
    """Let `name` point at the checked build (and make it active): begun, this step is finished, Ctrl-C or not."""
    with home.locked(), deferred_interrupt() as interrupted:
        previous = _refuse_existing(home, name, replace)  # another create may have taken the name meanwhile
        if previous is not None:  # what was measured of the old build is kept with the new one
            kept = records.read(previous)
            with home.writing(f"record {name}'s measurements"):
                records.write(
                    build,
                    dataclasses.replace(
                        records.read(build), baselines=kept.baselines, allreduce=kept.allreduce
                    ),
                )
        (build / BUILDING).unlink()
        home.point(home.envs / name, f"../builds/{build.name}")
        # one a restore holds is left to the next gc
        if (
            previous is not None
            and previous != build
            and previous not in home.referenced()
            and home.owns(previous)
            and home.restorer(previous) is None
        ):
            home.delete_build(previous)  # the old build stays until the new one has passed
        if activate:
            try:
                home.activate(name)
            except EnvError as exc:  # a full disk: what is built, checked and named stays
                raise EnvError(
                    f"{name} is built and named, not active: {exc.message}",
                    f"mend that, then make it active: provision switch {name} (nothing active was changed)",
                ) from exc
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
        done = proc.run(
            [python, "-c", "import torch; print('torch.version.cuda=' + (torch.version.cuda or ''))"],
            timeout=120,
        )
        # the answer is its own line: what site hooks or torch's import printed before it is not part of it
        answer = next(
            (line for line in reversed(done.stdout.splitlines()) if line.startswith("torch.version.cuda=")),
            "",
        )
        return (answer.partition("=")[2].strip() or None) if done.ok else None
    except (OSError, ValueError, SyntaxError, RecursionError):
        return None
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
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
        raise InputError(
            f"{venv}: no bin/python in it",
            "give the folder of a virtual environment (the one holding bin/python)",
        )
    _, version = find_python(str(python))
    cuda = profile.cuda if profile and profile.cuda else torch_cuda(venv, python)
    with home.locked():
        if name in home.names():
            raise EnvError(
                f"an environment named {name!r} exists already",
                "choose another name or provision remove it first",
            )
        built = [other for other, adopted in registered_as(home, venv) if not adopted]
        # its files go when that build is removed: the new name would dangle
        if built or _inside(venv, home.builds):
            raise EnvError(
                f"{venv} was built by provision"
                + (f" as {built[0]!r}" if built else f" (under {home.builds})")
                + ": it is an environment already",
                f"use it by that name (provision switch {built[0] if built else 'NAME'}), "
                "or build another: provision create PROFILE --name " + name,
            )
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        build = home.builds / f"{name}-adopted-{stamp}"
        record = EnvRecord(
            name=name,
            profile=profile.name if profile else None,
            profile_hash=profile.content_hash if profile else None,
            profile_path=str(profile.path) if profile else None,
            cuda=cuda or None,
            python=version,
            adopted=True,
            venv=str(venv.absolute()),
            env=resolve_env(profile.env, build, nvcc=profile.compiler_cuda() or profile.cuda)
            if profile
            else {},
            env_template=env_template(profile) if profile else None,
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            packages=[p.name for p in profile.packages] if profile else [],
            size_bytes=tree_size(venv),
            checks_required=list(profile.checks or []) if profile else [],
            baseline=profile.baseline if profile else None,
        )
        made = False
        try:
            with home.writing(f"register {name}"):
                build.mkdir(parents=True)
                made = True
                os.symlink(venv.absolute(), build / "venv")
                if profile and profile.toolkit:
                    toolkit_home.make(build / "cuda", site_packages(venv) / profile.toolkit)
                records.write(build, record)
                home.point(home.envs / name, f"../builds/{build.name}")
        except BaseException:
            if made:  # nothing half-registered stays: the link to the venv goes, never its files
                remove_tree(build)
            raise
    return build
