"""What checks and measurements answer, typed: a check's result, the machine a figure was measured on, the drift a
baseline ran on, and a baseline run. A payload's JSON answer, or a record read back from env.json, becomes one of
these in one place (a `parse` classmethod checks each key's type there, pypa/packaging's pylock.py is the model);
nothing after it reads a dict. `to_dict()` writes the JSON that env.json and `--json` carry, key for key.

Data only, like the check registry beside it: it imports nothing of provision but the statuses, so that envs/records.py
(which stores these) and envs/drift.py (whose check answers one) can read it from below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from provision import status as statuses

# the readers every record shares, read from here by the records' users too (explicit re-exports)
from provision.records.reader import DRIFT_KINDS as DRIFT_KINDS
from provision.records.reader import Better as Better
from provision.records.reader import JSONObject as JSONObject
from provision.records.reader import JSONValue as JSONValue
from provision.records.reader import MalformedResult as MalformedResult
from provision.records.reader import Reader as Reader
from provision.records.reader import drift_counts as drift_counts
from provision.records.reader import written as written

# a profile's [baseline], in a module of its own (a profile is read before uv runs, these results are not needed then)
from provision.records.recipe import Baseline as Baseline
from provision.status import Status

if TYPE_CHECKING:  # records/details.py reads with the Reader; loaded where a result has details
    from provision.records.details import Details


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """One check's verdict: what its payload answered (status, reason, details), and the runner's id, title, time."""

    id: str
    title: str = ""
    status: Status
    reason: str = ""
    details: Details | None = (
        None  # the check's own findings, typed per check (records/details.py); None: none
    )
    output_tail: str | None = None  # the last lines a failed or crashed payload printed
    seconds: float = 0.0
    extra: JSONObject = field(default_factory=dict)  # keys this version does not know, kept as they were
    absent: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    # written for every result; one an older record lacked stays out of it
    ALWAYS: ClassVar[tuple[str, ...]] = (
        "title",
        "reason",
        "seconds",
    )

    @property
    def failed(self) -> bool:
        """FAIL or ERROR: what stops an environment from becoming active."""
        return statuses.failed(self.status)

    @classmethod
    def parse(cls, fields: Reader) -> CheckResult:
        """A stored result (env.json): id and status required."""
        id = fields.text("id", required=True) or ""
        return cls(
            id=id,
            title=fields.text("title") or "",
            status=fields.status(),
            reason=fields.text("reason") or "",
            details=_details(id, fields),
            output_tail=fields.text("output_tail"),
            seconds=fields.number("seconds") or 0.0,
            extra=fields.rest(KNOWN_CHECK_KEYS),
            absent=fields.absent(cls.ALWAYS),
        )

    @classmethod
    def answer(cls, id: str, title: str, data: object) -> CheckResult:
        """A payload's answer, the last JSON line it printed ({"status", "reason", "details"}), as check `id`'s result."""
        fields = Reader(data)
        return cls(
            id=id,
            title=title,
            status=fields.status(),
            reason=fields.text("reason") or "",
            details=_details(id, fields),
            output_tail=fields.text("output_tail"),
            extra=fields.rest(KNOWN_CHECK_KEYS),
        )

    def to_dict(self) -> JSONObject:
        document: JSONObject = {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
        }
        if self.details is not None:
            document["details"] = self.details.to_json()
        if self.output_tail is not None:
            document["output_tail"] = self.output_tail
        return written({**document, **self.extra, "seconds": self.seconds}, self.absent)


def _details(check_id: str, fields: Reader) -> Details | None:
    """The result's details, typed for its check: a key of the wrong type is a MalformedResult naming it."""
    found = fields.mapping("details")
    if found is None:
        return None
    from provision.records import details

    return details.parse(check_id, Reader(found, fields.name("details")))


KNOWN_CHECK_KEYS = {"id", "title", "status", "reason", "details", "output_tail", "seconds"}


def overall(results: list[CheckResult]) -> Status:
    """The worst status of `results` (provision/status.py), SKIP for none."""
    return statuses.worst(r.status for r in results) or "skip"


@dataclass(frozen=True, kw_only=True)
class MachineStamp:
    """The machine a figure was measured on: "8 x NVIDIA H200, driver 580.95.05" and a hash of its driver and GPUs."""

    summary: str
    id: str

    @classmethod
    def parse(cls, fields: Reader) -> MachineStamp:
        # read leniently: a stamp is for people, and one from an older provision may lack either key
        return cls(summary=str(fields.data.get("summary", "?")), id=str(fields.data.get("id", "")))

    def to_dict(self) -> JSONObject:
        return {"summary": self.summary, "id": self.id}


# What the drift check finds (envs/drift.py), in the order `counts` is written wherever it appears (docs/json.md)
@dataclass(frozen=True, kw_only=True)
class DriftStamp:
    """The drift check just before a baseline: its status, summary, counts and first findings as lines."""

    status: Status
    summary: str
    counts: dict[str, int]
    findings: list[str]

    @property
    def drifted(self) -> bool:
        return self.status != "pass"

    @classmethod
    def parse(cls, fields: Reader) -> DriftStamp:
        return cls(
            status=fields.status(),
            summary=fields.text("summary") or "",
            counts=drift_counts(fields) or {},
            findings=fields.strings("findings") or [],
        )

    def to_dict(self) -> JSONObject:
        return {
            "status": self.status,
            "summary": self.summary,
            "counts": self.counts,
            "findings": self.findings,
        }


@dataclass(frozen=True, kw_only=True)
class BaselineRun:
    """One run of the profile's baseline: its figure and the machine it ran on."""

    figure: float | None
    unit: str
    better: Better
    at: str
    machine: MachineStamp
    command: list[str]
    seconds: float
    exit_code: int
    output_tail: str
    details: JSONObject | None = None  # the last JSON object the baseline printed, where its figure came from
    drift: DriftStamp | None = None  # the drift check just before it
    series: str | None = None  # runs of one `baseline --runs N` share it: compare takes them together

    @classmethod
    def parse(cls, fields: Reader) -> BaselineRun:
        machine, drift = fields.mapping("machine"), fields.mapping("drift")
        said = fields.text("better") or "higher"
        if said not in ("higher", "lower"):
            raise MalformedResult(f"key {fields.name('better')!r} is {said!r}, expected higher or lower")
        better: Better = "lower" if said == "lower" else "higher"
        return cls(
            figure=fields.number("figure"),
            unit=fields.text("unit") or "",
            better=better,
            at=fields.text("at") or "",
            machine=MachineStamp.parse(Reader(machine or {}, fields.name("machine"))),
            command=fields.strings("command") or [],
            seconds=fields.number("seconds") or 0.0,
            exit_code=fields.integer("exit_code") or 0,
            output_tail=fields.text("output_tail") or "",
            details=fields.mapping("details"),
            series=fields.text("series"),
            drift=DriftStamp.parse(Reader(drift, fields.name("drift"))) if drift is not None else None,
        )

    def to_dict(self) -> JSONObject:
        document: JSONObject = {
            "figure": self.figure,
            "unit": self.unit,
            "better": self.better,
            "at": self.at,
            "machine": self.machine.to_dict(),
            "command": self.command,
            "seconds": self.seconds,
            "exit_code": self.exit_code,
            "output_tail": self.output_tail,
            "details": self.details,
        }
        if self.drift is not None:  # a run from before drift was kept: rewritten as it was
            document["drift"] = self.drift.to_dict()
        if self.series is not None:  # a single run, or one from before --runs
            document["series"] = self.series
        return document
