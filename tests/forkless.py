"""provision run as a real process in which os.fork fails (EAGAIN: out of processes; ENOMEM: out of memory), which
root cannot cause reliably: the process replaces os.fork with one that raises before `python -m provision` runs.
subprocess starts children without os.fork (_posixsubprocess), so only provision's own forks fail."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Mapping

_START = """
import errno, os, runpy
forks = [os.fork]
def refused():
    if len(forks) <= {allowed}:
        forks.append(None)
        return forks[0]()
    raise OSError({code}, os.strerror({code}))
os.fork = refused
runpy.run_module("provision", run_name="__main__", alter_sys=True)
"""


def run_provision(
    *args: str,
    code: int = errno.EAGAIN,
    allowed: int = 0,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`provision ARGS...` in a process whose os.fork raises OSError(`code`), after its first `allowed` forks."""
    merged = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", _START.format(code=code, allowed=allowed), *args],
        env={k: v for k, v in merged.items() if v is not None},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
