"""A driver that starts and then stops answering (adversary of issue 39, round three): NVML's start is bounded
(PROVISION_NVML_START_TIMEOUT), but a real libnvidia-ml.so.1 whose nvmlInit answers and whose next call
(nvmlSystemGetDriverVersion) never returns hung `probe`, `check` and `report` for ever. The whole reading is bounded by
the same wait: past it, a note says NVML stopped answering, no GPUs read (the driver gate FAILs, as for a start that
timed out), and the command ends."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import standin_nvml
from launch import run_provision

SOURCE = r"""
#include <stdlib.h>
#include <unistd.h>
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return 0; }
int nvmlInit_v2(void) { return 0; }
int nvmlInit(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetDriverVersion(char *version, unsigned int length) { (void)version; (void)length; for (;;) pause(); }
const char *nvmlErrorString(int result) { (void)result; return "stand-in NVML error"; }
"""


@pytest.fixture(scope="module")
def hanging(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if standin_nvml.CC is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("hang-later")
    (folder / "s.c").write_text(SOURCE)
    (folder / "lib").mkdir()
    subprocess.run(
        [standin_nvml.CC, "-shared", "-fPIC", "-o", folder / "lib/libnvidia-ml.so.1", folder / "s.c"],
        check=True,
        timeout=120,
    )
    return folder / "lib"


def test_a_driver_that_hangs_after_its_start_is_a_timeout_note_not_a_hang(hanging: Path) -> None:
    env = {
        "LD_LIBRARY_PATH": str(hanging),
        "PROVISION_NVML_REPLAY": None,
        "PROVISION_NVML_START_TIMEOUT": "2",
    }
    try:
        done = run_provision("probe", "--json", env=env, timeout=40)
    except subprocess.TimeoutExpired:
        pytest.fail("probe hung on a driver that stopped answering after its start")
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["driver"]["nvml"]["state"] == "timeout" and facts["gpus"] == []
    assert any("stopped answering" in note for note in facts["notes"]), facts["notes"]
