"""The one order of the statuses a check or a gate can have, and "worst of": the runner's overall verdict, the status
`provision envs` shows, and a report target's verdict all read it from here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeGuard, get_args

Status = Literal["skip", "info", "pass", "warn", "fail", "error"]  # every status a check or a gate can have
ORDER: tuple[Status, ...] = get_args(Status)  # least to most serious
RANK: dict[str, int] = {status: rank for rank, status in enumerate(ORDER)}
# what a check payload may answer; info is a gate's
CHECK_STATUSES: frozenset[Status] = frozenset(ORDER) - {"info"}
# what stops an environment from becoming active, and exits 1
FAILED: frozenset[Status] = frozenset({"fail", "error"})


def known(status: object) -> TypeGuard[Status]:
    """Whether `status` is one of the statuses (a payload's JSON is read as untyped data)."""
    return status in RANK


def worst(statuses: Iterable[str | None]) -> Status | None:
    """The most serious of `statuses` (unknown ones and None ignored); None when there is none."""
    return max((s for s in statuses if known(s)), key=RANK.__getitem__, default=None)


def failed(status: object) -> bool:
    """Whether `status` is FAIL or ERROR."""
    return status in FAILED
