"""The one way to run a subprocess: argv list, timeout, an explicit environment, a typed failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision import log
from provision.errors import ToolError

# Set on the lent GPU machines because multicast use can take a shared host's GPUs out of service;
# every process the tool starts keeps them, whatever environment it is given.
SAFETY_VARIABLES = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


@dataclass(frozen=True, kw_only=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines: int = 20) -> str:
        text = (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()
        return "\n".join(text.splitlines()[-lines:])


def environment(extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return a copy of the process environment with `extra` laid over it and the safety variables kept."""
    env = dict(os.environ if base is None else base)
    env.update(extra or {})
    for name in SAFETY_VARIABLES:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGKILL it when provision dies, so a kill -9 leaves no installer writing on."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run(
    argv: Sequence[str | Path],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = False,
    input_text: str | None = None,
    die_with_parent: bool = False,
) -> Completed:
    """Run argv to completion within `timeout` seconds; never raises for a non-zero exit unless `check`.

    `die_with_parent` (only from the main thread: Linux ties it to the forking thread) kills the child with provision.
    """
    args = tuple(str(a) for a in argv)
    if log.level() >= log.VERBOSE:
        import shlex

        log.debug(f"$ {shlex.join(args)}" + (f"  (in {cwd})" if cwd else ""))
    deferred: list[int] = []
    # A Ctrl-C inside Popen would leave a started child unknown to us, writing on into a folder being cleaned up:
    # hold it until `child` exists, then raise it where the child is reaped.
    previous = _hold_interrupts(deferred)
    try:
        child = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=dict(env) if env is not None else environment(),
            cwd=cwd,
            preexec_fn=_die_with_parent if die_with_parent and sys.platform == "linux" else None,  # noqa: PLW1509
        )
    except BaseException as exc:
        _restore(previous)
        if isinstance(exc, FileNotFoundError):
            raise ToolError(f"{args[0]}: not found", "install it or put it on PATH") from exc
        raise
    try:
        _restore(previous)  # from here on a Ctrl-C reaps the child (below)
        if deferred:
            raise KeyboardInterrupt
        stdout, stderr = child.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        _reap(child)
        stdout, stderr = child.communicate()
        result = Completed(argv=args, returncode=-1, stdout=stdout, stderr=stderr, timed_out=True)
        log.debug(f"{args[0]} timed out after {timeout:g} s; its stderr:\n{stderr}")
        if check:
            raise ToolError(f"{' '.join(args[:3])}: timed out after {timeout:g} s", result.tail(5)) from None
        return result
    except BaseException:
        _reap(child)  # Ctrl-C: the child is dead, not dying, before anyone cleans up after it
        raise
    result = Completed(argv=args, returncode=child.returncode, stdout=stdout, stderr=stderr)
    if not result.ok:
        log.debug(f"{args[0]} exited with code {child.returncode}; its stderr:\n{stderr}")
    if check and not result.ok:
        raise ToolError(f"{' '.join(args[:3])} failed with exit code {child.returncode}", result.tail(5))
    return result


def _hold_interrupts(deferred: list[int]) -> Any:
    """Record SIGINT in `deferred` instead of raising it; return the handler to restore (None off the main thread)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, lambda number, _frame: deferred.append(number))


def _restore(handler: Any) -> None:
    if handler is not None:
        signal.signal(signal.SIGINT, handler)


def _reap(child: subprocess.Popen[str]) -> None:
    """Kill a child and wait until it is gone (subprocess.run waits only a quarter second after a Ctrl-C)."""
    child.kill()
    child.wait()
