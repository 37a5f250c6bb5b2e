"""A wheel's workers end with the scan, however it ends: a worker killed mid-scan (the OOM killer, kill -9) costs
its members a scan in the parent, not a traceback; a scan whose reader stops early (Ctrl-C in the caller, an error
in what it does with a result) does not wait for the rest of the wheel, and leaves no worker behind; a scan whose
process is killed leaves none running on (they would hold the caller's stdout open, and its reader waits for them).

Each worker here runs a stand-in of `_scan_member` that writes its pid, then kills itself or sleeps, for the
members the test names; the parent's own scan is the real one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_scan_fork_imports import members
from wheelhouse import build_wheel

WHEEL_TAG = "py3-none-manylinux_2_28_x86_64"

STAND_IN = """
import os, signal, time
from provision.scan import wheels

PARENT = os.getpid()
real = wheels._scan_member

def stand_in(place):
    if os.getpid() != PARENT:
        with open(PIDS, "a") as log:
            log.write(f"{os.getpid()}\\n")
        if place.name in KILLED:
            os.kill(os.getpid(), signal.SIGKILL)
        if place.name in SLOW:
            time.sleep(60)
    return real(place)

stand_in.__module__, stand_in.__qualname__ = wheels.__name__, "_scan_member"  # pickled by that name
wheels._scan_member = stand_in
wheels.PARALLEL = 0  # workers even for a wheel this small
"""


def _stand_in(pids: Path, killed: set[str], slow: set[str]) -> None:
    exec(STAND_IN, {"PIDS": str(pids), "KILLED": killed, "SLOW": slow})


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _pids(path: Path) -> set[int]:
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return build_wheel(tmp_path, "ends", "1.0", tag=WHEEL_TAG, files=members())


@pytest.fixture
def restored() -> object:
    from provision.scan import wheels

    kept = wheels._scan_member, wheels.PARALLEL
    yield
    wheels._scan_member, wheels.PARALLEL = kept


def test_a_worker_killed_mid_scan_costs_a_scan_here_not_a_traceback(
    wheel: Path, tmp_path: Path, restored: object
) -> None:
    from provision.scan import wheels

    expected = {name: code for name, code, _why in wheels.scan_wheel(wheel, jobs=1)}
    _stand_in(tmp_path / "pids", killed={"pkg/libsearched.so"}, slow=set())
    found = {name: code for name, code, _why in wheels.scan_wheel(wheel, jobs=2)}
    assert found == expected
    assert _pids(tmp_path / "pids")  # a worker did die


def test_a_scan_its_reader_stops_leaves_no_worker_and_does_not_wait(
    wheel: Path, tmp_path: Path, restored: object
) -> None:
    from provision.scan import wheels

    pids = tmp_path / "pids"
    _stand_in(pids, killed=set(), slow=set(members()) - {"pkg/libstreamed.so"})  # the largest: first
    scan = wheels.scan_wheel(wheel, jobs=2)
    assert next(scan)[0] == "pkg/libstreamed.so"
    started = time.monotonic()
    scan.close()  # what an exception in the reader's loop does
    assert time.monotonic() - started < 20, "the rest of the wheel was waited for"
    assert not [p for p in _pids(pids) if _alive(p)]


def _run_scan_in_child(wheel: Path, pids: Path) -> subprocess.Popen[str]:
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        PIDS, KILLED, SLOW = {str(pids)!r}, set(), {{"pkg/libsearched.so", "pkg/libobjects.a", "pkg/lib32.so"}}
        exec({STAND_IN!r})
        try:
            for found in wheels.scan_wheel(Path({str(wheel)!r}), jobs=2):
                pass
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_workers(child: subprocess.Popen[str], pids: Path) -> set[int]:
    deadline = time.monotonic() + 30
    while len(_pids(pids)) < 2 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    found = _pids(pids)
    assert len(found) >= 2, child.communicate()
    return found


def _gone(pids: set[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


def test_a_scan_killed_leaves_no_worker_running(wheel: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    child = _run_scan_in_child(wheel, pids)
    try:
        workers = _wait_for_workers(child, pids)
        child.kill()
        child.wait()
        assert _gone(workers, 10), "a worker ran on after its scan was killed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()


def test_ctrl_c_ends_the_scan_and_its_workers_at_once_without_their_tracebacks(
    wheel: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    child = _run_scan_in_child(wheel, pids)
    try:
        workers = _wait_for_workers(child, pids)
        os.killpg(child.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group gets it
        out, err = child.communicate(timeout=20)
        assert child.returncode == 130 and out == "interrupted\n", (out, err)
        assert "Traceback" not in err, err
        assert _gone(workers, 10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
