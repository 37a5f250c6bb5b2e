"""The fork server (tests/forkserver.py) answers as the console script does when it is exec'd: the same exit status,
stdout and stderr, and the same process-level behaviour a test relies on (a timeout kills the command; settings read
as a process starts are never taken from the fork server)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import launch
import pytest
from hostile_http import HostileServer, Route
from launch import run_provision
from test_network_hostile import lock_of
from wheelhouse import build_wheel

ROOT = Path(__file__).parent.parent.parent
DATA = Path(__file__).parent.parent / "data"
H200 = ROOT / "docs/machines/h200.probe.json"
WHEEL_PATH = (
    "/files/alpha-1.0-py3-none-any.whl"  # where the hostile server trickles the wheel of _hung_report
)

COMMANDS = {
    "version": ["--version"],
    "usage error": ["no-such-command"],
    "envs": ["envs", "--json"],
    "profiles": ["profiles", "--json"],
    "probe": ["probe", "--json"],
    "report table": ["report", "--machine", str(H200)],
    "report json": ["report", "--machine", str(H200), "--json"],
    "missing file": ["report", "--machine", "no-such-file.json", "--json"],
}


def both(
    monkeypatch: pytest.MonkeyPatch, *args: str | Path, **options: object
) -> tuple[subprocess.CompletedProcess[str], ...]:
    answers = []
    for exec_only in (True, False):
        monkeypatch.setattr(launch, "EXEC_ONLY", exec_only)
        answers.append(run_provision(*args, **options))  # type: ignore[arg-type]
    return tuple(answers)


@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_forked_command_answers_byte_for_byte_as_the_execd_one(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    execd, forked = both(
        monkeypatch, *args, env={"PROVISION_NVML_REPLAY": str(DATA / "rtx-pro-6000-x8.nvml.json")}, cwd=ROOT
    )
    assert (forked.returncode, forked.stdout, forked.stderr) == (execd.returncode, execd.stdout, execd.stderr)
    assert forked.stdout or forked.stderr


def test_a_variable_the_test_removes_is_gone_in_the_forked_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork server started with some test's PROVISION_HOME; a command whose test removes it has none."""
    execd, forked = both(monkeypatch, "envs", "--json", env={"PROVISION_HOME": None})
    assert (forked.returncode, forked.stdout, forked.stderr) == (execd.returncode, execd.stdout, execd.stderr)
    assert forked.stdout or forked.stderr


def test_the_fork_server_runs_the_commands_of_this_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """run_provision goes through this process's fork server (one, started once), not through exec."""
    monkeypatch.setattr(launch, "EXEC_ONLY", False)
    server = launch.ForkServer.get(launch.environment())
    assert server is not None, "the fork server did not start"
    before = server.commands
    run_provision("envs", "--json", env={"PROVISION_HOME": str(tmp_path / "home")}, check=True)
    run_provision("check", "--help", check=True)
    assert server.commands == before + 2
    assert launch.ForkServer.get(launch.environment()) is server and server.process.poll() is None


def test_a_setting_read_at_a_process_start_sends_the_command_to_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """LD_LIBRARY_PATH, LC_ALL, PYTHON*: the dynamic loader and the interpreter read them once, as a process starts; a
    fork would run with the fork server's, so such a command is exec'd."""
    monkeypatch.setattr(launch, "EXEC_ONLY", False)
    assert launch.ForkServer.get(launch.environment()) is not None
    for name, value in (
        ("LD_LIBRARY_PATH", "/nowhere"),
        ("LC_ALL", "C"),
        ("PYTHONHASHSEED", "7"),
        ("TZ", "UTC+3"),
    ):
        assert launch.ForkServer.get(launch.environment({name: value})) is None, name
    assert (
        launch.ForkServer.get(launch.environment({"PROVISION_HOME": "/elsewhere", "PATH": "/bin"}))
        is not None
    )


def test_a_timeout_kills_the_forked_command(
    monkeypatch: pytest.MonkeyPatch, hostile: HostileServer, tmp_path: Path
) -> None:
    """A command still waiting at the timeout is killed (its connection to the server closes at once) and the test
    gets TimeoutExpired, as from subprocess.run."""
    monkeypatch.setattr(launch, "EXEC_ONLY", False)
    lock, env = _hung_report(hostile, tmp_path)
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_provision("report", "--lock", lock, "--machine", H200, timeout=3, env=env)
    assert time.monotonic() - started < 10
    assert hostile.lasted(WHEEL_PATH) < 10  # the server's answer goes on for 45 s unless the client is gone


def test_the_environment_and_working_folder_are_the_commands_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each forked command sees the environment and folder its test gave it, never the previous command's."""
    monkeypatch.setattr(launch, "EXEC_ONLY", False)
    here = run_provision("report", "--machine", H200.name, "--json", cwd=H200.parent)
    there = run_provision("report", "--machine", H200.name, "--json", cwd=tmp_path)
    assert here.returncode == 0 and there.returncode != 0 and H200.name in there.stderr, (
        here.stderr,
        there.stderr,
    )
    first = run_provision("envs", "--json", env={"PROVISION_HOME": str(tmp_path / "a")}, check=True)
    second = run_provision("envs", "--json", env={"PROVISION_HOME": str(tmp_path / "b")}, check=True)
    assert str(tmp_path / "a") in first.stdout and str(tmp_path / "b") in second.stdout
    assert os.environ.get("PROVISION_HOME") != str(tmp_path / "b")


