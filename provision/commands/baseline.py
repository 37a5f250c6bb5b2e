"""`provision baseline`: the profile's baseline (or the built-in GEMM/FlashInfer one) run once the checks passed (they
run first when the environment has none stored), each run stored with the environment as it ends, so an interrupted
series keeps what it measured."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from provision.checks import baseline as baselines
from provision.envs import records

if TYPE_CHECKING:
    from provision.envs.home import Home
    from provision.log import Progress
    from provision.records.results import BaselineRun


def baseline(
    home: Home, name: str | None, *, runs: int = 1, progress: Progress = lambda _: None
) -> tuple[str, list[BaselineRun]]:
    """Run and store `runs` baselines of `name` (the active environment when None); its name and the runs."""
    name, build = home.named_or_active(name, "provision baseline")
    record = records.read(build)
    if not record.check_results:
        from provision.checks import runner

        progress("running the checks first")
        record = records.add_checks(build, runner.run(build, record, progress=progress), records.now())
    reading = baselines.ready(name, record)  # refused before "run 1 of 3" is said
    series = records.now() if runs > 1 else None
    done = []
    for number in range(1, runs + 1):
        if runs > 1:
            progress(f"run {number} of {runs}")
        run = dataclasses.replace(baselines.run(name, build, record, progress, reading), series=series)
        # each run stored as it ends: an interrupted series keeps what it measured
        records.add_baseline(build, run)
        done.append(run)
    return name, done
