"""The fleet summary drawn before the per-machine report: a table (or Markdown) of verdict counts per target, then
each failure and warning once per identical cause, with the machines that share it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.views import ui

if TYPE_CHECKING:
    from provision.report.fleet import Cause, FleetSummary

MAX_NAMES = 8  # a cause shared by 200 machines names the first few and counts the rest


def _names(machines: tuple[str, ...]) -> str:
    shown = ", ".join(machines[:MAX_NAMES])
    return shown + (f" and {len(machines) - MAX_NAMES} more" if len(machines) > MAX_NAMES else "")


def _cause(cause: Cause) -> str:
    count = len(cause.machines)
    return f"{cause.status.upper()} on {count} machine{'s' if count != 1 else ''} ({_names(cause.machines)}): {cause.gate}: {cause.reason}"


def table(summary: FleetSummary) -> None:
    out = ui.console()
    counts = ui.table(f"Fleet: {summary.machines} machines", "target", "CUDA", "pass", "warn", "fail", "skip")
    for t in summary.targets:
        counts.add_row(f"{t.kind} {t.name}", t.cuda, *(str(t.count(v)) for v in ("pass", "warn", "fail", "skip")))
    out.print(counts)
    for t in summary.targets:
        for cause in t.causes:
            out.print(f"{t.kind} {t.name}: {_cause(cause)}")
    out.print("")


def markdown(summary: FleetSummary) -> list[str]:
    lines = [f"## Fleet: {summary.machines} machines\n", "| target | CUDA | pass | warn | fail | skip |",
             "| --- | --- | --- | --- | --- | --- |"]
    for t in summary.targets:
        lines.append(f"| {t.kind} `{t.name}` | {t.cuda} | " + " | ".join(str(t.count(v)) for v in ("pass", "warn", "fail", "skip")) + " |")
    lines.append("")
    for t in summary.targets:
        for cause in t.causes:
            lines.append(f"- {t.kind} `{t.name}`: " + _cause(cause).replace("|", "\\|"))
    lines.append("")
    return lines
