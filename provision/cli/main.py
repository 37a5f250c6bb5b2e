"""The `provision` group: its options, every command added in one place, and the one place that turns an error
into a message and an exit code (docs/exit-codes.md)."""

from __future__ import annotations

import codecs
import contextlib
import errno
import functools
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import click

from provision import DISTRIBUTION, __version__
from provision.cli.options import HOME_HELP, App, home_option, verbosity_options
from provision.errors import InputError, Interrupted, ProvisionError, UsageError

if TYPE_CHECKING:
    from provision.views.render import Shown

# A command's code is found from its name: `provision NAME` lives in the module of its family, which calls one
# operation in the folder of the same name (docs/architecture.md). A family's module is imported only when one of its
# commands runs (click's lazy group), and imports its operations lazily in turn, so `switch` loads no lock, index,
# scan or rich.
COMMANDS: dict[str, str] = {
    "probe": "machine:probe",
    "scan": "scan:scan",
    "report": "machine:report",
    "profiles": "stacks:list_profiles",
    "lock": "stacks:lock_command",
    "create": "envs:create",
    "envs": "envs:list_envs",
    "switch": "active:switch",
    "rollback": "active:rollback",
    "remove": "envs:remove",
    "gc": "envs:gc",
    "adopt": "envs:adopt",
    "run": "envs:run",
    "shell-env": "envs:shell_env",
    "restore": "envs:restore",
    "accept": "envs:accept",
    "check": "checks:check",
    "baseline": "checks:baseline",
    "compare": "checks:compare",
    "bench": "checks:bench",
    "try": "trials:try_command",
    "trials": "trials:trials",
    "upgrade": "upgrade:upgrade",
}


class LazyGroup(click.Group):
    """The group whose commands are imported when asked for by name (click's documented LazyGroup)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            family, _, attribute = COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(f"provision.cli.{family}"), attribute)
            assert isinstance(command, click.Command) and command.name == cmd_name, COMMANDS[cmd_name]
            self.add_command(command)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__,
    prog_name="provision",
    package_name=DISTRIBUTION,
    message="%(prog)s, version %(version)s (%(package)s)",
)
@functools.partial(
    home_option, help=HOME_HELP + " The commands that use environments also take it after their name."
)
@verbosity_options
def cli() -> None:
    """Move a GPU machine from one CUDA stack to the next, verified and reversible."""


# click 8.2 and later raise it for a group called with no arguments (older ones print the help themselves)
_NO_ARGS: tuple[type[click.UsageError], ...] = tuple(
    [click.exceptions.NoArgsIsHelpError] if hasattr(click.exceptions, "NoArgsIsHelpError") else []
)


def _json_requested(state: App, argv: Sequence[str]) -> bool:
    # A usage error can stop parsing before --json's own callback ran: the command line still says what was asked.
    words = list(argv)
    return state.as_json or "--json" in (words[: words.index("--")] if "--" in words else words)


def fail(state: App, argv: Sequence[str], message: str, hint: str, exit_code: int, code: str) -> None:
    """Print the error line and its hint on stderr and, under --json, the error document on stdout (with the error
    class's `code`, docs/exit-codes.md); then exit."""
    from provision.log import redact
    from provision.views import ui

    message, hint = redact(message), redact(hint)  # the last net: no password of any URL is ever printed
    with contextlib.suppress(OSError):  # stderr gone too: the exit code still says it
        ui.error(message, hint)
    if _json_requested(state, argv):
        try:
            ui.dump_json({"error": {"message": message, "hint": hint, "exit_code": exit_code, "code": code}})
            sys.stdout.flush()
        except OSError:  # stdout is the failure (a full disk, a reader gone): the error line has said it
            _discard_stdout()
    sys.exit(exit_code)


def _closed_streams() -> None:
    """A stream the shell closed (`provision report >&-`) reads and writes as /dev/null: the output is thrown away as
    asked, never a traceback, and no file provision opens later takes its number (a child's output would land in it)."""
    from provision.cli import open_closed_descriptors

    open_closed_descriptors()
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 - the process's own stream


def _discard_stdout() -> None:
    """What stdout still holds goes nowhere (its reader is gone, its disk full): no second error when Python flushes
    it at exit."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's capture): nothing is flushed to a descriptor at exit
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def _write(shown: Shown | None, state: App) -> int:
    """Render a command's result (cli/main.py is the one place it happens) and flush it, so that a full disk or a
    reader gone is met here, inside the net, not when Python exits; return the exit code."""
    if shown is not None:
        from provision.views import render

        try:
            code = render.render(shown, state.output)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except UnicodeEncodeError as exc:
            # PYTHONIOENCODING=ascii, a C locale without UTF-8 mode: 'é' has no byte there (--json escapes it)
            _discard_stdout()
            raise ProvisionError(
                f"cannot write the output: its encoding ({exc.encoding}) has no {exc.object[exc.start : exc.end]!a}",
                "run it in a UTF-8 locale (LC_ALL=C.UTF-8) or with PYTHONIOENCODING=utf-8, or ask for --json",
            ) from exc
        except OSError as exc:  # stdout itself cannot be written: say so, and write nothing more on it
            _discard_stdout()  # the error document under --json goes where the rest went: nowhere
            hint = (
                "free space on that disk and run it again"
                if exc.errno == errno.ENOSPC
                else "check where the output goes"
            )
            raise ProvisionError(f"cannot write the output: {exc.strerror or exc}", hint) from exc
        return code
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line, exit with its code (0 ok, 1 a verdict failed, 2 usage, others per error class)."""
    code: str | int | None = 0
    try:
        _main(argv)
    except SystemExit as done:
        if argv is not None:  # a caller's own main(): its exit is its own
            raise
        code = done.code
    finally:
        # wheelfacts loaded: what it was given to put later is written now
        facts = sys.modules.get("provision.wheelfacts")
        if facts is not None:
            facts.settle()
    # the process ends here (`provision`, `python -m provision`), not in a caller's own main()
    if argv is None:
        _quick_exit(code)


def _quick_exit(code: str | int | None) -> None:
    """End the process as soon as what it says is out: the exit functions run, the output flushed, then os._exit,
    which spares the interpreter's teardown (6 ms of every command here: each module and object freed one by one,
    the last garbage collection over everything rich, requests and packaging made; a lock made again takes 1.1 s,
    uv's own 1.0). Everything provision writes is closed where it is written; kept connections and the output
    streams are the system's to close. A thread still at work (never one of provision's once the command has
    returned) or an exit code that is not a number ends as Python ends it."""
    import atexit
    import threading

    busy = any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()
    )
    if busy or not (code is None or isinstance(code, int)):
        import gc

        gc.freeze()  # at least no last collection
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # what Python exits with when it cannot flush stdout
    os._exit((code or 0) & 0xFF)


