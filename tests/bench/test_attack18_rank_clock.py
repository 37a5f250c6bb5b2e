"""The hang bound of a rank's step (payloads/_common.py) is measured on the monotonic clock. It compared the launcher's
wall clock with the one the rank read when it began the step: a wall clock stepped forward meanwhile (NTP correcting a
drift, an operator's `date -s`) read as the rank waiting that long, and every rank was killed and the check failed
with `rank N hung`; one stepped back hid a real hang for as long. Real ranks (spawned processes, no torch), the
launcher's wall clock 2 hours ahead of the ranks' (time.time moved in it alone, as a clock step does between two
readings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provision.checks import payload_dir

SCRIPT = """
import sys, time
sys.path.insert(0, {payloads!r})
from _common import emit, launch, progress, write_rank

def target(rank, world, out_dir, config):
    progress(out_dir, rank, "all-reduce", config["bound_s"])
    time.sleep(config["sleep_s"])
    write_rank(out_dir, rank, {{"rank": rank}})

if __name__ == "__main__":
    wall = time.time
    time.time = lambda: wall() + {ahead}
    config = {{"bound_s": {bound}, "sleep_s": {sleep}, "start_bound_s": 60}}
    emit("pass", "finished", ranks=launch(target, 2, config, 60.0))
"""


@pytest.mark.parametrize(
    ("ahead", "bound", "sleep", "status"),
    [(7200.0, 30.0, 1.0, "pass"), (-7200.0, 1.0, 20.0, "fail")],
    ids=["stepped-forward-no-hang", "stepped-back-a-real-hang"],
)
def test_a_step_is_timed_on_the_monotonic_clock(
    tmp_path: Path, ahead: float, bound: float, sleep: float, status: str
) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT.format(payloads=str(payload_dir()), ahead=ahead, bound=bound, sleep=sleep))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict["status"] == status, (verdict, done.stderr[-2000:])
    if status == "fail":
        assert "rank" in verdict["reason"] and "hung at all-reduce" in verdict["reason"], verdict
