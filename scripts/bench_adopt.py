"""`provision adopt`'s lookup (every installed distribution matched to its wheel by RECORD) on a venv of the size of
the SGLang stack, beside what a user would run instead to get a lock of the same pins: `uv pip freeze` and then
`uv pip compile --format pylock.toml` of what it printed; and that plus the wheels themselves fetched whole by uv
(`uv pip install --no-deps --target`, its cache as cold as adopt's), which is what adopt's proof reads (a RECORD is
trusted only from the wheel whose sha256 the lock pins). Same venv, same index, same run.

    python scripts/bench_adopt.py [--dists 200] [--files 30] [--runs 3] [--delay 0.02] [--json OUT]
    python scripts/bench_adopt.py --index URL --requirements "jupyterlab sphinx ..." [--runs 3] [--json OUT]
    python scripts/bench_adopt.py ... --before DIR   (an older checkout's adopt in the same runs, in turn)

A synthetic index (tests/wheelhouse.py: PEP 691 JSON, PEP 658 metadata, range requests) is served on 127.0.0.1 with
`--delay` seconds before each answer (a remote index's round trip); the venv is built from it by uv. Cold: an empty
uv cache for both tools (adopt reads each wheel's RECORD by range requests, uv fetches each page and metadata file);
warm: the uv cache the venv was built with (adopt reads the RECORDs there; uv revalidates its pages). The synthetic
index gives each file's size on its JSON page (PEP 700), as the default registry's does.
With --index and --requirements the venv is built by uv from that real index instead (the default registry's simple
URL, given on the command line, never written here), with what those requirements pull in: real wheels, real
network. Bytecode is compiled first for provision and its dependencies, as pip does at install time.
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
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from wheelhouse import IndexServer  # noqa: E402

from provision.stacks import uvtool  # noqa: E402


def provision_binary() -> str:
    found = shutil.which(
        "provision", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    )
    if not found:
        raise SystemExit("provision is not installed in this Python: pip install -e .")
    return found


def timed(
    argv: list[str], env: dict[str, str], cwd: Path | None = None
) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done


def summary(values: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dists", type=int, default=200)
    parser.add_argument("--files", type=int, default=30, help="files per wheel")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--delay", type=float, default=0.02, help="seconds the index waits before each answer"
    )
    parser.add_argument("--index", help="a real index to build the venv from (with --requirements)")
    parser.add_argument("--requirements", help="what the venv holds, space-separated, from --index")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--before",
        type=Path,
        help="an older checkout (git archive): its adopt timed in the same runs, in turn",
    )
    args = parser.parse_args()
    import compileall

    for site in {
        ROOT / "provision",
        *([args.before / "provision"] if args.before else []),
        *(Path(p) for p in sys.path if p.endswith("site-packages")),
    }:
        compileall.compile_dir(str(site), quiet=1, workers=2)
    provision = provision_binary()
    uv = uvtool.binary()
    base = Path(tempfile.mkdtemp(prefix="bench-adopt-"))
    server = IndexServer(base / "indexes")
    try:
        served = server.index("bench")
        served.pep658 = served.ranges = served.sizes = True
        names = (
            [f"bench-pkg-{n:03d}" for n in range(args.dists)]
            if not args.requirements
            else args.requirements.split()
        )
        for name in names if not args.requirements else []:
            module = name.replace("-", "_")
            served.add(
                name,
                "1.0",
                files={
                    f"{module}/part_{i}.py": (f"# {name} {i}\n" + "x = 1\n" * 200).encode()
                    for i in range(args.files)
                },
            )
        url = args.index if args.requirements else served.url
        venv = base / "venv"
        built_cache = base / "uv-cache-built"
        env = {**os.environ, "UV_CACHE_DIR": str(built_cache)}
        env.pop("UV_LINK_MODE", None)
        subprocess.run([uv, "venv", str(venv), "--python", sys.executable, "--quiet"], check=True, env=env)
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "--python",
                str(venv / "bin" / "python"),
                "--quiet",
                "--default-index",
                url,
                *(names if args.requirements else [f"{n}==1.0" for n in names]),
            ],
            check=True,
            env=env,
        )
        frozen = subprocess.run(
            [uv, "pip", "freeze", "--python", str(venv / "bin" / "python")],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        ).stdout.split()
        args.dists = len(frozen)
        served.delay = args.delay
        results: dict[str, Any] = {
            "index": "real (--index)" if args.requirements else "synthetic, 127.0.0.1",
            "requirements": args.requirements or "",
            "distributions": args.dists,
            "files_per_wheel": args.files,
            "index_delay_s": args.delay,
            "runs": args.runs,
            "python": sys.version.split()[0],
        }
        for state in ("cold", "warm"):
            adopt_wall, adopt_lookup, freeze_s, compile_s, both = [], [], [], [], []
            before_wall: list[float] = []
            before_lookup: list[float] = []
            fetch_s: list[float] = []
            all_three: list[float] = []
            requests = {}
            for run in range(args.runs):
                cache = built_cache if state == "warm" else base / f"uv-cache-empty-{state}-{run}"
                cache_uv = base / f"uv-cache-empty-uv-{run}" if state == "cold" else built_cache
                # provision's own caches (records/ by sha256) as cold or warm as uv's: a fresh XDG cache each cold run
                xdg = base / (f"xdg-cold-{run}" if state == "cold" else "xdg-warm")
                variables = {
                    **env,
                    "UV_CACHE_DIR": str(cache),
                    "PROVISION_HOME": str(base / f"home-{state}-{run}"),
                    "XDG_CACHE_HOME": str(xdg),
                    "PROVISION_INDEX_DEFAULT": url,
                }
                before = len(served.requests)
                seconds, done = timed([provision, "adopt", "bench", str(venv), "--json"], variables)
                document = json.loads(done.stdout)
                assert len(document["matched"]) == args.dists or args.requirements, document["unmatched"][:3]
                requests = {
                    "adopt_requests": len(served.requests) - before,
                    "records": document["records"],
                    "matched": len(document["matched"]),
                    "unmatched": len(document["unmatched"]),
                }
                adopt_wall.append(seconds)
                adopt_lookup.append(float(document["seconds"]))
                if args.before:  # the older checkout, its caches as cold or warm as this one's were
                    older = {
                        **variables,
                        "PYTHONPATH": str(args.before),
                        "PROVISION_HOME": str(base / f"home-before-{state}-{run}"),
                    }
                    if state == "cold":
                        older["UV_CACHE_DIR"] = str(base / f"uv-cache-empty-before-{run}")
                        older["XDG_CACHE_HOME"] = str(base / f"xdg-cold-before-{run}")
                    seconds, done = timed(  # run in that checkout: `-m` puts the working folder first
                        [sys.executable, "-m", "provision", "adopt", "bench", str(venv), "--json"],
                        older,
                        cwd=args.before,
                    )
                    before_wall.append(seconds)
                    before_lookup.append(float(json.loads(done.stdout)["seconds"]))
                uv_env = {**env, "UV_CACHE_DIR": str(cache_uv)}
                work = base / f"compile-{state}-{run}"
                work.mkdir()
                freeze, frozen = timed(
                    [uv, "pip", "freeze", "--python", str(venv / "bin" / "python")], uv_env
                )
                (work / "requirements.txt").write_text(frozen.stdout)
                before = len(served.requests)
                compiled, _ = timed(
                    [
                        uv,
                        "pip",
                        "compile",
                        "requirements.txt",
                        "--format",
                        "pylock.toml",
                        "-o",
                        "pylock.toml",
                        "--default-index",
                        url,
                        "--python",
                        str(venv / "bin" / "python"),
                        "--quiet",
                        "--no-header",
                    ],
                    uv_env,
                    cwd=work,
                )
                requests["uv_compile_requests"] = len(served.requests) - before
                # the wheels themselves, whole, into uv's cache as cold as adopt's: what adopt's proof reads (issue 39:
                # a RECORD is trusted only from the wheel whose sha256 the lock pins), fetched by uv
                fetch_env = {**env, "UV_CACHE_DIR": str(base / f"uv-cache-fetch-{state}-{run}")}
                if state == "warm":
                    fetch_env["UV_CACHE_DIR"] = str(built_cache)
                # fmt: skip
                fetched, _ = timed(
                    [
                        uv,
                        "pip",
                        "install",
                        "--no-deps",
                        "--target",
                        str(work / "target"),
                        "-r",
                        "requirements.txt",
                        "--default-index",
                        url,
                        "--python",
                        str(venv / "bin" / "python"),
                        "--quiet",
                        "--link-mode",
                        "copy",
                    ],
                    fetch_env,
                    cwd=work,
                )
                freeze_s.append(freeze)
                compile_s.append(compiled)
                fetch_s.append(fetched)
                both.append(freeze + compiled)
                all_three.append(freeze + compiled + fetched)
            results[state] = {
                "provision_adopt_process": summary(adopt_wall),
                "provision_adopt_lookup": summary(adopt_lookup),
                "uv_pip_freeze": summary(freeze_s),
                "uv_pip_compile": summary(compile_s),
                "uv_freeze_plus_compile": summary(both),
                "uv_pip_install_target_no_deps": summary(fetch_s),
                "uv_freeze_compile_and_wheels": summary(all_three),
                **requests,
            }
            if args.before:
                results[state]["before_adopt_process"] = summary(before_wall)
                results[state]["before_adopt_lookup"] = summary(before_lookup)
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)
    results["load_average"] = [round(x, 1) for x in os.getloadavg()]
    for state in ("cold", "warm"):
        results[state]["adopt_process/uv_freeze_plus_compile"] = round(
            results[state]["provision_adopt_process"]["median_s"]
            / results[state]["uv_freeze_plus_compile"]["median_s"],
            2,
        )
        results[state]["adopt_process/uv_freeze_compile_and_wheels"] = round(
            results[state]["provision_adopt_process"]["median_s"]
            / results[state]["uv_freeze_compile_and_wheels"]["median_s"],
            2,
        )
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
