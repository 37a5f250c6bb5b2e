"""Commands about stacks: profiles, lock (operations in provision/stacks)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from provision.cli.options import (
    index_option,
    json_option,
    profile_argument,
    python_option,
    verbosity_options,
)


@click.command("profiles", short_help="The profiles found, with their CUDA release.")
@json_option
@verbosity_options
def list_profiles(as_json: bool) -> None:
    """The profiles found (shipped, and in PROVISION_PROFILES folders), with their CUDA release."""
    from provision.stacks import profiles
    from provision.views import render as views

    views.profiles(profiles.available(), as_json)


@click.command("lock", short_help="Resolve PROFILE into a PEP 751 lockfile.")
@profile_argument
@python_option
@click.option("--platform", "platform_name", help="Target platform, as uv's --python-platform names it (default: this machine).")
@index_option
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="Lock path (pylock.toml or pylock.NAME.toml).")
@json_option
@verbosity_options
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
