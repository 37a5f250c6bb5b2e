"""CPU of the heavy commands as whole processes in a typical scenario, beside `python -c "import click"`.

    python scripts/bench_commands.py [--runs 7] [--before CHECKOUT] [--json OUT]

A home made by the real commands from an index served on 127.0.0.1 (tests/wheelhouse.py, the tests' `tiny` stack:
one package, a profile requiring the `imports` check): `create tiny` from its profile, `lock tiny -o pylock.tiny.toml`,
a bare venv adopted with --no-lock. Then, each the median of --runs processes, interleaved: `create --lock` (a second
environment from that lock, --replace), `check` (table and --json), `restore --json` (nothing drifted), `adopt
--no-lock` (a new name each run), `gc --json`, `profiles` (table and --json), `envs --json`, `report --json --machine`
(a recorded machine) and `lock` again. Each row gives the provision process's own CPU (user + system, read at its
exit: its imports and work) and with its children (uv, the check's Python). --before runs the same from another
checkout (say `git archive` of main), interleaved with this one, each on a home of its own; both start as
`python -c` in their checkout, so that checkout's provision is the one imported. Bytecode is compiled first, as pip
does at install time.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import tiny  # noqa: E402
from wheelhouse import IndexServer  # noqa: E402

# provision as a process, its own CPU written to OWN_CPU at exit (children apart): the import and the work of the
# command itself, whatever uv or a check's Python cost beside it
WRAP = """import atexit, os, resource, sys
def said():
    own = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["OWN_CPU"], "w") as out:
        out.write(str(own.ru_utime + own.ru_stime))
atexit.register(said)
from provision.cli.main import main
sys.argv = ["provision", *sys.argv[1:]]
main()
"""
MACHINE = str(ROOT / "docs/machines/rtx-pro-6000-x8.probe.json")


def once(argv: list[str], env: dict[str, str], cwd: Path, own_file: Path) -> tuple[float, float]:
    """(own CPU, CPU with children) of one provision process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**env, "OWN_CPU": str(own_file)}, cwd=cwd, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 and "import click" not in argv[-1]:
        raise SystemExit(f"{argv[3:]} exited {done.returncode}: {done.stderr[-800:]}")
    total = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    own = float(own_file.read_text()) if own_file.exists() and own_file.stat().st_size else total
    own_file.unlink(missing_ok=True)
    return own, total


class Checkout:
    """One checkout's provision on a home of its own, made by its own commands."""

    def __init__(self, checkout: Path, folder: Path, served_url: str, profiles: Path, label: str) -> None:
        self.checkout, self.folder, self.label = checkout, folder, label
        self.env = {
            **os.environ,
            "PROVISION_HOME": str(folder / "home"),
            "PROVISION_PROFILES": str(profiles),
            "PROVISION_INDEX_DEFAULT": served_url,
            "UV_CACHE_DIR": str(folder.parent / "uv-cache"),
        }
        self.env.pop("PYTHONPATH", None)
        self.adopted = 0

    def argv(self, *words: str) -> list[str]:
        return [sys.executable, "-c", WRAP, *words]

    def make(self) -> None:
        bare = self.folder / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
        for words in (
            ["create", "tiny", "--python", sys.executable],
            ["lock", "tiny", "-o", str(self.folder / "pylock.tiny.toml")],
            ["adopt", "mine", str(bare), "--no-lock"],
        ):
            once(self.argv(*words), self.env, self.checkout, self.folder / "own")

    def commands(self) -> dict[str, list[str]]:
        self.adopted += 1
        lock = str(self.folder / "pylock.tiny.toml")
        return {
            "create --lock (--replace)": self.argv(
                "create",
                "tiny",
                "--name",
                "again",
                "--lock",
                lock,
                "--python",
                sys.executable,
                "--replace",
                "--json",
            ),
            "check": self.argv("check", "tiny"),
            "check --json": self.argv("check", "tiny", "--json"),
            "restore --json (nothing drifted)": self.argv("restore", "tiny", "--json"),
            "adopt --no-lock": self.argv(
                "adopt", f"new{self.adopted}", str(self.folder / "venv"), "--no-lock"
            ),
            "gc --json": self.argv("gc", "--json"),
            "profiles": self.argv("profiles"),
            "profiles --json": self.argv("profiles", "--json"),
            "envs --json": self.argv("envs", "--json"),
            "report --json --machine": self.argv("report", "--json", "--machine", MACHINE),
            "lock (again)": self.argv("lock", "tiny", "-o", str(self.folder / "pylock.tiny.toml")),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="another checkout, measured beside this one (A/B)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    checkouts = [(" (before)", args.before.absolute())] if args.before else []
    checkouts.append(("", ROOT))
    for _, checkout in checkouts:
        compileall.compile_dir(str(checkout / "provision"), quiet=1)
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        server = IndexServer(work / "indexes")
        try:
            served = tiny.index(server)
            (work / "profiles").mkdir()
            tiny.profile(work / "profiles")
            made = []
            for label, checkout in checkouts:
                (work / f"home{label.strip(' ()')}").mkdir()
                one = Checkout(
                    checkout, work / f"home{label.strip(' ()')}", served.url, work / "profiles", label
                )
                one.make()
                made.append(one)
            floor = {
                "python -c pass": [sys.executable, "-c", "pass"],
                'python -c "import click"': [sys.executable, "-c", "import click"],
            }
            samples: dict[str, list[tuple[float, float]]] = {}
            for _ in range(args.runs):
                for row, argv in floor.items():
                    samples.setdefault(row, []).append(once(argv, dict(os.environ), ROOT, work / "own"))
                for command in made[0].commands():
                    # A and B in turn, command by command: the machine's drift hits both alike
                    for one in made:
                        argv = one.commands()[command]
                        samples.setdefault(command + one.label, []).append(
                            once(argv, one.env, one.checkout, one.folder / "own")
                        )
        finally:
            server.close()
    rows = {
        name: {
            "own_cpu_s": round(statistics.median(o for o, _ in got), 4),
            "cpu_with_children_s": round(statistics.median(t for _, t in got), 4),
        }
        for name, got in samples.items()
    }
    click = rows['python -c "import click"']["own_cpu_s"]
    width = max(map(len, rows))
    print(f"{'command':{width}} {'own cpu s':>10} {'/ import click':>14} {'with children s':>16}")
    for name, row in rows.items():
        print(
            f"{name:{width}} {row['own_cpu_s']:10.3f} {row['own_cpu_s'] / click:13.2f}x {row['cpu_with_children_s']:16.3f}"
        )
    print(f"python {sys.version.split()[0]}, {args.runs} runs, load average {os.getloadavg()[0]:.1f}")
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"runs": args.runs, "before": str(args.before or ""), "results": rows}, indent=2)
        )


main()
