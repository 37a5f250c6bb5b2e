"""Commands that prove an environment on the GPU: check, baseline, compare."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from provision.cli import JSON_HELP, cli
from provision.envcommands import _home, home_option


@cli.command()
@click.argument("name", required=False)
@click.option("--only", help="Comma-separated check ids (driver, torch-cuda, cuda-libs, sgl-kernel, symmetric-memory, flashinfer-jit, imports).")
@click.option("--target-sm", help="Also build FlashInfer's JIT for this SM (12.0) and check the cubins it produced.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def check(name: str | None, only: str | None, target_sm: str | None, as_json: bool, home: Path | None) -> None:
    """Run the smoke checks against an environment (the active one by default); exit 1 on FAIL or ERROR."""
    from provision import views
    from provision.checks import runner
    from provision.commands import _cc
    from provision.errors import EnvError
    from provision.home import read_meta, write_json

    where = _home(home)
    name = name or where.active()
    if name is None:
        raise EnvError("no environment is active", "name one: provision check NAME")
    build = where.build_of(name)
    meta = read_meta(build)
    ids = tuple(i.strip() for i in only.split(",") if i.strip()) if only else None
    with views.progress(as_json) as step:
        results = runner.run(build, meta, only=ids, target_sm=_cc(target_sm) if target_sm else None, progress=step)
    meta = read_meta(build)
    meta["checks"] = {"results": results, "at": views.now()}
    write_json(build / "env.json", meta)
    views.checks(name, results, as_json)
    sys.exit(1 if runner.overall(results) in ("fail", "error") else 0)


@cli.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def baseline(name: str | None, as_json: bool, home: Path | None) -> None:
    """Run the profile's baseline (or the built-in GEMM/FlashInfer one) once the checks passed, and record it."""
    from provision import baseline as baselines
    from provision import views

    with views.progress(as_json) as step:
        record = baselines.run(_home(home), name, step)
    views.baseline(record, as_json)


@cli.command()
@click.argument("first")
@click.argument("second")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def compare(first: str, second: str, as_json: bool, home: Path | None) -> None:
    """Two environments' latest baselines side by side, with the change in percent."""
    from provision import baseline as baselines
    from provision import views

    views.comparison(baselines.compare(_home(home), first, second), as_json)
