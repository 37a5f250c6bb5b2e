"""`provision lock` made again with nothing changed, beside a bare `uv pip compile` of the same requirements and,
with --before, the same command of an older provision (a `git archive` of it), interleaved run by run so that the
registry's and the machine's moods fall on all three alike. Uses the work folder `scripts/bench_sglang_stack.py` made
(its profile of SGLang 0.5.23's whole stack, uv's cache and provision's warm, each one's lock in place).

    python scripts/bench_sglang_stack.py --runs 1 --skip-report     # once: the profile, the caches, the locks
    python scripts/bench_lock_again.py [--runs 21] [--before DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from bench_sglang_stack import said  # noqa: E402  (scripts/ is the script's own folder on sys.path)

from provision.stacks import lock, profiles, uvtool  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-sglang-stack"))
    parser.add_argument("--before", type=Path, help="an older provision's checkout, run as `before`")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import compileall

    compileall.compile_dir(str(ROOT / "provision"), quiet=1)
    if args.before:
        compileall.compile_dir(str(args.before / "provision"), quiet=1)
    work = args.work
    env = {
        **os.environ,
        "UV_CACHE_DIR": str(work / "uv"),
        "XDG_CACHE_HOME": str(work / "xdg"),
        "UV_PYTHON_DOWNLOADS": "never",
    }
    profile = profiles.load_file(work / "today.toml")
    env.update(uvtool.index_options(lock.effective_indexes(profile, {}))[1])
    bare = [
        uvtool.binary(),
        *lock._uv_compile_args(lock.Target(python="3.12", platform=None), "pylock.bare.toml"),
    ]

    def ours(output: str, checkout: Path) -> tuple[list[str], dict[str, str]]:
        return (
            [sys.executable, "-m", "provision", "lock", "today.toml", "-o", output, "--json"],
            {**env, "PYTHONPATH": str(checkout)},
        )

    cases = {"uv pip compile": (bare, env), "provision lock": ours("pylock.today.toml", ROOT)}
    if args.before:
        cases["provision lock, before"] = ours("pylock.before.toml", args.before)
    for argv, case_env in cases.values():  # each one's lock in place, every cache warm
        subprocess.run(argv, cwd=work, env=case_env, capture_output=True, check=True)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, (argv, case_env) in cases.items():
            start = time.perf_counter()
            subprocess.run(argv, cwd=work, env=case_env, capture_output=True, check=True)
            times[name].append(time.perf_counter() - start)
    uv = statistics.median(times["uv pip compile"])
    results: dict[str, object] = {"runs": args.runs}
    for name, each in times.items():
        results[f"{name}, median s"] = round(statistics.median(each), 3)
        results[f"{name}, ratio to uv"] = round(statistics.median(each) / uv, 3)
        results[f"{name}, each run s"] = [round(t, 3) for t in each]
    results["provision lock, each run's ratio"] = [
        round(o / b, 3) for o, b in zip(times["provision lock"], times["uv pip compile"], strict=True)
    ]
    said(results, args.json)


if __name__ == "__main__":
    main()
