"""Scan against cuobjdump on the same files, in one run: time and counts, which must be identical.

    python scripts/bench_scan.py FILE... [--venv DIR] [--json OUT]

cuobjdump names cubins by SM and drops the `f` of family cubins (it prints sm_100 for sm_100f), and names PTX by
sm_ too; the comparison applies that naming to provision's labels. Each file: provision's scan median of 5 runs
(in process, page cache warm) against one run each of `cuobjdump --list-elf` and `--list-ptx`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provision.scan import binaries as scan  # noqa: E402


def cuobjdump_counts(path: Path, flag: str) -> tuple[Counter[str], float]:
    start = time.perf_counter()
    done = subprocess.run(["cuobjdump", flag, str(path)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return Counter(re.findall(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)", done.stdout)), seconds


def as_cuobjdump(labels: Counter[str], kind: str) -> Counter[str]:
    result: Counter[str] = Counter()
    for label, count in labels.items():
        name = label.replace("compute_", "sm_") if kind == "ptx" else label
        result[name[:-1] if name.endswith("f") else name] += count
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--venv", type=Path, help="also time a scan of this whole venv")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    rows = []
    for path in args.files:
        if not path.is_file():
            print(f"{path}: not found, left out")
            continue
        times = []
        for _ in range(5):
            start = time.perf_counter()
            counts = scan.counts_in_file(path)
            times.append(time.perf_counter() - start)
        row = {"file": str(path), "bytes": path.stat().st_size, "provision_s": round(statistics.median(times), 4),
               "cubins": sum(counts.cubin.values()), "ptx": sum(counts.ptx.values()), "labels": dict(counts.cubin)}
        if shutil.which("cuobjdump"):
            elf, elf_s = cuobjdump_counts(path, "--list-elf")
            ptx, ptx_s = cuobjdump_counts(path, "--list-ptx")
            row.update(cuobjdump_s=round(elf_s + ptx_s, 3), speedup=round((elf_s + ptx_s) / row["provision_s"], 1),
                       cubins_match=as_cuobjdump(counts.cubin, "cubin") == elf, ptx_match=as_cuobjdump(counts.ptx, "ptx") == ptx,
                       cuobjdump_cubins=sum(elf.values()), cuobjdump_ptx=sum(ptx.values()))
        rows.append(row)
    venv = None
    if args.venv:
        start = time.perf_counter()
        result = scan.scan([args.venv])
        venv = {"venv": str(args.venv), "seconds": round(time.perf_counter() - start, 3), "files_scanned": result.scanned,
                "files_with_cuda": len(result.files), "packages": len(result.packages),
                "entries": sum(sum(f.counts.cubin.values()) + sum(f.counts.ptx.values()) for f in result.files)}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "provision", "scan", "--json", str(args.venv)], capture_output=True)
        venv["process_s"] = round(time.perf_counter() - start, 3)
        venv["process_ok"] = done.returncode == 0
    for row in rows:
        match = "" if "cuobjdump_s" not in row else f" cuobjdump {row['cuobjdump_s']:.2f}s ({row['speedup']}x) match={row['cubins_match'] and row['ptx_match']}"
        print(f"{Path(row['file']).name}: {row['bytes'] / 2**20:.0f} MiB, {row['cubins']} cubins {row['ptx']} PTX, provision {row['provision_s']:.3f}s{match}")
    if venv:
        print(f"venv {venv['venv']}: {venv['files_scanned']} files, {venv['entries']} entries in {venv['seconds']}s (whole process {venv['process_s']}s)")
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump({"files": rows, "venv": venv}, handle, indent=2)


main()
