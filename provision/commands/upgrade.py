"""`provision upgrade`: the whole move as one step, each part the command that does it alone. gates (report's stack
gates) -> lock (stacks/lock.py, or --lock) -> lock-report (report --lock's judgement) -> create (beside, not active,
no checks) -> checks (checks/runner.py) -> baseline (checks/baseline.py run, old and new interleaved) -> decide
(judge(), the one rule; activation as switch does it). The --from environment stays active until the decision.

After every step the record (envs/upgrades.py) is written atomically; `--resume` goes on after the last finished step
and never builds, checks or measures again what a finished step proved."""

from __future__ import annotations

import dataclasses
import datetime
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from provision.envs import upgrades
from provision.envs.home import Home, check_name
from provision.envs.upgrades import Measured, Settings, StepRecord, UpgradeRecord
from provision.errors import EnvError, ProvisionError, UsageError
from provision.log import Progress

if TYPE_CHECKING:
    from provision.machine.facts import MachineFacts
    from provision.records.results import Baseline
    from provision.stacks.profiles import Profile


@dataclass(frozen=True, kw_only=True)
class Request:
    """What the command line asks: PROFILE (a new build) or to_env (one built already), and the rule's settings."""

    profile: str | None = None
    to_env: str | None = None
    from_env: str | None = None
    name: str | None = None
    lock: Path | None = None
    runs: int | None = None  # None: not asked (5 for a new upgrade; --resume: the record's)
    max_slowdown: float | None = None  # None: not asked (0 for a new upgrade; --resume: the record's)
    baseline_from: str | None = None
    activate: bool | None = None  # None: not asked (True for a new upgrade); False: --no-activate
    resume: bool = False
    allow_unsealed: bool = (
        False  # --allow-unsealed: a --lock without its seal read with a warning (asked on every run)
    )


@dataclass(frozen=True, kw_only=True)
class UpgradeResult:
    """The upgrade's record as it ended, and where it is kept."""

    record: UpgradeRecord
    path: Path

    @property
    def proceeded(self) -> bool:
        """Whether the rule said yes (the new environment activated, or with --no-activate, ready to be)."""
        return any(s.step == "decide" and s.status == "pass" for s in self.record.steps)

    def to_dict(self) -> dict[str, object]:
        return {**self.record.to_dict(), "record": str(self.path)}


def upgrade(home: Home, request: Request, progress: Progress = lambda _: None) -> UpgradeResult:
    """Run the upgrade `request` asks for (or go on with an unfinished one, with --resume)."""
    from provision.stacks import profiles

    assert (request.profile is None) != (request.to_env is None)  # the command line gave one (cli/upgrade.py)
    name = check_name(request.to_env or request.name or profiles.load(str(request.profile)).name)
    with upgrades.running(home.root, name):
        built = home.build_of(name) if name in home.names() else None
        found = upgrades.find(home.root, name, built)
        if found is not None and not found.record.done:
            if not request.resume:
                last = found.record.last_finished() or "none"
                raise EnvError(
                    f"an upgrade to {name} is unfinished (last finished step: {last}; its record: {found.path})",
                    "go on with it: the same command with --resume",
                )
            _same_rule(request, found.record.settings, found.path)
            path, record = found.path, found.record
        elif request.resume:
            if found is None:
                raise EnvError(f"no upgrade to {name} to resume", "run it without --resume")
            return UpgradeResult(record=found.record, path=found.path)  # finished: its record, shown again
        else:
            path, record = _start(home, request, name)
        return _Run(home, record, path, progress, allow_unsealed=request.allow_unsealed).go()


DEFAULT_RUNS = 5


def _same_rule(request: Request, kept: Settings, path: Path) -> None:
    """--resume goes on by the record's settings: an option given on this command line that says otherwise (resumed
    with --max-slowdown 0, started with 20) is refused, never silently outvoted by the record."""
    asked = {
        "--from": (request.from_env, kept.from_env),
        "--runs": (request.runs, kept.runs),
        "--max-slowdown": (request.max_slowdown, kept.max_slowdown),
        "--baseline-from": (request.baseline_from, kept.baseline_from),
        "--no-activate": (None if request.activate is None else not request.activate, not kept.activate),
        "--lock": (str(request.lock.absolute()) if request.lock else None, kept.lock),
    }
    differ = [
        f"{option} {_shown(given)} (the record: {_shown(was)})"
        for option, (given, was) in asked.items()
        if given is not None and given != was
    ]
    if differ:
        raise UsageError(
            f"--resume goes on by the settings the upgrade started with ({path}), and this command asks "
            f"otherwise: {'; '.join(differ)}",
            "drop those options to go on as started, or remove the record and start again",
        )


