"""What `provision upgrade` adds above the steps it runs: `upgrade --to-env NEW --from OLD --runs 3` against the same
steps run as separate commands (report --profile, report --lock, check, baseline x 6 interleaved, compare, switch),
interleaved A, B, A, B on one home, wall and CPU (user + system of the children) medians.

    python scripts/bench_upgrade.py [--runs 5] [--json OUT]

Two environments of a tiny stack served on 127.0.0.1 (tests/tiny.py), each with the same [baseline]: a Python program
that prints a fixed figure. Between runs the old one is made active again (not timed)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import tiny  # noqa: E402
from wheelhouse import IndexServer  # noqa: E402

PROVISION = str(Path(sys.executable).with_name("provision"))
BASELINE = (
    '[baseline]\ncommand = ["python", "-c", "print(\'decode 80.0 tok/s\')"]\n'
    "pattern = 'decode ([\\d.]+) tok/s'\nunit = \"tok/s\"\n"
)


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(commands: list[list[str]], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of `commands` run one after the other (an exit 1 is a verdict, not a failure)."""
    start, used = time.perf_counter(), cpu()
    for argv in commands:
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return time.perf_counter() - start, cpu() - used


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        server = IndexServer(folder / "indexes")
        try:
            served = tiny.index(server)
            profiles = folder / "profiles"
            profiles.mkdir()
            for name, packages in (("old", 'alpha = "==1.0"'), ("new", 'alpha = "==2.0"')):
                tiny.profile(profiles, name, packages, extra=BASELINE)
            env = {
                **os.environ,
                "PROVISION_HOME": str(folder / "home"),
                "PROVISION_PROFILES": str(profiles),
                "PROVISION_INDEX_DEFAULT": served.url,
                "UV_CACHE_DIR": str(folder / "uv-cache"),
            }
            for name, extra in (("old", []), ("new", ["--no-activate"])):
                subprocess.run(
                    [PROVISION, "create", name, "--python", sys.executable, *extra],
                    check=True,
                    capture_output=True,
                    env=env,
                )
            lock = json.loads(
                subprocess.run(
                    [PROVISION, "envs", "--json"], check=True, capture_output=True, text=True, env=env
                ).stdout
            )["environments"]
            new_lock = next(e for e in lock if e["name"] == "new")["path"] + "/env.json"
            lock_path = json.loads(Path(new_lock).read_text())["lock"]
            upgrade = [[PROVISION, "upgrade", "--to-env", "new", "--from", "old", "--runs", "3", "--json"]]
            steps = [
                [PROVISION, "report", "--profile", "new", "--json"],
                [PROVISION, "report", "--lock", lock_path, "--json"],
                [PROVISION, "check", "new", "--json"],
                *([[PROVISION, "baseline", "old", "--json"], [PROVISION, "baseline", "new", "--json"]] * 3),
                [PROVISION, "compare", "old", "new", "--json"],
                [PROVISION, "switch", "new", "--json"],
            ]
            results: dict[str, list[tuple[float, float]]] = {
                "upgrade --to-env": [],
                "the same steps, 11 commands": [],
            }
            for _ in range(args.runs):
                for label, commands in (
                    ("upgrade --to-env", upgrade),
                    ("the same steps, 11 commands", steps),
                ):
                    subprocess.run([PROVISION, "switch", "old"], check=True, capture_output=True, env=env)
                    results[label].append(timed(commands, env))
        finally:
            server.close()
    summary = {
        label: {
            "wall_s": round(statistics.median(w for w, _ in runs), 3),
            "cpu_s": round(statistics.median(c for _, c in runs), 3),
            "runs": runs,
        }
        for label, runs in results.items()
    }
    for label, figures in summary.items():
        print(
            f"{label}: {figures['wall_s']:.2f} s wall, {figures['cpu_s']:.2f} s CPU (median of {args.runs})"
        )
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"runs": args.runs, "load": os.getloadavg(), "results": summary}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
