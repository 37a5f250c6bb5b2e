"""The trials ledger of an environment (`provision try` writes it, `provision trials` reads it): BUILD/trials.json
beside env.json, one record per trial in the order they ran, typed here, written atomically under a lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from provision.atomic import write_atomic, write_json
from provision.envs.recordfile import (
    SCHEMA_VERSION,
    Fields,
    JSONObject,
    RecordError,
    fix_hint,
    load,
    lock_file,
)
from provision.records import timings

LEDGER = "trials.json"
FILES = "trial-files"  # in the build folder: FILES/<sha256>, each --file's content, so that --replay writes it again

Verdict = Literal["better", "worse", "within-noise", "cannot-tell", "failed", "not-applicable"]
VERDICTS: tuple[Verdict, ...] = ("better", "worse", "within-noise", "cannot-tell", "failed", "not-applicable")


@dataclass(frozen=True, kw_only=True)
class TrialFile:
    """A file a trial wrote over the venv: its path (relative to site-packages), where it came from, its sha256."""

    path: str
    source: str
    sha256: str

    def to_dict(self) -> JSONObject:
        return {"path": self.path, "source": self.source, "sha256": self.sha256}


@dataclass(frozen=True, kw_only=True)
class Change:
    """What a trial changed, for its runs only: variables, arguments appended to the baseline command, files."""

    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    files: list[TrialFile] = field(default_factory=list)

    def to_dict(self) -> JSONObject:
        return {"env": dict(self.env), "args": list(self.args), "files": [f.to_dict() for f in self.files]}

    def text(self) -> str:
        """One line for a table: K=V, the arguments, PATH (file)."""
        parts = (
            [f"{k}={v}" for k, v in self.env.items()]
            + list(self.args)
            + [f"{f.path} (file)" for f in self.files]
        )
        return " ".join(parts) or "-"


@dataclass(frozen=True, kw_only=True)
class Series:
    """Figures of one side: their median and spread (all None without figures)."""

    figures: list[float] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return timings.summary(self.figures)["median"]

    def to_dict(self) -> JSONObject:
        return dict(timings.summary(self.figures))


@dataclass(frozen=True, kw_only=True)
class After:
    """The one baseline run after the trial was put back, and whether it fell within the baseline's noise."""

    median: float | None
    within_noise: bool
    error: str | None = None

    def to_dict(self) -> JSONObject:
        return {"median": self.median, "within_noise": self.within_noise, "error": self.error}


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One trial of a change on an environment, judged against its baseline."""

    name: str
    label: str
    change: Change
    verdict: Verdict
    reason: str
    figure: Series
    baseline: Series
    change_pct: float | None = None
    restored: bool = True
    baseline_after: After | None = None
    baseline_ran_first: bool = False
    recipe: str | None = None
    note: str | None = None
    unit: str = ""
    better: str = "higher"
    at: str = ""

    def to_dict(self) -> JSONObject:
        return {
            "name": self.name,
            "label": self.label,
            "change": self.change.to_dict(),
            "verdict": self.verdict,
            "reason": self.reason,
            "figure": self.figure.to_dict(),
            "baseline": {**self.baseline.to_dict(), "ran_first": self.baseline_ran_first},
            "change_pct": self.change_pct,
            "restored": self.restored,
            "baseline_after": self.baseline_after.to_dict() if self.baseline_after else None,
            "recipe": self.recipe,
            "note": self.note,
            "unit": self.unit,
            "better": self.better,
            "at": self.at,
        }

    @classmethod
    def parse(cls, fields: Fields) -> Trial:
        change = Fields(fields.path, fields.mapping("change") or {}, f"{fields.where}.change")
        env = change.mapping("env") or {}
        files = [
            TrialFile(path=f.text("path") or "", source=f.text("source") or "", sha256=f.text("sha256") or "")
            for f in change.objects("files")
        ]
        verdict = fields.text("verdict")
        if verdict not in VERDICTS or not all(isinstance(v, str) for v in env.values()):
            raise RecordError(
                f"{fields.path}: {fields.where} has verdict {verdict!r} or a variable that is no string",
                fix_hint(fields.path),
            )
        after = fields.mapping("baseline_after")
        return cls(
            name=fields.text("name") or "",
            label=fields.text("label") or "",
            change=Change(env=dict(env), args=change.strings("args"), files=files),
            verdict=verdict,
            reason=fields.text("reason") or "",
            figure=_series(fields, "figure"),
            baseline=_series(fields, "baseline"),
            change_pct=fields.number("change_pct"),
            restored=fields.flag("restored"),
            baseline_after=None
            if after is None
            else After(
                median=_number(after.get("median")),
                within_noise=after.get("within_noise") is True,
                error=after.get("error") if isinstance(after.get("error"), str) else None,
            ),
            baseline_ran_first=(fields.mapping("baseline") or {}).get("ran_first") is True,
            recipe=fields.text("recipe"),
            note=fields.text("note"),
            unit=fields.text("unit") or "",
            better=fields.text("better") or "higher",
            at=fields.text("at") or "",
        )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _series(fields: Fields, key: str) -> Series:
    side = Fields(fields.path, fields.mapping(key) or {}, f"{fields.where}.{key}")
    values = side.data.get("figures") or []
    return Series(
        figures=[float(v) for v in values if _number(v) is not None] if isinstance(values, list) else []
    )


def content(build: Path, file: TrialFile) -> bytes:
    """The content `file` wrote, as kept in the build folder (FILES/<sha256>): a regular file (never through a link)
    whose sha256 is the ledger's; else an EnvError naming it (an edited copy was replayed as what was tried)."""
    import hashlib
    import re

    from provision import regular
    from provision.errors import EnvError
    from provision.stacks.profile_files import MAX_BYTES

    copy = build / FILES / file.sha256
    try:
        if not re.fullmatch(r"[0-9a-f]{64}", file.sha256):
            raise ValueError(f"its sha256 {file.sha256[:80]!r} is no sha256")
        data = regular.read_bytes(copy, MAX_BYTES + 1, follow=False)
        if hashlib.sha256(data).hexdigest() != file.sha256:
            raise ValueError("its content is not that sha256 any more: changed since the trial")
    except (OSError, ValueError) as exc:
        why = exc if isinstance(exc, ValueError) else f"it cannot be read: {exc.strerror or exc}"
        raise EnvError(
            f"{copy}: the kept copy of {file.path} is not what the trial wrote ({why})",
            "try the file again from its source: provision try NAME LABEL --file PATH=SOURCE",
        ) from None
    return data


