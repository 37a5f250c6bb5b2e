"""`provision upgrade`, shown: the steps with their status, seconds and result, both sides' figures, the decision
and its undo; the same as a Markdown page for a ticket (--markdown FILE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.views.render import Block, Line, Raw, Shown, Table, TableBuilder, Verdict, markdown_text

if TYPE_CHECKING:
    from provision.commands.upgrade import UpgradeResult
    from provision.envs.upgrades import UpgradeRecord


def upgraded(result: UpgradeResult) -> Shown:
    """Exit 0 when the rule said yes (activated, or ready to be with --no-activate), 1 when the old one stays."""
    return Shown(result.to_dict(), _blocks(result.record, str(result.path)), 0 if result.proceeded else 1)


def page(result: UpgradeResult) -> str:
    """The record as a Markdown page: a heading, the settings, then the tables and lines people read."""
    record, settings = result.record, result.record.settings
    head: list[Table | Line | Raw] = [
        Line(f"Upgrade {settings.from_env} -> {settings.to_env}: {_decision(record)}", heading=2)
    ]
    facts = TableBuilder("", "setting", "value")
    for key, value in (
        ("profile", settings.profile or f"{settings.to_env} (built already)"),
        ("lock", settings.lock or "-"),
        ("runs a side", str(settings.runs)),
        ("max slowdown", f"{settings.max_slowdown:g}%"),
        ("baseline command", " ".join(record.baseline.command) if record.baseline else "-"),
        ("started", record.started),
        ("finished", record.finished or "-"),
        ("record", str(result.path)),
    ):
        facts.add(key, value)
    body = [b for b in _blocks(record, str(result.path)) if isinstance(b, (Table, Line, Raw))]
    return markdown_text([*head, facts.done(), *body])


def _decision(record: UpgradeRecord) -> str:
    return (record.decision or "unfinished").upper()


def _blocks(record: UpgradeRecord, path: str) -> list[Block]:
    settings = record.settings
    steps = TableBuilder(
        f"Upgrade {settings.from_env} -> {settings.to_env}: {_decision(record)}",
        "step",
        "status",
        "seconds",
        "result",
    )
    for step in record.steps:
        steps.add(step.step, Verdict(step.status), f"{step.seconds:.1f}", step.result)
    blocks: list[Block] = [steps.done()]
    measured = record.baseline
    if measured is not None:
        figures = TableBuilder(
            f"Baseline: {' '.join(measured.command)}",
            "environment",
            "median",
            "min - max",
            "runs",
            caption=f"{measured.better} is better; runs interleaved old, new; judged {measured.verdict}",
        )
        for side in (measured.old, measured.new):
            median = f"{side.median:.2f} {measured.unit}" if side.median is not None else "-"
            spread = f"{min(side.figures):.2f} - {max(side.figures):.2f}" if side.figures else "-"
            figures.add(side.name, median, spread, str(len(side.figures)))
        blocks.append(figures.done())
    blocks.append(Line(f"{record.decision or 'unfinished'}: {record.reason}"))
    if record.undo:
        blocks.append(Line(f"undo: {record.undo}"))
    blocks.append(Line(f"record: {path}"))
    return blocks
