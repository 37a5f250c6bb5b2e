"""NVML that crashes the process, told apart from one that does not answer.

A libnvidia-ml.so.1 that dies inside nvmlInit (SIGSEGV: another driver's library mounted into a container, a broken
install) takes provision with it, and no Python code can catch that. So each NVML reading leaves a mark on disk while
it runs (`begin`, removed by `end` or at the process's exit), stamped with its writer's start time. A mark left by a
process that is gone (its pid free, or now a process that started at another time: a reused pid, another pid
namespace's; or one of this process's own pid that it did not make: a container's provision has the same pid every
run) means the last reading
died inside NVML: the next one starts and reads NVML in a child process first (`child_start`). A child killed by a
signal (or ended by the library) means this process never calls NVML; the reading says why (state `crashed`) and what
to do, and a kept `crashed` file makes every later run check in a child first, until a child reads NVML cleanly. The
crash itself prints the Python stacks (faulthandler, on while NVML runs), and the run after it explains.

Only os here: the probe loads no pathlib, and this runs before its threads start.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

FOLDER = "nvml"  # under provision's cache folder (wheelfacts.root)
CRASHED = "crashed"  # kept while NVML kills a child: every run checks in a child first
_MARK = "reading-"  # reading-<pid>: a reading under way
_PID_MAX = 1 << 22  # Linux's largest pid_max: a larger number is no mark of provision's
_OPEN = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK  # a FIFO put there is no wait for a reader


def suspected() -> bool:
    """Whether NVML crashed a reading before: a `crashed` file, or a mark of a process that is gone (removed now)."""
    held = _held(create=False)
    if held is None:
        return False
    try:
        names = os.listdir(held)
        found = CRASHED in names
        for name in names:
            pid = _pid(name)
            if pid is not None and not _reading(pid, _stamped(held, name)):
                found = True
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=held)
    except OSError:
        return False
    finally:
        os.close(held)
    return found


def child_start(work: Callable[[], object], limit: float) -> str | None:
    """`work` (NVML's start and reading) in a forked child: how the child died where it ended before it answered
    (the signal's name, "SIGSEGV"; "exit status N": a library that ends the process), "timeout" where it did not
    answer within `limit` seconds (killed then), or None where it answered, whatever NVML said (an error is read in
    this process, as ever). The child answers on a pipe, so that a caller's SIGCHLD ignored (the child reaped by
    itself) costs nothing; it dies with this process (PR_SET_PDEATHSIG), and this one's Ctrl-C kills it. OSError
    where no child could be started (fork's EAGAIN: out of processes; ENOMEM): NVML was not asked."""
    if not hasattr(os, "fork"):
        return None
    from provision import proc

    die_with_parent = proc.death_signal(os.getpid())  # prctl looked up here: the child only calls it
    readable, writable = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(readable)
        os.close(writable)
        raise
    if pid == 0:  # the child: nothing but `work`; its own output closed (a crash there says nothing)
        try:
            os.close(readable)
            if die_with_parent is not None:
                die_with_parent()
            import faulthandler

            faulthandler.disable()
            quiet = os.open(os.devnull, os.O_WRONLY)
            for fd in (1, 2):  # nothing of the child's reaches the parent's output (probe --json is stdout)
                os.dup2(quiet, fd)
            work()
        except BaseException:  # a Python error is an answer: NVML did not end the child
            pass
        finally:
            with contextlib.suppress(BaseException):
                os.write(writable, b"1")
            os._exit(0)
    os.close(writable)
    try:
        import select

        ended = bool(select.select([readable], [], [], limit)[0])  # its answer, or its end (EOF)
        answered = ended and os.read(readable, 1) == b"1"
    except BaseException:  # Ctrl-C: the child goes too
        _kill(pid)
        raise
    finally:
        os.close(readable)
    if not ended:
        _kill(pid)
        return "timeout"
    status = _reap(pid)
    if answered:
        return None
    if status is None:
        return "ended without answering"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return signal.Signals(number).name
        except ValueError:  # a real-time signal: Python names none of them
            return f"signal {number}"
    return f"exit status {os.WEXITSTATUS(status)}"


def crashed(kept: bool) -> None:
    """Keep (or, `kept` False, drop) the `crashed` file: whether NVML killed the last child."""
    if kept:
        _make(CRASHED)
    else:
        _remove(CRASHED)


def begin() -> str | None:
    """Mark a reading under way (and turn faulthandler on, so that a crash inside NVML prints where); the mark's
    name, for `end`, None where none could be made (a read-only home: no guard, as before)."""
    import atexit
    import faulthandler

    name = f"{_MARK}{os.getpid()}"
    if not _make(name, _started(os.getpid()) or ""):
        return None
    # once a process, however many readings: one left hung on its thread ends with the process, no crash
    if not _at_exit:
        _at_exit.append(atexit.register(_end_all))
    _under_way.append(name)
    if not faulthandler.is_enabled():
        try:
            faulthandler.enable()  # onto sys.stderr's descriptor
        except (AttributeError, ValueError, OSError):  # a stderr with none (an embedding's): the mark alone
            pass
        else:
            _enabled.append(name)
    return name


_enabled: list[str] = []  # the marks whose begin turned faulthandler on
# this process's readings under way, one entry each (a mark is removed with the last)
_under_way: list[str] = []
_at_exit: list[object] = []  # _end_all, once registered with atexit


def end(name: str | None) -> None:
    """The reading marked `name` ended (NVML answered, or this process ends without a crash)."""
    if name is None or name not in _under_way:
        return
    _under_way.remove(name)
    if name not in _under_way:
        _remove(name)
    if name in _enabled:
        import faulthandler

        _enabled.remove(name)
        faulthandler.disable()


def _end_all() -> None:
    for name in list(_under_way):
        end(name)


def _pid(name: str) -> int | None:
    """The pid of a mark's name, None for a name provision never writes (reading-abc, reading-², reading-0)."""
    number = name[len(_MARK) :]
    if not (name.startswith(_MARK) and number.isascii() and number.isdigit() and len(number) <= 8):
        return None
    return int(number) if 0 < int(number) <= _PID_MAX else None


def _reading(pid: int, stamp: str | None = None) -> bool:
    """Whether the process of a mark is reading NVML: alive, or this one where it has a reading under way. A mark
    stamped with its writer's start time (`_started`) is of a process that is gone where the pid's process now
    started at another time: the pid was reused, or the mark was written in another pid namespace."""
    if pid == os.getpid():
        return f"{_MARK}{pid}" in _under_way
    from provision import proc

    if not proc.pid_alive(pid):
        return False
    now = _started(pid)
    return not stamp or now is None or now == stamp


def _started(pid: int) -> str | None:
    """When the process `pid` started, in clock ticks after boot (/proc/PID/stat's 22nd field), None where it cannot
    be read (no /proc, another user's hidden one)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # after the command's name, which may hold spaces
            fields = stat.read(4096).rpartition(b")")[2].split()
        started = fields[19].decode()  # field 22: those after the name start at field 3, the state
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return started if started.isdigit() else None


def _stamped(held: int, name: str) -> str | None:
    """The start time a mark holds, None for a mark of the format before (empty) or one that cannot be read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=held)
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return text if text.isdigit() else None


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    _reap(pid)


def _reap(pid: int) -> int | None:
    """The child's wait status, None where it was reaped by itself (SIGCHLD ignored)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def _held(create: bool) -> int | None:
    """The folder's descriptor, trusted as wheelfacts trusts the cache's folders (a link there removed, never
    followed; none where it or the cache is another user's or writable by others), None where there is none."""
    from provision import wheelfacts

    try:
        return wheelfacts.open_folder(FOLDER, create=create)
    except OSError:  # a read-only cache: no guard, as before
        return None


def _make(name: str, text: str = "") -> bool:
    held = _held(create=True)
    if held is None:
        return False
    try:
        fd = os.open(name, _OPEN, 0o600, dir_fd=held)
        try:
            import stat

            if text and stat.S_ISREG(os.fstat(fd).st_mode):
                os.ftruncate(fd, 0)
                os.write(fd, text.encode())
        except OSError:  # a full disk: a mark left empty would read as a reading that crashed, next run
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=held)
            raise
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        os.close(held)
    return True


def _remove(name: str) -> None:
    held = _held(create=False)
    if held is not None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=held)
        os.close(held)
