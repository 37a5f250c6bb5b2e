"""Commands that move the active environment: switch and rollback (operations in provision/envs/active.py).

A family of their own: in an emergency they must start in about the time of `import click`, so their module defines
nothing else (the other environment commands' options and help cost a few milliseconds to build).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from provision.cli.options import (
    App,
    complete_env,
    env_argument,
    home_option,
    json_option,
    pass_app,
    verbosity_options,
)

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.command(short_help="Make NAME the active environment.")
@env_argument("name")
@json_option
@home_option
@verbosity_options
@pass_app
def switch(app: App, name: str) -> Shown:
    """Make NAME the active environment (nothing is reinstalled)."""
    from provision.envs import active as envs
    from provision.views import envs as views

    previous = envs.switch(app.root(), name)
    return views.switched(previous, name, [])


@click.command(short_help="Go back to the previous environment (toggles, like cd -).")
@click.option(
    "--to", "to", shell_complete=complete_env, help="Go to this environment instead of the previous one."
)
@json_option
@home_option
@verbosity_options
@pass_app
def rollback(app: App, to: str | None) -> Shown:
    """Switch back to the previously active environment, at once.

    Like `cd -`, it toggles: a second rollback returns to where the first one started (each switch is history).
    Environments removed since, or whose venv is gone, are skipped. --to NAME goes to NAME instead."""
    from provision.envs import active as envs
    from provision.views import envs as views

    previous, now, skipped = envs.rollback(app.root(), to)
    return views.switched(previous, now, skipped)
