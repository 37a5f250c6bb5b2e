"""The record of one `provision upgrade`, typed: its settings, each finished step, both sides' figures and the decision.
One reader and one writer (atomic writes): the upgrade writes it after every step, `--resume` reads it to go on, `envs`
and `report --env` show it.

Until the new environment is built it waits in HOME/upgrades/NAME.json; from then on it is kept with the build, as
BUILD/upgrade.json, and goes wherever the build goes (remove takes it with the environment)."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from provision.atomic import write_json
from provision.errors import EnvError
from provision.records import timings

UPGRADE_FILE = "upgrade.json"
SCHEMA_VERSION = 1
STEPS = ("gates", "lock", "lock-report", "create", "checks", "baseline", "decide")
StepStatus = Literal["pass", "fail", "skip", "error"]
Decision = Literal["activated", "kept"]
MAX_BYTES = 1 << 20  # a record is a few kilobytes: a larger file is not one
MAX_RUNS = 1000  # --runs: baseline runs a side (a record asking more is damaged: 10**9 ran without end)
MAX_SLOWDOWN = 1000.0  # --max-slowdown, percent (a record's Infinity let any slower stack through)
VERDICTS = ("better", "worse", "within-noise", "cannot-tell")


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """One step as it ended: pass or skip (finished), fail (the upgrade stops, kept), error (not finished: --resume
    runs it again)."""

    step: str
    status: StepStatus
    seconds: float
    result: str

    def to_dict(self) -> dict[str, object]:
        return {
            "step": self.step,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "result": self.result,
        }

    @property
    def finished(self) -> bool:
        return self.status in ("pass", "skip")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What the upgrade was asked, kept so that --resume goes on by the same rule."""

    profile: str | None  # a name or a path; None for --to-env
    from_env: str
    to_env: str
    built: bool  # --to-env: the new environment existed before
    lock: str | None  # --lock, or the lock the lock step made
    runs: int
    max_slowdown: float  # percent
    baseline_from: str | None
    activate: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "profile": self.profile,
            "from": self.from_env,
            "to": self.to_env,
            "built": self.built,
            "lock": self.lock,
            "runs": self.runs,
            "max_slowdown": self.max_slowdown,
            "baseline_from": self.baseline_from,
            "activate": self.activate,
        }


@dataclass(frozen=True, kw_only=True)
class Side:
    """One environment's figures of the baseline step."""

    name: str
    figures: tuple[float, ...]

    @property
    def median(self) -> float | None:
        return timings.summary(self.figures)["median"]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, **timings.summary(self.figures)}


@dataclass(frozen=True, kw_only=True)
class Measured:
    """The baseline step: the command both sides ran, its unit, and each side's figures, interleaved old, new."""

    command: tuple[str, ...]
    unit: str
    better: Literal["higher", "lower"]
    series: str
    old: Side
    new: Side
    verdict: str  # checks/baseline.py judge(): better, worse, within-noise, cannot-tell

    @property
    def change(self) -> float | None:
        """The new median against the old one, as a fraction (0.05 is 5 % higher)."""
        a, b = self.old.median, self.new.median
        return (b - a) / a if a and b is not None else None

    def to_dict(self) -> dict[str, object]:
        change = self.change
        return {
            "from": self.old.to_dict(),
            "to": self.new.to_dict(),
            "change": round(change, 6) if change is not None else None,
            "within_noise": None if self.verdict == "cannot-tell" else self.verdict == "within-noise",
            "verdict": self.verdict,
            "unit": self.unit,
            "better": self.better,
            "command": list(self.command),
            "series": self.series,
        }


@dataclass(frozen=True, kw_only=True)
class UpgradeRecord:
    """The upgrade's record: settings, steps in order, figures, and (once decided) the decision, why, and its undo."""

    settings: Settings
    started: str
    steps: tuple[StepRecord, ...] = ()
    baseline: Measured | None = None
    decision: Decision | None = None  # None while unfinished
    reason: str = ""
    undo: str | None = None
    finished: str | None = None

    @property
    def done(self) -> bool:
        return self.decision is not None

    def finished_steps(self) -> set[str]:
        return {s.step for s in self.steps if s.finished}

    def last_finished(self) -> str | None:
        return next((s.step for s in reversed(self.steps) if s.finished), None)

    def with_step(self, step: StepRecord) -> UpgradeRecord:
        """This record with `step` in place of any earlier try of the same step."""
        return replace(self, steps=(*(s for s in self.steps if s.step != step.step), step))

    def to_dict(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "from": self.settings.from_env,
            "to": self.settings.to_env,
            "decision": self.decision,
            "reason": self.reason,
            "steps": [s.to_dict() for s in self.steps],
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "undo": self.undo,
            "started": self.started,
            "finished": self.finished,
            "settings": self.settings.to_dict(),
        }

    def summary(self) -> dict[str, object]:
        """What `envs --json` shows of it (docs/json.md)."""
        return {
            "from": self.settings.from_env,
            "decision": self.decision,
            "reason": self.reason,
            "undo": self.undo,
            "last_step": self.last_finished(),
            "started": self.started,
            "finished": self.finished,
        }


