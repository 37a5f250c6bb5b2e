"""Start-up of `provision` commands as whole processes, beside `python -c "import click"` in the same run.

    python scripts/bench_startup.py [--runs 21] [--replay RECORDING] [--before CHECKOUT] [--scan FILE]...
                                    [--python PY [--python-path DIRS]] [--json OUT]

`provision --version`, `switch` and `rollback` (on a home of two adopted environments made here with uv), `probe` and
`probe --json` (this machine's NVML, or none without a driver), each the median of --runs whole processes (wall and
CPU: user + system of the child), interleaved with `python -c pass` and `python -c "import click"` so that a machine's
drift hits all of them alike. --replay adds `probe --json` on a recorded reading (PROVISION_NVML_REPLAY, e.g.
tests/data/h200.nvml.json). --before runs the same commands from another checkout too (say `git archive` of main
before a change), interleaved with this one: both then start as `python -m provision` in their checkout (first on
sys.path), on homes of their own.

Bytecode is compiled first for provision and pynvml, as pip compiles it at install time: where PYTHONDONTWRITEBYTECODE
is set (test images often set it) every run would otherwise compile every module of provision again.
The goal of issue 23: switch and rollback within 1.25x of `import click`; probe at most 0.15 s on the GPU machine.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
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


Run = tuple[list[str], dict[str, str], Path]  # argv, environment, working folder


def once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """One whole process, started in `cwd` (`python -m` puts the working folder first on sys.path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def compile_bytecode(checkout: Path) -> None:
    """What `pip install` does for provision and its NVML binding: their .pyc files written once."""
    compileall.compile_dir(str(checkout / "provision"), quiet=1)
    spec = importlib.util.find_spec("pynvml")
    if spec is not None and spec.origin:
        compileall.compile_file(spec.origin, quiet=1)


def provision_commands(
    provision: list[str],
    env: dict[str, str],
    cwd: Path,
    replay: Path | None,
    label: str = "",
    scans: tuple[Path, ...] = (),
    heavy: bool = False,
) -> dict[str, Run]:
    commands = {
        f"provision --version{label}": ([*provision, "--version"], env, cwd),
        f"provision switch a{label}": ([*provision, "switch", "a"], env, cwd),
        f"provision rollback{label}": ([*provision, "rollback"], env, cwd),
        f"provision probe{label}": ([*provision, "probe"], env, cwd),
        f"provision probe --json{label}": ([*provision, "probe", "--json"], env, cwd),
    }
    if replay is not None:
        commands[f"provision probe --json, replay{label}"] = (
            [*provision, "probe", "--json"],
            {**env, "PROVISION_NVML_REPLAY": str(replay)},
            cwd,
        )
    if heavy:
        machine = str(cwd / "docs/machines/rtx-pro-6000-x8.probe.json")
        for argv in (
            ["envs", "--json"],
            ["report", "--json", "--machine", machine],
            ["check", "nope"],
            ["create", "nope"],
            ["lock", "nope"],
        ):
            name = " ".join(argv).replace(machine, "rtx-pro-6000-x8.probe.json")
            commands[f"provision {name}{label}"] = ([*provision, *argv], env, cwd)
    for path in scans:
        commands[f"provision scan --json {path.name}{label}"] = (
            [*provision, "scan", "--json", str(path)],
            env,
            cwd,
        )
    return commands


def other_python(python: str, python_path: str | None, base: dict[str, str]) -> dict[str, Run]:
    """Another interpreter's floor, and `provision probe --json` under it (as `-m provision` from this checkout)."""
    env = {k: v for k, v in base.items() if k != "PYTHONPATH"}
    if python_path:
        env["PYTHONPATH"] = python_path
    return {
        f"python -c pass ({python})": ([python, "-c", "pass"], env, ROOT),
        f'python -c "import click" ({python})': ([python, "-c", "import click"], env, ROOT),
        f"provision probe --json ({python} -m provision)": (
            [python, "-m", "provision", "probe", "--json"],
            env,
            ROOT,
        ),
    }


def home_of(folder: Path, provision: list[str], env: dict[str, str], cwd: Path) -> None:
    """Two environments adopted into the home PROVISION_HOME names, `a` and `b` (b active)."""
    for name in ("a", "b"):
        venv = folder / f"venv-{name}"
        if not venv.exists():
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        subprocess.run(
            [*provision, "adopt", name, str(venv), "--no-lock"],
            env=env,
            check=True,
            capture_output=True,
            cwd=cwd,
        )
    subprocess.run([*provision, "switch", "b"], env=env, check=True, capture_output=True, cwd=cwd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument(
        "--replay", type=Path, help="a recording for PROVISION_NVML_REPLAY: probe --json on it too"
    )
    parser.add_argument("--before", type=Path, help="another checkout, measured beside this one (A/B)")
    parser.add_argument(
        "--heavy", action="store_true", help="also envs, report, check, create and lock (start-up)"
    )
    parser.add_argument(
        "--scan",
        dest="scans",
        type=Path,
        action="append",
        default=[],
        help="a file for `provision scan --json FILE` (repeatable)",
    )
    parser.add_argument(
        "--python", help="another interpreter, measured beside this one (its floor and probe --json)"
    )
    parser.add_argument("--python-path", help="PYTHONPATH for --python's rows")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    replay = args.replay.absolute() if args.replay else None
    compile_bytecode(ROOT)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base = {k: v for k, v in os.environ.items() if k != "PROVISION_NVML_REPLAY"}
        commands: dict[str, Run] = {
            "python -c pass": ([sys.executable, "-c", "pass"], base, work),
            'python -c "import click"': ([sys.executable, "-c", "import click"], base, work),
        }
        if args.before is None:
            script = shutil.which("provision", path=os.path.dirname(sys.executable))
            # the console script, else the module
            provision = [script] if script else [sys.executable, "-m", "provision"]
            env = {**base, "PROVISION_HOME": str(work / "home")}
            home_of(work, provision, env, ROOT)
            commands.update(
                provision_commands(provision, env, ROOT, replay, scans=tuple(args.scans), heavy=args.heavy)
            )
        else:
            compile_bytecode(args.before.absolute())
            module = [sys.executable, "-m", "provision"]
            for label, checkout in ((" (before)", args.before.absolute()), ("", ROOT)):
                path = os.pathsep.join([str(checkout), *filter(None, [base.get("PYTHONPATH")])])
                env = {**base, "PYTHONPATH": path, "PROVISION_HOME": str(work / f"home{label.strip(' ()')}")}
                home_of(work, module, env, checkout)
                commands.update(
                    provision_commands(module, env, checkout, replay, label, tuple(args.scans), args.heavy)
                )
        if args.python:
            commands.update(other_python(args.python, args.python_path, base))
        for run in commands.values():  # warm the page cache
            once(*run)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, run in commands.items():
                samples[name].append(once(*run))
    rows = {
        name: {
            "wall_s": round(statistics.median(w for w, _ in got), 4),
            "cpu_s": round(statistics.median(c for _, c in got), 4),
        }
        for name, got in samples.items()
    }
    click = rows['python -c "import click"']
    width = max(map(len, rows))
    print(
        f"{'command':{width}} {'wall s':>8} {'cpu s':>8} {'wall / import click':>19} {'cpu / import click':>18}"
    )
    for name, row in rows.items():
        print(
            f"{name:{width}} {row['wall_s']:8.4f} {row['cpu_s']:8.4f} {row['wall_s'] / click['wall_s']:18.2f}x "
            f"{row['cpu_s'] / click['cpu_s']:17.2f}x"
        )
    print(
        f"python {sys.version.split()[0]} ({sys.executable}), {args.runs} runs, load average {os.getloadavg()[0]:.1f}, "
        f"PYTHONDONTWRITEBYTECODE={'set' if sys.flags.dont_write_bytecode else 'unset'} (bytecode compiled first)"
    )
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "runs": args.runs,
                    "python": sys.version.split()[0],
                    "before": str(args.before or ""),
                    "replay": str(replay or ""),
                    "results": rows,
                },
                indent=2,
            )
        )


main()
