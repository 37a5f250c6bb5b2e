"""Measure what provision's wheel cache (provision/wheelfacts.py: scans/, records/ by sha256) saves, and what
`provision lock` costs as a whole process, beside the tool a user would use instead, in one run (issue 41's goals):

    python scripts/bench_wheel_cache.py --index URL [--packages nvidia-cuda-runtime,...] [--runs 5]
                                        [--before CHECKOUT] [--lock-only] [--json OUT]

1. `uv pip compile` of the packages (bare, the same index) beside `provision lock` of a profile of the same packages,
   interleaved run by run: first time (uv's cache and provision's emptied and the earlier output removed before each
   process: every RECORD read by range requests), then again (both warm);
2. `provision report --lock` of that lock three times: first (every wheel fetched and scanned), again (scans/ and
   records/ answer), again with scans/ removed (every wheel scanned again from provision's wheel cache).
--before CHECKOUT (say `git archive` of main) runs the same `provision lock` from another checkout in the same
rounds, on caches of its own (A/B). Bytecode is compiled first for every checkout, as pip does at install time
(where PYTHONDONTWRITEBYTECODE is set and nothing compiled it, every module is compiled from source in every process:
`--no-bytecode` measures that). Each figure is the wall-clock seconds of a whole process, with its CPU (its own and
its children's: uv's) beside it; medians of `--runs`. URL is the index to resolve from (the default registry's
simple URL, or a mirror): never written into this file.
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
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MACHINE = ROOT / "docs/machines/h200.probe.json"
PACKAGES = "nvidia-cuda-runtime>=13,<14,nvidia-nvjitlink>=13,<14,nvidia-cuda-nvrtc>=13,<14"
# provision from a given checkout, as `python -m provision` would run it (the checkout first on sys.path)
RUN = "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'provision'; from provision.cli.main import main; main()"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"{argv[:4]} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


class Tool:
    """One command measured under a label, on caches of its own (`cold` empties them before a first-time run)."""

    def __init__(
        self, label: str, argv: list[str], env: dict[str, str], caches: list[Path], output: Path
    ) -> None:
        self.label, self.argv, self.env, self.caches, self.output = label, argv, env, caches, output
        self.samples: dict[str, list[tuple[float, float]]] = {}

    def run(self, kind: str, cwd: Path, cold: bool = False) -> None:
        if cold:  # the caches emptied and no earlier lock: a lock made the first time, as on a fresh clone
            for cache in self.caches:
                shutil.rmtree(cache, ignore_errors=True)
            self.output.unlink(missing_ok=True)
        self.samples.setdefault(kind, []).append(timed(self.argv, self.env, cwd))

    def medians(self) -> dict[str, dict[str, float]]:
        return {
            f"{self.label} {kind}": {
                "wall": statistics.median(w for w, _ in got),
                "cpu": statistics.median(c for _, c in got),
                "walls": [round(w, 3) for w, _ in got],
            }
            for kind, got in self.samples.items()
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--index", required=True)
    parser.add_argument(
        "--packages", default=PACKAGES, help="requirements, comma-separated where no specifier has a comma"
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--before", type=Path, help="another checkout whose `provision lock` is measured beside this one"
    )
    parser.add_argument(
        "--lock-only", action="store_true", help="measure lock against uv pip compile, not report --lock"
    )
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="leave bytecode uncompiled (PYTHONDONTWRITEBYTECODE's cost)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    requirements = [r for r in args.packages.replace(",nvidia", "\nnvidia").split("\n") if r]
    checkouts = {"lock": ROOT, **({"lock (before)": args.before.absolute()} if args.before else {})}
    if not args.no_bytecode:
        for checkout in checkouts.values():
            compileall.compile_dir(str(checkout / "provision"), quiet=1)
        for site in {Path(p) for p in sys.path if p.endswith("site-packages")}:
            compileall.compile_dir(str(site), quiet=1, workers=2)
    work = Path(tempfile.mkdtemp(prefix="bench-wheel-cache-"))
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
    base = {**os.environ, "PROVISION_INDEX_DEFAULT": args.index}
    (work / "pyproject.toml").write_text(
        '[project]\nname = "bench"\nversion = "0"\ndependencies = [\n'
        + "".join(f'  "{r}",\n' for r in requirements)
        + "]\n"
    )
    pins = "".join(
        f'"{r.split(">")[0].split("=")[0]}" = "{r[len(r.split(">")[0].split("=")[0]) :]}"\n'
        for r in requirements
    )
    (work / "bench.toml").write_text(
        f'schema = 1\nname = "bench"\ncuda = "13.0"\npython = "3.12"\n[packages]\n{pins}'
    )

    def caches(name: str) -> tuple[dict[str, str], list[Path]]:
        env = {
            **base,
            "UV_CACHE_DIR": str(work / name / "uv"),
            "XDG_CACHE_HOME": str(work / name / "xdg"),
            "PROVISION_HOME": str(work / name / "home"),
        }
        return env, [work / name / "uv", work / name / "xdg"]

    compile_ = [
        uv,
        "pip",
        "compile",
        "pyproject.toml",
        "--no-config",
        "--quiet",
        "--format",
        "pylock.toml",
        "-o",
        "pylock.uv.toml",
        "--python-version",
        "3.12",
        "--default-index",
        args.index,
        "--no-header",
        "--python",
        sys.executable,
    ]
    tools = [Tool("uv pip compile", compile_, *caches("uv"), work / "pylock.uv.toml")]
    for number, (label, checkout) in enumerate(checkouts.items()):
        tools.append(
            Tool(
                label,
                [
                    sys.executable,
                    "-c",
                    RUN,
                    str(checkout),
                    "lock",
                    str(work / "bench.toml"),
                    "--python",
                    "3.12",
                    "-o",
                    str(work / f"pylock.bench{number}.toml"),
                ],
                *caches(f"c{number}"),
                work / f"pylock.bench{number}.toml",
            )
        )
    for _ in range(args.runs):  # first time: each from its own empty caches, interleaved
        for tool in tools:
            tool.run("first", work, cold=True)
    for _ in range(args.runs):  # again: all warm, interleaved
        for tool in tools:
            tool.run("again", work)
    result: dict[str, object] = {
        "packages": requirements,
        "bytecode": not args.no_bytecode,
        "runs": args.runs,
        "load_average": os.getloadavg(),
    }
    for tool in tools:
        result.update(tool.medians())
    uv_first, uv_again = result["uv pip compile first"], result["uv pip compile again"]
    result["ratios"] = {
        f"{label} {kind}/uv {kind}": round(result[f"{label} {kind}"]["wall"] / bare["wall"], 2)  # type: ignore[index]
        for label in checkouts
        for kind, bare in (("first", uv_first), ("again", uv_again))
    }
    if not args.lock_only:
        env, _ = caches("c0")
        report = [
            sys.executable,
            "-c",
            RUN,
            str(ROOT),
            "report",
            "--lock",
            str(work / "pylock.bench0.toml"),
            "--machine",
            str(MACHINE),
            "--json",
        ]
        result["report_first"] = timed(report, env, work)[0]
        again = [timed(report, env, work)[0] for _ in range(args.runs)]
        rescanned = []
        for _ in range(args.runs):
            shutil.rmtree(work / "c0/xdg/provision/scans", ignore_errors=True)
            rescanned.append(timed(report, env, work)[0])
        result["report_again"], result["report_scans_removed"] = (
            statistics.median(again),
            statistics.median(rescanned),
        )
        result["ratios"]["report_again/report_scans_removed"] = round(
            result["report_again"] / result["report_scans_removed"], 3
        )  # type: ignore[index, operator]
        result["wheel_bytes"] = sum(
            f.stat().st_size for f in (work / "c0/xdg/provision/wheels").rglob("*.whl")
        )
    text = json.dumps(result, indent=2, default=lambda x: round(x, 3))
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
