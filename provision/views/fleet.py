"""The fleet summary drawn before the per-machine report: a table (or Markdown) of verdict counts per target, then
each failure and warning once per identical cause, with the machines that share it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.report.fleet import VERDICTS
from provision.views.render import Block, Line, TableBuilder

if TYPE_CHECKING:
    from provision.report.fleet import Cause, FleetSummary

MAX_NAMES = 8  # a cause shared by 200 machines names the first few and counts the rest


def _names(machines: tuple[str, ...]) -> str:
    shown = ", ".join(machines[:MAX_NAMES])
    return shown + (f" and {len(machines) - MAX_NAMES} more" if len(machines) > MAX_NAMES else "")


def _cause(cause: Cause) -> str:
    count = len(cause.machines)
    return f"{cause.status.upper()} on {count} machine{'s' if count != 1 else ''} ({_names(cause.machines)}): {cause.gate}: {cause.reason}"


def blocks(summary: FleetSummary) -> list[Block]:
    counts = TableBuilder(
        f"Fleet: {summary.machines} machines", "target", "CUDA", "pass", "warn", "fail", "skip"
    )
    for t in summary.targets:
        counts.add(f"{t.kind} {t.name}", t.cuda, *(str(t.count(v)) for v in VERDICTS))
    causes = [Line(f"{t.kind} {t.name}: {_cause(cause)}") for t in summary.targets for cause in t.causes]
    return [counts.done(), *causes, Line("")]


def markdown(summary: FleetSummary) -> list[Block]:
    counts = TableBuilder("", "target", "CUDA", "pass", "warn", "fail", "skip")
    for t in summary.targets:
        counts.add(f"{t.kind} `{t.name}`", t.cuda, *(str(t.count(v)) for v in VERDICTS))
    causes = [
        f"- {t.kind} `{t.name}`: "
        + " ".join(_cause(cause).replace("|", "\\|").splitlines())  # one bullet each
        for t in summary.targets
        for cause in t.causes
    ]
    return [
        Line(f"Fleet: {summary.machines} machines", heading=2),
        counts.done(),
        *([Line("\n".join(causes))] if causes else []),
    ]