def _shown(value: object) -> str:
    if value is None or isinstance(value, bool):
        return {True: "given", False: "not given", None: "none"}[value]
    return f"{value:g}" if isinstance(value, float) else str(value)


def _start(home: Home, request: Request, name: str) -> tuple[Path, UpgradeRecord]:
    from_env = request.from_env or home.active()
    if from_env is None:
        raise EnvError("no environment is active to upgrade from", "name it: --from NAME")
    home.build_of(from_env)  # an EnvError naming the known ones when there is none
    if from_env == name:
        raise UsageError(
            f"--from {from_env} and the new environment are the same", "name the new one: --name NAME"
        )
    if request.baseline_from not in (None, from_env, name):
        raise UsageError(
            f"--baseline-from {request.baseline_from}: neither {from_env} nor {name}",
            f"name the one whose [baseline] both run: --baseline-from {from_env} or {name}",
        )
    if request.to_env is None and name in home.names():
        raise EnvError(
            f"an environment named {name!r} exists already",
            f"choose another --name, or provision remove {name}",
        )
    if request.to_env is not None and home.active() == name:
        raise UsageError(f"{name} is the active environment already", "name another: --to-env NAME")
    settings = Settings(
        profile=request.profile,
        from_env=from_env,
        to_env=name,
        built=request.to_env is not None,
        lock=str(request.lock.absolute()) if request.lock else None,
        runs=request.runs or DEFAULT_RUNS,
        max_slowdown=request.max_slowdown or 0.0,
        baseline_from=request.baseline_from,
        activate=request.activate is not False,
    )
    path = (
        home.build_of(name) / upgrades.UPGRADE_FILE
        if settings.built
        else upgrades.pending_path(home.root, name)
    )
    record = UpgradeRecord(settings=settings, started=_now())
    upgrades.write(path, record)
    return path, record


