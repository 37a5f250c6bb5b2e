"""A three-host rollout through contrib/ansible/upgrade.yml against the same commands run host by host, in one run.

    python scripts/bench_fleet.py [--runs 3] [--hosts 3] [--files 2] [--before CHECKOUT] [--json OUT]

Also in the same run: Ansible's own floor (the same hosts, a play of four `command: true` tasks: as many module runs
per host as upgrade.yml makes) and `provision report` over ten recorded machines, whole process.

The hosts are local-connection hosts on this machine, each with its own PROVISION_HOME (a fresh one per run, so every
run builds every host), against indexes served on 127.0.0.1 (tests/wheelhouse.py); every host passes its checks
(the recorded H200 reading at the NVML seam). Host by host is what one would type without Ansible: `provision lock`
once, then `provision create PROFILE --lock LOCK` on each host in turn. uv's cache is warm for both (one run first).
The profile carries --files patches ([files], as a team's own patches are carried). --before runs the playbooks of
another checkout (say `git archive` of main before a change) too, interleaved with these, each on fresh hosts.
"""

from __future__ import annotations

import argparse
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from wheelhouse import IndexServer  # noqa: E402

BIN = Path(sys.executable).parent
PROVISION = str(BIN / "provision")
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
REPLAY = ROOT / "tests" / "data" / "h200.nvml.json"


