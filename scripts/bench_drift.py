"""The drift check on a large environment: cold (no drift cache, and with --drop-caches no page cache either) and warm,
in process and as the whole `provision check NAME --only drift` process, beside `pip check` and `uv pip check` (which
verify dependencies only, not files) timed on the same venv in the same run.

    python scripts/bench_drift.py VENV [--lock PYLOCK] [--runs 7] [--drop-caches] [--accept PATH]... [--json OUT]

The venv is only read: the drift cache and a provision home live in a temporary folder.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provision.envs import drift  # noqa: E402


def drop_page_cache() -> bool:
    """Empty the kernel's page cache (root only), so that a cold run reads from the disk."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def timed(argv: list[str], runs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    times, code = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - start)
        code = done.returncode
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "exit_code": code,
        "argv": argv,
    }


def in_process(
    venv: Path, lock: Path | None, cache: Path, runs: int, *, cold: bool, drop: bool, kept: Any = None
) -> dict[str, Any]:
    seconds, last = [], None
    for _ in range(runs):
        if cold:
            cache.unlink(missing_ok=True)
            if drop:
                drop_page_cache()
        last = drift.scan(venv, lock=lock, cache=cache, **({"kept": kept} if kept else {}))
        seconds.append(last.seconds)
    assert last is not None
    return {
        "median_s": round(statistics.median(seconds), 3),
        "min_s": round(min(seconds), 3),
        "runs": runs,
        "distributions": last.distributions,
        "files": last.files,
        "hashed": last.hashed,
        "hashed_bytes": last.hashed_bytes,
        "remembered": last.remembered,
        "status": last.status,
        "summary": last.summary(),
    }


def accepted(venv: Path, paths: list[str]) -> dict[str, Any]:
    """The kept files `provision accept` would record for `paths` (relative to site-packages), at their present content."""
    import hashlib

    from provision.envs.records import KeptFile

    site = drift.site_packages(venv)
    return {
        path: KeptFile(path=path, sha256=hashlib.sha256((site / path).read_bytes()).hexdigest())
        for path in paths
    }


def whole_process(venv: Path, home: Path, runs: int) -> dict[str, Any]:
    """`provision check b --only drift --json` on the venv adopted into a scratch home: the first run is cold."""
    env = {**os.environ, "PROVISION_HOME": str(home)}
    provision = [sys.executable, "-m", "provision"]
    subprocess.run([*provision, "adopt", "bench", str(venv)], check=True, capture_output=True, env=env)
    argv = [*provision, "check", "bench", "--only", "drift", "--json"]
    first = timed(argv, 1, env)
    document = json.loads(subprocess.run(argv, capture_output=True, text=True, env=env).stdout)
    return {"first_s": first["median_s"], "warm": timed(argv, runs, env), "status": document["status"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("venv", type=Path)
    parser.add_argument("--lock", type=Path, help="Also compare every distribution with this PEP 751 lock.")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--drop-caches", action="store_true", help="Cold runs also start with an empty page cache (root)."
    )
    parser.add_argument("--json", type=Path, help="Write the figures here.")
    parser.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="PATH",
        help="Also a warm run with these files of site-packages accepted (their present content).",
    )
    args = parser.parse_args()
    venv = args.venv.absolute()
    python = str(venv / "bin" / "python")
    with tempfile.TemporaryDirectory(prefix="bench-drift-") as scratch:
        cache = Path(scratch) / drift.CACHE_NAME
        cold = in_process(venv, args.lock, cache, max(3, args.runs // 2), cold=True, drop=False)
        cold_disk = (
            in_process(venv, args.lock, cache, 3, cold=True, drop=True)
            if args.drop_caches and drop_page_cache()
            else None
        )
        warm = in_process(venv, args.lock, cache, args.runs, cold=False, drop=False)
        warm_accepted = (
            in_process(
                venv, args.lock, cache, args.runs, cold=False, drop=False, kept=accepted(venv, args.accept)
            )
            if args.accept
            else None
        )
        process = whole_process(venv, Path(scratch) / "home", args.runs)
    uv = shutil.which("uv")
    try:
        from provision.stacks import uvtool

        uv = uvtool.binary()
    except Exception:
        pass
    pip_argv = (
        [python, "-m", "pip", "check"]
        if (venv / "bin" / "pip").exists()
        else [sys.executable, "-m", "pip", "--python", python, "check"]
    )
    result = {
        "venv": str(venv),
        "lock": str(args.lock) if args.lock else None,
        "cpus": os.cpu_count(),
        "distributions": cold["distributions"],
        "files": cold["files"],
        "bytes": cold["hashed_bytes"],
        "cold_in_process": cold,
        "cold_disk_in_process": cold_disk,
        "warm_in_process": warm,
        "warm_in_process_accepted": warm_accepted,
        "whole_process": process,
        "pip_check": timed(pip_argv, args.runs),
        "uv_pip_check": timed([uv, "pip", "check", "--python", python], args.runs) if uv else None,
    }
    print(
        f"{venv}: {result['distributions']} distributions, {result['files']} files, {result['bytes'] / 1e9:.2f} GB, {os.cpu_count()} CPUs"
    )
    print(f"  drift cold (no drift cache, page cache warm)  {cold['median_s']:.3f} s in process")
    if cold_disk:
        print(f"  drift cold (page cache dropped)               {cold_disk['median_s']:.3f} s in process")
    print(
        f"  drift warm (size+mtime+inode clear all)       {warm['median_s']:.3f} s in process, {warm['hashed']} hashed"
    )
    if warm_accepted:
        print(
            f"  drift warm, {len(args.accept)} accepted file(s)            {warm_accepted['median_s']:.3f} s in process"
        )
    print(
        f"  provision check --only drift, whole process   first {process['first_s']:.3f} s, then {process['warm']['median_s']:.3f} s"
    )
    print(
        f"  pip check                                     {result['pip_check']['median_s']:.3f} s (dependencies only)"
    )
    if result["uv_pip_check"]:
        print(
            f"  uv pip check                                  {result['uv_pip_check']['median_s']:.3f} s (dependencies only)"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
