"""Commands about stacks: profiles, lock (operations in provision/stacks)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from provision.cli.options import (
    App,
    complete_env,
    complete_profile,
    home_option,
    index_option,
    json_option,
    pass_app,
    python_option,
    verbosity_options,
)

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.group(
    "profiles", invoke_without_command=True, short_help="The profiles found; `profiles new` writes one."
)
@json_option
@verbosity_options
@click.pass_context
@pass_app
def list_profiles(app: App, ctx: click.Context) -> Shown | None:
    """The profiles found (shipped, and in PROVISION_PROFILES folders), with their CUDA release."""
    from provision.stacks import profiles
    from provision.views import stacks as views

    if ctx.invoked_subcommand is not None:
        return None  # `profiles new`: its own result
    # what could be read is listed; a *.toml that is no profile file is named, and exits 4
    return views.profiles(profiles.found())


@list_profiles.command("new", short_help="Write a profile from an SGLang release's own pins.")
@click.argument("name")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="sglang==VERSION",
    help="The SGLang release whose Requires-Dist pins torch, sglang-kernel and FlashInfer (sglang: the newest).",
)
@click.option(
    "--cuda", default="13.0", show_default=True, help="CUDA release: which cuXY indexes and compiler to bind."
)
@click.option("--python", "python", default="3.12", show_default=True, help="Python X.Y the profile targets.")
@index_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),  # a folder is refused by newprofile, with a hint
    help="Where to write it (default: NAME.toml in the first PROVISION_PROFILES folder, else here).",
)
@click.option("--force", is_flag=True, help="Replace an existing file.")
@click.option(
    "--model-path",
    type=click.Path(path_type=Path, file_okay=False),
    help="The baseline's model: your model's folder (its config.json; no weights are read) instead of "
    "provision's weight-free one.",
)
@json_option
@verbosity_options
@pass_app
def new_profile(
    app: App,
    name: str,
    source: str,
    cuda: str,
    python: str,
    indexes: tuple[str, ...],
    output: Path | None,
    force: bool,
    model_path: Path | None,
) -> Shown:
    """Write profile NAME from the pins of an SGLang release, read from the index, each pin with its source."""
    from provision.stacks import lock, newprofile
    from provision.views import stacks as views

    result = newprofile.new(
        name,
        source,
        cuda=cuda,
        python=python,
        output=output,
        overrides=lock.parse_overrides(indexes),
        force=force,
        model_path=model_path,
    )
    return views.new_profile(result)


@click.command("lock", short_help="Lock PROFILE (PEP 751), or an adopted environment.")
@click.argument("profile_name", metavar="PROFILE", required=False, shell_complete=complete_profile)
@python_option
@click.option(
    "--platform",
    "platform_name",
    help="Target platform, as uv's --python-platform names it (default: this machine).",
)
@index_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Lock path (pylock.toml or pylock.NAME.toml).",
)
@click.option(
    "--env",
    "env_name",
    shell_complete=complete_env,
    help="Lock what the adopted environment NAME holds instead: each distribution matched to its wheel.",
)
@click.option(
    "-U",
    "--upgrade",
    is_flag=True,
    help="Resolve afresh: the newest versions the profile allows, not those of the lock being replaced.",
)
@click.option(
    "-P",
    "--upgrade-package",
    "upgrade_packages",
    multiple=True,
    metavar="NAME",
    help="Resolve this package afresh, keeping the other versions of the lock being replaced (repeatable).",
)
@home_option
@json_option
@verbosity_options
@pass_app
def lock_command(
    app: App,
    profile_name: str | None,
    python: str | None,
    platform_name: str | None,
    indexes: tuple[str, ...],
    output: Path | None,
    env_name: str | None,
    upgrade: bool,
    upgrade_packages: tuple[str, ...],
) -> Shown:
    """Resolve PROFILE into a PEP 751 lockfile: exact URLs and sha256 for every file. A lock made again keeps the
    versions of the lock it replaces where the profile still allows them (as `uv pip compile -o` and `uv lock` do):
    --upgrade resolves afresh, --upgrade-package NAME frees one package. With --env NAME, lock what the adopted
    environment NAME holds (what adopt does unless --no-lock): on its profile's indexes, else the default one."""
    from packaging.utils import InvalidName, canonicalize_name

    from provision.stacks import lock, lockfile, profiles

    if env_name is not None:
        if profile_name or python or platform_name or indexes or output or upgrade or upgrade_packages:
            raise click.UsageError(
                "--env locks what the environment holds: it takes no PROFILE, --python, --platform, --index, -o "
                "or --upgrade"
            )
        return _lock_env(app, env_name)
    if profile_name is None:
        raise click.UsageError("give a PROFILE to lock, or --env NAME for an adopted environment")
    from provision.stacks import uvtool

    uvtool.binary_soon()  # found while the profile is read
    for name in upgrade_packages:
        try:
            canonicalize_name(name, validate=True)
        except InvalidName:
            raise click.BadParameter(
                f"{name!r} is not a package name (letters, digits, '.', '-', '_')",
                param_hint="--upgrade-package",
            ) from None
    profile = profiles.load(profile_name)
    path = output or lockfile.default_output(profile)
    if not lockfile.is_lock_name(path):
        raise click.BadParameter(
            f"{path.name}: PEP 751 names a lock pylock.toml or pylock.NAME.toml", param_hint="-o"
        )
    target = lock.Target(
        python=lock.check_python(
            python or profile.python or f"{sys.version_info.major}.{sys.version_info.minor}"
        ),
        platform=platform_name,
    )
    with app.progress() as step:
        result = lock.lock(
            profile,
            target=target,
            overrides=lock.parse_overrides(indexes),
            output=path,
            progress=step,
            meanwhile=app.warm,
            upgrade=upgrade,
            upgrade_packages=upgrade_packages,
        )
    from provision.views import stacks as views  # loaded while uv resolved (app.warm)

    return views.locked(result)


def _lock_env(app: App, name: str) -> Shown:
    from provision.envs import adopted, records
    from provision.stacks import profiles
    from provision.views import envs as views

    where = app.environments()
    record = records.read(where.build_of(name))
    profile = None
    if record.profile:
        path = Path(record.profile_path) if record.profile_path else None
        profile = profiles.load(str(path) if path is not None and path.exists() else record.profile)
    with app.progress() as step:
        locked = adopted.lock_env(where, name, profile, progress=step)
    return views.env_locked(locked)