def setup(folder: Path, files: int) -> tuple[Path, dict[str, str]]:
    server = IndexServer(folder / "indexes")
    fleet = server.index("fleet")
    for package in ("alpha", "beta", "gamma"):
        fleet.add(package, "2.0")
    default = server.index("empty-default")
    profile = folder / "serve-cu130.toml"
    profile.write_text(
        f'schema = 1\nname = "serve-cu130"\ncuda = "13.0"\n[indexes]\nfleet = "{fleet.url}"\n[packages]\n'
        + "".join(f'{p} = {{ index = "fleet" }}\n' for p in ("alpha", "beta", "gamma"))
        + '[checks]\nrequired = ["driver"]\n'
        + ("[files]\n" if files else "")
        + "".join(f'"team_patch_{i}.py" = "patches/team_patch_{i}.py"\n' for i in range(files))
    )
    (folder / "patches").mkdir()
    for i in range(files):
        (folder / "patches" / f"team_patch_{i}.py").write_text(f"PATCH = {i}\n")
    env = {
        **os.environ,
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_HOME": str(folder / "ansible"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(folder / "ansible" / "tmp"),
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_PIPELINING": "1",
        "PROVISION_INDEX_DEFAULT": default.url,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return profile, env


def inventory(folder: Path, hosts: list[str], run: str) -> Path:
    document = {
        "all": {
            "hosts": {
                h: {
                    "provision_home": str(folder / run / h / "home"),
                    "provision_environment": {"PROVISION_NVML_REPLAY": str(REPLAY)},
                }
                for h in hosts
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "provision_bin": PROVISION,
                "provision_controller": PROVISION,
                "provision_fleet_dir": str(folder / run / "fleet"),
                "provision_remote_dir": str(folder / run / "{{ inventory_hostname }}" / "remote"),
                "provision_lock_python": PY,
                "provision_create_python": sys.executable,
            },
        }
    }
    path = folder / run / "inventory.yml"
    path.parent.mkdir(parents=True)
    (folder / run / "fleet").mkdir()
    path.write_text(json.dumps(document))
    return path


def by_hand(folder: Path, profile: Path, hosts: list[str], run: str, env: dict[str, str]) -> None:
    lock = folder / run / "pylock.serve-cu130.toml"
    lock.parent.mkdir(parents=True)
    subprocess.run(
        [
            PROVISION,
            "lock",
            str(profile),
            "--platform",
            "x86_64-manylinux_2_28",
            "--python",
            PY,
            "-o",
            str(lock),
            "--json",
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    for host in hosts:
        host_env = {
            **env,
            "PROVISION_HOME": str(folder / run / host / "home"),
            "PROVISION_NVML_REPLAY": str(REPLAY),
        }
        subprocess.run(
            [PROVISION, "create", str(profile), "--lock", str(lock), "--python", sys.executable, "--json"],
            check=True,
            capture_output=True,
            env=host_env,
        )


def children_cpu() -> float:
    """User + system seconds of every process this one has waited for, so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def floor(folder: Path, playbook: str, hosts: list[str], env: dict[str, str]) -> float:
    """One play of four no-op module runs per host, serial 1, against the same inventory: what Ansible itself costs."""
    play = folder / "floor.yml"
    play.write_text(
        "- hosts: all\n  gather_facts: false\n  serial: 1\n  tasks:\n"
        + "".join(f"    - name: step {i}\n      ansible.builtin.command: 'true'\n" for i in range(4))
    )
    start = time.perf_counter()
    subprocess.run(
        [playbook, "-i", str(inventory(folder, hosts, f"floor-{time.monotonic_ns()}")), str(play)],
        check=True,
        capture_output=True,
        env=env,
        cwd=folder,
    )
    return time.perf_counter() - start


def report_ten(env: dict[str, str], runs: int) -> list[float]:
    machines = [ROOT / "docs/machines/h200.probe.json", ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"] * 5
    argv = [PROVISION, "report", *(a for m in machines for a in ("--machine", str(m))), "--json"]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--files", type=int, default=2, help="patches the profile carries ([files])")
    parser.add_argument(
        "--before", type=Path, help="another checkout whose contrib/ansible runs beside this one"
    )
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    playbook = shutil.which("ansible-playbook", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if not playbook:
        sys.exit("ansible-playbook is not installed: pip install -e '.[test]'")
    hosts = [f"gpu-{i}" for i in range(args.hosts)]
    plays = {"ansible-playbook upgrade.yml": ROOT / "contrib/ansible/upgrade.yml"}
    if args.before:
        plays["ansible-playbook upgrade.yml (before)"] = args.before.resolve() / "contrib/ansible/upgrade.yml"
    # user + system of the whole playbook run
    cpu_times: dict[str, list[float]] = {name: [] for name in plays}
    times: dict[str, list[float]] = {
        **{name: [] for name in plays},
        "host by host": [],
        "ansible floor (4 no-op tasks)": [],
    }
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        profile, env = setup(folder, args.files)
        for run in range(args.runs + 1):  # run 0 warms uv's cache and is not counted
            for index, (name, upgrade) in enumerate(plays.items()):
                argv = [
                    playbook,
                    "-i",
                    str(inventory(folder, hosts, f"ansible-{index}-{run}")),
                    str(upgrade),
                    "-e",
                    f"provision_profile={profile}",
                ]
                start, cpu = time.perf_counter(), children_cpu()
                done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=folder)
                if done.returncode != 0:
                    sys.exit(done.stdout + done.stderr)
                if run:
                    times[name].append(time.perf_counter() - start)
                    cpu_times[name].append(children_cpu() - cpu)
            start = time.perf_counter()
            by_hand(folder, profile, hosts, f"hand-{run}", env)
            by_hand_seconds = time.perf_counter() - start
            if run:
                times["host by host"].append(by_hand_seconds)
                times["ansible floor (4 no-op tasks)"].append(floor(folder, playbook, hosts, env))
        times["provision report, ten machines (whole process)"] = report_ten(env, 3 * args.runs)
    results = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in results.items():
        print(f"{name:48} {seconds:7.2f} s  (runs: {', '.join(f'{v:.2f}' for v in times[name])})")
    cpu = {name: statistics.median(values) for name, values in cpu_times.items()}
    for name, seconds in cpu.items():
        print(
            f"{name + ', CPU':48} {seconds:7.2f} s  (runs: {', '.join(f'{v:.2f}' for v in cpu_times[name])})"
        )
    print(
        f"{len(hosts)} hosts, {args.files} files carried; upgrade.yml / host by host: {results['ansible-playbook upgrade.yml'] / results['host by host']:.2f}x; load average at the end: {os.getloadavg()[0]:.1f}"
    )
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "runs": args.runs,
                    "hosts": len(hosts),
                    "files": args.files,
                    "load_average": os.getloadavg(),
                    "median_seconds": results,
                    "median_cpu_seconds": cpu,
                    "all_cpu_seconds": cpu_times,
                    "all_seconds": times,
                },
                indent=2,
            )
        )


main()
