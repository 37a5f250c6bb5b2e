"""Measure what provision's wheel cache (provision/wheelfacts.py: scans/, records/ by sha256) saves, beside the tool a
user would use instead, in one run, from a cold state (issue 41's goals):

    python scripts/bench_wheel_cache.py --index URL [--packages nvidia-cuda-runtime,...] [--runs 3] [--json OUT]

1. `uv pip compile` of the packages (bare, the same index, uv's cache empty then warm) beside `provision lock` of a
   profile of the same packages: first time (provision's caches empty: every RECORD read by range requests), again;
2. `provision report --lock` of that lock three times: first (every wheel fetched and scanned), again (scans/ and
   records/ answer), again with scans/ removed (every wheel scanned again from provision's wheel cache).
URL is the index to resolve from (the default registry's simple URL, or a mirror): never written into this file.
Every figure is wall-clock seconds of a whole process; medians of `--runs` where a step is repeated.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MACHINE = ROOT / "docs/machines/h200.probe.json"
PACKAGES = "nvidia-cuda-runtime>=13,<14,nvidia-nvjitlink>=13,<14,nvidia-cuda-nvrtc>=13,<14"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"{argv[:3]} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--index", required=True)
    parser.add_argument("--packages", default=PACKAGES, help="requirements, comma-separated where no specifier has a comma")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    requirements = [r for r in args.packages.replace(",nvidia", "\nnvidia").split("\n") if r]
    work = Path(tempfile.mkdtemp(prefix="bench-wheel-cache-"))
    provision = str(Path(sys.executable).parent / "provision")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
    env = {**os.environ, "UV_CACHE_DIR": str(work / "uv"), "XDG_CACHE_HOME": str(work / "xdg"),
           "PROVISION_HOME": str(work / "home"), "PROVISION_INDEX_DEFAULT": args.index}
    (work / "pyproject.toml").write_text('[project]\nname = "bench"\nversion = "0"\ndependencies = [\n'
                                         + "".join(f'  "{r}",\n' for r in requirements) + "]\n")
    pins = "".join(f'"{r.split(">")[0].split("=")[0]}" = "{r[len(r.split(">")[0].split("=")[0]):]}"\n' for r in requirements)
    (work / "bench.toml").write_text(f'schema = 1\nname = "bench"\ncuda = "13.0"\npython = "3.12"\n[packages]\n{pins}')
    compile_ = [uv, "pip", "compile", "pyproject.toml", "--no-config", "--quiet", "--format", "pylock.toml", "-o", "pylock.uv.toml",
                "--python-version", "3.12", "--default-index", args.index, "--no-header", "--python", sys.executable]
    lock = [provision, "lock", str(work / "bench.toml"), "--python", "3.12", "-o", str(work / "pylock.bench.toml")]
    report = [provision, "report", "--lock", str(work / "pylock.bench.toml"), "--machine", str(MACHINE), "--json"]
    result: dict[str, object] = {"packages": requirements}
    # cold: uv's cache and provision's empty, for both tools in turn (each its own cold state)
    result["uv_compile_cold"] = timed(compile_, env, work)
    shutil.rmtree(work / "uv", ignore_errors=True)
    result["lock_first"] = timed(lock, env, work)
    warm_uv, warm_lock = [], []
    for _ in range(args.runs):  # interleaved, both warm
        warm_uv.append(timed(compile_, env, work))
        warm_lock.append(timed(lock, env, work))
    result["uv_compile_warm"], result["lock_again"] = statistics.median(warm_uv), statistics.median(warm_lock)
    result["report_first"] = timed(report, env, work)
    again = [timed(report, env, work) for _ in range(args.runs)]
    rescanned = []
    for _ in range(args.runs):
        shutil.rmtree(work / "xdg/provision/scans", ignore_errors=True)
        rescanned.append(timed(report, env, work))
    result["report_again"], result["report_scans_removed"] = statistics.median(again), statistics.median(rescanned)
    result["ratios"] = {"lock_first/uv_cold": round(result["lock_first"] / result["uv_compile_cold"], 2),  # type: ignore[operator]
                        "lock_again/uv_warm": round(result["lock_again"] / result["uv_compile_warm"], 2),  # type: ignore[operator]
                        "report_again/report_scans_removed": round(result["report_again"] / result["report_scans_removed"], 3)}  # type: ignore[operator]
    result["wheel_bytes"] = sum(f.stat().st_size for f in (work / "xdg/provision/wheels").rglob("*.whl"))
    text = json.dumps(result, indent=2, default=lambda x: round(x, 3))
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
