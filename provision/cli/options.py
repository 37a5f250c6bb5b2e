"""Options and arguments shared by several commands, and the small state the group hands to them (pip-tools'
`scripts/options.py` is the model): one definition each, so `--home` or `--json` read the same everywhere."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # pathlib too: the group's --home is converted when given (`scan` loads no pathlib)
    from click.shell_completion import CompletionItem

    from provision.envs.home import Home
    from provision.views.render import Output
    from provision.views.ui import progress

F = TypeVar("F", bound=Callable[..., Any])

JSON_HELP = "Print one JSON document (schema in docs/json.md) instead of tables; errors too."
HOME_HELP = "Where environments live (else PROVISION_HOME, else ~/.local/share/provision)."


class App:
    """The app's context, handed to every command (`@pass_app`): what the group's and the command's options decide
    for all of them: the home (--home before or after the command), -v/-q, and the output (--json, --markdown).
    A command returns a `views.render.Shown`; `cli/main.py` renders it as `output` and exits with its code.
    (A plain class: every command makes one, and a dataclass is generated at import.)"""

    def __init__(self, home: str | None = None, verbosity: int = 0, output: Output = "table") -> None:
        self.home = home
        self.verbosity = verbosity
        self.output: Output = output

    @property
    def as_json(self) -> bool:
        return self.output == "json"

    def environments(self) -> Home:
        """The environments home: --home, else PROVISION_HOME, else the XDG data folder."""
        return home_of(self.home)

    def root(self) -> str:
        """That home's folder as a str path, for switch and rollback (envs/links.py: they load no pathlib)."""
        from provision.envs import links

        return links.resolve(self.home)

    def warm(self) -> None:
        """Load what rendering this command's result needs (views.render.warm): for a thread while the command waits."""
        from provision.views import render

        render.warm(self.output)

    def progress(self) -> progress:
        """Long steps shown on stderr (never under --json, never with -q)."""
        from provision.views import ui

        return ui.progress(self.as_json)


def app(ctx: click.Context) -> App:
    return ctx.ensure_object(App)


pass_app = click.make_pass_decorator(App, ensure=True)


def home_of(path: str | None) -> Home:
    """The environments home: this --home, else PROVISION_HOME, else the XDG data folder."""
    from provision.envs import home

    return home.Home(home.resolve(path))


def _home_value(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    # `provision --home H switch x` and `provision switch x --home H` mean the same; the command's own one wins.
    if value is not None:
        app(ctx).home = value


def home_option(f: F, help: str = HOME_HELP) -> F:
    """--home, before the command's name (on the group) or after it: both set the app's home."""
    return click.option("--home", type=click.Path(), callback=_home_value, expose_value=False, help=help)(f)


def _json_value(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        app(ctx).output = "json"  # errors from here on are a JSON document too


def json_option(f: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,
        callback=_json_value,
        expose_value=False,
        help=JSON_HELP,
    )(f)


def _verbosity(step: int) -> Callable[[click.Context, click.Parameter, int], None]:
    def apply(ctx: click.Context, _param: click.Parameter, count: int) -> None:
        if count:
            from provision import log

            state = app(ctx)
            state.verbosity += step * count
            log.set_level(state.verbosity)

    return apply


def verbosity_options(f: F) -> F:
    """-v/--verbose (the commands provision runs, and their full stderr when they fail) and -q/--quiet (no progress
    or informational lines; results and errors stay), on the group and on every command."""
    f = click.option(
        "-q",
        "--quiet",
        count=True,
        expose_value=False,
        is_eager=True,
        callback=_verbosity(-1),
        help="Print less: no progress or informational lines (results and errors stay).",
    )(f)
    return click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        is_eager=True,
        callback=_verbosity(1),
        help="Print the commands provision runs (uv's argv), and their full stderr when they fail.",
    )(f)


def python_option(f: F) -> F:
    return click.option("--python", "python", help="Target Python X.Y (default: the profile's python).")(f)


def index_option(f: F) -> F:
    return click.option(
        "--index",
        "indexes",
        multiple=True,
        metavar="NAME=URL",
        help="Use URL for the profile's index NAME (mirrors, air-gapped sites).",
    )(f)


def allow_unsealed_option(f: F) -> F:
    """--allow-unsealed, on every command that reads a lock the user names (report --lock, create --lock, upgrade --lock)."""
    return click.option(
        "--allow-unsealed",
        is_flag=True,
        help="Read a lock that has no seal ([tool.provision] packages_sha256: an older provision's, or "
        "another tool's) as it is, with a warning; re-locking it is the fix.",
    )(f)


class NumberRange(click.FloatRange):
    """click's FloatRange that refuses nan, which it let through (nan compares false with both bounds): `gc --cache
    --older-than nan` kept every entry for ever as 'not used for nan days', `--max-slowdown nan` never activated."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:  # nan, the one float not equal to itself
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


def compute_capability(value: str) -> str:
    """Return "12.0" for 12.0, 12, sm_120, 120 or sm_120a; a usage error for anything else.

    A bare number of one or two digits is a major version (`12` is 12.0, `9` is 9.0), except two digits from 20 up,
    which read as an SM label (`90` is 9.0, `86` is 8.6: no GPU has a major version of 20 or more); three digits are
    an SM label (`120` is 12.0); `sm_`/`compute_` always mark an SM label (`sm_90a` is 9.0, `sm_9` is 9.0).
    """
    text = value.strip().lower()
    bare = text.removeprefix("sm_").removeprefix("compute_")
    is_label = bare != text
    digits = bare.rstrip("af") if is_label else bare
    if "." in digits:
        major, _, minor = digits.partition(".")
    elif digits.isdigit() and len(digits) >= 2 and (is_label or len(digits) == 3 or int(digits) >= 20):
        major, minor = digits[:-1], digits[-1]
    else:
        major, minor = digits, "0"
    if not (major.isdigit() and minor.isdigit() and len(minor) == 1 and 1 <= int(major) <= 19):
        raise click.BadParameter(f"{value!r} is not a compute capability; write it as 12.0, 12 or sm_120")
    return f"{int(major)}.{int(minor)}"


# --- shell completion: names read the way the commands read them, never an error ------------------------------


def _home_for_completion(ctx: click.Context) -> str | None:
    found = ctx.find_object(App)  # --home's callback has set it, before or after the command's name
    return found.home if found is not None else None


def complete_env(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Environment names in the home the command line names (else PROVISION_HOME, else the default)."""
    from click.shell_completion import CompletionItem

    try:
        names = home_of(_home_for_completion(ctx)).names()
    except (OSError, ValueError):
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def complete_first_env(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """`run NAME -- COMMAND`: environment names for the first word, nothing after it (the command is the shell's)."""
    return [] if ctx.params.get(param.name or "") else complete_env(ctx, param, incomplete)


def complete_profile(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Profile names (shipped, and in PROVISION_PROFILES folders); a path is completed as a file."""
    from click.shell_completion import CompletionItem

    if os.sep in incomplete or incomplete.startswith("."):
        return [CompletionItem(incomplete, type="file")]
    from provision.errors import ProvisionError
    from provision.stacks import profiles

    try:
        names = [p.name for p in profiles.available()]
    except (OSError, ProvisionError):
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def env_argument(name: str, *, required: bool = True, metavar: str | None = None) -> Callable[[F], F]:
    return click.argument(name, required=required, metavar=metavar, shell_complete=complete_env)


def profile_argument(f: F) -> F:
    return click.argument("profile_name", metavar="PROFILE", shell_complete=complete_profile)(f)
