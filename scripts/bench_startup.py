"""Start-up of `provision` commands as whole processes, beside `python -c "import click"` in the same run.

    python scripts/bench_startup.py [--runs 21] [--json OUT]

`provision --version`, `switch` and `rollback` (on a home of two adopted environments made here with uv) and
`probe --json`, each the median of --runs whole processes (wall and CPU: user + system of the child), interleaved
with `python -c pass` and `python -c "import click"` so that a machine's drift hits all of them alike. The goal of
issue 23: switch and rollback within 1.25x of `import click`; probe at most 0.15 s on the GPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    script = shutil.which("provision", path=os.path.dirname(sys.executable))
    provision = [script] if script else [sys.executable, "-m", "provision"]  # the console script, else the module
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        env = {**os.environ, "PROVISION_HOME": str(home)}
        for name in ("a", "b"):
            venv = Path(folder) / name
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            subprocess.run([*provision, "adopt", name, str(venv), "--no-lock"], env=env, check=True, capture_output=True)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            'python -c "import click"': [sys.executable, "-c", "import click"],
            "provision --version": [*provision, "--version"],
            "provision switch a": [*provision, "switch", "a"],
            "provision rollback": [*provision, "rollback"],
            "provision probe --json": [*provision, "probe", "--json"],
        }
        for argv in commands.values():  # warm the page cache and the bytecode
            once(argv, env)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                samples[name].append(once(argv, env))
    rows = {name: {"wall_s": round(statistics.median(w for w, _ in got), 4), "cpu_s": round(statistics.median(c for _, c in got), 4)}
            for name, got in samples.items()}
    click = rows['python -c "import click"']
    print(f"{'command':28} {'wall s':>8} {'cpu s':>8} {'wall / import click':>19} {'cpu / import click':>18}")
    for name, row in rows.items():
        print(f"{name:28} {row['wall_s']:8.4f} {row['cpu_s']:8.4f} {row['wall_s'] / click['wall_s']:18.2f}x "
              f"{row['cpu_s'] / click['cpu_s']:17.2f}x")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"runs": args.runs, "python": sys.version.split()[0], "results": rows}, indent=2))


main()
