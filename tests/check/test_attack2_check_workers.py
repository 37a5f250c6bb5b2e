"""A check payload that starts a worker (torch's compile pool, nvcc under FlashInfer's JIT build, a package that spawns
a helper on import) and hangs: at the check's timeout only the payload was killed, and provision then waited for the
worker to close the pipes it inherited (a check timed out at 2 s took the worker's 66 s; a worker that never ends
hung `check` and `create` for ever), the worker running on. Now a payload leads a process group of its own, killed
whole."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import tiny
from launch import run_provision
from test_attack2_baseline_output import _gone

SPAWNING = b"""import os, subprocess, time
worker = subprocess.Popen(["sleep", "120"])
with open(os.environ["WORKER_PID_FILE"], "w") as handle:
    handle.write(str(worker.pid))
time.sleep(600)
"""


def test_a_timed_out_check_takes_its_workers_with_it(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("tiny")
    served.add("alpha", "1.0", files={"alpha/__init__.py": SPAWNING})
    tool = tiny.make_tool(tmp_path, provision_bin, served)
    tool.create("tiny", "--no-checks")
    pidfile = tmp_path / "worker.pid"
    started = time.monotonic()
    try:
        done = run_provision(
            "check",
            "tiny",
            "--only",
            "imports",
            "--json",
            timeout=60,
            env=tool.env({"PROVISION_CHECK_TIMEOUT": "2", "WORKER_PID_FILE": str(pidfile)}),
        )
        assert time.monotonic() - started < 60
        assert done.returncode == 1 and "timed out after 2 s" in done.stdout, done.stderr
        worker = int(pidfile.read_text())
        deadline = time.monotonic() + 10
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(worker), "the check's worker outlived its timeout"
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("check waited on the pipes its payload's worker held") from exc
    finally:
        if pidfile.exists() and not _gone(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), 9)
