"""A lock named on the command line that is enormous (an 8 GB sparse file, a disk image named by mistake): every
reader of a lock read it whole, then decoded it (twice its size in memory): `report --lock`, `create --lock`, restore
and gc took the machine's memory, or under a limit ended in `internal error: MemoryError`. Now a lock past 64 MiB is
refused in one line naming it (exit 2), having read 64 MiB at most."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tiny
from launch import argv, environment

LIMITED = """import resource, os, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
os.execv(sys.argv[1], sys.argv[1:])"""


@pytest.mark.parametrize("command", [("report", "--lock"), ("create", "tiny", "--no-checks", "--lock")])
def test_an_enormous_lock_is_refused_without_reading_it_whole(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    lock = tmp_path / "pylock.tiny.toml"
    with open(lock, "wb") as handle:
        handle.truncate(8 << 30)  # sparse: no disk taken
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    tiny.profile(profiles)
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, *argv((*command, str(lock)))],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment({"PROVISION_HOME": str(tmp_path / "home"), "PROVISION_PROFILES": str(profiles)}),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert (
        done.stderr
        == f"error: {lock}: not a PEP 751 lock (larger than 64 MiB)\nhint: make one with: provision lock PROFILE\n"
    )


def test_an_enormous_nvml_recording_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """PROVISION_NVML_REPLAY naming an 8 GB file: read whole (internal error: MemoryError under a limit, the machine's
    memory without one); now refused in one line after 64 MiB (exit 2)."""
    recording = tmp_path / "nvml.json"
    with open(recording, "wb") as handle:
        handle.truncate(8 << 30)
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, *argv(("probe",))],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment({"PROVISION_NVML_REPLAY": str(recording)}),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(
        f"error: {recording}: not a readable NVML recording (larger than 64 MiB)\nhint: "
    )
