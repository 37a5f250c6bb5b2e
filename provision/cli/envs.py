"""Commands that build, switch and use environments (operations in provision/envs)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from provision.cli.options import (
    App,
    NumberRange,
    allow_unsealed_option,
    complete_first_env,
    complete_profile,
    env_argument,
    home_option,
    index_option,
    json_option,
    pass_app,
    profile_argument,
    verbosity_options,
)

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.command(short_help="Build, check and activate an environment for PROFILE.")
@profile_argument
@click.option("--name", help="The environment's name (default: the profile's name).")
@click.option(
    "--python",
    help="Python X.Y (as uv finds it, and pyenv's versions), or a path to an interpreter "
    "(default: a --lock's Python, else the profile's python).",
)
@click.option(
    "--lock",
    "lock_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Install this lock instead of locking.",
)
@allow_unsealed_option
@index_option
@click.option(
    "--no-activate", is_flag=True, help="Build and check it, but leave the active environment as it is."
)
@click.option(
    "--no-checks", is_flag=True, help="Skip the smoke checks (the environment is still built and named)."
)
@click.option(
    "--replace", is_flag=True, help="Rebuild an existing environment of that name (its baselines are kept)."
)
@click.option(
    "--keep-failed",
    is_flag=True,
    help="Keep a build whose install or checks failed, as NAME-failed-STAMP: listed by envs, never activated, "
    "removed by remove or gc.",
)
@json_option
@home_option
@verbosity_options
@pass_app
def create(
    app: App,
    profile_name: str,
    name: str | None,
    python: str | None,
    lock_path: Path | None,
    allow_unsealed: bool,
    indexes: tuple[str, ...],
    no_activate: bool,
    no_checks: bool,
    replace: bool,
    keep_failed: bool,
) -> Shown:
    """Build an environment for PROFILE beside the others, check it, and make it active."""
    from provision.envs.home import check_name

    if name is not None:
        check_name(name)  # before anything is read, built or imported for it
    from provision.commands import create as creating
    from provision.stacks import lock, profiles
    from provision.views import envs as views

    profile = profiles.load(profile_name)
    with app.progress() as step:
        result = creating.create(
            app.environments(),
            profile,
            name=name,
            python=python,
            lock_path=lock_path,
            overrides=lock.parse_overrides(indexes),
            checks=not no_checks,
            activate=not no_activate,
            replace=replace,
            keep_failed=keep_failed,
            progress=step,
            allow_unsealed=allow_unsealed,
        )
    return views.created(result)


@click.command("envs", short_help="Every environment, and which is active.")
@json_option
@home_option
@verbosity_options
@pass_app
def list_envs(app: App) -> Shown:
    """Every environment: profile, CUDA, Python, size, checks, baseline, and which is active."""
    from provision.envs import inventory
    from provision.stacks import uvtool
    from provision.views import envs as views

    return views.environments(inventory.listing(app.environments(), uvtool.cache_dir()))


@click.command(short_help="Remove environment NAME.")
@env_argument("name")
@click.option(
    "--force", is_flag=True, help="Remove it even if it is the active one (nothing is active afterwards)."
)
@json_option
@home_option
@verbosity_options
@pass_app
def remove(app: App, name: str, force: bool) -> Shown:
    """Remove environment NAME (an adopted venv's own files are never touched)."""
    from provision.envs import cleanup
    from provision.views import envs as views

    with app.progress() as step:
        return views.removed(cleanup.remove(app.environments(), name, force, progress=step))


@click.command(short_help="Clean up interrupted builds; prune provision's caches.")
@click.option(
    "--cache",
    "cache_only",
    is_flag=True,
    help="Prune and show provision's caches alone; the home is not touched.",
)
@click.option(
    "--older-than",
    "older_than_days",
    type=NumberRange(min=0),
    default=30.0,
    show_default=True,
    metavar="DAYS",
    help="Remove cached wheels and entries not used for this many days.",
)
@json_option
@home_option
@verbosity_options
@pass_app
def gc(app: App, cache_only: bool, older_than_days: float) -> Shown:
    """Remove what interrupted builds left behind, and the failed builds create --keep-failed kept; then prune
    provision's caches in $XDG_CACHE_HOME/provision/ (else ~/.cache/provision/): wheels/ (wheels report --lock
    fetched, several GB for a serving stack) keeps only wheels a lock names (in the home or ./lockfiles/); wheels/,
    scans/, records/ and metadata/ (what each wheel's bytes determine, by sha256), urls/, verdicts/, locks/ and ahead/ (a
    URL's sha256, the lock's conflict gate by its set of wheels, a lock's text proven, how a lock command line ran uv)
    lose what was not used for --older-than days. Everything there can be fetched or computed again. --cache: the caches alone, with their
    sizes."""
    from provision.commands import gc as collect
    from provision.views import envs as views

    return views.collected(
        collect.gc(app.environments(), cache_only=cache_only, older_than_days=older_than_days)
    )


@click.command(short_help="Register an existing venv as NAME.")
@click.argument("name")
@click.argument("venv", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option(
    "--profile",
    "profile_name",
    shell_complete=complete_profile,
    help="The profile it corresponds to (its CUDA release, checks, [env], indexes).",
)
@click.option(
    "--no-lock",
    is_flag=True,
    help="Skip matching what is installed to wheels (provision lock --env NAME does it later).",
)
@json_option
@home_option
@verbosity_options
@pass_app
def adopt(app: App, name: str, venv: Path, profile_name: str | None, no_lock: bool) -> Shown:
    """Register an existing venv (say, the cu128 one that works) as NAME, and lock what it holds: each distribution
    matched to its wheel on the profile's indexes (the default index without a profile) or in uv's cache. Its files
    are never deleted."""
    from provision.envs import adopted
    from provision.views import envs as views

    profile = None
    if profile_name:  # the profile parser (packaging) only when one is named
        from provision.stacks import profiles

        profile = profiles.load(profile_name)
    with app.progress() as step:
        return views.adopted(
            adopted.adopt(app.environments(), name, venv, profile, lock=not no_lock, progress=step)
        )


@click.command(
    short_help="Run a command inside an environment.",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, required=True, shell_complete=complete_first_env)
@home_option
@verbosity_options
@pass_app
def run(app: App, args: tuple[str, ...]) -> NoReturn:
    """Run a command inside an environment: provision run [NAME] -- CMD... (the active one by default)."""
    from provision import proc
    from provision.envs.variables import venv_environment
    from provision.errors import CommandNotExecutable, CommandNotFound, UsageError

    if "--" in args:
        split = args.index("--")
        names, command = args[:split], args[split + 1 :]
    else:
        names, command = (), args
    where = app.environments()
    if "--" not in args and len(args) > 1 and args[0] in where.names():
        import shlex

        raise UsageError(
            f"{args[0]!r} is an environment, and the command must follow --",
            f"add --: provision run {args[0]} -- {shlex.join(args[1:])}",
        )
    if len(names) > 1 or not command:
        raise UsageError(
            "usage: provision run [NAME] -- CMD...",
            "for example: provision run cu130 -- python -c 'import torch'",
        )
    _, _, variables = venv_environment(where, names[0] if names else None)
    environment = proc.environment(variables)
    found = CommandNotFound(
        f"{command[0]}: command not found in the environment or on PATH", "check the command"
    )
    if not command[0]:  # as shells give; execve refuses an empty name with a ValueError
        raise found
    try:
        # the command's own stdout and exit code, nothing added
        os.execvpe(command[0], list(command), environment)
    except FileNotFoundError as exc:  # exit 127 and 126, as shells give
        raise found from exc
    except PermissionError as exc:
        raise CommandNotExecutable(
            f"{command[0]}: permission denied (not executable)", "check the file's mode (chmod +x)"
        ) from exc
    except OSError as exc:
        import errno

        # no such command on PATH, as shells say
        if exc.errno == errno.ENAMETOOLONG and "/" not in command[0]:
            raise found from exc
        if exc.errno == errno.ENOEXEC and exc.filename is not None and _script(os.fsdecode(exc.filename)):
            # a script without a #! line: run by /bin/sh, as execvp and shells run it
            os.execve("/bin/sh", ["sh", os.fsdecode(exc.filename), *command[1:]], environment)
        why = (
            "not a program this machine can run (a binary for another machine?)"
            if exc.errno == errno.ENOEXEC
            else (exc.strerror or str(exc)).lower()
        )
        raise CommandNotExecutable(
            f"{command[0]}: cannot execute it: {why}",
            "give the path of a program, or run the file with its interpreter",
        ) from exc


def _script(path: str) -> bool:
    """Whether `path` is text a shell would run: no NUL byte in its first line (bash's test for a binary file)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(80)
    except OSError:
        return False
    return b"\0" not in head.split(b"\n", 1)[0]


@click.command("shell-env", short_help="Print what to eval to enter (or leave) an environment.")
@env_argument("name", required=False)
@click.option(
    "--undo",
    is_flag=True,
    help="Print what to eval to leave it: the variables as they were before the first eval.",
)
@home_option
@verbosity_options
@pass_app
def shell_env(app: App, name: str | None, undo: bool) -> Shown:
    """Print what to eval to enter an environment in a shell: eval "$(provision shell-env cu130)".

    Evaluated again (the same or another environment), it starts from the shell's variables before the first eval,
    so PATH does not grow. To leave: provision_deactivate (a function the eval defines), or
    eval "$(provision shell-env --undo)"."""
    from provision.envs import shellenv
    from provision.envs.variables import venv_environment
    from provision.views import envs as views

    if undo:
        lines = shellenv.undo_lines()
    else:
        _, path_head, variables = venv_environment(app.environments(), name)
        lines = shellenv.activate_lines(variables, path_head)
    return views.shell_lines(lines)


@click.command(short_help="Put an environment back to its lock.")
@env_argument("name")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would be reinstalled, uninstalled and set aside; change nothing.",
)
@click.option("--no-checks", is_flag=True, help="Skip the checks and the baseline afterwards.")
@json_option
@home_option
@verbosity_options
@pass_app
def restore(app: App, name: str, dry_run: bool, no_checks: bool) -> Shown:
    """Put NAME back to its lock: reinstall drifted distributions, set unowned start-up files aside, re-check."""
    from provision.commands import restore as restoring
    from provision.views import restore as restore_view

    with app.progress() as step:
        result = restoring.restore(
            app.environments(), name, dry_run=dry_run, checks=not no_checks, progress=step
        )
    return restore_view.restored(result)


@click.command(short_help="Make files of NAME's venv part of its known-good state.")
@env_argument("name")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option(
    "--drop",
    "drops",
    multiple=True,
    metavar="PATH",
    help="Forget an accepted file (drift judges it as before).",
)
@json_option
@home_option
@verbosity_options
@pass_app
def accept(app: App, name: str, paths: tuple[str, ...], drops: tuple[str, ...]) -> Shown:
    """Keep the present content of each PATH of NAME's venv (relative to its site-packages, or absolute inside the
    venv; without PATH, every file drift finds changed or unowned) as known-good: drift judges it by that content,
    restore puts that content back."""
    from provision.envs import accept as accepting
    from provision.errors import UsageError
    from provision.views import envs as views

    if paths and drops:
        raise UsageError("give PATHs to accept or --drop PATH, not both", "run provision accept twice")
    return views.accepted(accepting.accept(app.environments(), name, paths, drops))
