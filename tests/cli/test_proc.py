"""provision.proc: how a child's end is seen. In-process (the function itself), with real child processes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from provision import proc


def test_a_child_run_with_progress_is_seen_ending_without_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Popen.wait(timeout) looks every 50 ms at most, sleeping between looks: the install a create waits on was seen
    ended 25 ms late on average. The end is now seen when it comes (a pidfd), so subprocess sleeps not once."""
    sleeps: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(subprocess.time, "sleep", lambda s: (sleeps.append(s), real_sleep(s))[1])
    lines: list[str] = []
    code = "import sys, time; print('working', file=sys.stderr, flush=True); time.sleep(0.4); print('done')"
    done = proc.run([sys.executable, "-c", code], timeout=60, on_stderr_line=lines.append)
    assert (done.returncode, done.stdout, lines) == (0, "done\n", ["working"])
    assert sleeps == [], f"the end was polled for: {len(sleeps)} sleeps"


def test_a_child_past_its_timeout_is_stopped_and_said_so() -> None:
    start = time.monotonic()
    done = proc.run(
        [sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5, on_stderr_line=lambda _: None
    )
    assert done.timed_out and done.returncode == -1
    assert time.monotonic() - start < 20  # stopped at its bound, not after its 30 s


def test_an_exit_code_and_a_signal_are_read_as_popen_reads_them() -> None:
    failed = proc.run(
        [sys.executable, "-c", "raise SystemExit(3)"], timeout=60, on_stderr_line=lambda _: None
    )
    killed = proc.run(["sh", "-c", "kill -9 $$"], timeout=60, on_stderr_line=lambda _: None)
    assert (failed.returncode, killed.returncode) == (3, -9)
