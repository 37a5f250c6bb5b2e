"""A recorded NVML reading (PROVISION_NVML_REPLAY, written by `probe --record-nvml`) whose compute capability answer is
no pair of numbers (a recording edited by hand, or by a tool that wrote strings): probe wrote `compute_capability`
"a.b" and `report` then ended in `internal error: ValueError: invalid literal for int()` (exit 3). Now the answer is
read as NVML gives it, two integers, or not at all: a note says it was not read, and report judges what it has."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import DATA
from launch import run_provision


@pytest.mark.parametrize("answer", [["a", "b"], "a\nb", [9, 0, 1], [None, 0]])
def test_a_compute_capability_that_is_no_pair_of_numbers_is_a_note(tmp_path: Path, answer: object) -> None:
    recording = json.loads((DATA / "h200.nvml.json").read_text())
    for call in recording["calls"]:
        if call["fn"] == "nvmlDeviceGetCudaComputeCapability":
            call["result"] = answer
    replay = tmp_path / "odd.nvml.json"
    replay.write_text(json.dumps(recording))
    env = {**os.environ, "PROVISION_NVML_REPLAY": str(replay)}
    done = run_provision("probe", "--json", env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    probed = json.loads(done.stdout)
    assert [g["compute_capability"] for g in probed["gpus"]] == [None], probed["gpus"]
    assert any("compute capability: not read" in note for note in probed["notes"]), probed["notes"]
    done = run_provision("report", "--json", env=env, timeout=120)
    assert (
        done.returncode in (0, 1) and "internal error" not in done.stderr and "Traceback" not in done.stderr
    ), done.stderr
