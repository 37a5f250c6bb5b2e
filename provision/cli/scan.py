"""`provision scan` (operation in provision/scan/binaries.py): a family of its own, whose paths stay strings.

pathlib (with urllib.parse and ipaddress, which it imports) is a good part of a whole `scan --json FILE` process:
this module, the group's options and a one-file scan load none of it (a folder or a
wheel does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from provision.cli.options import App, compute_capability, json_option, pass_app, verbosity_options

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.command(short_help="Which SMs and PTX CUDA binaries carry.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--require", "require", multiple=True, help="Judge each package against this SM (12.0, 12 or sm_120)."
)
@json_option
@verbosity_options
@pass_app
def scan(app: App, paths: tuple[str, ...], require: tuple[str, ...]) -> Shown:
    """Which SMs and PTX every CUDA binary under PATHS carries (files, wheels, folders, venvs)."""
    from provision.scan import binaries as scanning
    from provision.views import machine as views

    return views.scan(scanning.scan(list(paths), tuple(compute_capability(r) for r in require)))
