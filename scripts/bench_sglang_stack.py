"""The whole SGLang stack from the real registry, in one run: `provision lock` beside a bare `uv pip compile` of the
same requirements, the first time (uv's and provision's caches empty, no lock to replace) and again (both warm, each
one's earlier lock in place: uv keeps its versions), then `report --lock` of that lock cold (nothing in uv's or
provision's cache: every wheel fetched) and warm (read again from provision's cache: nothing downloaded).

    python scripts/bench_sglang_stack.py [--runs 3] [--work DIR] [--skip-report] [--json OUT]

The profile is what `provision profiles new today --from sglang==0.5.23` writes with every index pointed at the
default registry (the one every machine here reaches). uv's cache is warm for both lock commands (one unmeasured
compile first) for the runs again; provision's bytecode is compiled first, as pip compiles it on install. The cold report downloads the whole stack (about 10 GB): --skip-report leaves it
out.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from provision.stacks import lock, newprofile, profiles, uvtool  # noqa: E402


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, done


def summary(what: str, bare: list[float], ours: list[float]) -> dict[str, object]:
    """Both tools' medians, their ratio, and each run's pair (uv's own time moves between runs)."""
    return {
        f"{what}, uv pip compile (bare), median s": round(statistics.median(bare), 2),
        f"{what}, provision lock, median s": round(statistics.median(ours), 2),
        f"{what}, ratio": round(statistics.median(ours) / statistics.median(bare), 2),
        f"{what}, each run (bare, provision), s": [
            (round(b, 2), round(o, 2)) for b, o in zip(bare, ours, strict=True)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-sglang-stack"))
    parser.add_argument("--skip-report", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import compileall  # as pip installs it: bytecode compiled, not compiled again in every process

    compileall.compile_dir(str(ROOT / "provision"), quiet=1)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "UV_CACHE_DIR": str(work / "uv"),
        "XDG_CACHE_HOME": str(work / "xdg"),
        "UV_PYTHON_DOWNLOADS": "never",
    }
    registry = newprofile.default_index()
    profile_path = work / "today.toml"
    if not profile_path.exists():
        indexes = [
            p for n in ("pytorch", "sglang", "flashinfer", "default") for p in ("--index", f"{n}={registry}")
        ]
        timed(
            [
                sys.executable,
                "-m",
                "provision",
                "profiles",
                "new",
                "today",
                "--from",
                "sglang==0.5.23",
                *indexes,
                "-o",
                str(profile_path),
            ],
            work,
            env,
        )
    profile = profiles.load_file(profile_path)
    target = lock.Target(python="3.12", platform=None)
    effective = lock.effective_indexes(profile, {})
    (work / "pyproject.toml").write_text(lock._project(profile, {}, effective))
    bare = [uvtool.binary(), *lock._uv_compile_args(target, "pylock.bare.toml")]
    env.update(uvtool.index_options(effective)[1])  # the indexes, as provision gives them to uv: by variable
    ours = [
        sys.executable,
        "-m",
        "provision",
        "lock",
        str(profile_path),
        "-o",
        str(work / "pylock.today.toml"),
        "--json",
    ]
    results: dict[str, object] = {}
    # first: nothing cached (uv's cache and provision's each empty) and no lock to replace, interleaved
    cold_bare: list[float] = []
    cold_ours: list[float] = []
    for _ in range(args.runs):
        for times, argv, output in (
            (cold_bare, bare, work / "pylock.bare.toml"),
            (cold_ours, ours, work / "pylock.today.toml"),
        ):
            for folder in ("uv-cold", "xdg-cold"):
                shutil.rmtree(work / folder, ignore_errors=True)
            output.unlink(missing_ok=True)
            cold_env = {
                **env,
                "UV_CACHE_DIR": str(work / "uv-cold"),
                "XDG_CACHE_HOME": str(work / "xdg-cold"),
            }
            times.append(timed(argv, work, cold_env)[0])
    results.update(summary("first lock", cold_bare, cold_ours))
    timed(bare, work, env)  # uv's cache warm for both, and each one's lock there to keep (its preferences)
    timed(ours, work, env)  # and provision's RECORDs read once
    bare_times: list[float] = []
    our_times: list[float] = []
    # interleaved, so that the registry's and the machine's moods fall on both alike
    for _ in range(args.runs):
        bare_times.append(timed(bare, work, env)[0])
        our_times.append(timed(ours, work, env)[0])
    results.update(summary("again", bare_times, our_times))
    if not args.skip_report:
        lockfile = work / "pylock.today.toml"
        report = [
            sys.executable,
            "-m",
            "provision",
            "report",
            "--lock",
            str(lockfile),
            "--machine",
            str(ROOT / "docs/machines/h200.probe.json"),
            "--json",
        ]
        cold_env = {**env, "UV_CACHE_DIR": str(work / "uv-empty"), "XDG_CACHE_HOME": str(work / "xdg-report")}
        shutil.rmtree(work / "uv-empty", ignore_errors=True)
        shutil.rmtree(work / "xdg-report", ignore_errors=True)
        for name in ("cold", "warm"):
            seconds, done = timed(report, work, cold_env)
            target = next(t for t in json.loads(done.stdout)["machines"][0]["targets"] if t["kind"] == "lock")
            scan = next(g for g in target["gates"] if g["id"] == "lock-scan")
            results[f"report --lock {name}, s"] = round(seconds, 1)
            results[f"report --lock {name}, wheels"] = scan["reason"]
        results["wheels kept, bytes"] = sum(
            f.stat().st_size for f in (work / "xdg-report/provision/wheels").rglob("*.whl")
        )
    said(results, args.json)


def said(results: dict[str, object], path: Path | None) -> None:
    """Each figure on a line of its own, and all of them in `path` as JSON where one is given."""
    for key, value in results.items():
        print(f"{key}: {value}")
    if path:
        path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
