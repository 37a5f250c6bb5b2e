"""One order of statuses: the runner's overall verdict, `provision envs`' check status and a report target's verdict."""

from __future__ import annotations

import itertools

import pytest

from provision import status
from provision.envs import inventory
from provision.records.results import CheckResult, overall
from provision.report.gates import Gate, Target
from provision.status import Status

CHECKS = ["skip", "pass", "warn", "fail", "error"]


def test_the_order_is_total_and_known() -> None:
    assert status.ORDER == ("skip", "info", "pass", "warn", "fail", "error")
    assert status.worst([]) is None and status.worst([None, "unknown"]) is None
    assert (
        status.failed("fail")
        and status.failed("error")
        and not status.failed("warn")
        and not status.failed(None)
    )


@pytest.mark.parametrize(
    "combo", [c for n in range(1, 4) for c in itertools.combinations(CHECKS, n)], ids=",".join
)
def test_the_three_readers_agree(combo: tuple[Status, ...]) -> None:
    results = [CheckResult(id=str(i), status=s) for i, s in enumerate(combo)]
    expected = max(combo, key=CHECKS.index)
    assert overall(results) == expected
    assert inventory.worst_status(results) == expected
    target = Target(
        kind="profile",
        name="x",
        cuda="13.0",
        gates=(
            *(Gate(id=str(i), title="", status=s, reason="") for i, s in enumerate(combo) if s != "error"),
            Gate(id="note", title="", status="info", reason=""),
        ),
    )
    gate_statuses = [s for s in combo if s != "error"]
    assert target.verdict == (max(gate_statuses, key=CHECKS.index) if gate_statuses else "skip")


def test_empty_and_info_only() -> None:
    assert overall([]) == "skip" and inventory.worst_status([]) is None
    target = Target(
        kind="profile", name="x", cuda="13.0", gates=(Gate(id="a", title="", status="info", reason=""),)
    )
    assert target.verdict == "skip"


def test_statuses_are_one_literal_type_and_unknown_ones_are_ignored() -> None:
    from typing import get_args

    from provision import status

    assert status.ORDER == get_args(status.Status) == ("skip", "info", "pass", "warn", "fail", "error")
    assert status.known("warn") and not status.known("WARN") and not status.known(None)
    assert status.worst(["pass", "bogus", None, "warn"]) == "warn" and status.worst(["bogus"]) is None
