"""Clocks. Every time provision stores is UTC (`2026-12-06T22:59:31+00:00`), and a table showed it cut to the minute,
its zone gone: under TZ=Pacific/Kiritimati (or TZ=UTC-14, POSIX for the same +14 hours) an environment built a minute
ago read as built 14 hours ago. Tables now mark it UTC (`2026-12-06T22:59Z`). What does not depend on the clock, and
stays so: environments built within one second never share a build folder, the rollback history is the order of the
switches (never of the times recorded), and an environment whose record is dated in the future or in the distant past
(a clock wrong when it was built) is listed, switched to and rolled back to as any other."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tiny
from launch import popen_provision

TOOL_WITH_ENV = True  # environment tiny, made by the fixture


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "UTC-14", "no/such/zone"])
def test_a_table_marks_its_times_utc_whatever_tz_says(tool: tiny.Tool, zone: str) -> None:
    # started with exec, so that the process reads TZ as it starts
    listed = popen_provision("envs", env=tool.env({"TZ": zone}))
    out, err = listed.communicate(timeout=60)
    created = tool.envs()["tiny"]["created"]
    assert listed.returncode == 0, err
    assert f"{created[:16]}Z" in out, out


def test_builds_in_one_second_and_records_dated_in_the_future_or_past(tool: tiny.Tool) -> None:
    for name in ("b", "c"):
        tool.create("tiny", "--name", name, "--no-checks")
    builds = tool.builds()
    assert len(builds) == len(set(builds)) == 3
    # the clock was wrong when they were built: c dated in 2099, b in 1999
    for name, when in (("c", "2099-01-01T00:00:00+00:00"), ("b", "1999-01-01T00:00:00+00:00")):
        record = Path(tool.envs()[name]["path"]) / "env.json"
        data = json.loads(record.read_text())
        record.write_text(json.dumps({**data, "created": when}))
        os.utime(record, (4_070_908_800, 4_070_908_800) if name == "c" else (915_148_800, 915_148_800))
    assert tool.envs()["c"]["created"] == "2099-01-01T00:00:00+00:00"
    tool("switch", "b")
    tool("switch", "c")
    tool("switch", "tiny")
    assert "active: c (was tiny)" in tool("rollback").stderr
    assert "active: tiny (was c)" in tool("rollback").stderr
    assert "2099-01-01T00:00Z" in tool("envs").stdout
    done = tool("gc", "--json")
    assert json.loads(done.stdout)["removed"] == [] and set(tool.envs()) == {"tiny", "b", "c"}, done.stdout
