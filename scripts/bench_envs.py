"""Whole-process `provision switch` and `rollback` with a small and a large environment, and `provision create` from a
warm uv cache against a bare `uv venv` + `uv pip sync` of the same lock (checks excluded), in one run.

    python scripts/bench_envs.py [--runs 9] [--large-venv PATH] [--json OUT]

The small environment comes from indexes served on 127.0.0.1 (tests/stacks.py); the large one is any existing venv
(adopted, never modified), e.g. one with torch in it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import stacks  # noqa: E402
from wheelhouse import IndexServer  # noqa: E402

from provision.envs import inventory  # noqa: E402
from provision.stacks import uvtool  # noqa: E402

PROVISION = [sys.executable, "-m", "provision"]
# What a user runs: the console script pip installed beside this interpreter (no runpy), with bytecode compiled as pip
# compiles it at install time (PYTHONDONTWRITEBYTECODE in a test image would otherwise recompile every module each run).
SCRIPT = [str(Path(sys.executable).with_name("provision"))]


# median CPU seconds (user + system) of the child, one per timed() call in the order of `results`: steadier than wall
# time on a busy machine
CPU: list[float] = []


def timed(argv: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall seconds of `runs` whole-process runs of argv (its median CPU time goes to CPU)."""
    import resource

    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    CPU.append(statistics.median(cpu))
    return statistics.median(times)


def large_create(
    folder: Path, server: IndexServer, wheel: Path, env: dict[str, str], runs: int
) -> dict[str, float]:
    """create against bare uv for an environment of several hundred MB (torch and its dependencies)."""
    import shutil

    index = server.index("large")
    (index.root / "torch").mkdir(parents=True)
    shutil.copy(wheel, index.root / "torch" / wheel.name)
    version = wheel.name.split("-")[1]
    profile = folder / "large.toml"
    profile.write_text(
        f'schema = 1\nname = "large"\ncuda = "13.0"\n[indexes]\nlarge = "{index.url}"\n'
        f'[packages]\ntorch = {{ index = "large", version = "=={version}" }}\n'
    )
    create = [*PROVISION, "create", str(profile), "--python", sys.executable, "--no-checks"]
    subprocess.run(create, check=True, capture_output=True, env=env)
    lock_file = next((folder / "home" / "locks").glob("pylock.large-*.toml"))
    bare_venv = folder / "bare-large"
    bare = (
        f"rm -rf {bare_venv} && {uvtool.binary()} venv -q {bare_venv} --python {sys.executable} --no-project && "
        f"{uvtool.binary()} pip sync -q {lock_file} --python {bare_venv}/bin/python --index large={index.url}"
    )
    listing = json.loads(
        subprocess.run([*PROVISION, "envs", "--json"], capture_output=True, text=True, env=env).stdout
    )
    size = inventory.tree_size(Path(next(e["venv"] for e in listing["environments"] if e["name"] == "large")))
    # provision copies (or clones) files instead of uv's default hard links: the same command with --link-mode copy
    # is the like-for-like comparison, the default one what the copy costs
    return {
        f"provision create --replace, large ({size / 2**20:.0f} MiB, warm cache, no checks)": timed(
            [*create, "--replace"], env, runs
        ),
        "uv venv + uv pip sync (bare, same flags, uv's default hard links), large": timed(
            ["bash", "-c", bare], env, runs
        ),
        "uv venv + uv pip sync --link-mode copy (bare), large": timed(
            ["bash", "-c", bare + " --link-mode copy"], env, runs
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--large-venv", type=Path)
    parser.add_argument(
        "--large-wheel",
        type=Path,
        help="a torch wheel on disk: also create a large environment from it "
        "(served on 127.0.0.1; its dependencies come from the public registry)",
    )
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    results: dict[str, float] = {}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "provision")], check=True)
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        server = IndexServer(folder / "indexes")
        indexes = stacks.cu130(server)
        env = {**os.environ, "PROVISION_HOME": str(folder / "home")}
        create = [
            *PROVISION,
            "create",
            "cu130",
            "--python",
            sys.executable,
            "--no-checks",
            *stacks.index_args(indexes),
        ]
        subprocess.run(create, check=True, capture_output=True, env=env)  # locks once and warms uv's cache
        results["provision create --replace (warm cache, lock reused, no checks)"] = timed(
            [*create, "--replace"], env, args.runs
        )
        lock_file = next((folder / "home" / "locks").glob("pylock.*.toml"))
        bare_venv = folder / "bare"
        # The same uv commands that create runs (the index flags let uv reuse its cache instead of revalidating
        # each file URL); what provision adds is the lock lookup, the metadata and the atomic switch.
        flags = " ".join(f"--index {n}={i.url}" for n, i in indexes.items() if n != "default")
        bare = (
            f"rm -rf {bare_venv} && {uvtool.binary()} venv -q {bare_venv} --python {sys.executable} --no-project && "
            f"{uvtool.binary()} pip sync -q {lock_file} --python {bare_venv}/bin/python {flags}"
        )
        results["uv venv + uv pip sync (bare, same flags)"] = timed(["bash", "-c", bare], env, args.runs)
        plain = (
            f"rm -rf {bare_venv} && {uvtool.binary()} venv -q {bare_venv} --python {sys.executable} --no-project && "
            f"{uvtool.binary()} pip sync -q {lock_file} --python {bare_venv}/bin/python"
        )
        results["uv venv + uv pip sync (bare, no index flags)"] = timed(["bash", "-c", plain], env, args.runs)
        subprocess.run(
            [
                *PROVISION,
                "create",
                "cu130",
                "--name",
                "small2",
                "--python",
                sys.executable,
                "--no-checks",
                *stacks.index_args(indexes),
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        results["python -c pass (the interpreter alone)"] = timed(
            [sys.executable, "-c", "pass"], env, args.runs
        )
        results["provision --version (the CLI alone)"] = timed([*SCRIPT, "--version"], env, args.runs)
        results["switch, small environments"] = timed([*SCRIPT, "switch", "small2"], env, args.runs)
        results["rollback, small environments"] = timed([*SCRIPT, "rollback"], env, args.runs)
        results["python -m provision switch, small environments"] = timed(
            [*PROVISION, "switch", "small2"], env, args.runs
        )
        if args.large_wheel:
            results.update(large_create(folder, server, args.large_wheel, env, max(3, args.runs // 3)))
        if args.large_venv:
            subprocess.run(
                [*PROVISION, "adopt", "adopted-large", str(args.large_venv)],
                check=True,
                capture_output=True,
                env=env,
            )
            subprocess.run([*PROVISION, "switch", "adopted-large"], check=True, capture_output=True, env=env)
            size = inventory.tree_size(args.large_venv)
            results[f"switch, large environment ({size / 2**20:.0f} MiB)"] = timed(
                [*SCRIPT, "switch", "adopted-large"], env, args.runs
            )
            results[f"rollback, large environment ({size / 2**20:.0f} MiB)"] = timed(
                [*SCRIPT, "rollback"], env, args.runs
            )
        server.close()
    cpu = dict(zip(results, CPU, strict=True))
    for name, seconds in results.items():
        print(f"{name:58} {seconds:7.3f} s   cpu {cpu.get(name, 0):6.3f} s")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "runs": args.runs,
                    "results": results,
                    "cpu_seconds": cpu,
                    "load_average": os.getloadavg()[0],
                },
                indent=2,
            )
        )


main()
