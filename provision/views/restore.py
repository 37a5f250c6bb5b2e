"""The restore result: the plan (or what was done), what drift finds afterwards, the checks, and the baseline against
the last one measured on the environment as locked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.views import ui
from provision.views.render import Block, Line, Shown

if TYPE_CHECKING:
    from provision.envs.restore import RestoreResult


def restored(result: RestoreResult) -> Shown:
    """What differed, what was (or would be) done, what drift finds after, the checks and the baseline; exit 1 where
    a check failed, the baseline did not run or something cannot be put back."""
    # a dry run exits as the restore would: 1 where something cannot be put back (its checks do not run)
    failed = any(r.failed for r in result.checks) or result.baseline_error or result.not_restorable
    return Shown(result.to_dict(), _blocks(result), exit_code=1 if failed else 0)


def _blocks(result: RestoreResult) -> list[Block]:
    verb = "would" if result.dry_run else "did"
    if not result.changed and not result.not_restorable:
        against = (
            "its lock" if result.before.lock else "its RECORDs (it has no lock: distributions not compared)"
        )
        return [Line(f"{result.name}: nothing differs from {against} ({result.before.files} files checked)")]
    lines = [
        f"{result.name}: {result.before.summary()}",
        *(f"  {finding.line()}" for finding in result.before.findings),
    ]
    actions = [
        ("reinstall", result.reinstall),
        ("uninstall", result.uninstall),
        ("set aside", result.set_aside),
        ("put back (accepted or profile content)", result.put_back),
    ]
    lines += [f"{verb} {label}: {', '.join(items)}" for label, items in actions if items]
    if result.not_restorable and not result.before.lock:
        lines.append(
            f"cannot restore without a lock: {', '.join(result.not_restorable)} (lock it: provision lock --env {result.name})"
        )
    elif result.not_restorable:
        lines.append(
            f"cannot restore: {', '.join(result.not_restorable)} matched no wheel when it was locked "
            f"(see [tool.provision] unmatched in {result.before.lock})"
        )
    if result.dry_run:
        return [Line(line) for line in lines]
    if result.aside_folder:
        lines.append(f"start-up files set aside in {result.aside_folder}")
    source = (
        "downloaded"
        + (
            f" (uv's cached copy of {', '.join(result.refreshed)} had been changed too)"
            if result.refreshed
            else ""
        )
        if result.downloaded
        else "from uv's cache, nothing downloaded"
    )
    if result.reinstall:
        lines.append(f"reinstalled {source}")
    if result.after is not None:
        lines.append(f"after: {result.after.summary()}")
    blocks: list[Block] = [Line(line) for line in lines]
    if result.checks:
        from provision.views.checks import check_blocks

        blocks += check_blocks(result.name, result.checks)
    if result.baseline is not None:
        figure = f"{result.baseline.figure:.2f} {result.baseline.unit}"
        before = result.baseline_before
        then = (
            f" (as locked it measured {before.figure:.2f} {before.unit} on {ui.moment(before.at)})"
            if before
            else ""
        )
        blocks.append(Line(f"baseline: back to {figure}{then}"))
    elif result.baseline_error:
        blocks.append(Line(f"baseline did not run: {result.baseline_error}"))
    return blocks