@contextlib.contextmanager
def running(root: Path, name: str) -> Iterator[None]:
    """Hold the upgrade to `name` for this process: a second one (a --resume while the first still runs) is refused."""
    from provision.envs import links
    from provision.envs.recordfile import lock_file

    folder = root / "upgrades"
    with links.writing(str(root), "make its upgrades folder"):
        folder.mkdir(parents=True, exist_ok=True)
        handle = os.fdopen(lock_file(folder / f".{name}.lock"), "r+")

    def busy(pid: str) -> None:
        raise EnvError(
            f"an upgrade to {name} is running (pid {pid})",
            "wait for it to end; --resume goes on if it was stopped",
        )

    with links.holding(handle, busy):
        yield


def pending_path(root: Path, name: str) -> Path:
    """Where the record waits until the new environment is built."""
    return root / "upgrades" / f"{name}.json"


def read(path: Path) -> UpgradeRecord | None:
    """The record at `path`; None when there is none. A damaged one is an EnvError naming it."""
    from provision import regular

    try:
        data = json.loads(regular.read_bytes(path, MAX_BYTES))
        return _parse(data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise EnvError(
            f"{path}: not an upgrade record ({type(exc).__name__}: {exc})",
            f"move it aside (mv {path} {path}.damaged) and run the upgrade again",
        ) from None


def write(path: Path, record: UpgradeRecord) -> None:
    """Write the record atomically: a reader (a --resume after kill -9) sees the old one or the new one."""
    os.makedirs(path.parent, exist_ok=True)
    write_json(path, record.to_dict())


def _parse(data: dict[str, object]) -> UpgradeRecord:
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"schema_version is {data.get('schema_version') if isinstance(data, dict) else None!r}, expected 1"
        )
    s = _mapping(data, "settings")
    runs, max_slowdown = s["runs"], s["max_slowdown"]
    if not isinstance(runs, int) or isinstance(runs, bool) or not 3 <= runs <= MAX_RUNS:
        raise ValueError(f"settings.runs is {runs!r}, not 3 to {MAX_RUNS}")
    if (
        not isinstance(max_slowdown, (int, float))
        or isinstance(max_slowdown, bool)
        or not 0 <= max_slowdown <= MAX_SLOWDOWN
    ):
        raise ValueError(f"settings.max_slowdown is {max_slowdown!r}, not 0 to {MAX_SLOWDOWN:g}")
    settings = Settings(
        profile=_text(s, "profile"),
        from_env=str(s["from"]),
        to_env=str(s["to"]),
        built=bool(s["built"]),
        lock=_text(s, "lock"),
        runs=runs,
        max_slowdown=float(max_slowdown),
        baseline_from=_text(s, "baseline_from"),
        activate=bool(s["activate"]),
    )
    steps = []
    for item in data.get("steps") or []:  # type: ignore[attr-defined]
        if item["step"] not in STEPS or item["status"] not in ("pass", "fail", "skip", "error"):
            raise ValueError(f"a step {item['step']!r} of status {item['status']!r}")
        steps.append(
            StepRecord(
                step=item["step"],
                status=item["status"],
                seconds=float(item["seconds"]),
                result=str(item["result"]),
            )
        )
    measured = None
    if data.get("baseline") is not None:
        b = _mapping(data, "baseline")
        sides = [_mapping(b, key) for key in ("from", "to")]
        better: Literal["higher", "lower"] = "lower" if b.get("better") == "lower" else "higher"
        figures = [tuple(map(float, side["figures"])) for side in sides]  # type: ignore[call-overload]
        if b.get("verdict") not in VERDICTS or not all(map(math.isfinite, figures[0] + figures[1])):
            raise ValueError(f"baseline verdict {b.get('verdict')!r} with figures {figures}")
        measured = Measured(
            command=tuple(map(str, b["command"])),  # type: ignore[call-overload]
            unit=str(b["unit"]),
            better=better,
            series=str(b["series"]),
            verdict=str(b["verdict"]),
            old=Side(name=str(sides[0]["name"]), figures=figures[0]),
            new=Side(name=str(sides[1]["name"]), figures=figures[1]),
        )
    if measured is None and any(step.step == "baseline" and step.finished for step in steps):
        raise ValueError("the baseline step finished, and its figures are missing")
    decision = data.get("decision")
    if decision not in (None, "activated", "kept"):
        raise ValueError(f"decision {decision!r}")
    return UpgradeRecord(
        settings=settings,
        started=str(data["started"]),
        steps=tuple(steps),
        baseline=measured,
        decision=decision,
        reason=str(data.get("reason") or ""),
        undo=_text(data, "undo"),
        finished=_text(data, "finished"),
    )


def _mapping(data: dict[str, object], key: str) -> dict[str, object]:
    value = data[key]
    if not isinstance(value, dict):
        raise TypeError(f"key {key!r} is not an object")
    return value


def _text(data: dict[str, object], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(value)


@dataclass(frozen=True, kw_only=True)
class Found:
    """An upgrade's record and where it is kept."""

    path: Path
    record: UpgradeRecord = field(compare=False)


def find(root: Path, name: str, build: Path | None) -> Found | None:
    """The record of the upgrade to `name`: the one kept with its build, else the one waiting in HOME/upgrades."""
    for path in ([build / UPGRADE_FILE] if build is not None else []) + [pending_path(root, name)]:
        record = read(path)
        if record is not None and record.settings.to_env == name:
            return Found(path=path, record=record)
    return None
