"""Baselines: the profile's benchmark run inside the environment once its checks passed, with the machine it ran on
(the caller stores the run: checks run and judge, envs/records.py writes); `compare` puts two environments' figures
side by side."""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from provision import proc
from provision.checks import dummy_model, payload_dir
from provision.checks import runner as check_runner
from provision.envs.records import EnvRecord
from provision.errors import EnvError
from provision.log import Progress, one_line
from provision.machine import probe
from provision.records import timings
from provision.records.allreduce_runs import AllreduceRun
from provision.records.results import (
    Baseline,
    BaselineRun,
    Better,
    DriftStamp,
    JSONObject,
    JSONValue,
    MachineStamp,
)

if TYPE_CHECKING:
    from provision.machine import nvml

BUILTIN = Baseline(
    command=("python", "{payloads}/baseline_builtin.py"),
    timeout=900.0,
    json_key="bf16_gemm_tflops",
    unit="TFLOP/s",
    better="higher",
)
# the printed document kept with a run in env.json: a figure and a few beside it fit in far less
DETAILS_CHARS = 64 << 10
PATTERN_SECONDS = 10.0  # a profile's pattern searching the kept output: a plain one takes milliseconds
# of each of a baseline's stdout and stderr, the last characters held: the figure is printed last
KEPT_OUTPUT = 8 << 20


def machine_fingerprint(reading: nvml.Reading) -> MachineStamp:
    names = sorted(g.name for g in reading.gpus)
    text = f"{len(names)} x {names[0]}" if names and len(set(names)) == 1 else ", ".join(names) or "no GPU"
    identity = json.dumps([reading.driver.version, [g.uuid for g in reading.gpus]])
    return MachineStamp(
        summary=f"{text}, driver {reading.driver.version or '-'}",
        id=hashlib.sha256(identity.encode()).hexdigest()[:12],
    )


def extract(spec: Baseline, stdout: str) -> tuple[float | str | None, dict[str, JSONValue] | None]:
    """The figure: the last match of the pattern's first group, or a (dotted) key of the last JSON object printed.
    What was printed there but is no float (`n/a`, an integer past a float's range) comes back as its text: the run
    fails naming it (run), never as provision's own error."""
    if spec.pattern:
        matches = _findall(spec.pattern, stdout)
        if not matches:
            return None, None
        last = matches[-1]
        return _number(last[0] if isinstance(last, tuple) else last), None
    for line in reversed(stdout.strip().splitlines()):
        if line.lstrip().startswith("{"):
            try:
                document = json.loads(line)
            except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past the recursion limit
                continue
            if not isinstance(document, dict):
                continue
            value: JSONValue = document
            for part in str(spec.json_key).split("."):
                value = value.get(part) if isinstance(value, dict) else None
            return (_number(value) if isinstance(value, (int, float)) else None), document
    return None, None


class _Late(Exception):
    """The pattern's search ran past PATTERN_SECONDS (raised from the timer's signal, which re checks as it matches)."""


