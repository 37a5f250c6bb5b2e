"""The restore result: the plan (or what was done), what drift finds afterwards, the checks, and the baseline against
the last one measured on the environment as locked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.views import ui

if TYPE_CHECKING:
    from provision.envs.restore import RestoreResult


def restored(result: RestoreResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    out = ui.console()
    verb = "would" if result.dry_run else "did"
    if not result.changed and not result.not_restorable:
        against = "its lock" if result.before.lock else "its RECORDs (it has no lock: distributions not compared)"
        out.print(f"{result.name}: nothing differs from {against} ({result.before.files} files checked)")
        return
    out.print(f"{result.name}: {result.before.summary()}")
    for finding in result.before.findings:
        out.print(f"  {finding.line()}")
    lines = [("reinstall", result.reinstall), ("uninstall", result.uninstall), ("set aside", result.set_aside),
             ("put back (accepted or profile content)", result.put_back)]
    for label, items in lines:
        if items:
            out.print(f"{verb} {label}: {', '.join(items)}")
    if result.not_restorable and not result.before.lock:
        out.print(f"cannot restore without a lock: {', '.join(result.not_restorable)} (lock it: provision lock --env {result.name})")
    elif result.not_restorable:
        out.print(f"cannot restore: {', '.join(result.not_restorable)} matched no wheel when it was locked "
                  f"(see [tool.provision] unmatched in {result.before.lock})")
    if result.dry_run:
        return
    if result.aside_folder:
        out.print(f"start-up files set aside in {result.aside_folder}")
    source = "downloaded" + (f" (uv's cached copy of {', '.join(result.refreshed)} had been changed too)" if result.refreshed else "") \
        if result.downloaded else "from uv's cache, nothing downloaded"
    if result.reinstall:
        out.print(f"reinstalled {source}")
    if result.after is not None:
        out.print(f"after: {result.after.summary()}")
    if result.checks:
        from provision.views import checks as check_views
        from provision.views.render import Shown, render

        render(Shown(blocks=check_views.check_blocks(result.name, result.checks)), "table")
    if result.baseline is not None:
        figure = f"{result.baseline['figure']:.2f} {result.baseline['unit']}"
        before = result.baseline_before
        then = f" (as locked it measured {before['figure']:.2f} {before['unit']} on {before['at'][:16]})" if before else ""
        out.print(f"baseline: back to {figure}{then}")
    elif result.baseline_error:
        out.print(f"baseline did not run: {result.baseline_error}")
