"""The NVML crash guard (provision/machine/nvmlguard.py) attacked: marks it never wrote, a pid that is the reader's
own, a child that hangs, exits or dies of a signal Python has no name for, a caller that ignores SIGCHLD, a `crashed`
that is a FIFO, a library that starts cleanly and dies in its first reading, a provision killed while its child
waits. Each through real processes and the real stand-in libnvidia-ml.so.1 (tests/standin_nvml.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import standin_nvml
from launch import run_provision

pytestmark = pytest.mark.skipif(not standin_nvml.CC, reason="no C compiler to build a stand-in NVML library")

# provision started in a process that first makes a mark of its own pid (a container's provision: the same small pid
# every run, the cache folder a volume), optionally with SIGCHLD ignored (inherited across exec), then becomes it
EXEC = """
import os, signal, sys
folder, own_mark, ignore_sigchld = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
if own_mark:
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"reading-{os.getpid()}"), "w").close()
if ignore_sigchld:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execv(sys.executable, [sys.executable, "-m", "provision", "probe", "--json"])
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standin_nvml.build(tmp_path_factory.mktemp("standin"))


def _guard() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "provision" / "nvml"


def _dead_mark() -> None:
    """The mark of a reading whose process is gone (it died inside NVML)."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _guard().mkdir(parents=True, exist_ok=True)
    (_guard() / f"reading-{gone.pid}").touch()


def _exec(
    lib: Path, code: str, own_mark: bool, ignore_sigchld: bool, **extra: str
) -> subprocess.CompletedProcess[str]:
    variables = {**os.environ, **extra, "PROVISION_NVML_REPLAY": ""}
    variables.update({k: v for k, v in standin_nvml.environment(lib, code).items() if v is not None})
    return subprocess.run(
        [sys.executable, "-c", EXEC, str(_guard()), str(int(own_mark)), str(int(ignore_sigchld))],
        env=variables,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _start(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, (done.returncode, done.stderr)
    start = json.loads(done.stdout)["driver"]["nvml"]
    assert isinstance(start, dict)
    return start


@pytest.mark.parametrize("pid", ["99999999999999999999", "\u00b2", "abc", "0", "-1", ""])
def test_a_mark_provision_never_wrote_is_no_traceback(lib: Path, pid: str) -> None:
    """reading-99999999999999999999 passed isdigit and overflowed os.kill; reading-² passed isdigit and int() of it
    raised: the probe died with a traceback."""
    _guard().mkdir(parents=True, exist_ok=True)
    (_guard() / f"reading-{pid}").touch()
    assert _start(run_provision("probe", "--json", env=standin_nvml.environment(lib, 0), timeout=60))[
        "state"
    ] not in ("crashed", "timeout")


def test_a_mark_of_the_readers_own_pid_is_of_a_process_that_is_gone(lib: Path) -> None:
    """A container's provision has the same pid every run: the mark its crashed reading left is of a process that is
    gone, though the pid answers (it is this one). It was taken for a reading under way: every run crashed again."""
    start = _start(_exec(lib, "crash", own_mark=True, ignore_sigchld=False))
    assert start["state"] == "crashed" and "SIGSEGV" in str(start["reason"]), start


def test_a_caller_ignoring_sigchld_costs_no_traceback(lib: Path) -> None:
    """SIGCHLD ignored (inherited across exec from a daemon's shell) reaps the child by itself: waitpid raised
    ChildProcessError and the probe died with a traceback."""
    _dead_mark()
    assert _start(_exec(lib, "0", own_mark=False, ignore_sigchld=True))["state"] not in ("crashed", "timeout")


def test_a_child_killed_by_a_signal_python_has_no_name_for_is_crashed(lib: Path) -> None:
    """signal.Signals(40) raises ValueError: a library dying of a real-time signal cost a traceback."""
    first = run_provision("probe", "--json", env=standin_nvml.environment(lib, "signal:40"), timeout=60)
    # died inside NVML: the mark stays
    assert first.returncode in (-40, 128 + 40), (
        first.returncode,
        first.stderr,
    )
    start = _start(
        run_provision("probe", "--json", env=standin_nvml.environment(lib, "signal:40"), timeout=60)
    )
    assert start["state"] == "crashed" and "40" in str(start["reason"]), start


def test_a_library_that_ends_the_process_is_told_apart(lib: Path) -> None:
    """A library that calls exit() inside nvmlInit ends provision without a word. The child ending so was taken for a
    clean start: every run after called NVML in process and ended the same way."""
    first = run_provision("probe", "--json", env=standin_nvml.environment(lib, "exit:3"), timeout=60)
    assert first.returncode == 3 and first.stdout == "", (first.returncode, first.stdout)
    start = _start(run_provision("probe", "--json", env=standin_nvml.environment(lib, "exit:3"), timeout=60))
    assert start["state"] == "crashed" and "3" in str(start["reason"]), start


def test_a_library_that_dies_in_its_first_reading_is_crashed_too(lib: Path) -> None:
    """nvmlInit answers, nvmlSystemGetDriverVersion raises SIGSEGV. The child only started NVML: it ended cleanly,
    `crashed` was dropped and every run after died in process."""
    later = {**standin_nvml.environment(lib, 0), standin_nvml.LATER_VARIABLE: "crash"}
    first = run_provision("probe", "--json", env=later, timeout=60)
    assert first.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), (first.returncode, first.stderr)
    for _ in range(2):
        start = _start(run_provision("probe", "--json", env=later, timeout=60))
        assert start["state"] == "crashed" and "SIGSEGV" in str(start["reason"]), start
    assert _start(run_provision("probe", "--json", env=standin_nvml.environment(lib, 0), timeout=60))[
        "state"
    ] not in ("crashed", "timeout")
    assert list(_guard().iterdir()) == []


def test_a_child_that_never_answers_is_waited_for_once_and_keeps_crashed(lib: Path) -> None:
    """A hung child was killed after PROVISION_NVML_START_TIMEOUT, then NVML was started in process and waited for
    again (twice the bound), and `crashed` was dropped though no child had started NVML cleanly."""
    _guard().mkdir(parents=True, exist_ok=True)
    (_guard() / "crashed").touch()
    hang = {**standin_nvml.environment(lib, "hang"), "PROVISION_NVML_START_TIMEOUT": "3"}
    began = time.monotonic()
    start = _start(run_provision("probe", "--json", env=hang, timeout=60))
    took = time.monotonic() - began
    assert start["state"] == "timeout", start
    assert took < 5.5, took  # one wait of 3 s (and provision's start), not two
    assert sorted(p.name for p in _guard().iterdir()) == ["crashed"]


def test_a_crashed_file_that_is_a_fifo_is_no_hang(lib: Path) -> None:
    """open(O_WRONLY) of a FIFO waits for a reader: `crashed` (or a mark) made a FIFO hung the probe for ever."""
    _guard().mkdir(parents=True, exist_ok=True)
    os.mkfifo(_guard() / "crashed")
    start = _start(run_provision("probe", "--json", env=standin_nvml.environment(lib, "crash"), timeout=30))
    assert start["state"] == "crashed", start


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_a_provision_killed_while_its_child_waits_leaves_no_child(lib: Path, how: int) -> None:
    """kill -9 (or a Ctrl-C) of provision while its child hangs in nvmlInit left the child running for ever."""
    _dead_mark()
    variables = {**os.environ, "PROVISION_NVML_REPLAY": "", "PROVISION_NVML_START_TIMEOUT": "120"}
    variables.update({k: v for k, v in standin_nvml.environment(lib, "hang").items() if v is not None})
    provision = subprocess.Popen(
        [sys.executable, "-m", "provision", "probe", "--json"],
        env=variables,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (children := _children(provision.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children, "no child started"
        time.sleep(0.3)  # the child inside nvmlInit
        os.kill(provision.pid, how)
        provision.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_running(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_running(c) for c in children), children
    finally:
        for child in children if "children" in locals() else []:
            if _running(child):
                os.kill(child, signal.SIGKILL)
        provision.kill()
        provision.wait()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_many_readings_in_one_process_register_one_exit_handler() -> None:
    """A process that reads NVML again and again (a notebook, a service calling gpu_reading): each reading registered
    another atexit handler, kept for ever."""
    import atexit

    from provision.machine import nvmlguard

    # the first reading imports what it writes with: modules with exit handlers of their own
    nvmlguard.end(nvmlguard.begin())
    before = atexit._ncallbacks()
    for _ in range(50):
        nvmlguard.end(nvmlguard.begin())
    assert atexit._ncallbacks() == before
    assert not (_guard() / f"reading-{os.getpid()}").exists()


def test_a_link_for_the_nvml_folder_is_never_written_through(lib: Path, tmp_path: Path) -> None:
    """provision/nvml a link to another folder (a cache in a shared place, another user's link): the marks and
    `crashed` were made (and removed) there, as root too. The cache's folders are trusted as wheelfacts trusts them:
    a link is removed, a folder made in its place."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _guard().parent.mkdir(parents=True, exist_ok=True)
    _guard().symlink_to(elsewhere)
    crash = standin_nvml.environment(lib, "crash")
    first = run_provision("probe", "--json", env=crash, timeout=60)
    assert first.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), (first.returncode, first.stderr)
    assert list(elsewhere.iterdir()) == []
    assert not _guard().is_symlink() and [p.name for p in _guard().iterdir()][0].startswith("reading-")
    assert _start(run_provision("probe", "--json", env=crash, timeout=60))["state"] == "crashed"
    assert list(elsewhere.iterdir()) == [] and [p.name for p in _guard().iterdir()] == ["crashed"]


def test_an_nvml_folder_others_may_write_is_not_used(lib: Path) -> None:
    """A `crashed` or marks in a folder others may write (a cache in /tmp) are nobody's word: that folder is neither
    read nor written, NVML read in process as without the guard."""
    _guard().mkdir(parents=True)
    _guard().chmod(0o777)
    (_guard() / "crashed").touch()
    done = run_provision("probe", "--json", env=standin_nvml.environment(lib, 0), timeout=60)
    assert _start(done)["state"] not in ("crashed", "timeout")
    assert "nvml is writable by other users" in done.stderr, done.stderr
    # untouched: no child was asked, nothing written
    assert [p.name for p in _guard().iterdir()] == ["crashed"]


def test_a_wait_that_is_no_number_costs_no_evidence(lib: Path) -> None:
    """PROVISION_NVML_START_TIMEOUT=abc is exit 2; it was read after the dead mark had been removed: the run after,
    the variable mended, called NVML in process and died again."""
    _dead_mark()
    (mark,) = _guard().iterdir()
    bad = {**standin_nvml.environment(lib, "crash"), "PROVISION_NVML_START_TIMEOUT": "abc"}
    assert run_provision("probe", "--json", env=bad, timeout=60).returncode == 2
    assert mark.exists()
    assert (
        _start(run_provision("probe", "--json", env=standin_nvml.environment(lib, "crash"), timeout=60))[
            "state"
        ]
        == "crashed"
    )
