"""Thin click commands: parse, call one operation, hand the result to a view. The only place that exits."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from provision import __version__
from provision.errors import ProvisionError

JSON_HELP = "Print one JSON document (schema in docs/json.md) instead of tables."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="provision")
def cli() -> None:
    """Move a GPU machine from one CUDA stack to the next, verified and reversible."""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--venv", "venvs", multiple=True, type=click.Path(path_type=Path), help="Also look for nvcc wheels in this venv.")
def probe(as_json: bool, venvs: tuple[Path, ...]) -> None:
    """Read the machine: driver, GPUs, topology, CUDA toolkits, host."""
    from provision.machine import probe as probing
    from provision.views import render as views

    views.probe(probing.probe(venvs), as_json)


def _register() -> None:
    # Each command group lives in its own module; importing them here keeps `provision --help` complete
    # while a single command imports only what it needs.
    from provision.cli import checks as checkcommands  # noqa: F401
    from provision.cli import envs as envcommands  # noqa: F401
    from provision.cli import machine as commands  # noqa: F401


def main() -> None:
    _register()
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except ProvisionError as exc:
        from provision.views import ui

        ui.error(exc.message, exc.hint)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted; nothing active was changed\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(0)
