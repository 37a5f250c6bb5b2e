"""`provision try NAME LABEL`: one change (variables, arguments appended to the baseline command, files written over
the venv's) tried on environment NAME and judged against its baseline, then NAME put back exactly and its baseline
run once more to show it returned to its noise band. `provision try NEW --replay OLD` runs OLD's trials on NEW in
the same order. (`try` is a Python keyword: this module is try_.)

The order: the baseline of N runs (run first when NAME has none that long), the drift check (a file the trial would
write must be as its known-good state says), the trial's files (recorded before they are written:
envs/trialfiles.py), N runs with the change, the verdict (checks/baseline.py's judge: the one rule), the files put
back byte for byte whatever happened (Ctrl-C too), drift again, one more baseline run, the ledger (envs/ledger.py)."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from provision import regular
from provision.checks import baseline as baselines
from provision.checks.baseline import BaselineFailed, judge
from provision.commands import recipes
from provision.envs import drift, kept, ledger, records, trialfiles
from provision.envs.home import Home, deferred_interrupt
from provision.envs.ledger import After, Change, Series, Trial, TrialFile
from provision.envs.records import EnvRecord
from provision.errors import EnvError, InputError, ProvisionError, UsageError
from provision.log import Progress
from provision.names import SHELL_NAME
from provision.records.results import BaselineRun
from provision.stacks.profile_files import MAX_BYTES

DEFAULT_RUNS = 5


@dataclass(frozen=True, kw_only=True)
class Asked:
    """The change as the command line gives it: K=V variables, arguments, PATH=SOURCE files (or their content)."""

    env: Mapping[str, str] = field(default_factory=dict)
    args: Sequence[str] = ()
    files: Sequence[tuple[str, str]] = ()  # (PATH in the venv, SOURCE file)
    # SOURCE -> content, where it is known (a replay)
    contents: Mapping[str, bytes] = field(default_factory=dict)


def parse_env(pairs: Sequence[str]) -> dict[str, str]:
    """--env K=V, each K a variable name."""
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not SHELL_NAME.match(key) or "\0" in value:
            raise UsageError(f"--env {pair!r} is not NAME=VALUE", "e.g. --env NCCL_ALGO=allreduce:tree")
        found[key] = value
    return found


def parse_files(pairs: Sequence[str]) -> list[tuple[str, str]]:
    """--file PATH=SOURCE."""
    found = []
    for pair in pairs:
        path, sep, source = pair.partition("=")
        if not sep or not path or not source:
            raise UsageError(
                f"--file {pair!r} is not PATH=SOURCE",
                "e.g. --file sglang/srt/distributed/communication_op.py=./patched.py",
            )
        found.append((path, source))
    return found


def try_(
    home: Home,
    name: str,
    label: str,
    asked: Asked,
    *,
    runs: int = DEFAULT_RUNS,
    note: str | None = None,
    force: bool = False,
    recipe: str | None = None,
    progress: Progress = lambda _: None,
) -> Trial:
    """Try the change on `name` (a recipe's, when `recipe` is given, before the asked one), judge it, put it back."""
    build = home.build_of(name)  # what a trial killed mid-way left is put back here
    record = records.read(build)
    venv = record.venv_path(build).resolve()
    site = drift.site_packages(venv)
    written, files = _files(venv, site, asked)
    change = Change(env=dict(asked.env), args=list(asked.args), files=files)
    spec = record.baseline or baselines.BUILTIN
    trial = Trial(
        name=name,
        label=label,
        change=change,
        verdict="not-applicable",
        reason="",
        figure=Series(),
        baseline=Series(),
        recipe=recipe,
        note=note,
        unit=spec.unit,
        better=spec.better,
    )
    if recipe is not None:
        fit = _recipe_fit(venv, recipes.find(recipe))
        if fit.change is not None:
            change = Change(
                env={**fit.change.env, **change.env}, args=[*fit.change.args, *change.args], files=files
            )
            trial = dataclasses.replace(trial, change=change)
        if not fit.applies and not (force and fit.change is not None):
            return _recorded(
                build,
                written,
                dataclasses.replace(
                    trial, reason=fit.reason + ("" if fit.change is None else "; --force runs it anyway")
                ),
            )
    with trialfiles.held(build, name):
        record = _checked(build, record, progress)
        base, ran_first = _baseline(name, build, record, runs, progress)
        trial = dataclasses.replace(trial, baseline=Series(figures=base), baseline_ran_first=ran_first)
        before = drift.scan_env(venv, build, record)
        _refuse_drifted(name, before, [w.path for w in written])
        figures: list[float] = []
        failure: BaselineFailed | None = None
        try:
            if written:
                with home.restoring(build, name):
                    trialfiles.write(build, venv, site, written)
            changed = _with_change(record, change)
            for number in range(1, runs + 1):
                progress(f"{label} on {name}: run {number} of {runs}")
                try:
                    figures.append(_figure(baselines.run(name, build, changed, progress)))
                except BaselineFailed as exc:
                    failure = exc
                    break
        finally:
            with deferred_interrupt() as interrupted, home.restoring(build, name):
                try:
                    trialfiles.put_back(build, venv, site)
                # a full disk (the trial's workload filled it): they stay until there is room
                except OSError as exc:
                    raise EnvError(
                        f"cannot put the trial's files back in {venv}: {exc.strerror or exc} ({exc.filename})",
                        f"free space on that disk, then run any command on {name} (provision check {name}): "
                        "it puts them back first",
                    ) from exc
            # held while the files went back: the trial ends here, as it would have
            if interrupted:
                raise KeyboardInterrupt
        progress(f"{name}: checking it is back (drift)")
        after = drift.scan_env(venv, build, record)
        restored = {f.line() for f in after.findings} <= {f.line() for f in before.findings}
        trial = dataclasses.replace(
            trial,
            figure=Series(figures=figures),
            restored=restored,
            baseline_after=_after(name, build, record, base, progress),
        )
        trial = _judged(trial, failure)
    return _recorded(build, written, trial)


def replay(
    home: Home,
    new: str,
    old: str,
    *,
    runs: int = DEFAULT_RUNS,
    force: bool = False,
    progress: Progress = lambda _: None,
) -> list[Trial]:
    """Every trial recorded on `old`, on `new`, in the same order with the same changes (a recipe read again from
    NEW's SGLang); stops after one that left NEW not put back or out of its noise."""
    old_build = home.build_of(old)
    done: list[Trial] = []
    earlier = ledger.read(old_build)
    if not earlier:
        raise EnvError(
            f"{old} has no trials to replay", f"try a change on it first: provision try {old} LABEL --env K=V"
        )
    # all, first
    kept = [{f.source: ledger.content(old_build, f) for f in trial.change.files} for trial in earlier]
    for trial, contents in zip(earlier, kept, strict=True):
        asked = Asked(
            env={} if trial.recipe else trial.change.env,
            args=() if trial.recipe else trial.change.args,
            files=[(f.path, f.source) for f in trial.change.files],
            contents=contents,
        )
        progress(f"replaying {trial.label} of {old} on {new}")
        done.append(
            try_(
                home,
                new,
                trial.label,
                asked,
                runs=runs,
                note=trial.note,
                force=force,
                recipe=trial.recipe,
                progress=progress,
            )
        )
        if not done[-1].restored or (
            done[-1].baseline_after is not None and not done[-1].baseline_after.within_noise
        ):
            break
    return done


def _files(venv: Path, site: Path, asked: Asked) -> tuple[list[trialfiles.Written], list[TrialFile]]:
    """Each --file read before anything runs (a wrong one is refused first); its content is kept for --replay with
    the trial's record (`_recorded`), never before: a trial refused or stopped keeps no copy."""
    written, files = [], []
    for given, source in asked.files:
        key = kept.key_of(venv, site, given)
        kept.location(venv, site, key)
        content = asked.contents.get(source)
        if content is None:
            try:
                content = regular.read_bytes(source, MAX_BYTES + 1)
            except OSError as exc:
                raise InputError(
                    f"--file {given}={source}: {source} cannot be read ({exc.strerror or exc})",
                    "give a regular file as SOURCE",
                ) from None
            if len(content) > MAX_BYTES:
                raise InputError(
                    f"--file {given}={source}: larger than {MAX_BYTES >> 20} MiB",
                    "try patches, not libraries",
                )
        written.append(trialfiles.Written(path=key, content=content))
        files.append(TrialFile(path=key, source=source, sha256=kept.sha256(content)))
    return written, files


def _recipe_fit(venv: Path, recipe: recipes.Recipe) -> recipes.Fit:
    from provision.commands import sglang_source
    from provision.machine import probe
    from provision.report.environments import installed

    return recipes.fit(
        recipe, sglang_source.read(venv), probe.probe(), installed(venv).get("flashinfer-python")
    )


def _checked(build: Path, record: EnvRecord, progress: Progress) -> EnvRecord:
    """The record, with its checks run first when they never ran (the baseline runs only after they pass)."""
    if record.check_results:
        return record
    from provision.checks import runner

    progress("running the checks first")
    return records.add_checks(build, runner.run(build, record, progress=progress), _now())


def _baseline(
    name: str, build: Path, record: EnvRecord, runs: int, progress: Progress
) -> tuple[list[float], bool]:
    """The figures of NAME's latest baseline series, run first (and stored) when it has fewer than `runs`; whether it was."""
    if record.baselines:
        last = record.baselines[-1]
        series = [r for r in record.baselines if r.series == last.series] if last.series else [last]
        figures = [r.figure for r in series if r.figure is not None]
        if len(figures) >= runs:
            return figures, False
    stamp = _now()
    figures = []
    for number in range(1, runs + 1):
        progress(f"{name} has no baseline of {runs} runs: running it first, run {number} of {runs}")
        run = dataclasses.replace(baselines.run(name, build, record, progress), series=stamp)
        records.add_baseline(build, run)
        figures.append(_figure(run))
    return figures, True


def _refuse_drifted(name: str, before: drift.Drift, paths: list[str]) -> None:
    """A file the trial writes must be as its known-good state says: else putting it back would not be exact."""
    for finding in before.findings:
        if finding.path in paths:
            raise EnvError(
                f"{name}: {finding.line()}: the file a trial would write differs from its known-good state already",
                f"put it back first (provision restore {name}), or keep it (provision accept {name} {finding.path})",
            )


def _with_change(record: EnvRecord, change: Change) -> EnvRecord:
    """The record the trial's runs see: its variables over the profile's, its arguments after the command."""
    spec = record.baseline or baselines.BUILTIN
    if change.args:
        spec = dataclasses.replace(spec, command=(*spec.command, *change.args))
    return dataclasses.replace(record, env={**record.env, **change.env}, baseline=spec)


def _after(name: str, build: Path, record: EnvRecord, base: list[float], progress: Progress) -> After:
    """One baseline run on NAME as put back: within its recorded noise (as `judge` takes noise: its distance from the
    baseline's median no larger than the baseline's range), or not."""
    progress(f"{name}: one more baseline run, which must fall within its noise")
    try:
        figure = _figure(baselines.run(name, build, record, progress))
    except EnvError as exc:
        return After(median=None, within_noise=False, error=exc.message)
    return After(median=figure, within_noise=baselines.covers(base, figure))


def _judged(trial: Trial, failure: BaselineFailed | None) -> Trial:
    """The verdict and its reason: failed (exit code and last line), else the one rule of judge()."""
    if failure is not None:
        code = "timed out" if failure.returncode is None else f"exit code {failure.returncode}"
        return dataclasses.replace(
            trial, verdict="failed", reason=f"{code}: {failure.last_line or failure.why}"
        )
    base, figures = trial.baseline.figures, trial.figure.figures
    verdict = judge(base, figures, "lower" if trial.better == "lower" else "higher")
    change = (
        round((statistics.median(figures) - statistics.median(base)) / statistics.median(base) * 100, 2)
        if base and figures and statistics.median(base)
        else None
    )
    shown = f"{change:+.1f}%" if change is not None else "-"  # as the ledger shows change_pct
    reason = {
        "better": f"{shown}, beyond the noise of both",
        "worse": f"{shown}, beyond the noise of both",
        "within-noise": f"{shown}: the spread covers it",
        "cannot-tell": f"{shown}: fewer than {baselines.MIN_RUNS} runs a side cannot tell noise from a change",
    }[verdict]
    return dataclasses.replace(trial, verdict=verdict, reason=reason, change_pct=change)


def _recorded(build: Path, written: Sequence[trialfiles.Written], trial: Trial) -> Trial:
    """`trial` added to the ledger, with the content of the files it wrote (for --replay); where the ledger cannot
    take it (a full disk, a ledger damaged meanwhile), the error carries what was measured: every run was paid for,
    and the venv is back."""
    trial = dataclasses.replace(trial, at=_now())
    try:
        ledger.add(build, trial, {kept.sha256(w.content): w.content for w in written})
    except (OSError, ProvisionError) as exc:
        why = exc.message if isinstance(exc, ProvisionError) else f"{exc.strerror or exc} ({exc.filename})"
        raise EnvError(
            f"the trial {trial.label!r} ended, {trial.verdict} ({trial.reason}; baseline {trial.baseline.figures}, "
            f"trial {trial.figure.figures}), but the ledger cannot keep it: {why}",
            f"{exc.hint + '; ' if isinstance(exc, ProvisionError) and exc.hint else ''}the venv is back as it was",
        ) from exc
    return trial


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _figure(run: BaselineRun) -> float:
    """A stored run's figure (baselines.run stores none without one: a run that printed none failed)."""
    return run.figure if run.figure is not None else float("nan")
