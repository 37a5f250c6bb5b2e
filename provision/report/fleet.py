"""The fleet summary of `provision report`: per target, how many machines pass, and the failures grouped by cause.

A cause is one stack gate's id, status and exact reason: ten machines on the same old driver read as one line with
ten names; a machine that fails for two reasons is named under both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from provision.report.gates import MachineReport, Target
from provision.status import Status

VERDICTS = ("pass", "warn", "fail", "skip")


@dataclass(frozen=True, kw_only=True)
class Cause:
    status: Status  # "fail" or "warn"
    gate: str  # the stack gate's id
    reason: str
    machines: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "gate": self.gate,
            "reason": self.reason,
            "machines": list(self.machines),
        }


@dataclass(frozen=True, kw_only=True)
class TargetSummary:
    kind: str
    name: str
    cuda: str
    machines: dict[str, tuple[str, ...]]  # verdict -> machine sources, in the order given
    causes: tuple[Cause, ...] = ()

    def count(self, verdict: str) -> int:
        return len(self.machines.get(verdict, ()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "cuda": self.cuda,
            **{v: self.count(v) for v in VERDICTS},
            "machines": {v: list(self.machines.get(v, ())) for v in VERDICTS},
            "causes": [c.to_dict() for c in self.causes],
        }


@dataclass(frozen=True, kw_only=True)
class FleetSummary:
    machines: int
    targets: tuple[TargetSummary, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"machines": self.machines, "targets": [t.to_dict() for t in self.targets]}


def summarize(reports: Sequence[MachineReport]) -> FleetSummary:
    """Return the summary over every machine: targets in the order first met, machines in the order given."""
    order: list[tuple[str, str]] = []
    found: dict[tuple[str, str], list[tuple[str, Target]]] = {}
    for report in reports:
        for target in report.targets:
            key = (target.kind, target.name)
            if key not in found:
                order.append(key)
                found[key] = []
            found[key].append((report.facts.source, target))
    summaries = []
    for key in order:
        rows = found[key]
        machines: dict[str, list[str]] = {}
        grouped: dict[tuple[Status, str, str], list[str]] = {}
        for source, target in rows:
            machines.setdefault(target.verdict, []).append(source)
            for gate in target.gates:
                if gate.kind == "stack" and gate.status in ("fail", "warn"):
                    grouped.setdefault((gate.status, gate.id, gate.reason), []).append(source)
        # stable: gate order within a count
        causes = sorted(
            (Cause(status=s, gate=g, reason=r, machines=tuple(m)) for (s, g, r), m in grouped.items()),
            key=lambda c: (c.status != "fail", -len(c.machines)),
        )
        first = rows[0][1]
        summaries.append(
            TargetSummary(
                kind=first.kind,
                name=first.name,
                cuda=first.cuda,
                machines={v: tuple(m) for v, m in machines.items()},
                causes=tuple(causes),
            )
        )
    return FleetSummary(machines=len(reports), targets=tuple(summaries))
