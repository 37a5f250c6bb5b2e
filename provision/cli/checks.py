"""Commands that prove an environment on the GPU: check, baseline, compare, bench (operations in provision/checks)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from provision.cli.options import (
    App,
    compute_capability,
    env_argument,
    home_option,
    json_option,
    pass_app,
    verbosity_options,
)

if TYPE_CHECKING:
    from provision.views.render import Shown


@click.command(short_help="Run the smoke checks against an environment.")
@env_argument("name", required=False)
@click.option(
    "--only",
    help="Comma-separated check ids (drift, driver, torch-cuda, cuda-libs, sgl-kernel, symmetric-memory, nccl-allreduce, flashinfer-jit, imports).",
)
@click.option(
    "--target-sm", help="Also build FlashInfer's JIT for this SM (12.0) and check the cubins it produced."
)
@click.option(
    "--strict", is_flag=True, help="Exit 1 on a WARN too (drift included), as git diff --exit-code does."
)
@json_option
@home_option
@verbosity_options
@pass_app
def check(app: App, name: str | None, only: str | None, target_sm: str | None, strict: bool) -> Shown:
    """Run the smoke checks against an environment (the active one by default); exit 1 on FAIL or ERROR (--strict: WARN too)."""
    from provision.commands import check as checking
    from provision.views import checks as views

    ids = tuple(i.strip() for i in only.split(",") if i.strip()) if only else None
    with app.progress() as step:
        name, results = checking.check(
            app.environments(),
            name,
            only=ids,
            target_sm=compute_capability(target_sm) if target_sm else None,
            progress=step,
        )
    return views.checks(name, results, strict=strict)


@click.command(short_help="Run and record the profile's baseline.")
@env_argument("name", required=False)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Run it this many times; every run is stored, and compare takes their median and spread.",
)
@json_option
@home_option
@verbosity_options
@pass_app
def baseline(app: App, name: str | None, runs: int) -> Shown:
    """Run the profile's baseline (or the built-in GEMM/FlashInfer one) once the checks passed, and record it.

    With --runs N every run is stored; compare then shows the median and the spread of each side, and says "within
    noise" when the spreads cover the difference."""
    from provision.commands import baseline as measuring
    from provision.views import checks as views

    with app.progress() as step:
        name, done = measuring.baseline(app.environments(), name, runs=runs, progress=step)
    return views.baseline(name, done)


@click.command(short_help="Two environments' baselines side by side.")
@env_argument("first")
@env_argument("second")
@json_option
@home_option
@verbosity_options
@pass_app
def compare(app: App, first: str, second: str) -> Shown:
    """Two environments' latest baselines side by side, with the change in percent."""
    from provision.commands import compare as comparing
    from provision.views import checks as views

    return views.comparison(comparing.compare(app.environments(), first, second))


@click.group(short_help="Benchmarks stored with an environment.")
def bench() -> None:
    """Benchmarks run inside an environment and stored with it."""


@bench.command("allreduce", short_help="All-reduce sweep, stored with the environment.")
@env_argument("name", required=False)
@click.option("-b", "--min-bytes", default="8", show_default=True, help="Smallest size (8, 42K, 2.5M).")
@click.option("-e", "--max-bytes", default="128M", show_default=True, help="Largest size.")
@click.option(
    "-f",
    "--factor",
    type=click.IntRange(min=2),
    default=2,
    show_default=True,
    help="Multiply the size by this each step (2 or more: 1 would never reach the largest size).",
)
@click.option(
    "--iters", type=click.IntRange(min=1), default=20, show_default=True, help="All-reduces per timed batch."
)
@click.option(
    "--nccl-algo",
    "algos",
    multiple=True,
    help="NCCL_ALGO variant to run (repeatable), e.g. 'allreduce:tree'.",
)
@click.option(
    "--nccl-proto", "protos", multiple=True, help="NCCL_PROTO variant to run (repeatable): LL, LL128, Simple."
)
@click.option(
    "--backend",
    type=click.Choice(["nccl", "gloo"]),
    default="nccl",
    show_default=True,
    help="gloo runs the same orchestration on CPUs (no graphs, no GPU timing).",
)
@click.option("--ranks", type=click.IntRange(min=1), help="Processes (default: one per GPU; 2 for gloo).")
@click.option(
    "--nccl-env",
    "nccl_env",
    multiple=True,
    metavar="NAME=VALUE",
    help="An NCCL variable for every run of this call (repeatable), e.g. NCCL_GRAPH_MIXING_SUPPORT=0.",
)
@click.option(
    "--nccl-tests",
    "nccl_tests",
    type=click.Path(path_type=Path),
    help="NVIDIA's all_reduce_perf (or its build/ folder) to run beside, same sizes and NCCL variables; "
    "default: all_reduce_perf on PATH, if any.",
)
@json_option
@home_option
@verbosity_options
@pass_app
def bench_allreduce(
    app: App,
    name: str | None,
    min_bytes: str,
    max_bytes: str,
    factor: int,
    iters: int,
    algos: tuple[str, ...],
    protos: tuple[str, ...],
    backend: str,
    ranks: int | None,
    nccl_env: tuple[str, ...],
    nccl_tests: Path | None,
) -> Shown:
    """All-reduce sweep like nccl-tests' all_reduce_perf, then 122 x 42 KB against 2 x 2.5 MB in CUDA graphs."""
    from provision.checks import allreduce
    from provision.envs import records
    from provision.errors import UsageError
    from provision.views import checks as views

    sizes, settings = (
        (allreduce.parse_size(min_bytes), allreduce.parse_size(max_bytes)),
        allreduce.nccl_env(nccl_env),
    )
    if sizes[0] > sizes[1]:
        raise UsageError(
            f"--min-bytes {min_bytes} is larger than --max-bytes {max_bytes}", "swap them, e.g. -b 8 -e 128M"
        )
    if nccl_tests is not None and backend == "gloo":  # all_reduce_perf runs on GPUs: it was silently skipped
        raise UsageError(
            f"--nccl-tests {nccl_tests} runs NVIDIA's all_reduce_perf on GPUs, which --backend gloo does not use",
            "drop --nccl-tests, or run with --backend nccl on a GPU machine",
        )
    # What the command line alone can refuse is refused first (exit 2), before the environment and the GPUs are read
    allreduce.variants(algos, protos)
    if nccl_tests is not None:
        from provision.checks import nccl_tests as anchors

        anchors.find(nccl_tests)
    name, build = app.environments().named_or_active(name, "provision bench allreduce")
    with app.progress() as step:
        run = allreduce.run(
            build,
            records.read(build),
            min_bytes=sizes[0],
            max_bytes=sizes[1],
            factor=factor,
            iters=iters,
            algos=algos,
            protos=protos,
            backend=backend,
            ranks=ranks,
            nccl_tests=nccl_tests,
            settings=settings,
            progress=step,
        )
    records.add_allreduce(build, run)
    return views.allreduce(name, run)  # exit 1 when nccl-tests beside it hung or failed: its error is shown
