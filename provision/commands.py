"""Commands beyond `probe`, registered on the click group (kept apart so cli.py stays short)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from provision.cli import JSON_HELP, cli


def _cc(value: str) -> str:
    text = value.strip().lower().removeprefix("sm_")
    if "." not in text and text.isdigit() and len(text) >= 2:
        text = f"{text[:-1]}.{text[-1]}"
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise click.BadParameter(f"{value!r} is not a compute capability; write it as 12.0 or sm_120")
    return f"{int(major)}.{int(minor)}"


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--require", "require", multiple=True, help="Judge each package against this SM (12.0 or sm_120).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def scan(paths: tuple[Path, ...], require: tuple[str, ...], as_json: bool) -> None:
    """Which SMs and PTX every CUDA binary under PATHS carries (files, wheels, folders, venvs)."""
    from provision import scan as scanning
    from provision import views

    result = scanning.scan(list(paths), tuple(_cc(r) for r in require))
    views.scan(result, as_json)
    if result.failed:
        sys.exit(1)
