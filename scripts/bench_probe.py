"""Time `provision probe --json` as a whole process against what people use instead, in the same run.

    python scripts/bench_probe.py [--runs 9] [--json OUT]

Compares with `nvidia-smi --query-gpu=...` (fast, but far less) and `python -m torch.utils.collect_env` (the usual
bug-report tool), each the median of several whole-process runs. A tool that is not installed is left out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time


def median_seconds(argv: list[str], runs: int) -> tuple[float, int] | None:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            return None
    return statistics.median(times), len(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--slow-runs", type=int, default=3, help="runs of collect_env (seconds each)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    provision = [sys.executable, "-m", "provision", "probe", "--json"]
    rows = {"provision probe --json": median_seconds(provision, args.runs)}
    if shutil.which("nvidia-smi"):
        query = "name,compute_cap,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current,persistence_mode"
        rows["nvidia-smi --query-gpu"] = median_seconds(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv"], args.runs
        )
        rows["nvidia-smi topo -m"] = median_seconds(["nvidia-smi", "topo", "-m"], args.runs)
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is not None:
            rows["python -m torch.utils.collect_env"] = median_seconds(
                [sys.executable, "-m", "torch.utils.collect_env"], args.slow_runs
            )
    except ImportError:
        pass
    results = {name: {"median_s": round(r[0], 4), "output_bytes": r[1]} for name, r in rows.items() if r}
    base = results["provision probe --json"]["median_s"]
    print(f"{'command':40} {'median s':>10} {'vs provision':>13}")
    for name, r in results.items():
        print(f"{name:40} {r['median_s']:10.3f} {r['median_s'] / base:12.1f}x")
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump(
                {"runs": args.runs, "python": sys.version.split()[0], "results": results}, handle, indent=2
            )


main()