class _Run:
    """One run of the steps (a first one, or a --resume): what the steps share, and the record as it grows."""

    def __init__(
        self,
        home: Home,
        record: UpgradeRecord,
        path: Path,
        progress: Progress,
        *,
        allow_unsealed: bool = False,
    ) -> None:
        self.home, self.record, self.path, self.progress = home, record, path, progress
        self.allow_unsealed = allow_unsealed
        self.settings = record.settings
        self._facts: MachineFacts | None = None

    def go(self) -> UpgradeResult:
        steps: dict[str, Callable[[], StepRecord]] = {
            "gates": self.gates,
            "lock": self.lock,
            "lock-report": self.lock_report,
            "create": self.create,
            "checks": self.checks,
            "baseline": self.baseline,
            "decide": self.decide,
        }
        done = self.record.finished_steps()
        for number, (step, run) in enumerate(steps.items(), start=1):
            if step in done:
                continue
            self.progress(f"step {number} of {len(steps)}: {step}")
            started = time.perf_counter()
            try:
                ended = run()
            except ProvisionError as exc:  # not finished: --resume runs the step again
                self._save(
                    self.record.with_step(
                        StepRecord(
                            step=step,
                            status="error",
                            seconds=time.perf_counter() - started,
                            result=exc.message,
                        )
                    )
                )
                # its own hint says what to mend; running the upgrade again without --resume is refused (unfinished)
                exc.hint = "; ".join(
                    filter(None, (exc.hint, f"the upgrade goes on from {step} with --resume added"))
                )
                raise
            self._save(
                self.record.with_step(dataclasses.replace(ended, seconds=time.perf_counter() - started))
            )
            if ended.status == "fail" and step != "decide":
                self._save(
                    dataclasses.replace(
                        self.record,
                        decision="kept",
                        finished=_now(),
                        undo=None,
                        reason=f"{self.settings.from_env} stays active: {step}: {ended.result}",
                    )
                )
                break
        return UpgradeResult(record=self.record, path=self.path)

    def _save(self, record: UpgradeRecord) -> None:
        self.record = record
        upgrades.write(self.path, record)

    # --- the steps --------------------------------------------------------------------------------------------

    def profile(self) -> Profile | None:
        """PROFILE, or --to-env's own profile (None when it has none, or it is not found here)."""
        from provision.envs import records
        from provision.stacks import profiles

        if self.settings.profile is not None:
            return profiles.load(self.settings.profile)
        record = records.read(self.home.build_of(self.settings.to_env))
        if record.profile is None:
            return None
        where = (
            record.profile_path
            if record.profile_path and Path(record.profile_path).exists()
            else record.profile
        )
        try:
            return profiles.load(where)
        except ProvisionError:
            return None

    def facts(self) -> MachineFacts:
        if self._facts is None:
            from provision.machine import probe

            self._facts = probe.probe()
        return self._facts

    def gates(self) -> StepRecord:
        from provision.report import gates
        from provision.stacks import uvtool

        profile = self.profile()
        differ = self._baselines_differ(profile)
        if differ:
            return _step("gates", "fail", differ)
        if profile is None:
            return _step(
                "gates", "skip", f"{self.settings.to_env} has no profile here to judge the machine against"
            )
        self.progress(f"judging this machine against {profile.name}")
        target = gates.judge(self.facts(), profile, Path(uvtool.cache_dir() or "."))
        return _judged("gates", f"profile {profile.name}", target.gates)

    def lock(self) -> StepRecord:
        from provision.stacks import lock as locking
        from provision.stacks import lockfile

        if self.settings.built:
            return _step("lock", "skip", f"{self.settings.to_env} is built already")
        profile = self.profile()
        assert profile is not None
        if self.settings.lock is not None:
            lockfile.check_binding(Path(self.settings.lock), profile, allow_unsealed=self.allow_unsealed)
            return _step("lock", "pass", f"given: {self.settings.lock}")
        python = locking.check_python(profile.python or f"{sys.version_info[0]}.{sys.version_info[1]}")
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        output = self.home.locks / f"pylock.{self.settings.to_env}-upgrade-{stamp}.toml"
        with self.home.writing("make its locks folder"):
            self.home.locks.mkdir(parents=True, exist_ok=True)
        made = locking.lock(
            profile,
            target=locking.Target(python=python, platform=None),
            overrides={},
            output=output,
            progress=self.progress,
        )
        self.settings = dataclasses.replace(self.settings, lock=str(made.path))
        self.record = dataclasses.replace(self.record, settings=self.settings)
        return _step("lock", "pass", f"{len(made.packages)} packages locked for Python {python}: {made.path}")

    def lock_report(self) -> StepRecord:
        from provision.envs import records
        from provision.report import lockscan
        from provision.stacks import uvtool

        lock = self.settings.lock
        if self.settings.built:
            lock = records.read(self.home.build_of(self.settings.to_env)).lock
            if not lock or not Path(lock).is_file():
                return _step("lock-report", "skip", f"{self.settings.to_env} has no lock to judge")
        assert lock is not None
        cache = Path(uvtool.cache_dir() or ".")
        facts = self.facts()
        scanned, stack = lockscan.read_lock(
            Path(lock),
            fetch=True,
            uv_cache=cache,
            progress=self.progress,
            code=bool(facts.gpus),
            allow_unsealed=self.allow_unsealed,
        )
        target = lockscan.judge(facts, scanned, stack, cache)
        return _judged("lock-report", f"lock {Path(lock).name}", target.gates)

    def create(self) -> StepRecord:
        from provision.commands import create as creating
        from provision.envs import records

        name = self.settings.to_env
        if self.settings.built:
            return _step("create", "skip", f"{name} is built already ({self.home.build_of(name)})")
        if name in self.home.names():  # made by this upgrade, killed before its record moved to the build
            made = records.read(self.home.build_of(name))
            if made.lock != self.settings.lock or (made.created or "") < self.record.started:
                raise EnvError(
                    f"an environment named {name!r} exists already, not built by this upgrade",
                    f"remove it (provision remove {name}) and run this again",
                )
            build = self.home.build_of(name)
        else:
            profile = self.profile()
            assert profile is not None and self.settings.lock is not None
            build = creating.create(
                self.home,
                profile,
                name=name,
                lock_path=Path(self.settings.lock),
                checks=False,
                activate=False,
                progress=self.progress,
                allow_unsealed=self.allow_unsealed,
            ).path
        pending, self.path = self.path, build / upgrades.UPGRADE_FILE
        upgrades.write(self.path, self.record)
        pending.unlink(missing_ok=True)
        return _step("create", "pass", f"{name} built beside {self.settings.from_env}, not active: {build}")

    def checks(self) -> StepRecord:
        from provision.checks import runner
        from provision.envs import records
        from provision.machine import probe

        build = self.home.build_of(self.settings.to_env)
        reading = probe.gpu_reading()  # once, for every check: a driver that does not answer fails the step
        # a build this upgrade made is fresh: a file that is not what its lock pins FAILs drift, as after create
        results = runner.run(
            build,
            records.read(build),
            gpus=reading.gpus,
            driver=reading.driver,
            progress=self.progress,
            fresh=not self.settings.built,
        )
        records.add_checks(build, results, _now())
        start = reading.driver.nvml
        failed = [f"{r.id} {r.status.upper()}: {r.reason}" for r in results if r.failed]
        # a driver installed that does not answer (a reboot pending, say): never read as "no GPU"
        if start.silent:
            return _step(
                "checks",
                "fail",
                f"the GPU checks could not run: the NVIDIA driver does not answer "
                f"({start.state}: {start.reason}); {start.hint}",
            )
        if failed:
            return _step(
                "checks",
                "fail",
                "; ".join(failed)[:600] + f" (the build is kept: provision check {self.settings.to_env})",
            )
        counts = {s: sum(r.status == s for r in results) for s in ("pass", "warn", "skip")}
        return _step(
            "checks", "pass", ", ".join(f"{v} {k}" for k, v in counts.items() if v) + f" of {len(results)}"
        )

    def _spec(self, old: Baseline | None, new: Baseline | None) -> Baseline | None:
        """The baseline both sides run; None when their profiles' [baseline] differ and --baseline-from chose none."""
        from provision.checks.baseline import BUILTIN

        chosen = {self.settings.from_env: old, self.settings.to_env: new}
        if old == new or self.settings.baseline_from is not None:
            return chosen[self.settings.baseline_from or self.settings.from_env] or BUILTIN
        return None

    def _baselines_differ(self, profile: Profile | None) -> str | None:
        from provision.envs import records

        old = records.read(self.home.build_of(self.settings.from_env)).baseline
        new = (
            records.read(self.home.build_of(self.settings.to_env)).baseline
            if self.settings.built
            else (profile.baseline if profile else None)
        )
        if self._spec(old, new) is not None:
            return None
        said = [" ".join(b.command) if b else "the built-in GEMM" for b in (old, new)]
        return (
            f"the two profiles' [baseline] differ ({self.settings.from_env}: {said[0]}; {self.settings.to_env}: "
            f"{said[1]}): their figures cannot be compared; --baseline-from NAME runs one of them on both"
        )

    def baseline(self) -> StepRecord:
        from provision.checks import baseline as baselines
        from provision.envs import records

        names = (self.settings.from_env, self.settings.to_env)
        builds = [self.home.build_of(n) for n in names]
        kept = [records.read(b) for b in builds]
        spec = self._spec(kept[0].baseline, kept[1].baseline)
        if spec is None:
            raise EnvError(
                self._baselines_differ(None) or "the baselines differ", "pass --baseline-from NAME"
            )
        series, figures = _now(), ([], [])  # type: tuple[str, tuple[list[float], list[float]]]
        for number in range(1, self.settings.runs + 1):
            for side in (0, 1):  # interleaved, old then new: the machine's drift meets both alike
                self.progress(f"baseline run {number} of {self.settings.runs}: {names[side]}")
                run = baselines.run(
                    names[side], builds[side], dataclasses.replace(kept[side], baseline=spec), self.progress
                )
                run = dataclasses.replace(run, series=series)
                # each run stored as it ends, as baseline --runs stores them
                records.add_baseline(builds[side], run)
                figures[side].append(float(run.figure or 0.0))
        verdict = baselines.judge(figures[0], figures[1], spec.better)
        self.record = dataclasses.replace(
            self.record,
            baseline=Measured(
                command=tuple(spec.command),
                unit=spec.unit,
                better=spec.better,
                series=series,
                verdict=verdict,
                old=upgrades.Side(name=names[0], figures=tuple(figures[0])),
                new=upgrades.Side(name=names[1], figures=tuple(figures[1])),
            ),
        )
        return _step("baseline", "pass", f"{self.settings.runs} runs a side, interleaved: {verdict}")

    def decide(self) -> StepRecord:
        measured, old, name = self.record.baseline, self.settings.from_env, self.settings.to_env
        assert measured is not None
        yes, why = rule(measured, self.settings.max_slowdown)
        if not yes:
            self.record = dataclasses.replace(
                self.record, decision="kept", finished=_now(), undo=None, reason=f"{old} stays active: {why}"
            )
            return _step("decide", "fail", why)
        if not self.settings.activate:
            self.record = dataclasses.replace(
                self.record,
                decision="kept",
                finished=_now(),
                undo=None,
                reason=f"{why}; --no-activate: {old} stays active (provision switch {name} activates it)",
            )
            return _step("decide", "pass", why)
        with self.home.locked():
            if self.home.active() != name:
                self.home.activate(name)
        self.record = dataclasses.replace(
            self.record,
            decision="activated",
            finished=_now(),
            undo=f"provision rollback --to {old}",
            reason=f"{name} is active: {why}",
        )
        return _step("decide", "pass", why)


