"""The one way tests start provision: the installed console script as a real process, in the test's isolated
environment (conftest's `isolated` fixture) plus what a test adds. A value of None in `env` removes that variable.

`run_provision` forks that process from a provision that has imported itself once (tests/forkserver.py): the same
interpreter, console script and command line, its own pid, environment, working folder and stdio, without the import
that was most of the CPU of the thousand commands the tests run. It starts the script with exec instead where a fork
could differ (an environment whose settings read as a process starts differ from the fork server's: PYTHON*, LC_*,
LD_*, ...; a working folder that is not there), and for every command when PROVISION_TEST_EXEC=1 is set in the shell
that runs pytest. What a forked command shows that an exec'd one does not: its /proc/PID/cmdline and environ are
the fork server's (a test that finds provision by its command line starts it with popen_provision; what the command and
its children see is the test's environment).
`popen_provision` always starts the script with exec."""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

BINARY = (
    shutil.which("provision", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    or ""
)
# read at import: conftest removes PROVISION_* for each test
EXEC_ONLY = os.environ.get("PROVISION_TEST_EXEC") == "1"


def environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    merged: dict[str, str | None] = {**os.environ, **(env or {})}
    return {k: v for k, v in merged.items() if v is not None}


def argv(args: tuple[str | Path, ...]) -> list[str]:
    assert BINARY, "provision is not installed in this environment: pip install -e '.[test]'"
    return [BINARY, *map(str, args)]


def run_provision(
    *args: str | Path,
    env: Mapping[str, str | None] | None = None,
    check: bool = False,
    timeout: float = 300,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`provision ARGS...`; with check=True a non-zero exit fails the test with provision's stderr."""
    command, variables = argv(args), environment(env)
    server = None if EXEC_ONLY or (cwd is not None and not os.path.isdir(cwd)) else ForkServer.get(variables)
    if server is None:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=variables, cwd=cwd
        )
    else:
        done = server.run(command, variables, str(cwd or os.getcwd()), timeout)
    if check:
        assert done.returncode == 0, (
            f"provision {' '.join(map(str, args))} exited {done.returncode}: {done.stderr}"
        )
    return done


def popen_provision(*args: str | Path, env: Mapping[str, str | None] | None = None) -> subprocess.Popen[str]:
    """`provision ARGS...` started in the background, stdout and stderr piped."""
    return subprocess.Popen(
        argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(env)
    )


def interrupt(
    process: subprocess.Popen[str],
    held: threading.Event,
    started: Callable[[], bool],
    stop: signal.Signals = signal.SIGINT,
) -> str:
    """Ctrl-C (or the `stop` signal given) to `process` once `started()` says it waits on a request that the test's
    index holds (`held` unset); the index answers again 3 s later, as a slow one would, so the signal lands while the
    request is open (a delay instead let provision finish first on a loaded machine). Return its stderr once it
    ended."""
    deadline = time.time() + 60
    while time.time() < deadline and not started():
        time.sleep(0.05)
    process.send_signal(stop)
    threading.Timer(3.0, held.set).start()
    try:
        _, err = process.communicate(timeout=60)
    finally:
        held.set()
    return err


def start_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The variables read once, as a process starts (by the interpreter, its locale, the dynamic loader): a forked
    command has the fork server's."""
    return {
        k: v
        for k, v in env.items()
        if k.startswith(("PYTHON", "LC_", "LD_", "MALLOC_"))
        or k in ("LANG", "LANGUAGE", "TZ", "GLIBC_TUNABLES")
    }


class ForkServer:
    """tests/forkserver.py, started once per test process (the first time a test runs provision) and ended with it."""

    started: dict[int, ForkServer | None] = {}
    starting = threading.Lock()

    def __init__(self, env: dict[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="provision-fork-")  # a socket's path is at most 107 bytes
        self.socket = os.path.join(self.folder, "socket")
        self.settings = start_settings(env)
        self.commands = 0  # run so far
        self.running: set[int] = set()  # the pids of the commands running now
        # the console script's own interpreter (a `#!/bin/sh` trampoline: ours)
        with open(BINARY, "rb") as script:
            shebang = script.readline()[2:].decode().strip()
        interpreter = shebang if os.path.basename(shebang).startswith("python") else sys.executable
        self.process = subprocess.Popen(
            [interpreter, os.path.join(os.path.dirname(__file__), "forkserver.py"), self.socket, BINARY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=self.folder,
        )
        assert self.process.stdout is not None
        self.ready = self.process.stdout.readline() == b"ready\n"
        atexit.register(self.stop)

    def stop(self) -> None:
        """End the fork server and wait for it: the CPU of every command it ran then counts as this process's
        children's, as the commands' own did when each was this process's child (scripts/bench_tests.sh)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    @classmethod
    def get(cls, env: dict[str, str]) -> ForkServer | None:
        """This process's fork server, if it can run a command in `env`."""
        with cls.starting:
            if os.getpid() not in cls.started:
                if start_settings(env) != start_settings(environment()):
                    return None  # a command of other start settings (a stand-in NVML on LD_LIBRARY_PATH) is exec'd:
                    # the server is started for the test process's own, which the other commands share
                made = cls(env)
                cls.started[os.getpid()] = made if made.ready else None
        server = cls.started[os.getpid()]
        return server if server is not None and start_settings(env) == server.settings else None

    def run(
        self, command: list[str], env: dict[str, str], cwd: str, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """As subprocess.run(capture_output=True, text=True): stdout and stderr are pipes read to their end (a process
        the command leaves behind holding them holds this up too), then the exit status; on the timeout the command
        is killed and TimeoutExpired carries what it wrote."""
        deadline = time.monotonic() + timeout
        pipes = [os.pipe(), os.pipe()]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(self.socket)
            message = json.dumps({"argv": command, "env": env, "cwd": cwd}).encode() + b"\n"
            # stdin: the test's own, as subprocess.run gives a child when no input is passed
            socket.send_fds(connection, [message], [0, pipes[0][1], pipes[1][1]])
            for _, write in pipes:
                os.close(write)
            answer = _Lines(connection)
            output = {read: bytearray() for read, _ in pipes}
            connection.settimeout(timeout)  # a fork server that never answers is this command's timeout too
            try:
                pid = int(answer.next())
            except TimeoutError:
                for read in output:
                    os.close(read)
                raise subprocess.TimeoutExpired(command, timeout) from None
            self.commands += 1
            self.running.add(pid)
            try:
                _drain(output, deadline)
                connection.settimeout(max(deadline - time.monotonic(), 0.001))
                status = answer.next()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):  # it ended at the deadline, and was reaped
                    os.kill(pid, signal.SIGKILL)
                connection.settimeout(None)
                answer.next()
                out, err = (_text(output[read]) for read, _ in pipes)
                raise subprocess.TimeoutExpired(command, timeout, out, err) from None
            finally:
                self.running.discard(pid)
                for read in output:
                    os.close(read)
            out, err = (_text(output[read]) for read, _ in pipes)
            return subprocess.CompletedProcess(command, os.waitstatus_to_exitcode(int(status)), out, err)


class _Lines:
    """The fork server's answer, a line at a time, read straight from the socket (a timeout leaves it usable)."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection, self.buffer = connection, b""

    def next(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = self.connection.recv(64)
            if not chunk:
                raise ConnectionError("the fork server's helper ended without an answer")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


def _drain(output: dict[int, bytearray], deadline: float) -> None:
    """Read each pipe until its end; TimeoutError at the deadline."""
    with selectors.DefaultSelector() as watch:
        for read in output:
            watch.register(read, selectors.EVENT_READ)
        while watch.get_map():
            ready = watch.select(deadline - time.monotonic())
            if not ready:
                raise TimeoutError
            for key, _ in ready:
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    output[key.fd] += chunk
                else:
                    watch.unregister(key.fd)


def _text(data: bytes | bytearray) -> str:
    """Bytes as subprocess.run(text=True) turns them into text."""
    # what subprocess.run(text=True) decodes with: _text_encoding() from Python 3.11, the locale's before
    encoding = getattr(subprocess, "_text_encoding", lambda: locale.getpreferredencoding(False))()
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
