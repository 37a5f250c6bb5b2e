"""Commands that build, switch and use environments."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from provision.cli.main import JSON_HELP, cli

if TYPE_CHECKING:
    from provision.envs.home import Home


F = TypeVar("F", bound=Callable[..., Any])


def home_option(f: F) -> F:
    return click.option("--home", type=click.Path(path_type=Path, file_okay=False),
                        help="Where environments live (else PROVISION_HOME, else ~/.local/share/provision).")(f)


def _home(path: Path | None) -> Home:
    from provision.envs import home

    return home.Home(home.resolve(path))


@cli.command()
@click.argument("profile_name", metavar="PROFILE")
@click.option("--name", help="The environment's name (default: the profile's name).")
@click.option("--python", help="Python X.Y, or a path to an interpreter (default: the profile's python).")
@click.option("--lock", "lock_path", type=click.Path(path_type=Path, dir_okay=False, exists=True), help="Install this lock instead of locking.")
@click.option("--index", "indexes", multiple=True, metavar="NAME=URL", help="Use URL for the profile's index NAME.")
@click.option("--no-activate", is_flag=True, help="Build and check it, but leave the active environment as it is.")
@click.option("--no-checks", is_flag=True, help="Skip the smoke checks (the environment is still built and named).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def create(profile_name: str, name: str | None, python: str | None, lock_path: Path | None, indexes: tuple[str, ...],
           no_activate: bool, no_checks: bool, as_json: bool, home: Path | None) -> None:
    """Build an environment for PROFILE beside the others, check it, and make it active."""
    from provision.checks import runner
    from provision.envs import lifecycle as envs
    from provision.stacks import lock, profiles
    from provision.views import render as views

    profile = profiles.load(profile_name)
    with views.progress(as_json) as step:
        result = envs.create(_home(home), profile, name=name, python=python, lock_path=lock_path,
                             overrides=lock.parse_overrides(indexes), activate=not no_activate,
                             run_checks=None if no_checks else (lambda build, meta: runner.run(build, meta, progress=step)),
                             progress=step)
    views.created(result, as_json)
    if not result.passed:
        sys.exit(1)


@cli.command("envs")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def list_envs(as_json: bool, home: Path | None) -> None:
    """Every environment: profile, CUDA, Python, size, checks, baseline, and which is active."""
    from provision.envs import lifecycle as envs
    from provision.stacks import uvtool
    from provision.views import render as views

    where = _home(home)
    views.environments(where.root, envs.listing(where), as_json, uvtool.cache_dir())


@cli.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def switch(name: str, as_json: bool, home: Path | None) -> None:
    """Make NAME the active environment (nothing is reinstalled)."""
    from provision.envs import lifecycle as envs
    from provision.views import render as views

    previous = envs.switch(_home(home), name)
    views.switched(previous, name, [], as_json)


@cli.command()
@click.option("--to", "to", help="Go to this environment instead of the previous one.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def rollback(to: str | None, as_json: bool, home: Path | None) -> None:
    """Switch back to the previously active environment, at once."""
    from provision.envs import lifecycle as envs
    from provision.views import render as views

    previous, now, skipped = envs.rollback(_home(home), to)
    views.switched(previous, now, skipped, as_json)


@cli.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="Remove it even if it is the active one (nothing is active afterwards).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def remove(name: str, force: bool, as_json: bool, home: Path | None) -> None:
    """Remove environment NAME (an adopted venv's own files are never touched)."""
    from provision.envs import lifecycle as envs
    from provision.views import ui

    envs.remove(_home(home), name, force)
    if as_json:
        ui.dump_json({"removed": name})
    else:
        ui.info(f"removed {name}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def gc(as_json: bool, home: Path | None) -> None:
    """Remove what interrupted builds left behind."""
    from provision.envs import lifecycle as envs
    from provision.views import ui

    where = _home(home)
    with where.locked():
        removed = envs.gc(where)
    if as_json:
        ui.dump_json({"removed": removed})
    else:
        ui.info("\n".join(f"removed {r}" for r in removed) or "nothing to clean")


@cli.command()
@click.argument("name")
@click.argument("venv", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--profile", "profile_name", help="The profile it corresponds to (its CUDA release, checks, [env]).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def adopt(name: str, venv: Path, profile_name: str | None, as_json: bool, home: Path | None) -> None:
    """Register an existing venv (say, the cu128 one that works) as NAME; its files are never deleted."""
    from provision.envs import lifecycle as envs
    from provision.stacks import profiles
    from provision.views import ui

    build = envs.adopt(_home(home), name, venv, profiles.load(profile_name) if profile_name else None)
    if as_json:
        ui.dump_json({"adopted": name, "venv": str(venv.absolute()), "path": str(build)})
    else:
        ui.info(f"adopted {venv} as {name} ({build})")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, required=True)
@home_option
def run(args: tuple[str, ...], home: Path | None) -> None:
    """Run a command inside an environment: provision run [NAME] -- CMD... (the active one by default)."""
    from provision import proc
    from provision.envs import lifecycle as envs
    from provision.errors import UsageError

    if "--" in args:
        split = args.index("--")
        names, command = args[:split], args[split + 1 :]
    else:
        names, command = (), args
    if len(names) > 1 or not command:
        raise UsageError("usage: provision run [NAME] -- CMD...", "for example: provision run cu130 -- python -c 'import torch'")
    _, _, variables = envs.venv_environment(_home(home), names[0] if names else None)
    environment = proc.environment(variables)
    try:
        os.execvpe(command[0], list(command), environment)  # the command's own stdout and exit code, nothing added
    except FileNotFoundError as exc:
        raise UsageError(f"{command[0]}: command not found in the environment or on PATH", "check the command") from exc


@cli.command("shell-env")
@click.argument("name", required=False)
@home_option
def shell_env(name: str | None, home: Path | None) -> None:
    """Print what to eval to activate an environment in a shell: eval "$(provision shell-env cu130)"."""
    from provision.envs import lifecycle as envs

    _, _, variables = envs.venv_environment(_home(home), name)
    for key, value in variables.items():
        click.echo(f"export {key}={shlex.quote(value)}")
