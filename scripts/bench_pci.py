"""Time the probe's PCI reading (IOMMU, bridges above the GPUs, ACS) against `lspci -vvv`, in the same run.

    python scripts/bench_pci.py [--runs 21] [--lspci PATH] [--json OUT]

`lspci -vvv` (as root) is what a user runs to see ACSCtl. The probe's reading runs in process over the GPUs NVML
names, or, without a GPU, over every PCI function as a stand-in; `lspci` is a whole process (with `--lspci`, a copy
unpacked from Debian's pciutils: its libpci beside it through LD_LIBRARY_PATH). A tool that is not found is left out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provision.machine import nvml, pci, sysfs


def targets() -> list[tuple[int, str | None]]:
    reading = nvml.read(nvml.load_library())
    if reading.gpus:
        return [(g.index, g.pci_bus_id) for g in reading.gpus]
    names = sorted(os.listdir(pci.DEVICES)) if os.path.isdir(pci.DEVICES) else []
    return list(enumerate(names))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--lspci", help="an lspci binary (default: the one on PATH)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    gpus = targets()
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        found, _ = pci.read(sysfs.Live(), gpus)
        times.append(time.perf_counter() - start)
    results = {
        "functions": len(gpus),
        "bridges": len(found.bridges),
        "provision pci.read, in process": round(statistics.median(times), 5),
    }
    lspci = args.lspci or shutil.which("lspci")
    if lspci:
        env = dict(os.environ)
        lib = Path(lspci).resolve().parent.parent / "lib/x86_64-linux-gnu"
        if lib.is_dir():
            env["LD_LIBRARY_PATH"] = str(lib)
        ids = Path(lspci).resolve().parent.parent / "share/misc/pci.ids"
        argv = [lspci, "-vvv"] + (["-i", str(ids)] if ids.exists() else [])
        runs = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, env=env, check=True, timeout=60)
            runs.append(time.perf_counter() - start)
        results["lspci -vvv, whole process"] = round(statistics.median(runs), 5)
    print(json.dumps(results, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
