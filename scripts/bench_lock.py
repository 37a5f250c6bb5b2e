"""`provision lock` against a bare `uv pip compile` of the same requirements and indexes, in one run.

    python scripts/bench_lock.py [--runs 7] [--json OUT]

Indexes shaped like the cu130 ones are served on 127.0.0.1 (tests/stacks.py); uv's cache is warm for both. The bare
command is what a user would type: one `uv pip compile` of the same pyproject (sources binding each package to its
index) to pylock.toml. provision adds the nightly query, the attribution of each package to its index (index pages read in
parallel), the checks and the PEP 751 validation.
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

from provision.stacks import lock, profiles, uvtool  # noqa: E402


def median(argv: list[str], runs: int, cwd: Path, extra: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            argv,
            check=True,
            capture_output=True,
            cwd=cwd,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never", **(extra or {})},
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def registry(runs: int) -> dict[str, float]:
    """A stack resolved from the public registry: what uv does over a real network, against provision around it."""
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        profile_path = folder / "registry.toml"
        profile_path.write_text(
            'schema = 1\nname = "registry"\ncuda = "13.0"\npython = "3.12"\n[packages]\n'
            'torch = "==2.11.0"\nflashinfer-python = "==0.6.9"\nninja = {}\n'
        )
        profile = profiles.load_file(profile_path)
        target = lock.Target(python="3.12", platform="x86_64-manylinux_2_28")
        effective = lock.effective_indexes(profile, {})
        (folder / "pyproject.toml").write_text(lock._project(profile, {}, effective))
        bare = [uvtool.binary(), *lock._uv_compile_args(target, "pylock.toml")]
        uv_env = uvtool.index_options(effective)[1]  # the indexes as provision gives them to uv: by variable
        ours = [
            sys.executable,
            "-m",
            "provision",
            "lock",
            str(profile_path),
            "--python",
            "3.12",
            "--platform",
            "x86_64-manylinux_2_28",
            "-o",
            str(folder / "out" / "pylock.registry.toml"),
        ]
        median(bare, 1, folder, uv_env)  # warm uv's cache
        return {
            "uv pip compile (bare), registry": median(bare, runs, folder, uv_env),
            "provision lock, registry": median(ours, runs, folder),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", dest="json_out")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="seconds each local index waits before it answers (a round trip to a remote index), e.g. 0.05",
    )
    parser.add_argument(
        "--registry",
        action="store_true",
        help="also lock a stack from the public registry (uv's default index): flashinfer-python 0.6.9 + torch 2.11",
    )
    args = parser.parse_args()
    results: dict[str, float] = {}
    if args.registry:
        results.update(registry(args.runs))
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        server = IndexServer(folder / "indexes")
        indexes = stacks.cu130(server)
        profile = profiles.load("cu130")
        overrides = {n: i.url for n, i in indexes.items()}
        target = lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM)
        effective = lock.effective_indexes(profile, overrides)
        pins, _ = lock.nightly_pins(profile, effective, target)
        (folder / "pyproject.toml").write_text(lock._project(profile, pins, effective))
        bare = [uvtool.binary(), *lock._uv_compile_args(target, "pylock.toml")]
        uv_env = uvtool.index_options(effective)[1]  # the indexes as provision gives them to uv: by variable
        ours = [
            sys.executable,
            "-m",
            "provision",
            "lock",
            "cu130",
            "--python",
            stacks.PYTHON,
            "--platform",
            stacks.PLATFORM,
            "-o",
            str(folder / "out" / "pylock.cu130.toml"),
            *stacks.index_args(indexes),
        ]
        median(ours, 1, folder)  # warm uv's cache
        for index in indexes.values():
            index.delay = args.latency
        where = f"local indexes, {args.latency * 1000:g} ms per answer" if args.latency else "local indexes"
        counts = {}
        for label, argv in ((f"uv pip compile (bare), {where}", bare), (f"provision lock, {where}", ours)):
            before = sum(len(i.requests) for i in indexes.values())
            results[label] = median(argv, args.runs, folder, uv_env if argv is bare else None)
            counts[label] = (sum(len(i.requests) for i in indexes.values()) - before) / args.runs
        inside = []
        # the same lock in this process: what provision adds beyond Python's start-up
        for run in range(args.runs):
            start = time.perf_counter()
            lock.lock(
                profile,
                target=target,
                overrides=overrides,
                output=folder / "out" / f"pylock.inside{run}.toml",
            )
            inside.append(time.perf_counter() - start)
        results[f"provision lock (in process), {where}"] = statistics.median(inside)
        for label, count in counts.items():
            print(f"{label:60} {count:6.1f} requests per run")
        server.close()
    for name, seconds in results.items():
        base = results[
            name.replace("provision lock (in process)", "provision lock").replace(
                "provision lock", "uv pip compile (bare)"
            )
        ]
        print(f"{name:60} {seconds:7.3f} s  {seconds / base:5.2f}x  (+{seconds - base:.3f} s)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"runs": args.runs, "results": results}, indent=2))


main()
