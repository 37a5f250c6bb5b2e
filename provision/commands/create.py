"""`provision create`: what interrupted builds left is cleaned up first (gc), the new build is made beside the others
from a lock (envs/lifecycle.py), its smoke checks run (checks/runner.py), and only a build whose checks passed is
named and, unless asked otherwise, made active; a failed one is removed, or kept under NAME-failed-STAMP. HOME's lock
is held only to start and to finish (the swap), never through the install and the checks: a rollback in an
emergency does not wait for a build."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provision.envs import cleanup, lifecycle
from provision.envs.home import check_name
from provision.records.results import CheckResult

if TYPE_CHECKING:
    from provision.envs.accept import NotCarried
    from provision.envs.home import Home
    from provision.log import Progress
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
    lock_source: str | None = (
        None  # the lock that `lock` is a copy of (given, or the profile's in lockfiles/)
    )
    lock_note: str | None = None  # why the profile's lock in lockfiles/ was not the one built
    seconds: dict[str, float] = field(default_factory=dict)
    kept_as: str | None = None  # --keep-failed: the name the failed build is kept under
    accepted_reapplied: tuple[str, ...] = ()  # --replace: the old build's accepted files, written again
    accepted_dropped: tuple[NotCarried, ...] = ()  # --replace: those left out, each with why

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": str(self.path),
            "activated": self.activated,
            "passed": self.passed,
            "lock": self.lock,
            "lock_reused": self.lock_reused,
            "lock_origin": self.lock_origin,
            "lock_source": self.lock_source,
            "lock_note": self.lock_note,
            "checks": [r.to_dict() for r in self.checks],
            "accepted_reapplied": list(self.accepted_reapplied),
            "accepted_dropped": [d.to_dict() for d in self.accepted_dropped],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "kept_as": self.kept_as,
        }


def create(
    home: Home,
    profile: Profile,
    *,
    name: str | None = None,
    python: str | None = None,
    lock_path: Path | None = None,
    overrides: dict[str, str] | None = None,
    checks: bool = True,
    activate: bool = True,
    replace: bool = False,
    keep_failed: bool = False,
    progress: Progress = lambda _: None,
    allow_unsealed: bool = False,
) -> CreateResult:
    """Clean up, build, check, then name and activate an environment for `profile`: the whole of `provision create`."""
    name = check_name(name or profile.name)
    overrides = overrides or {}
    lifecycle.refuse_early(profile, overrides)  # before anything is made
    build: Path | None = None
    try:
        with home.locked():
            cleanup.gc(home)  # what interrupted builds left is removed before another is started
            build, previous = lifecycle.start(home, name, replace=replace)
        installed = lifecycle.install(
            home,
            profile,
            name,
            build,
            previous,
            python=python,
            lock_path=lock_path,
            overrides=overrides,
            allow_unsealed=allow_unsealed,
            progress=progress,
        )
        started = time.perf_counter()
        results: list[CheckResult] = []
        if checks:
            from provision.checks import runner

            results = runner.run(build, installed.record, progress=progress, fresh=True)
        seconds = {**installed.seconds, "checks": time.perf_counter() - started}
        lifecycle.record_checks(home, name, build, results, installed.record)
        passed = not any(r.failed for r in results)
        kept_as = None
        if passed:  # only a build whose checks passed is named, and made active unless --no-activate
            lifecycle.commit(home, name, build, activate=activate, replace=replace, progress=progress)
        elif keep_failed:
            kept_as = lifecycle.keep(home, name, profile, build)
        else:
            home.delete_build(build)
    except BaseException as exc:
        lifecycle.abandon(home, name, profile, build, exc, keep_failed=keep_failed)
        raise
    chosen, carried = installed.chosen, installed.carried
    return CreateResult(
        name=name,
        path=build,
        activated=passed and activate,
        passed=passed,
        checks=results,
        lock=str(chosen.path),
        lock_reused=chosen.reused,
        lock_origin=chosen.origin,
        lock_source=str(chosen.source) if chosen.source else None,
        lock_note=chosen.note,
        seconds=seconds,
        kept_as=kept_as,
        accepted_reapplied=tuple(f.path for f in carried[0]) if carried else (),
        accepted_dropped=tuple(carried[1]) if carried else (),
    )