def rule(measured: Measured, max_slowdown: float) -> tuple[bool, str]:
    """Whether the new side may be activated, and why in one line with both medians: not worse beyond noise (the
    spreads, as compare judges), or worse by no more than `max_slowdown` percent."""
    old, new = measured.old, measured.new
    change = measured.change
    medians = (
        f"median {new.median:.2f} {measured.unit} against {old.name}'s {old.median:.2f}"
        if new.median is not None and old.median is not None
        else "no medians"
    )
    shown = f" ({change * 100:+.1f}%)" if change is not None else ""
    if measured.verdict == "cannot-tell" or change is None:
        return False, f"cannot tell: {new.name}'s {medians}{shown}, too few runs"
    if measured.verdict in ("better", "within-noise"):
        said = (
            "better"
            if measured.verdict == "better"
            else "within noise (the spread covers the difference), not worse"
        )
        return True, f"{new.name}'s {medians}{shown}: {said}"
    slowdown = (-change if measured.better == "higher" else change) * 100
    if slowdown <= max_slowdown:
        return (
            True,
            f"{new.name}'s {medians}{shown}: worse beyond noise, within --max-slowdown {max_slowdown:g}%",
        )
    return False, (
        f"{new.name}'s {medians}{shown}: worse beyond noise (spreads {min(new.figures):.2f}-"
        f"{max(new.figures):.2f} against {min(old.figures):.2f}-{max(old.figures):.2f}), more than "
        f"--max-slowdown {max_slowdown:g}%"
    )


def _judged(step: str, what: str, found: tuple[object, ...]) -> StepRecord:
    """A step that is a verdict over gates: FAIL naming each failing stack gate, else PASS (a WARN is said)."""
    from provision.report.gates import Gate

    stack = [g for g in found if isinstance(g, Gate) and g.kind == "stack"]
    failing = [f"{g.id}: {g.reason}" for g in stack if g.status == "fail"]
    if failing:
        return _step(step, "fail", f"{what} FAIL: " + "; ".join(failing)[:600])
    warned = [g.id for g in stack if g.status == "warn"]
    return _step(step, "pass", f"{what}: no gate fails" + (f" (WARN: {', '.join(warned)})" if warned else ""))


def _step(step: str, status: upgrades.StepStatus, result: str) -> StepRecord:
    return StepRecord(step=step, status=status, seconds=0.0, result=result)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