def _hung_report(hostile: HostileServer, tmp_path: Path) -> tuple[Path, dict[str, str | None]]:
    """A `report --lock` that waits on a wheel trickling from the hostile server (for 40 s, unless killed)."""
    wheel = build_wheel(tmp_path / "built", "alpha", "1.0").read_bytes()
    hostile.routes[WHEEL_PATH] = Route(wheel, how="trickle")
    lock = lock_of(tmp_path, hostile.url + WHEEL_PATH, wheel, len(wheel))
    return lock, {"PROVISION_HTTP_TIMEOUT": "40", "XDG_CACHE_HOME": str(tmp_path / "xdg")}


def _process_facts(pid: int) -> dict[str, object]:
    """What a process inherits from whoever started it, as /proc shows it: its descriptors (by kind, a file by its
    name), signal dispositions and mask, umask, limits, folder, process group and session. (/proc/PID/environ is the
    environment a process was exec'd with, the fork server's for a forked command: what the command and its children
    see is os.environ, compared byte for byte above.)"""
    proc = Path(f"/proc/{pid}")
    kinds = {}
    for fd in sorted((proc / "fd").iterdir(), key=lambda p: int(p.name)):
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            kinds[int(fd.name)] = target.split(":[")[0] if ":[" in target else os.path.basename(target)
    status = dict(
        line.split(":\t", 1) for line in (proc / "status").read_text().splitlines() if ":\t" in line
    )
    stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    return {
        "fds": kinds,
        **{k: status[k].strip() for k in ("SigBlk", "SigIgn", "SigCgt", "Umask")},
        "limits": (proc / "limits").read_text(),
        "cwd": os.readlink(proc / "cwd"),
        "pgrp-is-ours": int(stat[2]) == os.getpgrp(),
        "session-is-ours": int(stat[3]) == os.getsid(0),
    }


def _pid_of(exec_only: bool, server: launch.ForkServer, marker: str) -> int:
    """The pid of the provision command this test started, once it runs: exec'd, the child of this process whose
    command line names `marker` (this test's lock: a command another test of this worker left exiting is not it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not exec_only and server.running:
            return next(iter(server.running))
        if exec_only:
            for entry in Path("/proc").glob("[0-9]*"):
                with contextlib.suppress(OSError, IndexError):
                    if (
                        int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid()
                        and launch.BINARY.encode() in (entry / "cmdline").read_bytes().split(b"\0")[:2]
                        and marker.encode() in (entry / "cmdline").read_bytes().split(b"\0")
                        and int(entry.name) != server.process.pid
                    ):
                        return int(entry.name)
        time.sleep(0.02)
    raise AssertionError("the command did not start")


def _spooling(pid: int) -> dict[str, object]:
    """The process's facts once it is spooling the wheel (its file and the connection it trickles on both open): it
    stays so until killed, whatever the load. (Before that it opens and closes other connections.)"""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        facts = _process_facts(pid)
        kinds = list(facts["fds"].values())  # type: ignore[attr-defined]
        if "socket" in kinds and "alpha-1.0-py3-none-any.whl" in kinds:
            return facts
        time.sleep(0.05)
    raise AssertionError(f"the command never spooled the wheel: {facts}")


def test_a_forked_command_inherits_what_an_execd_one_does(
    monkeypatch: pytest.MonkeyPatch, hostile: HostileServer, tmp_path: Path
) -> None:
    """The same hung command started both ways, read from /proc while it waits: the same kinds of descriptors at the
    same numbers (nothing of the fork server's left open), signal dispositions and mask, umask, limits, folder,
    process group and session. Each is then killed."""
    lock, env = _hung_report(hostile, tmp_path)
    server = launch.ForkServer.get(launch.environment())
    assert server is not None
    facts = {}
    for exec_only in (True, False):
        monkeypatch.setattr(launch, "EXEC_ONLY", exec_only)
        answers: list[subprocess.CompletedProcess[str]] = []
        running = threading.Thread(
            target=lambda done=answers: done.append(
                run_provision("report", "--lock", lock, "--machine", H200, env=env, cwd=tmp_path, timeout=60)
            )
        )
        running.start()
        pid = _pid_of(exec_only, server, str(lock))
        facts[exec_only] = _spooling(pid)
        os.kill(pid, signal.SIGKILL)
        running.join(60)
        assert answers and answers[0].returncode == -signal.SIGKILL
    assert facts[False] == facts[True]


def test_a_fork_server_that_never_answers_is_the_commands_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fork server stuck before it forks (here a socket that accepts and never answers) does not hang the test: the
    command's timeout raises TimeoutExpired, as from subprocess.run."""
    import socket as sockets

    monkeypatch.setattr(launch, "EXEC_ONLY", False)
    server = launch.ForkServer.get(launch.environment())
    assert server is not None
    mute = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    mute.bind(str(tmp_path / "mute"))
    mute.listen(1)
    monkeypatch.setattr(server, "socket", str(tmp_path / "mute"))
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_provision("--version", timeout=2)
    assert time.monotonic() - started < 10
    mute.close()


def test_commands_run_at_once_each_get_their_own_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Eight commands started together from threads (a second copy running at once): each is forked at once, none waits
    for another, and each answer is its own home's."""
    monkeypatch.setattr(launch, "EXEC_ONLY", False)
    homes = [tmp_path / f"home{i}" for i in range(8)]
    answers: dict[int, subprocess.CompletedProcess[str]] = {}
    threads = [
        threading.Thread(
            target=lambda i=i: answers.__setitem__(
                i, run_provision("envs", "--json", env={"PROVISION_HOME": str(homes[i])})
            )
        )
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(answers) == list(range(8))
    for i, done in answers.items():
        assert done.returncode == 0 and str(homes[i]) in done.stdout, done.stderr
        assert not any(str(home) in done.stdout for home in homes if home != homes[i])
