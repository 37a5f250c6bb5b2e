"""Commands that try changes on an environment and keep what they showed: try, trials (commands/try_.py and
commands/trials.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from provision.cli.options import App, env_argument, home_option, json_option, pass_app, verbosity_options

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.command("try", short_help="Try one change against the baseline, then put it back.")
@env_argument("name")
@click.argument("label", required=False)
@click.option(
    "--env", "env", multiple=True, metavar="K=V", help="A variable for the baseline command (repeatable)."
)
@click.option(
    "--arg",
    "args",
    multiple=True,
    metavar="ARG",
    help="An argument appended to the baseline command (repeatable; --arg=--flag).",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    metavar="PATH=SOURCE",
    help="Write SOURCE over PATH in the venv for this trial (site-packages-relative or absolute inside it; repeatable).",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Runs with the change; the baseline needs as many (run first when it has fewer).",
)
@click.option("--note", help="A note kept with the trial in the ledger.")
@click.option(
    "--force", is_flag=True, help="Run a recipe that report says cannot run on this machine or stack."
)
@click.option(
    "--recipe", help="A recipe's change (provision try --list-recipes NAME); LABEL defaults to its id."
)
@click.option(
    "--replay", metavar="OLD", help="Run every trial recorded on environment OLD on NAME, in the same order."
)
@click.option(
    "--list-recipes",
    "list_recipes",
    is_flag=True,
    help="Show which recipes apply to NAME, and why not the others.",
)
@json_option
@home_option
@verbosity_options
@pass_app
def try_command(
    app: App,
    name: str,
    label: str | None,
    env: tuple[str, ...],
    args: tuple[str, ...],
    files: tuple[str, ...],
    runs: int,
    note: str | None,
    force: bool,
    recipe: str | None,
    replay: str | None,
    list_recipes: bool,
) -> Shown:
    """Run the baseline N times with one change (variables, arguments, files), judge it against NAME's baseline
    (better, worse, within-noise, failed, not-applicable), put NAME back exactly and check its baseline returned to
    its noise band (exit 1 when not)."""
    from provision.commands import trials as ledgers
    from provision.commands import try_ as trying
    from provision.errors import UsageError
    from provision.views import trials as views

    home = app.environments()
    change = bool(env or args or files or recipe)
    if list_recipes:
        if label or change or replay:
            raise UsageError("--list-recipes takes NAME alone", "provision try --list-recipes NAME")
        return views.recipes(ledgers.list_recipes(home, name))
    if replay:
        if label or change:
            raise UsageError(
                "--replay OLD runs OLD's trials as they were: give no LABEL or change with it",
                f"provision try {name} --replay {replay}",
            )
        with app.progress() as step:
            return views.replayed(
                name, replay, trying.replay(home, name, replay, runs=runs, force=force, progress=step)
            )
    label = label or recipe
    if not label:
        raise UsageError(
            "give the trial a LABEL (or --recipe ID)",
            f"e.g. provision try {name} tree --env NCCL_ALGO=allreduce:tree",
        )
    if not change:
        raise UsageError(
            "nothing to try: give --env K=V, --arg ARG, --file PATH=SOURCE or --recipe ID",
            "see provision try --help",
        )
    asked = trying.Asked(env=trying.parse_env(env), args=list(args), files=trying.parse_files(files))
    with app.progress() as step:
        return views.trial(
            trying.try_(
                home, name, label, asked, runs=runs, note=note, force=force, recipe=recipe, progress=step
            )
        )


@click.command(short_help="The trials ledger; a matrix across environments.")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--markdown", "as_markdown", is_flag=True, help="A Markdown page for a ticket.")
@json_option
@home_option
@verbosity_options
@pass_app
def trials(app: App, names: tuple[str, ...], as_markdown: bool) -> Shown:
    """Every trial recorded (on the environments named, else on all): label, change, environment, median and spread,
    the change against the baseline, verdict, reason, date; with several environments, each label side by side."""
    from provision.commands import trials as ledgers
    from provision.views import trials as views

    if as_markdown and app.as_json:
        raise click.UsageError("choose one of --json and --markdown")
    if as_markdown:
        app.output = "markdown"
    return views.ledger(ledgers.trials(app.environments(), names))
