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

from provision import envs, uvtool  # noqa: E402

PROVISION = [sys.executable, "-m", "provision"]


def timed(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--large-venv", type=Path)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        server = IndexServer(folder / "indexes")
        indexes = stacks.cu130(server)
        env = {**os.environ, "PROVISION_HOME": str(folder / "home")}
        create = [*PROVISION, "create", "cu130", "--python", sys.executable, "--no-checks", *stacks.index_args(indexes)]
        subprocess.run(create, check=True, capture_output=True, env=env)  # locks once and warms uv's cache
        results["provision create (warm cache, lock reused, no checks)"] = timed(create, env, args.runs)
        lock_file = next((folder / "home" / "locks").glob("pylock.*.toml"))
        bare_venv = folder / "bare"
        bare = (f"rm -rf {bare_venv} && {uvtool.binary()} venv -q {bare_venv} --python {sys.executable} && "
                f"{uvtool.binary()} pip sync -q {lock_file} --python {bare_venv}/bin/python")
        results["uv venv + uv pip sync (bare)"] = timed(["bash", "-c", bare], env, args.runs)
        subprocess.run([*PROVISION, "create", "cu130", "--name", "small2", "--python", sys.executable, "--no-checks",
                        *stacks.index_args(indexes)], check=True, capture_output=True, env=env)
        results["switch, small environments"] = timed([*PROVISION, "switch", "small2"], env, args.runs)
        results["rollback, small environments"] = timed([*PROVISION, "rollback"], env, args.runs)
        if args.large_venv:
            subprocess.run([*PROVISION, "adopt", "large", str(args.large_venv)], check=True, capture_output=True, env=env)
            subprocess.run([*PROVISION, "switch", "large"], check=True, capture_output=True, env=env)
            size = envs.tree_size(args.large_venv)
            results[f"switch, large environment ({size / 2**20:.0f} MiB)"] = timed([*PROVISION, "switch", "large"], env, args.runs)
            results[f"rollback, large environment ({size / 2**20:.0f} MiB)"] = timed([*PROVISION, "rollback"], env, args.runs)
        server.close()
    for name, seconds in results.items():
        print(f"{name:58} {seconds:7.3f} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"runs": args.runs, "results": results}, indent=2))


main()
