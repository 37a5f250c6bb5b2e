"""The one way to run a subprocess: argv list, timeout, an explicit environment, a typed failure."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, NamedTuple

from provision import log
from provision.errors import ToolError

if TYPE_CHECKING:
    from pathlib import Path
    from signal import _HANDLER

# Set on the lent GPU machines because multicast use can take a shared host's GPUs out of service;
# every process the tool starts keeps them, whatever environment it is given.
SAFETY_VARIABLES = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


class Completed(NamedTuple):
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines: int = 20) -> str:
        """The last `lines` lines of stdout then stderr, and of them no more than TAIL_CHARS characters (the end): what
        an error message, a check's output_tail and env.json carry of a child's output, whatever length its lines."""
        text = (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()
        kept = "\n".join(text.splitlines()[-lines:])
        return kept if len(kept) <= TAIL_CHARS else "..." + kept[-TAIL_CHARS:]


TAIL_CHARS = (
    4000  # 20 lines of 200 characters; a benchmark printing one 600 KB line was shown (and stored) whole
)


def environment(
    extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Return a copy of the process environment with `extra` laid over it and the safety variables kept."""
    env = dict(os.environ if base is None else base)
    env.update(extra or {})
    for name in SAFETY_VARIABLES:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up in the parent: the child between fork and exec should only call it, not import."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def death_signal(parent: int) -> Callable[[], None] | None:
    """In the child (made in the parent, called in the child: a subprocess's preexec_fn, a fork's first step): ask
    Linux to SIGKILL it when provision dies (PR_SET_PDEATHSIG), so a kill -9 leaves nothing running on; if provision
    died already, before the request, the child ends at once."""
    prctl = _prctl() if sys.platform == "linux" else None
    if prctl is None:
        return None

    def request() -> None:
        prctl(1, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    return request


def run(
    argv: Sequence[str | Path],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = False,
    input_text: str | None = None,
    die_with_parent: bool | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    keep: int | None = None,
    group: bool = False,
    started: Callable[[], None] | None = None,
    child: subprocess.Popen[str] | None = None,
) -> Completed:
    """Run argv to completion within `timeout` seconds; never raises for a non-zero exit unless `check`. With `keep`,
    of each of stdout and stderr only the last `keep` characters are held (a command of the user's, such as a profile's
    baseline, may print gigabytes: read whole they took three times that in memory). With `group`, the child leads a
    process group of its own, and what is left of it is killed when the child ends, times out or is interrupted (a
    baseline's torchrun workers, a shell's background job: killed with the child alone, they ran on holding the GPUs).

    The child dies with provision (a kill -9 leaves no installer or check payload running on), unless
    `die_with_parent` is False. Linux ties that to the forking thread, so it applies from the main thread only.
    `started` is called once the child runs, before it is waited for (what the caller does meanwhile, in a thread).
    With `child`, argv already runs as that child (`start`: stacks/ahead), and is waited for as if started here.
    """
    args = tuple(str(a) for a in argv)
    if log.level() >= log.VERBOSE:
        import shlex

        log.debug(f"$ {shlex.join(args)}" + (f"  (in {cwd})" if cwd else ""))
    if die_with_parent is None:
        die_with_parent = threading.current_thread() is threading.main_thread()
    deferred: list[int] = []
    # A Ctrl-C inside Popen would leave a started child unknown to us, writing on into a folder being cleaned up:
    # hold it until `child` exists, then raise it where the child is reaped.
    previous = _hold_interrupts(deferred)
    try:
        if child is None:
            child = start(
                args,
                env=dict(env) if env is not None else environment(),
                cwd=cwd,
                input_text=input_text is not None,
                die_with_parent=die_with_parent,
                group=group,
            )
    except BaseException as exc:
        _restore(previous)
        if isinstance(exc, FileNotFoundError):
            raise ToolError(f"{args[0]}: not found", "install it or put it on PATH") from exc
        if isinstance(exc, OSError):  # a folder, a file without the execute bit, a binary for another machine
            raise ToolError(
                f"{args[0]}: cannot run it ({exc.strerror or exc})", "give the path of an executable program"
            ) from exc
        raise
    late: list[str] = []  # what `keep` held when the deadline came
    try:
        _restore(previous)  # from here on a Ctrl-C reaps the child (below)
        if deferred:
            raise KeyboardInterrupt
        if started is not None:
            started()
        if keep is not None:
            stdout, stderr = _communicate_kept(child, timeout, keep, late, group, on_stderr_line)
        elif on_stderr_line is not None:
            stdout, stderr = _communicate_lines(child, timeout, on_stderr_line)
        else:
            stdout, stderr = child.communicate(input_text, timeout=timeout)
        if group:
            _kill_group(child)
    except subprocess.TimeoutExpired:
        _reap(child, group)
        # with `keep`, what the reading threads held (the pipes are theirs); else what is left in the pipes
        stdout, stderr = late if keep is not None and late else child.communicate()
        result = Completed(argv=args, returncode=-1, stdout=stdout, stderr=stderr, timed_out=True)
        log.debug(f"{args[0]} timed out after {timeout:g} s; its stderr:\n{stderr}")
        if check:
            raise ToolError(f"{' '.join(args[:3])}: timed out after {timeout:g} s", result.tail(5)) from None
        return result
    except BaseException:
        _reap(child, group)  # Ctrl-C: the child is dead, not dying, before anyone cleans up after it
        raise
    result = Completed(argv=args, returncode=child.returncode, stdout=stdout, stderr=stderr)
    if not result.ok:
        log.debug(f"{args[0]} exited with code {child.returncode}; its stderr:\n{stderr}")
    if check and not result.ok:
        raise ToolError(f"{' '.join(args[:3])} failed with exit code {child.returncode}", result.tail(5))
    return result


def start(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str | None,
    input_text: bool = False,
    die_with_parent: bool = True,
    group: bool = False,
) -> subprocess.Popen[str]:
    """Start argv with its output piped as text (`run` waits for it): it dies with provision unless
    `die_with_parent` is False."""
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if input_text else subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=dict(env),
        cwd=cwd,
        preexec_fn=death_signal(os.getpid()) if die_with_parent else None,
        start_new_session=group,
    )


