"""A three-host rollout through contrib/ansible/upgrade.yml against the same commands run host by host, in one run.

    python scripts/bench_fleet.py [--runs 3] [--hosts 3] [--json OUT]

Also in the same run: Ansible's own floor (the same hosts, a play of four `command: true` tasks: as many module runs
per host as upgrade.yml makes) and `provision report` over ten recorded machines, whole process.

The hosts are local-connection hosts on this machine, each with its own PROVISION_HOME (a fresh one per run, so every
run builds every host), against indexes served on 127.0.0.1 (tests/wheelhouse.py); every host passes its checks
(the recorded H200 reading at the NVML seam). Host by host is what one would type without Ansible: `provision lock`
once, then `provision create PROFILE --lock LOCK` on each host in turn. uv's cache is warm for both (one run first).
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from wheelhouse import IndexServer  # noqa: E402

BIN = Path(sys.executable).parent
PROVISION = str(BIN / "provision")
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
REPLAY = ROOT / "tests" / "data" / "h200.nvml.json"


def setup(folder: Path) -> tuple[Path, dict[str, str]]:
    server = IndexServer(folder / "indexes")
    fleet = server.index("fleet")
    for package in ("alpha", "beta", "gamma"):
        fleet.add(package, "2.0")
    default = server.index("empty-default")
    profile = folder / "serve-cu130.toml"
    profile.write_text(f'schema = 1\nname = "serve-cu130"\ncuda = "13.0"\n[indexes]\nfleet = "{fleet.url}"\n[packages]\n'
                       + "".join(f'{p} = {{ index = "fleet" }}\n' for p in ("alpha", "beta", "gamma"))
                       + '[checks]\nrequired = ["driver"]\n')
    env = {**os.environ, "LC_ALL": "C.UTF-8", "ANSIBLE_HOME": str(folder / "ansible"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCAL_TEMP": str(folder / "ansible" / "tmp"), "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_PIPELINING": "1",
           "PROVISION_INDEX_DEFAULT": default.url, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return profile, env


def inventory(folder: Path, hosts: list[str], run: str) -> Path:
    document = {"all": {
        "hosts": {h: {"provision_home": str(folder / run / h / "home"),
                      "provision_environment": {"PROVISION_NVML_REPLAY": str(REPLAY)}} for h in hosts},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "provision_bin": PROVISION,
                 "provision_controller": PROVISION, "provision_fleet_dir": str(folder / run / "fleet"),
                 "provision_remote_dir": str(folder / run / "{{ inventory_hostname }}" / "remote"),
                 "provision_lock_python": PY, "provision_create_python": sys.executable}}}
    path = folder / run / "inventory.yml"
    path.parent.mkdir(parents=True)
    (folder / run / "fleet").mkdir()
    path.write_text(json.dumps(document))
    return path


def by_hand(folder: Path, profile: Path, hosts: list[str], run: str, env: dict[str, str]) -> None:
    lock = folder / run / "pylock.serve-cu130.toml"
    lock.parent.mkdir(parents=True)
    subprocess.run([PROVISION, "lock", str(profile), "--platform", "x86_64-manylinux_2_28", "--python", PY, "-o", str(lock),
                    "--json"], check=True, capture_output=True, env=env)
    for host in hosts:
        host_env = {**env, "PROVISION_HOME": str(folder / run / host / "home"), "PROVISION_NVML_REPLAY": str(REPLAY)}
        subprocess.run([PROVISION, "create", str(profile), "--lock", str(lock), "--python", sys.executable, "--json"],
                       check=True, capture_output=True, env=host_env)


def floor(folder: Path, playbook: str, hosts: list[str], env: dict[str, str]) -> float:
    """One play of four no-op module runs per host, serial 1, against the same inventory: what Ansible itself costs."""
    play = folder / "floor.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  serial: 1\n  tasks:\n"
                    + "".join(f"    - name: step {i}\n      ansible.builtin.command: 'true'\n" for i in range(4)))
    start = time.perf_counter()
    subprocess.run([playbook, "-i", str(inventory(folder, hosts, f"floor-{time.monotonic_ns()}")), str(play)],
                   check=True, capture_output=True, env=env, cwd=folder)
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
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    playbook = shutil.which("ansible-playbook", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if not playbook:
        sys.exit("ansible-playbook is not installed: pip install -e '.[test]'")
    hosts = [f"gpu-{i}" for i in range(args.hosts)]
    times: dict[str, list[float]] = {"ansible-playbook upgrade.yml": [], "host by host": [], "ansible floor (4 no-op tasks)": []}
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        profile, env = setup(folder)
        for run in range(args.runs + 1):  # run 0 warms uv's cache and is not counted
            argv = [playbook, "-i", str(inventory(folder, hosts, f"ansible-{run}")), str(ROOT / "contrib/ansible/upgrade.yml"),
                    "-e", f"provision_profile={profile}"]
            start = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=folder)
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                sys.exit(done.stdout + done.stderr)
            start = time.perf_counter()
            by_hand(folder, profile, hosts, f"hand-{run}", env)
            by_hand_seconds = time.perf_counter() - start
            if run:
                times["ansible-playbook upgrade.yml"].append(seconds)
                times["host by host"].append(by_hand_seconds)
                times["ansible floor (4 no-op tasks)"].append(floor(folder, playbook, hosts, env))
        times["provision report, ten machines (whole process)"] = report_ten(env, 3 * args.runs)
    results = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in results.items():
        print(f"{name:48} {seconds:7.2f} s  (runs: {', '.join(f'{v:.2f}' for v in times[name])})")
    print(f"{len(hosts)} hosts; upgrade.yml / host by host: {results['ansible-playbook upgrade.yml'] / results['host by host']:.2f}x; load average at the end: {os.getloadavg()[0]:.1f}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"runs": args.runs, "hosts": len(hosts), "load_average": os.getloadavg(),
                                                   "median_seconds": results,
                                                   "all_seconds": times}, indent=2))


main()
