"""`provision check`: an environment's smoke checks run (checks/runner.py) and stored with it (env.json): a full run
is the report's "last smoke checks", a narrower `--only` run is kept beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.checks import runner
from provision.envs import records

if TYPE_CHECKING:
    from provision.envs.home import Home
    from provision.log import Progress
    from provision.records.results import CheckResult


def check(
    home: Home,
    name: str | None,
    *,
    only: tuple[str, ...] | None = None,
    target_sm: str | None = None,
    progress: Progress = lambda _: None,
) -> tuple[str, list[CheckResult]]:
    """Run the checks against `name` (the active environment when None) and store them; its name and the results."""
    name, build = home.named_or_active(name, "provision check")
    results = runner.run(build, records.read(build), only=only, target_sm=target_sm, progress=progress)
    records.add_checks(build, results, records.now(), only=only)
    return name, results
