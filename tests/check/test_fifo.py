"""A pipe named where provision reads or writes a file: refused in one line, never waited on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import DATA, ROOT

from provision.machine import nvml


def test_a_pipe_for_a_recording_a_lock_or_a_probe_document_is_exit_2_not_a_hang(
    tmp_path: Path, provision_bin: str
) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    replay = {**os.environ, nvml.REPLAY_VARIABLE: str(DATA / "h200.nvml.json")}
    runs = {
        "replay": ([provision_bin, "probe"], {**os.environ, nvml.REPLAY_VARIABLE: str(pipe)}),
        "record": ([provision_bin, "probe", "--record-nvml", str(pipe)], replay),
        "lock": (
            [
                provision_bin,
                "report",
                "--lock",
                str(pipe),
                "--machine",
                str(ROOT / "docs/machines/h200.probe.json"),
            ],
            replay,
        ),
        "machine": ([provision_bin, "report", "--machine", str(pipe)], replay),
    }
    for what, (argv, env) in runs.items():
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            env={**env, "PROVISION_HOME": str(tmp_path / "home")},
        )
        assert done.returncode == 2, (what, done.stderr)
        assert (
            str(pipe) in done.stderr
            and "Traceback" not in done.stderr
            and len(done.stderr.strip().splitlines()) == 2
        ), (what, done.stderr)
    assert pipe.exists() and not pipe.is_file()  # the pipe is left as it was, not replaced by a file
