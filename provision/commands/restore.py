"""`provision restore`: an environment put back to its lock (envs/restore.py: planned from drift, changed in a
hard-linked copy swapped in atomically), then, when something changed, its smoke checks run again (checks/runner.py)
and, when they pass and the profile names a baseline, the baseline measured again beside the last one measured
without drift (checks/baseline.py)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from provision.envs import records
from provision.envs import restore as restoring
from provision.errors import ProvisionError

if TYPE_CHECKING:
    from provision.envs.home import Home
    from provision.envs.restore import RestoreResult
    from provision.log import Progress


def restore(
    home: Home, name: str, *, dry_run: bool = False, checks: bool = True, progress: Progress = lambda _: None
) -> RestoreResult:
    """Plan, and unless `dry_run` apply, the changes; then (with `checks`) the checks and the profile's baseline."""
    build, result = restoring.restore(home, name, dry_run=dry_run, progress=progress)
    if result.dry_run or not result.changed or not checks:
        return result
    from provision.checks import runner

    progress("running the checks")
    result = dataclasses.replace(result, checks=runner.run(build, records.read(build), progress=progress))
    record = records.add_checks(build, result.checks, records.now())
    if not record.baseline or any(r.failed for r in result.checks):
        return result
    from provision.checks import baseline as baselines

    result = dataclasses.replace(
        result,
        baseline_before=next(
            (b for b in reversed(record.baselines) if b.drift is None or not b.drift.drifted), None
        ),
    )
    progress("running the baseline")
    try:
        run = baselines.run(name, build, record, progress)
        records.add_baseline(build, run)
    except ProvisionError as exc:  # the restore is done: a baseline that cannot run is said, not raised
        return dataclasses.replace(result, baseline_error=exc.message)
    return dataclasses.replace(result, baseline=run)
