"""Commands about stacks: profiles, lock (operations in provision/stacks)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from provision.cli.options import (
    complete_env,
    complete_profile,
    home_option,
    index_option,
    json_option,
    python_option,
    verbosity_options,
)


@click.group("profiles", invoke_without_command=True, short_help="The profiles found; `profiles new` writes one.")
@json_option
@verbosity_options
@click.pass_context
def list_profiles(ctx: click.Context, as_json: bool) -> None:
    """The profiles found (shipped, and in PROVISION_PROFILES folders), with their CUDA release."""
    from provision.stacks import profiles
    from provision.views import stacks as views

    if ctx.invoked_subcommand is None:
        found, skipped = profiles.found()
        views.profiles(found, as_json, skipped)
        if skipped:  # listed what could be read; what is named *.toml and is no profile file is the profile check's
            sys.exit(4)


@list_profiles.command("new", short_help="Write a profile from an SGLang release's own pins.")
@click.argument("name")
@click.option("--from", "source", required=True, metavar="sglang==VERSION",
              help="The SGLang release whose Requires-Dist pins torch, sglang-kernel and FlashInfer (sglang: the newest).")
@click.option("--cuda", default="13.0", show_default=True, help="CUDA release: which cuXY indexes and compiler to bind.")
@click.option("--python", "python", default="3.12", show_default=True, help="Python X.Y the profile targets.")
@index_option
@click.option("-o", "--output", type=click.Path(path_type=Path),  # a folder is refused by newprofile, with a hint
              help="Where to write it (default: NAME.toml in the first PROVISION_PROFILES folder, else here).")
@click.option("--force", is_flag=True, help="Replace an existing file.")
@json_option
@verbosity_options
def new_profile(name: str, source: str, cuda: str, python: str, indexes: tuple[str, ...], output: Path | None,
                force: bool, as_json: bool) -> None:
    """Write profile NAME from the pins of an SGLang release, read from the index, each pin with its source."""
    from provision.stacks import lock, newprofile
    from provision.views import stacks as views

    result = newprofile.new(name, source, cuda=cuda, python=python, output=output,
                            overrides=lock.parse_overrides(indexes), force=force)
    views.new_profile(result, as_json)


@click.command("lock", short_help="Lock PROFILE (PEP 751), or an adopted environment.")
@click.argument("profile_name", metavar="PROFILE", required=False, shell_complete=complete_profile)
@python_option
@click.option("--platform", "platform_name", help="Target platform, as uv's --python-platform names it (default: this machine).")
@index_option
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="Lock path (pylock.toml or pylock.NAME.toml).")
@click.option("--env", "env_name", shell_complete=complete_env,
              help="Lock what the adopted environment NAME holds instead: each distribution matched to its wheel.")
@home_option
@json_option
@verbosity_options
def lock_command(profile_name: str | None, python: str | None, platform_name: str | None, indexes: tuple[str, ...],
                 output: Path | None, env_name: str | None, home: Path | None, as_json: bool) -> None:
    """Resolve PROFILE into a PEP 751 lockfile: exact URLs and sha256 for every file. With --env NAME, lock what the
    adopted environment NAME holds (what adopt does unless --no-lock): on its profile's indexes, else the default one."""
    from packaging.pylock import is_valid_pylock_path

    from provision.stacks import lock, lockfile, profiles
    from provision.views import stacks as views
    from provision.views import ui

    if env_name is not None:
        if profile_name or python or platform_name or indexes or output:
            raise click.UsageError("--env locks what the environment holds: it takes no PROFILE, --python, --platform, --index or -o")
        _lock_env(env_name, home, as_json)
        return
    if profile_name is None:
        raise click.UsageError("give a PROFILE to lock, or --env NAME for an adopted environment")
    profile = profiles.load(profile_name)
    path = output or lockfile.default_output(profile)
    if not is_valid_pylock_path(path):
        raise click.BadParameter(f"{path.name}: PEP 751 names a lock pylock.toml or pylock.NAME.toml", param_hint="-o")
    target = lock.Target(python=lock.check_python(python or profile.python or f"{sys.version_info.major}.{sys.version_info.minor}"),
                         platform=platform_name)
    with ui.progress(as_json) as step:
        result = lock.lock(profile, target=target, overrides=lock.parse_overrides(indexes), output=path, progress=step)
    views.locked(result, as_json)


def _lock_env(name: str, home: Path | None, as_json: bool) -> None:
    from provision.cli.options import home_of
    from provision.envs import adopted, records
    from provision.stacks import profiles
    from provision.views import envs as views
    from provision.views import ui

    where = home_of(home)
    record = records.read(where.build_of(name))
    profile = None
    if record.profile:
        path = Path(record.profile_path) if record.profile_path else None
        profile = profiles.load(str(path) if path is not None and path.exists() else record.profile)
    with ui.progress(as_json) as step:
        locked = adopted.lock_env(where, name, profile, progress=step)
    views.env_locked(locked, as_json)