def _communicate_lines(
    child: subprocess.Popen[str], timeout: float, on_line: Callable[[str], None]
) -> tuple[str, str]:
    """communicate(), with each stderr line handed to `on_line` as it comes (what an installer says it is doing)."""
    collected: dict[str, list[str]] = {"out": [], "err": []}

    def read_out() -> None:
        if child.stdout is not None:
            collected["out"].append(child.stdout.read())

    def read_err() -> None:
        for line in child.stderr if child.stderr is not None else []:
            collected["err"].append(line)
            with contextlib.suppress(Exception):  # a display problem must never break the install
                on_line(line.rstrip("\n"))

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    wait(child, timeout)  # TimeoutExpired goes to the caller, which reaps the child
    for reader in readers:
        reader.join(5)
    return "".join(collected["out"]), "".join(collected["err"])


def _communicate_kept(
    child: subprocess.Popen[str],
    timeout: float,
    keep: int,
    late: list[str],
    group: bool,
    on_stderr_line: Callable[[str], None] | None = None,
) -> tuple[str, str]:
    """communicate(), holding of each stream only its last `keep` characters; on the deadline the child is killed,
    what was kept of stdout and stderr put in `late`, and subprocess.TimeoutExpired raised. With `on_stderr_line`,
    each line of stderr is also handed to it as it comes."""
    import collections

    kept: dict[str, collections.deque[str]] = {"out": collections.deque(), "err": collections.deque()}

    def read(stream: IO[str] | None, chunks: collections.deque[str]) -> None:
        size = 0
        lines = on_stderr_line if chunks is kept["err"] else None
        while stream is not None:
            chunk = stream.readline(1 << 16) if lines is not None else stream.read(1 << 16)
            if not chunk:
                return
            if lines is not None:
                lines(chunk.rstrip("\n"))
            chunks.append(chunk)
            size += len(chunk)
            while size - len(chunks[0]) >= keep:
                size -= len(chunks.popleft())

    readers = [
        threading.Thread(target=read, args=(child.stdout, kept["out"]), daemon=True),
        threading.Thread(target=read, args=(child.stderr, kept["err"]), daemon=True),
    ]
    for reader in readers:
        reader.start()

    def joined() -> tuple[str, str]:
        for reader in readers:
            reader.join(5)  # a helper the child left may hold a pipe open: what was read is enough
        return "".join(list(kept["out"]))[-keep:], "".join(list(kept["err"]))[-keep:]

    try:
        wait(child, timeout)
    except subprocess.TimeoutExpired:
        _reap(child, group)
        late.extend(joined())
        raise
    if group:  # its helpers go with it: what they hold open of its pipes is closed too
        _kill_group(child)
    return joined()


