"""Commands beyond `probe`, registered on the click group (kept apart so cli.py stays short)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from provision.cli.main import JSON_HELP, cli


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
    from provision.scan import binaries as scanning
    from provision.views import render as views

    result = scanning.scan(list(paths), tuple(_cc(r) for r in require))
    views.scan(result, as_json)
    if result.failed:
        sys.exit(1)


@cli.command()
@click.option("--machine", "machines", multiple=True, type=click.Path(path_type=Path, dir_okay=False),
              help="A recorded `provision probe --json` file (repeat for a fleet); default: probe this machine.")
@click.option("--profile", "profile_names", multiple=True, help="Judge against this profile (name or path); default: all.")
@click.option("--env", "env_names", multiple=True, help="Also judge this environment (scan, versions, checks, baseline).")
@click.option("--home", type=click.Path(path_type=Path, file_okay=False), help="Environments home (else PROVISION_HOME).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--markdown", is_flag=True, help="Print Markdown tables to paste into a ticket.")
def report(machines: tuple[Path, ...], profile_names: tuple[str, ...], env_names: tuple[str, ...],
           home: Path | None, as_json: bool, markdown: bool) -> None:
    """Compatibility report: this machine (or recorded ones) against every profile and environment."""
    from provision.report import gates as reporting
    from provision.stacks import profiles
    from provision.views import render as views

    if as_json and markdown:
        raise click.UsageError("choose one of --json and --markdown")
    if machines:
        facts = [reporting.load_machine(path) for path in machines]
    else:
        from provision.machine import probe as probing

        facts = [probing.probe()]
    chosen = [profiles.load(n) for n in profile_names] if profile_names else profiles.available()
    result = reporting.report(facts, chosen)
    if env_names:
        from provision.report import environments as envreport

        envreport.add_environments(result, env_names, home)
    views.report(result, "json" if as_json else "markdown" if markdown else "table")


@cli.command("profiles")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def list_profiles(as_json: bool) -> None:
    """The profiles found (shipped, and in PROVISION_PROFILES folders), with their CUDA release."""
    from provision.stacks import profiles
    from provision.views import render as views

    views.profiles(profiles.available(), as_json)


F = TypeVar("F", bound=Callable[..., Any])


def _python_option(f: F) -> F:
    return click.option("--python", "python", help="Target Python X.Y (default: the profile's python).")(f)


@cli.command("lock")
@click.argument("profile_name", metavar="PROFILE")
@_python_option
@click.option("--platform", "platform_name", help="Target platform, as uv's --python-platform names it (default: this machine).")
@click.option("--index", "indexes", multiple=True, metavar="NAME=URL", help="Use URL for the profile's index NAME (mirrors, air-gapped sites).")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="Lock path (pylock.toml or pylock.NAME.toml).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def lock_command(profile_name: str, python: str | None, platform_name: str | None, indexes: tuple[str, ...],
                 output: Path | None, as_json: bool) -> None:
    """Resolve PROFILE into a PEP 751 lockfile: exact URLs and sha256 for every file."""
    from packaging.pylock import is_valid_pylock_path

    from provision.stacks import lock, profiles
    from provision.views import render as views

    profile = profiles.load(profile_name)
    path = output or lock.default_output(profile)
    if not is_valid_pylock_path(path):
        raise click.BadParameter(f"{path.name}: PEP 751 names a lock pylock.toml or pylock.NAME.toml", param_hint="-o")
    target = lock.Target(python=python or profile.python or f"{sys.version_info.major}.{sys.version_info.minor}", platform=platform_name)
    with views.progress(as_json) as step:
        result = lock.lock(profile, target=target, overrides=lock.parse_overrides(indexes), output=path, progress=step)
    views.locked(result, as_json)