def _stderr_as_ls() -> None:
    """stderr writes a path's byte that is not UTF-8 as it is too, as stdout does (docs/exit-codes.md): Python's
    stderr backslashes it, and an `error:` line named the file `h\\udcffme`, which is no name `ls` shows or a shell
    takes. A character the encoding has no byte for is still backslashed (`\\xf4` under ascii): stderr never fails."""

    def as_ls(exc: UnicodeError) -> tuple[str | bytes, int]:
        if not isinstance(exc, UnicodeEncodeError):
            raise exc
        # one character at a time: a run the encoding refuses may mix both kinds (`h\\xf4\xffme`)
        character = exc.object[exc.start]
        # Python keeps a byte that is not UTF-8 as U+DC80 to U+DCFF (surrogateescape): that byte again
        if "\udc80" <= character <= "\udcff":
            return bytes([ord(character) - 0xDC00]), exc.start + 1
        return character.encode("ascii", "backslashreplace").decode("ascii"), exc.start + 1

    codecs.register_error("provision.as_ls", as_ls)
    if getattr(sys.stderr, "errors", None) in ("backslashreplace", "strict") and hasattr(
        sys.stderr, "reconfigure"
    ):
        # a stream that took its descriptor as seekable and now has a pipe there cannot change: it stays as it was
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.reconfigure(errors="provision.as_ls")


