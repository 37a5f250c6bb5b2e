"""The one way tests start provision: the installed console script as a real process, in the test's isolated
environment (conftest's `isolated` fixture) plus what a test adds. A value of None in `env` removes that variable."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

BINARY = shutil.which("provision", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")) or ""


def environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    merged: dict[str, str | None] = {**os.environ, **(env or {})}
    return {k: v for k, v in merged.items() if v is not None}


def argv(args: tuple[str | Path, ...]) -> list[str]:
    assert BINARY, "provision is not installed in this environment: pip install -e '.[test]'"
    return [BINARY, *map(str, args)]


def run_provision(*args: str | Path, env: Mapping[str, str | None] | None = None, check: bool = False,
                  timeout: float = 300, input: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`provision ARGS...`; with check=True a non-zero exit fails the test with provision's stderr."""
    done = subprocess.run(argv(args), capture_output=True, text=True, timeout=timeout, env=environment(env), input=input,
                          cwd=cwd)
    if check:
        assert done.returncode == 0, f"provision {' '.join(map(str, args))} exited {done.returncode}: {done.stderr}"
    return done


def popen_provision(*args: str | Path, env: Mapping[str, str | None] | None = None) -> subprocess.Popen[str]:
    """`provision ARGS...` started in the background, stdout and stderr piped."""
    return subprocess.Popen(argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(env))


def interrupt(process: subprocess.Popen[str], held: threading.Event, started: Callable[[], bool]) -> str:
    """Ctrl-C to `process` once `started()` says it waits on a request that the test's index holds (`held` unset);
    the index answers again 3 s later, as a slow one would, so the signal lands while the request is open (a delay
    instead let provision finish first on a loaded machine). Return its stderr once it ended."""
    deadline = time.time() + 60
    while time.time() < deadline and not started():
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    threading.Timer(3.0, held.set).start()
    try:
        _, err = process.communicate(timeout=60)
    finally:
        held.set()
    return err
