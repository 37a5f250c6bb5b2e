"""NVML that kills the process starting it (SIGSEGV inside nvmlInit: a broken or mismatched libnvidia-ml.so.1), told
apart from one that does not answer. The crash itself cannot be caught: it prints where (faulthandler), and the run
after it reads NVML in a child first, says `crashed` with what to do, and never calls NVML itself; once a child starts
NVML cleanly, NVML is read in process again. Proven through a real libnvidia-ml.so.1 (tests/standin_nvml.py) that
raises SIGSEGV in its nvmlInit, first on the loader's path."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import forkless
import pytest
import standin_nvml
from launch import run_provision

pytestmark = pytest.mark.skipif(not standin_nvml.CC, reason="no C compiler to build a stand-in NVML library")


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standin_nvml.build(tmp_path_factory.mktemp("standin"))


def _guard() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "provision" / "nvml"


def test_a_crash_inside_nvml_is_named_by_the_next_run_which_never_calls_nvml(lib: Path) -> None:
    crash = standin_nvml.environment(lib, "crash")
    first = subprocess.run(
        [sys.executable, "-m", "provision", "probe", "--json"],
        env={**os.environ, **{k: v for k, v in crash.items() if v is not None}, "PROVISION_NVML_REPLAY": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == -signal.SIGSEGV, (first.returncode, first.stderr)
    # where it died
    assert "Segmentation fault" in first.stderr and "_start_nvml" in first.stderr, first.stderr
    (mark,) = _guard().iterdir()  # the mark of the reading that died with its process
    assert mark.name.startswith("reading-") and mark.name.removeprefix("reading-").isdigit(), mark.name

    for _ in range(2):  # and every run after, while the library is broken
        done = run_provision("probe", "--json", env=crash, timeout=120)
        assert done.returncode == 0, done.stderr
        start = json.loads(done.stdout)["driver"]["nvml"]
        assert start["state"] == "crashed" and "SIGSEGV" in start["reason"], start
        assert "libnvidia-ml.so.1" in start["hint"] and "ldconfig" in start["hint"], start
        assert sorted(p.name for p in _guard().iterdir()) == ["crashed"]  # no mark: NVML was not called here
    table = run_provision("probe", env=crash, timeout=120)
    assert "crashed" in table.stdout and "what to do" in table.stdout, table.stdout

    mended = run_provision("probe", "--json", env=standin_nvml.environment(lib, 0), timeout=120)
    assert mended.returncode == 0, mended.stderr
    assert json.loads(mended.stdout)["driver"]["nvml"]["state"] != "crashed"
    assert list(_guard().iterdir()) == []  # a child started it cleanly: read in process again, nothing kept


def test_a_mark_of_a_running_reading_is_no_crash_and_one_of_a_dead_process_is_checked(lib: Path) -> None:
    _guard().mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (_guard() / f"reading-{sleeper.pid}").touch()  # another probe reading NVML right now
        done = run_provision("probe", "--json", env=standin_nvml.environment(lib, 0), timeout=120)
        assert json.loads(done.stdout)["driver"]["nvml"]["state"] != "crashed"
        assert (_guard() / f"reading-{sleeper.pid}").exists()  # left to its reader
    finally:
        sleeper.kill()
        sleeper.wait()
    # its reader is gone now: the next run reads NVML in a child first, which reads it cleanly
    crash_free = run_provision("probe", "--json", env=standin_nvml.environment(lib, 0), timeout=120)
    assert json.loads(crash_free.stdout)["driver"]["nvml"]["state"] != "crashed"
    assert list(_guard().iterdir()) == []


def test_a_stderr_without_a_descriptor_costs_the_stacks_not_the_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """provision used inside a notebook: sys.stderr has no file descriptor for faulthandler. The mark is made all the
    same, and the reading goes on."""
    import faulthandler
    import io

    from provision.machine import nvmlguard

    was = faulthandler.is_enabled()
    faulthandler.disable()
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    try:
        mark = nvmlguard.begin()
        assert mark is not None and (_guard() / mark).exists() and not faulthandler.is_enabled()
        nvmlguard.end(mark)
        assert not (_guard() / mark).exists()
    finally:
        if was:
            faulthandler.enable(file=sys.__stderr__)


def test_a_mark_whose_pid_now_names_another_process_is_of_one_that_is_gone() -> None:
    """A mark holds its writer's start time: the same pid started at another time is a reused pid (or a pid of another
    namespace, a container's sharing the cache), so the reading it marked died, and the next run checks in a child."""
    from provision.machine import nvmlguard

    _guard().mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = nvmlguard._started(sleeper.pid)
        assert started is not None and started.isdigit()
        mark = _guard() / f"reading-{sleeper.pid}"
        for stamp, gone in ((started, False), ("", False), (str(int(started) + 1), True)):
            mark.write_text(stamp)  # its own start time, a mark of the format before, another process's
            assert nvmlguard.suspected() is gone, stamp
            assert mark.exists() is not gone
    finally:
        sleeper.kill()
        sleeper.wait()
    made = nvmlguard.begin()  # this process's own mark carries its start time
    try:
        assert made is not None and (_guard() / made).read_text() == nvmlguard._started(os.getpid())
    finally:
        nvmlguard.end(made)


@pytest.mark.parametrize("code", [errno.EAGAIN, errno.ENOMEM])
def test_no_child_to_read_nvml_in_is_a_driver_not_asked_never_no_driver(lib: Path, code: int) -> None:
    """A crash is suspected, so NVML is read in a child first, and the fork fails (out of processes or memory): the
    probe says it could not ask the driver (a driver that does not answer, never "no driver"), calls no NVML itself,
    and keeps what it knew of the crash."""
    _guard().mkdir(parents=True, exist_ok=True)
    (_guard() / "crashed").touch()
    env = standin_nvml.environment(lib, 0)
    done = forkless.run_provision("probe", "--json", code=code, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    start = json.loads(done.stdout)["driver"]["nvml"]
    assert start["state"] == "not_asked" and os.strerror(code) in start["reason"], start
    # no NVML called here; the crash still kept
    assert sorted(p.name for p in _guard().iterdir()) == ["crashed"]
    table = forkless.run_provision("probe", code=code, env=env)
    assert table.returncode == 0 and "not_asked" in table.stdout, table.stdout + table.stderr
    checked = forkless.run_provision("check", "--json", code=code, env=env)
    assert "Traceback" not in checked.stderr, checked.stderr
