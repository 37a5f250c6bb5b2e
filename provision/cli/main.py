"""The `provision` group: its options, every command added in one place, and the one place that turns an error
into a message and an exit code (docs/exit-codes.md)."""

from __future__ import annotations

import errno
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from provision import DISTRIBUTION, __version__
from provision.cli import checks, envs, machine, stacks
from provision.cli.options import HOME_HELP, App, app, verbosity_options
from provision.errors import ProvisionError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="provision", package_name=DISTRIBUTION,
                      message="%(prog)s, version %(version)s (%(package)s)")
@click.option("--home", type=click.Path(path_type=Path),
              help=HOME_HELP + " The commands that use environments also take it after their name.")
@verbosity_options
@click.pass_context
def cli(ctx: click.Context, home: Path | None) -> None:
    """Move a GPU machine from one CUDA stack to the next, verified and reversible."""
    app(ctx).home = home


# A command's code is found from its name: `provision NAME` lives in the module of its family, which calls one
# operation in the folder of the same name (docs/architecture.md). Each module imports its operations lazily, so
# `switch` loads no lock, index or rich.
COMMANDS: tuple[click.Command, ...] = (
    machine.probe, machine.scan, machine.report,
    stacks.list_profiles, stacks.lock_command,
    envs.create, envs.list_envs, envs.switch, envs.rollback, envs.remove, envs.gc, envs.adopt, envs.run, envs.shell_env, envs.restore, envs.accept,
    checks.check, checks.baseline, checks.compare, checks.bench,
)
for _command in COMMANDS:
    cli.add_command(_command)


# click 8.2 and later raise it for a group called with no arguments (older ones print the help themselves)
_NO_ARGS: tuple[type[click.UsageError], ...] = tuple(
    [click.exceptions.NoArgsIsHelpError] if hasattr(click.exceptions, "NoArgsIsHelpError") else [])


def _json_requested(state: App, argv: Sequence[str]) -> bool:
    # A usage error can stop parsing before --json's own callback ran: the command line still says what was asked.
    words = list(argv)
    return state.as_json or "--json" in (words[: words.index("--")] if "--" in words else words)


def fail(state: App, argv: Sequence[str], message: str, hint: str, exit_code: int) -> None:
    """Print the error line and its hint on stderr and, under --json, the error document on stdout; then exit."""
    from provision.stacks.index import redact_text
    from provision.views import ui

    message, hint = redact_text(message), redact_text(hint)  # the last net: no password of any URL is ever printed
    ui.error(message, hint)
    if _json_requested(state, argv):
        ui.dump_json({"error": {"message": message, "hint": hint, "exit_code": exit_code}})
    sys.exit(exit_code)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line, exit with its code (0 ok, 1 a verdict failed, 2 usage, others per error class)."""
    args = list(sys.argv[1:] if argv is None else argv)
    state = App()
    try:
        cli.main(args=args, prog_name="provision", standalone_mode=False, obj=state)
    except _NO_ARGS as exc:  # bare `provision` (or `provision bench`): its help, exit 2, as click gives
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        fail(state, args, "interrupted", "", 130)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "provision"
        fail(state, args, exc.format_message().replace("\n", " "), f"see {where} --help", 2)
    except click.ClickException as exc:
        fail(state, args, exc.format_message().replace("\n", " "), "", exc.exit_code)
    except ProvisionError as exc:
        fail(state, args, exc.message, exc.hint, exc.exit_code)
    except KeyboardInterrupt:
        fail(state, args, "interrupted; nothing active was changed", "", 130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # the last net: core code names what it writes, this names the file at least
        where = f": {exc.filename}" if exc.filename else ""
        hint = "free space on that disk and run it again" if exc.errno == errno.ENOSPC else "check that path and its permissions"
        fail(state, args, f"{exc.strerror or exc}{where}", hint, 3)
    sys.exit(0)


if __name__ == "__main__":
    main()
