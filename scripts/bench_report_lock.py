"""Measure `provision report --lock` on a real lock beside `unzip -p` of the same members to /dev/null.

    python scripts/bench_report_lock.py LOCK [--machine PROBE.json] [--json OUT]

1. downloads every wheel of LOCK once into a temporary folder (timed apart: the network is not the scan);
2. `unzip -p WHEEL MEMBERS... > /dev/null` for the members that hold device code (ELF or ar), per wheel: the floor,
   what any tool that reads those members must decompress;
3. provision's scan of the same wheels in place (zip members read in memory, nothing unpacked): what
   `report --lock` does for a wheel uv's cache lacks;
4. `provision report --lock LOCK` end to end with an empty uv cache (fetch + scan), then with uv's cache filled by
   `uv pip sync LOCK` (the wheels scanned where uv unpacked them).
Every figure is wall-clock seconds, best of `--repeat`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provision.scan import binaries, wheels  # noqa: E402
from provision.stacks import index, lockfile  # noqa: E402


def device_members(wheel: Path) -> list[str]:
    """The members the scan reads: those that start like an ELF file or an ar archive (scan/wheels.py)."""
    with zipfile.ZipFile(wheel) as archive:
        return [info.filename for info in wheels.candidates(archive)]


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("lock", type=Path)
    parser.add_argument("--machine", type=Path, default=ROOT / "docs/machines/h200.probe.json")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    provision = shutil.which("provision", path=os.path.dirname(sys.executable)) or "provision"
    pylock, _ = lockfile.read(args.lock)
    work = Path(tempfile.mkdtemp(prefix="bench-report-lock-"))
    try:
        wheels = []
        start = time.perf_counter()
        for package in pylock.packages:
            for wheel in list(package.wheels or [])[:1]:
                target = work / "wheels" / (wheel.name or str(wheel.url).rsplit("/", 1)[-1])
                target.parent.mkdir(parents=True, exist_ok=True)
                with index.get(str(wheel.url), stream=True) as response, open(target, "wb") as handle:
                    for chunk in response.iter_content(4 << 20):
                        handle.write(chunk)
                wheels.append(target)
        download = time.perf_counter() - start
        size = sum(w.stat().st_size for w in wheels)
        members = {w: device_members(w) for w in wheels}
        count = sum(len(m) for m in members.values())

        def unzip() -> None:
            for wheel, names in members.items():
                if names:
                    subprocess.run(["unzip", "-p", str(wheel), *names], stdout=subprocess.DEVNULL, check=True)

        def scan() -> None:
            for wheel in wheels:
                binaries.scan([wheel])

        unzip_s = best(unzip, args.repeat)
        scan_s = best(scan, args.repeat)
        base = [provision, "report", "--lock", str(args.lock), "--machine", str(args.machine), "--json"]
        cold_env = {**os.environ, "UV_CACHE_DIR": str(work / "empty-cache")}

        def cold() -> None:
            shutil.rmtree(work / "empty-cache", ignore_errors=True)
            subprocess.run(base, env=cold_env, stdout=subprocess.DEVNULL, check=False)

        cold_s = best(cold, 1)
        cache = work / "uv-cache"
        venv = work / "venv"
        warm_env = {**os.environ, "UV_CACHE_DIR": str(cache)}
        uv = shutil.which("uv", path=os.path.dirname(sys.executable)) or "uv"
        subprocess.run(
            [uv, "venv", str(venv), "--python", sys.executable, "--quiet"], env=warm_env, check=True
        )
        subprocess.run(
            [uv, "pip", "sync", str(args.lock), "--python", str(venv / "bin/python"), "--quiet"],
            env=warm_env,
            check=True,
        )
        warm = subprocess.run(base, env=warm_env, capture_output=True, text=True, check=False)
        origins = [
            p["origin"]
            for t in json.loads(warm.stdout)["machines"][0]["targets"]
            if t["kind"] == "lock"
            for p in t.get("packages", [])
        ]
        warm_s = best(
            lambda: subprocess.run(base, env=warm_env, stdout=subprocess.DEVNULL, check=False), args.repeat
        )
        figures = {
            "lock": str(args.lock),
            "wheels": len(wheels),
            "bytes": size,
            "device_members": count,
            "download_s": round(download, 2),
            "unzip_p_s": round(unzip_s, 2),
            "scan_zip_in_memory_s": round(scan_s, 2),
            "ratio_scan_to_unzip": round(scan_s / unzip_s, 2) if unzip_s else None,
            "report_lock_cold_s": round(cold_s, 2),
            "report_lock_warm_uv_cache_s": round(warm_s, 2),
            "warm_origins": sorted(set(origins)),
            "cpus": os.cpu_count(),
        }
        print(json.dumps(figures, indent=2))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
