"""The one order of the statuses a check or a gate can have, and "worst of": the runner's overall verdict, the status
`provision envs` shows, and a report target's verdict all read it from here."""

from __future__ import annotations

from collections.abc import Iterable

ORDER = ("skip", "info", "pass", "warn", "fail", "error")  # least to most serious
RANK = {status: rank for rank, status in enumerate(ORDER)}
CHECK_STATUSES = frozenset(ORDER) - {"info"}  # what a check payload may answer; info is a report gate's
FAILED = frozenset({"fail", "error"})  # what stops an environment from becoming active, and exits 1


def worst(statuses: Iterable[str | None]) -> str | None:
    """The most serious of `statuses` (unknown ones and None ignored); None when there is none."""
    return max((s for s in statuses if s in RANK), key=RANK.__getitem__, default=None)


def failed(status: object) -> bool:
    """Whether `status` is FAIL or ERROR."""
    return status in FAILED
