"""`provision upgrade`: the whole move as one step (the operation: provision/commands/upgrade.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from provision.cli.options import (
    App,
    NumberRange,
    allow_unsealed_option,
    complete_env,
    complete_profile,
    home_option,
    json_option,
    pass_app,
    verbosity_options,
)
from provision.envs import upgrades

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.command(short_help="Move to a new stack in one step, decided by measurement.")
@click.argument("profile_name", metavar="[PROFILE]", required=False, shell_complete=complete_profile)
@click.option(
    "--to-env",
    "to_env",
    shell_complete=complete_env,
    help="Move to this environment, built already (created or adopted), instead of building PROFILE.",
)
@click.option(
    "--from",
    "from_env",
    shell_complete=complete_env,
    help="The environment to move from (default: the active one).",
)
@click.option("--name", help="The new environment's name (default: the profile's name).")
@click.option(
    "--lock",
    "lock_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Install this lock (judged first, as report --lock judges it) instead of locking now.",
)
@allow_unsealed_option
@click.option(
    "--runs",
    type=click.IntRange(min=3, max=upgrades.MAX_RUNS),
    default=None,
    help="Baseline runs a side, interleaved old, new, old, new (3 or more: fewer cannot tell noise from a change; "
    "default 5; --resume: as started).",
)
@click.option(
    "--max-slowdown",
    "max_slowdown",
    type=NumberRange(min=0, max=upgrades.MAX_SLOWDOWN),
    default=None,
    metavar="PCT",
    help="Activate a new environment worse beyond noise by at most this many percent (default 0; "
    "--resume: as started).",
)
@click.option(
    "--baseline-from",
    "baseline_from",
    shell_complete=complete_env,
    help="When the two profiles' [baseline] differ: run this environment's on both.",
)
@click.option("--no-activate", is_flag=True, help="Decide, but leave the --from environment active.")
@click.option(
    "--resume",
    is_flag=True,
    help="Go on with an unfinished upgrade of that name from its last finished step.",
)
@click.option(
    "--markdown",
    "markdown",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Also write the record as a Markdown page to FILE (for a ticket).",
)
@json_option
@home_option
@verbosity_options
@pass_app
def upgrade(
    app: App,
    profile_name: str | None,
    to_env: str | None,
    from_env: str | None,
    name: str | None,
    lock_path: Path | None,
    allow_unsealed: bool,
    runs: int | None,
    max_slowdown: float | None,
    baseline_from: str | None,
    no_activate: bool,
    resume: bool,
    markdown: Path | None,
) -> Shown:
    """Move from the active environment (or --from) to PROFILE, built beside it, in one step: judge the machine and the
    lock, build, check, measure both with the same baseline interleaved, and activate the new one only when its checks
    pass and it is not worse beyond noise. Exit 0 when the rule said yes, 1 when the old one stays (the JSON says why).
    Interrupted, the old one stays active; --resume goes on from the last finished step."""
    from provision.commands import upgrade as upgrading
    from provision.errors import UsageError
    from provision.views import upgrade as views

    if (profile_name is None) == (to_env is None):
        raise UsageError(
            "give a PROFILE to build, or --to-env NAME for an environment built already",
            "not both, not neither",
        )
    if to_env is not None and (lock_path is not None or name is not None):
        raise UsageError("--to-env NAME is built already: it takes no --lock and no --name", "drop them")
    request = upgrading.Request(
        profile=profile_name,
        to_env=to_env,
        from_env=from_env,
        name=name,
        lock=lock_path,
        runs=runs,
        max_slowdown=max_slowdown,
        baseline_from=baseline_from,
        activate=False if no_activate else None,
        resume=resume,
        allow_unsealed=allow_unsealed,
    )
    if markdown is not None:  # before the upgrade: found after it, an upgrade that activated ended in exit 2
        _writable(markdown)
    with app.progress() as step:
        result = upgrading.upgrade(app.environments(), request, step)
    if markdown is not None:
        from provision import regular
        from provision.errors import InputError

        try:
            regular.write_text(markdown, views.page(result))
        except OSError as exc:
            raise InputError(
                f"cannot write the page to {markdown}: {exc.strerror or exc}",
                f"choose --markdown in a folder you can write; the upgrade's record is {result.path}",
            ) from exc
    return views.upgraded(result)


def _writable(page: Path) -> None:
    """An InputError (exit 2) unless the page can be written where it is asked: a regular file there or none, in a
    folder that is one (made if missing) and may be written. A FIFO, a device, a path under a file are named."""
    import os

    from provision import regular
    from provision.errors import InputError

    try:
        if os.path.lexists(page):
            os.close(regular.open_fd(page, os.O_WRONLY))
        else:
            page.parent.mkdir(parents=True, exist_ok=True)
            if not os.access(page.parent, os.W_OK):
                raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise InputError(
            f"--markdown {page}: cannot write the page there ({exc.strerror or exc})",
            "choose a regular file in a folder you can write; nothing was run",
        ) from exc