def read(build: Path) -> list[Trial]:
    """Every trial recorded on the environment built in `build`, oldest first (none without a ledger)."""
    path = build / LEDGER
    data = load(path)
    if data is None:
        return []
    fields = Fields(path, data)
    fields.version()
    return [Trial.parse(item) for item in fields.objects("trials")]


def add(build: Path, trial: Trial, contents: Mapping[str, bytes] | None = None) -> None:
    """Append `trial` to the ledger, re-read under its lock: two trials ending at once both keep theirs. The content
    of each file the trial wrote (`contents`, by sha256) is kept first (FILES/<sha256>, for --replay), and only
    with it: a copy made here goes again when the ledger cannot take the trial, so that no copy stays that no trial
    names (one an earlier trial kept stays, whatever happens)."""
    with os.fdopen(lock_file(build / f".{LEDGER}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder_made = not os.path.lexists(build / FILES)
        made: list[Path] = []
        try:
            for digest, data in (contents or {}).items():
                copy = build / FILES / digest
                if not os.path.lexists(copy):
                    made.append(copy)
                # written again where it was: an edited copy is mended
                write_atomic(copy, data, 0o644)
            trials = read(build)
            write_json(
                build / LEDGER,
                {"schema_version": SCHEMA_VERSION, "trials": [t.to_dict() for t in [*trials, trial]]},
            )
        except BaseException:
            for copy in made:
                copy.unlink(missing_ok=True)
            if folder_made:
                with contextlib.suppress(OSError):
                    (build / FILES).rmdir()
            raise
