"""Commands that read machines: probe, report (operations in provision/machine and provision/report; scan has
its own family, cli/scan.py). Their paths come as strings and become Paths in the body: probe --json loads no
pathlib unless a path is given."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from provision.cli.options import (
    App,
    allow_unsealed_option,
    complete_env,
    complete_profile,
    home_option,
    json_option,
    pass_app,
    verbosity_options,
)

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.command(short_help="Read the machine: driver, GPUs, topology, toolkits.")
@json_option
@click.option(
    "--venv",
    "venvs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="Also look for nvcc wheels in this venv.",
)
@click.option(
    "--record-nvml",
    type=click.Path(dir_okay=False),
    help="Also write every raw NVML answer read to FILE (replay it with PROVISION_NVML_REPLAY=FILE).",
)
@verbosity_options
@pass_app
def probe(app: App, venvs: tuple[str, ...], record_nvml: str | None) -> Shown:
    """Read the machine: driver, GPUs, topology, CUDA toolkits, host."""
    from provision.machine import probe as probing

    record = None
    if record_nvml is not None:
        import os
        from pathlib import Path

        from provision.errors import UsageError

        if record_nvml.endswith(("/", os.sep)):  # Path would drop the slash and overwrite a file of that name
            raise UsageError(
                f"--record-nvml {record_nvml}: a file name ends with no /",
                "name the file to write, e.g. --record-nvml machine.nvml.json",
            )
        record = Path(record_nvml)
    running = probing.Probing(venvs, record)  # NVML and the nvcc processes start on their threads
    from provision.views import machine as views  # imported while they run

    return views.probe(running.facts())


@click.command(short_help="Judge machines against profiles and environments.")
@click.option(
    "--machine",
    "machines",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A recorded `provision probe --json` file; several for a fleet (--machine fleet/*.json takes a "
    "shell glob's files: those after the first are read as more machines); default: probe this machine.",
)
@click.argument("more_machines", nargs=-1, type=click.Path(dir_okay=False), metavar="[MACHINE_FILE]...")
@click.option(
    "--profile",
    "profile_names",
    multiple=True,
    shell_complete=complete_profile,
    help="Judge against this profile (name or path); default: all.",
)
@click.option(
    "--env",
    "env_names",
    multiple=True,
    shell_complete=complete_env,
    help="Also judge this environment (scan, versions, checks, baseline).",
)
@click.option(
    "--lock",
    "locks",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True),
    help="Judge this PEP 751 lock before installing it: every CUDA wheel scanned (uv's cache, else provision's, else fetched and kept; never unpacked), two wheels installing one path and mixed CUDA majors FAIL.",
)
@click.option(
    "--no-fetch",
    is_flag=True,
    help="With --lock: scan only the wheels uv's or provision's cache holds; the rest SKIP.",
)
@allow_unsealed_option
@home_option
@json_option
@click.option("--markdown", is_flag=True, help="Print Markdown tables to paste into a ticket.")
@verbosity_options
@pass_app
def report(
    app: App,
    machines: tuple[str, ...],
    more_machines: tuple[str, ...],
    profile_names: tuple[str, ...],
    env_names: tuple[str, ...],
    locks: tuple[str, ...],
    no_fetch: bool,
    allow_unsealed: bool,
    markdown: bool,
) -> Shown:
    """Compatibility report: this machine (or recorded ones) against every profile and environment."""
    from pathlib import Path

    from provision.report import assemble
    from provision.views import machine as views

    if app.as_json and markdown:
        raise click.UsageError("choose one of --json and --markdown")
    if more_machines and not machines:
        raise click.UsageError(
            f"{more_machines[0]}: a machine file is given after --machine (report --machine FILE...)"
        )
    if markdown:
        app.output = "markdown"
    # `--machine fleet/*.json`: the shell gives the files after one --machine
    files = tuple(Path(m) for m in (*machines, *more_machines))
    with app.progress() as step:
        result = assemble.build(
            files,
            profile_names,
            locks=tuple(Path(lock) for lock in locks),
            env_names=env_names,
            fetch=not no_fetch,
            home=app.home,
            progress=step,
            allow_unsealed=allow_unsealed,
        )
    return views.report(result)
