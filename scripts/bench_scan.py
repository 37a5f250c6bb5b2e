"""`provision scan` beside the tools a user would use instead, in one run, as whole processes.

    python scripts/bench_scan.py FILE... [--wheel WHL]... [--venv DIR] [--cuobjdump PATH] [--runs 5] [--json OUT]

FILE: `provision scan --json FILE` as a whole process (median of --runs, page cache warm) against one run each of
`cuobjdump --list-elf` and `--list-ptx`; counts compared over the fatbin sections, the part cuobjdump reads (it
drops the `f` of family cubins and names PTX sm_XY too; containers a library keeps in its own data, as cuFFT and
cuBLASLt do, are counted by provision and invisible to cuobjdump: shown as `elsewhere`).
WHL: `provision scan --json WHL` (in place, every core) against `unzip -p WHL MEMBERS > /dev/null` of the same ELF
and archive members (single-threaded inflate, nothing else), median of --runs each, the two taking turns (on a shared
machine the load moves between runs). CPU: user + system of the process and of every child it waited for (the
scan's worker processes included).
Bytecode is compiled first for provision, as pip compiles it at install time: where PYTHONDONTWRITEBYTECODE is set
(the H200 image sets it) every run would otherwise compile every module of provision again.
The floor, in the same run: `python -c pass`, `python -c "import click"` and `provision scan --json /bin/true` (a
file with nothing to read). Each file is also scanned in this process, its data sections searched on one core and on
every core (provision.scan.search), median of --runs.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from cuobjdump import as_cuobjdump, fatbin_sections_only, listing

from provision.scan import binaries as scan
from provision.scan import wheels

PROVISION = [sys.executable, "-m", "provision"]


CPU: dict[str, float] = {}  # argv[-1] -> median CPU seconds (user + system) of the last timed() call


def timed(
    argv: list[str], runs: int, to_null: bool = False
) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """(median, minimum) wall seconds of `runs` runs of argv (stdout kept, or thrown into /dev/null), and the last.
    The median CPU seconds of the child (user + system) go to CPU: on a shared machine, wall time also counts the
    time the process waited for a core."""
    times, cpu, done = [], [], None
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            argv, stdout=subprocess.DEVNULL if to_null else subprocess.PIPE, stderr=subprocess.PIPE
        )
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    assert done is not None
    CPU[argv[0]] = statistics.median(cpu)
    return statistics.median(times), min(times), done


def bench_file(path: Path, runs: int, tool: Path | None) -> dict[str, object]:
    median, best, done = timed([*PROVISION, "scan", "--json", str(path)], runs)
    document = json.loads(done.stdout)
    row: dict[str, object] = {
        "file": str(path),
        "bytes": path.stat().st_size,
        "provision_process_s": round(median, 3),
        **in_process(path, runs),
        "provision_process_min_s": round(best, 3),
        "provision_cpu_s": round(CPU[PROVISION[0]], 3),
        "cubins": sum(sum(f["cubin"].values()) for f in document["files"]),
        "ptx": sum(sum(f["ptx"].values()) for f in document["files"]),
    }
    if tool:
        start = time.perf_counter()
        theirs = listing(tool, path)
        row["cuobjdump_s"] = round(time.perf_counter() - start, 3)
        row["speedup"] = round(float(row["cuobjdump_s"]) / median, 1)  # type: ignore[arg-type]
        sections = fatbin_sections_only(path)
        row["match"] = theirs is not None and as_cuobjdump(sections) == theirs
        row["elsewhere_containers"] = scan.code_in_file(path).loadable.containers - sections.containers
    return row


def bench_wheel(path: Path, runs: int) -> dict[str, object]:
    with zipfile.ZipFile(path) as archive:
        members = [info.filename for info in wheels.candidates(archive)]
        size = sum(archive.getinfo(m).file_size for m in members)
    ours, theirs, ours_cpu, theirs_cpu = [], [], [], []
    for _ in range(runs):  # in turns: the load of a shared machine weighs on both alike
        wall, _best, done = timed([*PROVISION, "scan", "--json", str(path)], 1)
        ours.append(wall)
        ours_cpu.append(CPU[PROVISION[0]])
        wall, _best, _ = timed(["unzip", "-p", str(path), *members], 1, to_null=True)
        theirs.append(wall)
        theirs_cpu.append(CPU["unzip"])
    document = json.loads(done.stdout)
    median, unzip, cpu, unzip_cpu = (statistics.median(v) for v in (ours, theirs, ours_cpu, theirs_cpu))
    return {
        "wheel": path.name,
        "members": len(members),
        "member_bytes": size,
        "provision_process_s": round(median, 3),
        "provision_min_s": round(min(ours), 3),
        "unzip_p_s": round(unzip, 3),
        "unzip_p_min_s": round(min(theirs), 3),
        "ratio": round(median / unzip, 2),
        "provision_cpu_s": round(cpu, 3),
        "unzip_cpu_s": round(unzip_cpu, 3),
        "cpu_ratio": round(cpu / unzip_cpu, 2),
        "files_with_cuda": len(document["files"]),
        "cores": len(os.sched_getaffinity(0)),
    }


def in_process(path: Path, runs: int) -> dict[str, float]:
    """Median seconds of the scan of one file in this process: data sections searched on one core, on every core."""
    import mmap

    from provision.scan import elf

    found: dict[str, float] = {}
    for name, jobs in (("in_process_one_core_s", 1), ("in_process_s", len(os.sched_getaffinity(0)))):
        times = []
        for _ in range(runs):
            with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                start = time.perf_counter()
                elf.code_in_image(mapped, jobs=jobs)
                times.append(time.perf_counter() - start)
        found[name] = round(statistics.median(times), 4)
    return found


def floor(runs: int) -> dict[str, float]:
    """Whole-process medians of what every `provision scan` pays before reading a byte."""
    rows = {
        "python_c_pass_s": [sys.executable, "-c", "pass"],
        "import_click_s": [sys.executable, "-c", "import click"],
        "scan_nothing_s": [*PROVISION, "scan", "--json", "/bin/true"],
    }
    return {name: round(timed(argv, runs)[0], 4) for name, argv in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--wheel", dest="wheels", action="append", type=Path, default=[])
    parser.add_argument("--venv", type=Path, help="also time a scan of this whole venv")
    parser.add_argument("--cuobjdump", type=Path, default=shutil.which("cuobjdump"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "provision"), quiet=1)
    base = floor(args.runs)
    print(
        f"floor: python -c pass {base['python_c_pass_s']:.3f} s, import click {base['import_click_s']:.3f} s, "
        f"provision scan --json /bin/true {base['scan_nothing_s']:.3f} s"
    )
    rows = [bench_file(path, args.runs, args.cuobjdump) for path in args.files]
    for row in rows:
        extra = (
            ""
            if "cuobjdump_s" not in row
            else (
                f"; cuobjdump {row['cuobjdump_s']:.3f} s ({row['speedup']}x), match={row['match']}, "
                f"elsewhere={row['elsewhere_containers']}"
            )
        )
        print(
            f"{Path(str(row['file'])).name}: {int(row['bytes']) / 2**20:.0f} MiB, {row['cubins']} cubins {row['ptx']} PTX, "  # type: ignore[call-overload]
            f"provision scan --json {row['provision_process_s']:.3f} s (min {row['provision_process_min_s']:.3f}, "
            f"CPU {row['provision_cpu_s']:.3f}); in process {row['in_process_s']:.4f} s "
            f"(one core {row['in_process_one_core_s']:.4f}){extra}"
        )
    wheel_rows = [bench_wheel(path, args.runs) for path in args.wheels]
    for row in wheel_rows:
        print(
            f"{row['wheel']}: {row['members']} members, {int(row['member_bytes']) / 2**20:.0f} MiB: provision "  # type: ignore[call-overload]
            f"{row['provision_process_s']:.2f} s (CPU {row['provision_cpu_s']:.2f}), unzip -p {row['unzip_p_s']:.2f} s "
            f"(CPU {row['unzip_cpu_s']:.2f}): {row['ratio']}x wall, {row['cpu_ratio']}x CPU on {row['cores']} cores"
        )
    venv = None
    if args.venv:
        median, _best, done = timed([*PROVISION, "scan", "--json", str(args.venv)], 1)
        document = json.loads(done.stdout)
        venv = {
            "venv": str(args.venv),
            "process_s": round(median, 3),
            "files_scanned": document["scanned_files"],
            "files_with_cuda": len(document["files"]),
            "packages": len(document["packages"]),
        }
        print(f"venv {venv['venv']}: {venv['files_scanned']} files in {venv['process_s']} s (whole process)")
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump({"floor": base, "files": rows, "wheels": wheel_rows, "venv": venv}, handle, indent=2)


main()