@contextlib.contextmanager
def _stops_as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP (timeout(1), systemd stopping a unit, Ansible's async timeout, a terminal closed) taken as
    Ctrl-C by every command: what a command does on Ctrl-C (a build removed, a trial's files put back, a lock's work
    folder and the uv started ahead ended) it does on these, exit 130. They killed provision where it stood, as kill
    -9 does: a venv ran a trial's files until the next command on it, a killed build waited for gc. A signal ignored
    (nohup) stays ignored; off the main thread nothing changes; `run` execs its command, which gets them as they were."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from provision.cli import held_stops, hold_stop

    # as the provision script left them: held since it started (cli/__init__.py), else the system's default
    stops = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) in (signal.SIG_DFL, hold_stop)]

    def as_interrupt(_number: int, _frame: object) -> None:
        """As Ctrl-C, wherever it is held at the time (a swap, a child being started) or raised. A script's
        background job (`provision try ... &` under sh -c) has SIGINT ignored: the SIGINT sent was lost, and with it
        the stop; nothing holds it then, so it is raised here."""
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGINT)

    previous = {s: signal.signal(s, as_interrupt) for s in stops}
    try:
        if held_stops:  # came while the command line loaded: taken now, as Ctrl-C
            os.kill(os.getpid(), held_stops.pop())
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def _main(argv: Sequence[str] | None) -> None:
    _closed_streams()
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        # a path's bytes that are not UTF-8 (kept by Python as lone surrogates) go out as they are, as `ls` and
        # Python under a C locale write them, instead of failing the whole table under en_US.UTF-8
        sys.stdout.reconfigure(errors="surrogateescape")
    _stderr_as_ls()
    args = list(sys.argv[1:] if argv is None else argv)
    state = App()
    try:
        with _stops_as_interrupts():
            shown = cli.main(args=args, prog_name="provision", standalone_mode=False, obj=state)
            if isinstance(shown, int):  # click's own exits (--version, --help) come back as their code
                sys.exit(shown)
            sys.exit(_write(shown, state))  # the one place a result becomes output and an exit code
    except _NO_ARGS as exc:  # bare `provision` (or `provision bench`): its help, exit 2, as click gives
        exc.show()
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):  # Ctrl-C: click's prompt turns it into Abort
        interrupted = Interrupted("interrupted; nothing active was changed")
        fail(state, args, interrupted.message, interrupted.hint, interrupted.exit_code, interrupted.code)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "provision"
        fail(state, args, exc.format_message().replace("\n", " "), f"see {where} --help", 2, UsageError.code)
    except click.ClickException as exc:
        fail(state, args, exc.format_message().replace("\n", " "), "", exc.exit_code, UsageError.code)
    except ProvisionError as exc:
        fail(state, args, exc.message, exc.hint, exc.exit_code, exc.code)
    # the reader stopped reading (`provision report | head -1`): exit 1 quietly, as click does
    except BrokenPipeError:
        _discard_stdout()
        sys.exit(1)
    except UnicodeEncodeError as exc:
        # a path this locale's encoding cannot hold: a home made as `hômé` used under PYTHONUTF8=0 LC_ALL=C
        of = f" of {exc.object!a}" if len(exc.object) <= 300 else ""
        held = exc.object[exc.start : exc.end]
        if codecs.lookup(exc.encoding).name == "utf-8":
            # UTF-8 holds every character: what it refused is a name's byte that is not UTF-8 (a lone surrogate),
            # which no locale mends; it was 'run it in a UTF-8 locale' to a user who was in one
            message = f"a name holds a byte that is not UTF-8 ({held!a}{of}) and cannot be written into a UTF-8 file"
            hint = "rename that file or folder to a UTF-8 name, and run it again"
        else:
            message = f"this locale's encoding ({exc.encoding}) cannot hold {held!a}{of}"
            hint = "run it in a UTF-8 locale (LC_ALL=C.UTF-8), or with PYTHONUTF8=1"
        fail(state, args, message, hint, InputError.exit_code, InputError.code)
    except OSError as exc:  # the last net: core code names what it writes, this names the file at least
        where = f": {exc.filename}" if exc.filename else ""
        hint = (
            "free space on that disk and run it again"
            if exc.errno == errno.ENOSPC
            else "check that path and its permissions"
        )
        fail(state, args, f"{exc.strerror or exc}{where}", hint, 3, ProvisionError.code)
    # a bug in provision: one line naming it, never a traceback unless -v asks for it
    except Exception as exc:
        import traceback

        from provision import log

        log.debug("".join(traceback.format_exception(exc)))
        fail(
            state,
            args,
            f"internal error: {type(exc).__name__}: {exc}",
            "a bug in provision: run it again with -v and report what it prints",
            3,
            "internal",
        )


if __name__ == "__main__":
    main()
