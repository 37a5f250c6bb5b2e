"""Commands that prove an environment on the GPU: check, baseline, compare."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from provision.cli.envs import _home, home_option
from provision.cli.main import JSON_HELP, cli


@cli.command()
@click.argument("name", required=False)
@click.option("--only", help="Comma-separated check ids (driver, torch-cuda, cuda-libs, sgl-kernel, symmetric-memory, flashinfer-jit, imports).")
@click.option("--target-sm", help="Also build FlashInfer's JIT for this SM (12.0) and check the cubins it produced.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def check(name: str | None, only: str | None, target_sm: str | None, as_json: bool, home: Path | None) -> None:
    """Run the smoke checks against an environment (the active one by default); exit 1 on FAIL or ERROR."""
    from provision.checks import runner
    from provision.cli.machine import _cc
    from provision.envs.home import read_meta, write_json
    from provision.errors import EnvError
    from provision.views import render as views

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
    from provision.checks import baseline as baselines
    from provision.views import render as views

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
    from provision.checks import baseline as baselines
    from provision.views import render as views

    views.comparison(baselines.compare(_home(home), first, second), as_json)


@cli.group()
def bench() -> None:
    """Benchmarks run inside an environment and stored with it."""


@bench.command("allreduce")
@click.argument("name", required=False)
@click.option("-b", "--min-bytes", default="8", show_default=True, help="Smallest size (8, 42K, 2.5M).")
@click.option("-e", "--max-bytes", default="128M", show_default=True, help="Largest size.")
@click.option("-f", "--factor", default=2, show_default=True, help="Multiply the size by this each step.")
@click.option("--iters", default=20, show_default=True, help="All-reduces per timed batch.")
@click.option("--nccl-algo", "algos", multiple=True, help="NCCL_ALGO variant to run (repeatable), e.g. 'allreduce:tree'.")
@click.option("--nccl-proto", "protos", multiple=True, help="NCCL_PROTO variant to run (repeatable): LL, LL128, Simple.")
@click.option("--backend", type=click.Choice(["nccl", "gloo"]), default="nccl", show_default=True,
              help="gloo runs the same orchestration on CPUs (no graphs, no GPU timing).")
@click.option("--ranks", type=int, help="Processes (default: one per GPU; 2 for gloo).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@home_option
def bench_allreduce(name: str | None, min_bytes: str, max_bytes: str, factor: int, iters: int, algos: tuple[str, ...],
                    protos: tuple[str, ...], backend: str, ranks: int | None, as_json: bool, home: Path | None) -> None:
    """All-reduce sweep like nccl-tests' all_reduce_perf, then 122 x 42 KB against 2 x 2.5 MB in CUDA graphs."""
    from provision.checks import allreduce
    from provision.views import render as views

    with views.progress(as_json) as step:
        record = allreduce.run(_home(home), name, min_bytes=allreduce.parse_size(min_bytes), max_bytes=allreduce.parse_size(max_bytes),
                               factor=factor, iters=iters, algos=algos, protos=protos, backend=backend, ranks=ranks, progress=step)
    views.allreduce(record, as_json)
