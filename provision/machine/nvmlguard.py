"""NVML that crashes the process, told apart from one that does not answer.

A libnvidia-ml.so.1 that dies inside nvmlInit (SIGSEGV: another driver's library mounted into a container, a broken
install) takes provision with it, and no Python code can catch that. So each NVML reading leaves a mark on disk while
it runs (`begin`, removed by `end` or at the process's exit). A mark left by a process that is gone means the last
reading died inside NVML: the next one starts NVML in a child process first (`child_start`). A child killed by a
signal means this process never calls NVML; the reading says why (state `crashed`) and what to do, and a kept
`crashed` file makes every later run check in a child first, until a child starts NVML cleanly. The crash itself
prints the Python stacks (faulthandler, on while NVML runs), and the run after it explains.

Only os here: the probe loads no pathlib, and this runs before its threads start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

FOLDER = "nvml"  # under provision's cache folder (wheelfacts.root)
CRASHED = "crashed"  # kept while NVML's start kills a child: every run checks in a child first
_MARK = "reading-"  # reading-<pid>: a reading under way


def folder() -> str:
    from provision import wheelfacts

    return os.path.join(wheelfacts.root(), FOLDER)


def suspected() -> bool:
    """Whether NVML crashed a reading before: a `crashed` file, or a mark of a process that is gone (removed now)."""
    try:
        names = os.listdir(folder())
    except OSError:
        return False
    found = CRASHED in names
    for name in names:
        pid = name[len(_MARK) :]
        if name.startswith(_MARK) and pid.isdigit() and not _alive(int(pid)):
            found = True
            _remove(name)
    return found


def child_start(library: str, limit: float) -> str | None:
    """Start NVML (`library`'s nvmlInitWithFlags, then nvmlShutdown) in a forked child: the name of the signal that
    killed it ("SIGSEGV"), "timeout" where it did not end within `limit` seconds (killed then), or None where it
    ended by itself, whatever NVML answered (an error code is read in this process, as ever)."""
    if not hasattr(os, "fork"):
        return None
    pid = os.fork()
    if pid == 0:  # the child: nothing but the start; its own stderr closed (a crash there says nothing)
        try:
            import ctypes
            import faulthandler

            faulthandler.disable()
            quiet = os.open(os.devnull, os.O_WRONLY)
            for fd in (1, 2):  # nothing of the child's reaches the parent's output (probe --json is stdout)
                os.dup2(quiet, fd)
            lib = ctypes.CDLL(library)
            if lib.nvmlInitWithFlags(0) == 0:
                lib.nvmlShutdown()
        finally:
            os._exit(0)
    deadline = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.005)
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return None


def crashed(kept: bool) -> None:
    """Keep (or, `kept` False, drop) the `crashed` file: whether NVML's start killed the last child."""
    if kept:
        try:
            os.makedirs(folder(), mode=0o700, exist_ok=True)
            os.close(
                os.open(os.path.join(folder(), CRASHED), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            )
        except OSError:
            pass
    else:
        _remove(CRASHED)


def begin() -> str | None:
    """Mark a reading under way (and turn faulthandler on, so that a crash inside NVML prints where); the mark's
    name, for `end`, None where none could be made (a read-only home: no guard, as before)."""
    import atexit
    import faulthandler

    name = f"{_MARK}{os.getpid()}"
    try:
        os.makedirs(folder(), mode=0o700, exist_ok=True)
        os.close(os.open(os.path.join(folder(), name), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    except OSError:
        return None
    if not faulthandler.is_enabled():
        try:
            faulthandler.enable()  # onto sys.stderr's descriptor
        except (AttributeError, ValueError, OSError):  # a stderr with none (an embedding's): the mark alone
            pass
        else:
            _enabled.append(name)
    atexit.register(end, name)  # a reading left hung on its thread ends with the process: no crash
    return name


_enabled: list[str] = []  # the marks whose begin turned faulthandler on


def end(name: str | None) -> None:
    """The reading marked `name` ended (NVML answered, or this process ends without a crash)."""
    if name is None:
        return
    _remove(name)
    if name in _enabled:
        import faulthandler

        _enabled.remove(name)
        faulthandler.disable()


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(folder(), name))


def _alive(pid: int) -> bool:
    from provision import proc

    return proc.pid_alive(pid)