def _findall(pattern: str, text: str) -> list[str | tuple[str, ...]]:
    """re.findall(pattern, text) within PATTERN_SECONDS: a profile's pattern that backtracks without end on this output
    (nested repeats such as `(a+)+$`) is an EnvError naming it, never a hang. Off the main thread there is no timer."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return re.findall(pattern, text)

    def late(_number: int, _frame: object) -> None:
        raise _Late

    previous = signal.signal(signal.SIGALRM, late)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, PATTERN_SECONDS)
            return re.findall(pattern, text)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Late:
        raise EnvError(
            f"the baseline pattern {pattern[:80]!r} took over {PATTERN_SECONDS:g} s to search {len(text)} "
            "characters of output: it backtracks without end (nested repeats such as (a+)+)",
            "make [baseline] pattern in the profile simpler (one group around the figure); nothing was "
            "stored",
        ) from None
    finally:
        signal.signal(signal.SIGALRM, previous)


def _number(value: str | float) -> float | str:
    try:
        return float(value)
    except (ValueError, OverflowError):
        return str(value)


def _details(document: dict[str, JSONValue] | None) -> JSONObject | None:
    """The printed document as env.json keeps it: a NaN beside the figure (a spread of 0/0) is null there, as --json
    shows it. One over DETAILS_CHARS as JSON (every request's latency, say) is not kept: env.json took it whole on every
    run, and every command that lists environments read it."""
    from provision.atomic import finite

    try:
        if document is not None and len(json.dumps(document, default=str)) > DETAILS_CHARS:
            return None
        kept = finite(document)
    except RecursionError:  # the figure beside a document nested hundreds deep: kept, the document not
        return None
    return kept if isinstance(kept, dict) else None


def ready(name: str, record: EnvRecord) -> nvml.Reading:
    """The GPUs a baseline of `name` runs on, once it may run: its checks passed, and a GPU read for the built-in one.
    Asked before the first of several runs is announced (`baseline --runs 3` said "run 1 of 3", then refused)."""
    failed = [r for r in record.check_results if r.failed]
    # the first one's reason said: a driver that does not answer is named here, not only in `check`
    if failed:
        raise EnvError(
            f"{name}: checks {', '.join(r.id for r in failed)} did not pass ({failed[0].id}: "
            f"{one_line(failed[0].reason)}); the baseline runs only after they do",
            f"see provision check {name}",
        )
    spec = record.baseline or BUILTIN
    # once: the built-in baseline needs a GPU, and every run is stamped with the machine
    reading = probe.gpu_reading()
    if spec is BUILTIN and not reading.gpus:
        start = reading.driver.nvml
        why = (
            f"NVML did not start: {start.reason}; {start.hint}"
            if start.state not in ("ok", "unknown")
            else "NVML found none"
        )
        raise EnvError(
            f"{name}: the built-in baseline times GPUs, and this machine has no NVIDIA GPU ({why})",
            "run it on the GPU machine, or give the profile a [baseline] command",
        )
    return reading


def run(
    name: str,
    build: Path,
    record: EnvRecord,
    progress: Progress = lambda _: None,
    reading: nvml.Reading | None = None,
) -> BaselineRun:
    """Run the profile's baseline (the built-in one without) in the environment; its checks must have passed
    (`reading`: what `ready` gave, else it is asked here)."""
    reading = reading or ready(name, record)
    spec = record.baseline or BUILTIN
    result_file = build / f".baseline-result.{os.getpid()}.jsonl"  # {result}: a fresh file each run
    _remove_stale_results(build)
    command = _filled(spec.command, build, len(reading.gpus), result_file)
    venv = record.venv_path(build)
    env = check_runner.environment(venv, record)
    progress("checking for drift")
    drifted = drift_status(venv, build, record)
    progress(f"running the baseline: {' '.join(command)}")
    start = time.perf_counter()
    result_file.unlink(missing_ok=True)
    try:
        done = proc.run(
            command,
            timeout=spec.timeout or 1800.0,
            env=env,
            cwd=Path(spec.cwd or "."),
            keep=KEPT_OUTPUT,
            group=True,
        )
        seconds = time.perf_counter() - start
        written, unread = (
            _result_text(result_file) if "{result}" in " ".join(spec.command) else (done.stdout, "")
        )
        figure, document = extract(spec, written)
    finally:
        result_file.unlink(missing_ok=True)
    if done.timed_out or not done.ok or not isinstance(figure, float) or not math.isfinite(figure):
        shown = (
            figure
            if isinstance(figure, float)
            else repr(figure if figure is None or len(figure) <= 40 else figure[:40] + "...")
        )
        why = (
            "timed out"
            if done.timed_out
            else f"exit code {done.returncode}"
            if not done.ok
            else f"no figure in its output{unread}"
            if figure is None
            # NaN or an infinity (0/0, x/0) measured nothing, and JSON has no such number: nothing is stored
            else f"its figure{' ' + spec.json_key if spec.json_key else ''} is {shown}, not a number"
        )
        raise BaselineFailed(
            f"{name}: the baseline failed ({why}): {done.tail(3)}",
            "run it by hand: provision run " + name + " -- " + " ".join(command),
            returncode=None if done.timed_out else done.returncode,
            why=why,
            last_line=_last_line(done.tail(20)),
        )
    return BaselineRun(
        figure=figure,
        unit=spec.unit,
        better=spec.better,
        at=_now(),
        machine=machine_fingerprint(reading),
        command=command,
        seconds=round(seconds, 2),
        exit_code=done.returncode,
        output_tail=done.tail(15),
        details=_details(document),
        drift=drifted,
    )


class BaselineFailed(EnvError):
    """A baseline run that failed: the command's exit code (None when it timed out), why, and the last line of its
    output (a traceback's `KeyError: 12`), for `try` to say beside its verdict."""

    def __init__(self, message: str, hint: str, *, returncode: int | None, why: str, last_line: str) -> None:
        super().__init__(message, hint)
        self.returncode, self.why, self.last_line = returncode, why, last_line


def _last_line(tail: str) -> str:
    """The last line of output that is not blank."""
    return next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")


def _remove_stale_results(build: Path) -> None:
    """The {result} files of baselines killed with -9 (their process gone): removed; a running one's is left alone."""
    import contextlib

    for left in build.glob(".baseline-result.*.jsonl"):
        pid = left.name.split(".")[2]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(OSError):
                left.unlink()


def _filled(command: tuple[str, ...], build: Path, gpus: int, result_file: Path) -> list[str]:
    """The command with its placeholders filled: {payloads} (provision's payload folder), {model} (provision's
    weight-free model folder, written into the build when named), {tp_size} (the TP size these GPUs allow: 1, 2, 4
    or 8) and {result} (a fresh file the command writes its JSON result to, read for json_key instead of stdout)."""
    values = {
        "{payloads}": str(payload_dir()),
        "{tp_size}": str(dummy_model.tp_size(gpus)),
        "{result}": str(result_file),
    }
    if any("{model}" in part for part in command):
        values["{model}"] = str(dummy_model.write(build / "dummy-model"))
    filled = []
    for part in command:
        for placeholder, value in values.items():
            part = part.replace(placeholder, value)
        filled.append(part)
    return filled


def _result_text(path: Path) -> tuple[str, str]:
    """What the command wrote to {result} (its last 8 M characters, as of its output), or nothing; and, when what the
    command left there is no regular file, why it was not read. The path is the command's to make: a FIFO there hung
    the read, a link to /dev/zero read without end, a link elsewhere passed off another file: none is opened."""
    from provision import regular

    try:
        with regular.open_file(path, follow=False) as written:
            size = os.fstat(written.fileno()).st_size
            written.seek(max(0, size - KEPT_OUTPUT))
            return written.read(KEPT_OUTPUT).decode("utf-8", "replace"), ""
    except OSError as exc:
        if regular.refusal(exc):
            return "", f" ({path.name} is not a regular file: a link, a FIFO or a device, not read)"
        return "", ""


def drift_status(venv: Path, build: Path, record: EnvRecord) -> DriftStamp:
    """What the baseline ran on: the drift check's status, counts and first findings (kept with the figure)."""
    from provision.envs import drift

    found = drift.scan_env(venv, build, record)
    return DriftStamp(
        status=found.status,
        summary=found.summary(),
        counts=found.counts(),
        findings=[f.line() for f in found.findings[:20]],
    )


Verdict = Literal["better", "worse", "within-noise", "cannot-tell"]
MIN_RUNS = 3  # fewer runs a side cannot tell noise from a change: one run each read -58% for identical stacks


def covers(series: list[float], figure: float, spread: float = 0.0) -> bool:
    """Whether `figure` is within the noise of `series`: its distance from the series' median is no larger than the
    wider of the series' own range (min to max) and `spread` (the other side's range, when a series is compared). One
    run after a trial (`try`) is judged by it as two series are (`judge`): a band of 3 runs 1.2 TFLOP/s wide on an H100
    read a run 0.1 above its max as "not back" (docs/evidence/h100-2026-12-06-final-try/)."""
    import statistics

    return abs(figure - statistics.median(series)) <= max(max(series) - min(series), spread)


def judge(first: list[float], second: list[float], better: Better) -> Verdict:
    """The one rule `compare`, `upgrade` and `try` judge two series by: cannot-tell with fewer than MIN_RUNS figures a
    side; within-noise when the spread covers the difference of the medians (it is no larger than the wider of the two
    ranges, min to max; two ranges that meet always are); else better or worse, by the medians and which way is better.
    Ranges that merely meet were the rule until two copies of one venv on an H100 read -0.5% with ranges 0.25 TFLOP/s
    apart, and an upgrade to the same stack was kept (docs/evidence/h100-2026-12-06-final-upgrade/)."""
    import statistics

    if len(first) < MIN_RUNS or len(second) < MIN_RUNS:
        return "cannot-tell"
    if covers(first, statistics.median(second), max(second) - min(second)) or (
        max(first) >= min(second) and max(second) >= min(first)
    ):
        return "within-noise"
    higher = statistics.median(second) > statistics.median(first)
    return "better" if higher == (better == "higher") else "worse"


@dataclass(frozen=True, kw_only=True)
class Compared:
    """One side of `compare`: an environment's latest baseline call, its median and spread."""

    name: str
    unit: str
    better: Better
    at: str
    machine: str  # the stamp's summary
    runs: int  # every run stored, not only those compared
    figures: list[float]  # the runs compared: every run of the last `baseline --runs N`, else the last run
    multi_gpu_allreduce: AllreduceRun | None
    drift: DriftStamp | None

    @property
    def median(self) -> float | None:
        return timings.summary(self.figures)["median"]

    def to_dict(self) -> dict[str, object]:
        # in the order docs/json.md gives them; `runs` here is every run stored
        spread = timings.summary(self.figures)
        return {
            "name": self.name,
            "figure": spread["median"],
            "median": spread["median"],
            "min": spread["min"],
            "max": spread["max"],
            "figures": self.figures,
            "unit": self.unit,
            "better": self.better,
            "at": self.at,
            "machine": self.machine,
            "runs": self.runs,
            "multi_gpu_allreduce": self.multi_gpu_allreduce.to_dict() if self.multi_gpu_allreduce else None,
            "drift": self.drift.to_dict() if self.drift else None,
        }


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Two environments' baselines side by side: the change between the medians, and whether the spreads cover it."""

    first: Compared
    second: Compared

    @property
    def change(self) -> float | None:
        """The second median against the first, in percent (None without both)."""
        a, b = self.first.median, self.second.median
        return (b - a) / a * 100 if a and b is not None else None

    @property
    def change_percent(self) -> float | None:
        return round(self.change, 2) if self.change is not None else None

    @property
    def verdict(self) -> Verdict:
        """better, worse, within-noise, or cannot-tell (fewer than MIN_RUNS runs a side, or a side without figures)."""
        return judge(self.first.figures, self.second.figures, self.first.better)

    @property
    def improved(self) -> bool | None:
        """True when the second side is better beyond noise; None when it cannot be told."""
        verdict = self.verdict
        return None if verdict == "cannot-tell" else verdict == "better"

    @property
    def within_noise(self) -> bool | None:
        """Whether the two series' ranges (min to max) meet; None when it cannot be told."""
        return None if self.verdict == "cannot-tell" else self.verdict == "within-noise"

    @property
    def same_machine(self) -> bool:
        return self.first.machine == self.second.machine

    @property
    def drifted(self) -> list[str]:
        """The sides whose baseline ran on a drifted environment."""
        return [
            side.name for side in (self.first, self.second) if side.drift is not None and side.drift.drifted
        ]

    def to_dict(self) -> dict[str, object]:
        return {
            "environments": [self.first.to_dict(), self.second.to_dict()],
            "change_percent": self.change_percent,
            "verdict": self.verdict,
            "improved": self.improved,
            "within_noise": self.within_noise,
            "same_machine": self.same_machine,
            "drifted": self.drifted,
        }


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