def wait(child: subprocess.Popen[str], timeout: float) -> None:
    """Wait for `child` to end, at most `timeout` seconds (subprocess.TimeoutExpired after), woken by its exit.

    Popen.wait(timeout) polls, sleeping up to 50 ms between looks: a child that runs a while (uv installing) was
    found ended 25 ms late on average. Linux's pidfd becomes readable when the process ends; where there is none
    (another system, a seccomp filter that refuses it) Popen.wait does as before. Ctrl-C raises from the poll."""
    import select

    try:
        descriptor = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        child.wait(timeout=timeout)
        return
    try:
        watch = select.poll()
        watch.register(descriptor, select.POLLIN)
        if not watch.poll(max(0, int(timeout * 1000))):
            raise subprocess.TimeoutExpired(child.args, timeout)
    finally:
        os.close(descriptor)
    child.wait()  # ended: reaped at once


def run_watched(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str],
    first_bound_s: float,
    on_line: Callable[[str], float | None],
) -> Completed:
    """Run argv, reading its stdout line by line as it comes; `on_line` answers a line that shows progress with the
    bound for the next one (seconds from now), any other with None. No progress within the bound: the whole process
    group is killed and the result has timed_out=True with what was printed so far.

    stdout is a pseudo-terminal, so a C program's stdio writes each line as it ends (into a pipe it would hold them
    in a 4 KiB buffer until exit, and every run would look hung)."""
    import pty
    import select
    import time

    args = tuple(str(a) for a in argv)
    log.debug(f"$ {' '.join(args)}  (watched)")
    # Linux ties the death signal to that thread
    main_thread = threading.current_thread() is threading.main_thread()
    try:
        master, slave = pty.openpty()
    except OSError as exc:  # a container without /dev/pts
        raise ToolError(
            f"no pseudo-terminal to read {args[0]}'s lines as they come ({exc.strerror or exc})",
            "mount /dev/pts (devpts) in this container",
        ) from exc
    stderr_chunks: list[bytes] = []
    try:
        child = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,  # its own process group: a kill takes its helpers too
            preexec_fn=death_signal(os.getpid()) if main_thread else None,
        )
    except OSError as exc:
        os.close(master)
        raise ToolError(
            f"{args[0]}: cannot run it ({exc.strerror or exc})", "give the path of an executable program"
        ) from exc
    finally:
        os.close(slave)
    assert child.stderr is not None
    drain = threading.Thread(
        target=lambda: stderr_chunks.append(child.stderr.read() if child.stderr else b""), daemon=True
    )
    drain.start()
    lines: list[str] = []
    pending, deadline, stalled = b"", time.monotonic() + first_bound_s, False
    try:
        exited_at: float | None = None
        while not stalled:
            remaining = deadline - time.monotonic()
            # wake at least twice a second: a child that exited while a helper of its keeps the terminal open is
            # done once its last output is read, not hung at the deadline
            if remaining <= 0 or not select.select([master], [], [], min(remaining, 0.5))[0]:
                if exited_at is None and child.poll() is not None:
                    exited_at = time.monotonic()
                if exited_at is not None and time.monotonic() - exited_at >= 1.0:
                    break
                stalled = time.monotonic() >= deadline
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                chunk = b""
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                lines.append(raw.decode(errors="replace").rstrip("\r"))
                bound = on_line(lines[-1])
                if bound is not None:
                    deadline = time.monotonic() + bound
        if not stalled:
            try:
                child.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                stalled = True
    finally:  # also on Ctrl-C; and a helper it left behind holding the terminal goes with it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        os.close(master)
        drain.join(5)
    if pending:
        lines.append(pending.decode(errors="replace").rstrip("\r"))
    return Completed(
        argv=args,
        returncode=-1 if stalled else child.returncode,
        stdout="\n".join(lines) + "\n",
        stderr=b"".join(stderr_chunks).decode(errors="replace"),
        timed_out=stalled,
    )


def _hold_interrupts(deferred: list[int]) -> _HANDLER:
    """Record SIGINT in `deferred` instead of raising it; return the handler to restore (None off the main thread)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, lambda number, _frame: deferred.append(number))


def _restore(handler: _HANDLER) -> None:
    if handler is not None:
        signal.signal(signal.SIGINT, handler)


def _reap(child: subprocess.Popen[str], group: bool = False) -> None:
    """Kill a child (with `group`, every process of its group) and wait until it is gone (subprocess.run waits only a
    quarter second after a Ctrl-C)."""
    if group:
        _kill_group(child)
    child.kill()
    child.wait()


def _kill_group(child: subprocess.Popen[str]) -> None:
    """SIGKILL every process left in the group `child` leads (started with start_new_session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
