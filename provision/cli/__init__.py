"""The command line: the group and its error handling in main.py, shared options in options.py, one module per
family of commands (machine, stacks, envs, checks)."""

import os
import sys


def main() -> None:
    """The `provision` script (and `python -m provision`): a lock made again has its uv started before anything else
    is imported (stacks/ahead), then the command line runs (main.py)."""
    open_closed_descriptors()
    _hold_stops()
    # another command imports nothing of it, one that names a `lock` too (an environment, a word given to `run`)
    if _command(sys.argv[1:]) == "lock":
        from provision.stacks import ahead

        ahead.start(sys.argv[1:])
    from provision.cli.main import main as command_line

    command_line()


def _command(argv: list[str]) -> str | None:
    """The command's name: the first word that is none of the group's options (-v, -q, --home PATH; --help and
    --version end there)."""
    words = iter(argv)
    for word in words:
        if word == "--home":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def open_closed_descriptors() -> None:
    """Each of descriptors 0, 1 and 2 that the shell closed (`provision report >&-`, `provision lock <&- >&-`) opened
    on /dev/null, before any file or pipe is made: one made first took its number (a uv started ahead had its stdout
    pipe on 1, where the command line then put /dev/null, and closing that pipe closed the command's stdout)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


# a stop signal (SIGTERM, SIGHUP) that came while the command line loaded: main.py's handling raises it once in place
held_stops: list[int] = []


def hold_stop(number: int, _frame: object) -> None:
    """Keep a stop signal for the command line to take as Ctrl-C once it can say so (cli/main._stops_as_interrupts):
    a uv started ahead asks the index while click loads, and a stop then killed provision, leaving its folder."""
    held_stops.append(number)


def _hold_stops() -> None:
    import signal

    for stop in (signal.SIGTERM, signal.SIGHUP):
        # one ignored (nohup) stays ignored
        if signal.getsignal(stop) is signal.SIG_DFL:
            signal.signal(stop, hold_stop)
