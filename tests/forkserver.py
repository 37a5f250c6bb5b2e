"""A provision that has imported itself once and forks a real process for each command a test runs (tests/launch.py).

The tests start provision about a thousand times; each start spent most of its CPU importing the same modules. This
program imports every provision module once, then waits on a Unix socket. For each request (argv, environment, working
folder, and the test's stdin, stdout and stderr as file descriptors) it forks a helper, which forks the command's
process and reports its pid and then its wait status. That process is a real one, with its own pid, file descriptors,
environment, working folder, signals and exit status: it runs the installed console script's `main()` exactly as the
script would, its stdio on the test's files, and it ends the way an interpreter ends (atexit, flushed streams, the
status of an uncaught exception or of a signal).

What a forked command cannot share with this program, the test side (launch.py) starts with exec instead: an
environment whose settings read at a process's start differ from this program's (PYTHON*, LC_*, LD_*, LANG, TZ), a
missing working folder. `PROVISION_TEST_EXEC=1` starts every command with exec.

Wire format: a request is one line of JSON, {"argv": [...], "env": {...}, "cwd": "..."}, sent with three descriptors
(socket.send_fds); the answer is two lines on the same connection, the pid and then the raw wait status.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import io
import json
import os
import pkgutil
import selectors
import signal
import socket
import sys
import tempfile
import types
from typing import NoReturn

# sys.path as the console script has it: its own folder first, never this one (tests/) or the working folder.
sys.path[:] = [os.path.dirname(sys.argv[2])] + [
    p for p in sys.path[1:] if p not in ("", os.path.dirname(__file__))
]

# Every module a command may import, imported now, once: a child then imports nothing that is not already here.
import provision  # noqa: E402
from provision.cli import main  # noqa: E402  (the console script's entry point)
from provision.cli.main import _quick_exit  # noqa: E402

for module in pkgutil.walk_packages(provision.__path__, "provision."):
    importlib.import_module(module.name)


def serve(path: str) -> tuple[list[str], socket.socket]:
    """Answer requests until stdin closes (the test process ended); return only in a command's process."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    watch = selectors.DefaultSelector()
    watch.register(listener, selectors.EVENT_READ)
    watch.register(sys.stdin, selectors.EVENT_READ)
    while True:
        for key, _ in watch.select():
            reap()
            if key.fileobj is sys.stdin:
                os._exit(0)
            connection, _ = listener.accept()
            if os.fork() == 0:
                watch.close()
                listener.close()
                return helper(connection)
            connection.close()


def reap() -> None:
    """Wait for the helpers that ended: their CPU, and their commands', then counts as this program's children's."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def helper(connection: socket.socket) -> tuple[list[str], socket.socket]:
    """Fork the command's process, tell the test its pid and then its wait status."""
    message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while not message.endswith(b"\n"):  # one line of JSON, however the stream splits it
        chunk = connection.recv(1 << 16)
        if not chunk:
            os._exit(1)
        message += chunk
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)  # dup2 makes them inheritable, as a real process's 0, 1 and 2 are
            os.close(fd)
        # stdout and stderr over those descriptors, as Python makes them at start: the server's took a file as
        # seekable, and changing a stream's errors (cli/main._stderr_as_ls) then asked a pipe where it stood
        for name in ("stdout", "stderr"):
            made = getattr(sys, name)
            again = io.TextIOWrapper(
                io.BufferedWriter(io.FileIO(made.fileno(), "w", closefd=False)),
                encoding=made.encoding,
                errors=made.errors,
                line_buffering=made.line_buffering,
                write_through=made.write_through,
            )
            setattr(sys, name, again)
            setattr(sys, f"__{name}__", again)
        connection.close()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # it keeps the TMPDIR it first read
        script = types.ModuleType("__main__")  # the console script's, as `spawn` would import it again
        script.__file__ = request["argv"][0]
        sys.modules["__main__"] = script
        return request["argv"], connection
    for fd in fds:
        os.close(fd)
    connection.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    connection.sendall(f"{status}\n".encode())
    os._exit(0)


def finish(code: str | int | None) -> NoReturn:
    """End as the console script ends (its main() does it itself: provision.cli.main._quick_exit, atexit, flushed
    streams, os._exit); here for what main() lets out (an interrupt, a bug)."""
    _quick_exit(code)
    sys.exit(code)  # a thread still at work: as Python ends


if __name__ == "__main__":
    gc.freeze()  # what was imported is never collected: a child's collections leave the pages it shares alone
    argv, _ = serve(sys.argv[1])
    sys.argv = argv
    try:
        main()  # the console script's sys.exit(main()): main() ends with sys.exit
        finish(0)
    except SystemExit as ended:
        finish(ended.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        atexit._run_exitfuncs()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as Python ends on an uncaught Ctrl-C: killed by SIGINT
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        finish(1)
