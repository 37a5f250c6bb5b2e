"""The Ansible playbooks of contrib/ansible, run for real by ansible-core against three hosts on this machine (local
connection, each with its own PROVISION_HOME) and the tests' own index on 127.0.0.1.

Host gpu-b records an old driver (575.57.08, CUDA 12.9) at the hardware seam (PROVISION_NVML_REPLAY), so a CUDA 13.0
stack fails its `driver` gate there for the reason a real fleet would, and the fleet report says so before anything is
installed. Host gpu-c is made slower: its baseline (a real program, the same command in both profiles, whose figure
depends on the environment's [env]) runs the new stack at 80 %. The rollout runs `provision upgrade --lock` on every
host: gpu-a moves, gpu-b (gate FAIL, nothing built) and gpu-c (slower) keep their stacks and are reported, not failed;
the fleet summary lists each host's decision and both medians. With -e provision_require_activation=true the rollout
stops at gpu-b instead and never reaches gpu-c. Once gpu-b has its new driver, the same playbook moves it; gpu-c's
earlier decision is shown again; the fleet rollback then takes the moved hosts back.

The fleet's index needs a password (`provision_index: {fleet: http://alice:PASSWORD@...}`), as a team's mirror does:
the plays once handed it to provision as `--index fleet=URL` on the command line, where every local user of the
controller and each host can read it (ps), and Ansible prints a failed command's argv whole: the host whose checks
failed showed the password in the rollout's own output. The URLs go by PROVISION_INDEX_<NAME>, as provision's own rule
wants (README: credentials go by variable), and appear nowhere in what the rollout prints (-v) or writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, ROOT
from launch import run_provision
from wheelhouse import IndexServer

from provision.envs import drift

pytest.importorskip("ansible", reason="ansible-core is not installed (pip install -e '.[test]')")

PLAYBOOKS = ROOT / "contrib" / "ansible"
HOSTS = ("gpu-a", "gpu-b", "gpu-c")
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SECRET = "s3cretPassw0rd"
FLEET_PATCH = "CUSTOM_ALL_REDUCE = False\n"
DEEP_PATCH = "DEEP = True\n"


def playbook_binary() -> str:
    found = shutil.which(
        "ansible-playbook", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    )
    if not found:
        pytest.skip("ansible-playbook is not installed")
    return found


# The same baseline command in both profiles (upgrade compares like with like); its figure depends on the stack the
# environment's [env] names, and on a host that sets FLEET_SLOW_STACK to that stack it runs at 80 %.
BENCH = (
    "import os; stack = os.environ['FLEET_STACK']; figure = {'cu128': 82.0, 'cu130': 89.5}[stack]; "
    "print(f\"decode {figure * (0.8 if os.environ.get('FLEET_SLOW_STACK') == stack else 1.0):.2f} tok/s\")"
)


def profile(folder: Path, name: str, cuda: str, version: str, url: str, stack: str, files: str = "") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        f'schema = 1\nname = "{name}"\ncuda = "{cuda}"\n[indexes]\nfleet = "{url}"\n'
        f'[packages]\nalpha = {{ index = "fleet", version = "=={version}" }}\n'
        '[checks]\nrequired = ["driver"]\n'
        f'[env]\nFLEET_STACK = "{stack}"\n'
        f'[baseline]\ncommand = ["python", "-c", {json.dumps(BENCH)}]\n'
        'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n' + files
    )
    return path


class Fleet:
    def __init__(self, base: Path, server: IndexServer, provision_bin: str, *, password: str = "") -> None:
        self.base, self.provision = base, provision_bin
        fleet = server.index("fleet")
        fleet.add("alpha", "1.0")
        fleet.add("alpha", "2.0")
        fleet.password = (
            password  # every request must then carry alice:password, which only the mirror URLs hold
        )
        self.mirrors = (
            {"fleet": fleet.url.replace("http://", f"http://alice:{password}@")} if password else {}
        )
        self.default = server.index("empty-default")  # nothing may come from the public registry
        profiles = base / "profiles"
        profiles.mkdir()
        self.old = profile(profiles, "serve-cu128", "12.8", "1.0", fleet.url, "cu128")
        (profiles / "patches" / "deep").mkdir(parents=True)
        # the team's patch, carried to every host
        (profiles / "patches" / "fleet_patch.py").write_text(FLEET_PATCH)
        # same name, a folder further down
        (profiles / "patches" / "deep" / "fleet_patch.py").write_text(DEEP_PATCH)
        self.new = profile(
            profiles,
            "serve-cu130",
            "13.0",
            "2.0",
            fleet.url,
            "cu130",
            files='[files]\n"fleet_patch.py" = "patches/fleet_patch.py"\n'
            '"deep/fleet_patch.py" = "patches/deep/fleet_patch.py"\n',
        )
        new_driver = DATA / "h200.nvml.json"
        old_driver = json.loads(new_driver.read_text())
        answers = {"nvmlSystemGetDriverVersion": "575.57.08", "nvmlSystemGetCudaDriverVersion_v2": 12090}
        for call in old_driver["calls"]:
            call["result"] = answers.get(call["fn"], call.get("result"))
        (base / "old-driver.nvml.json").write_text(json.dumps(old_driver))
        self.fleet_dir = base / "fleet"
        self.fleet_dir.mkdir()
        self.replay = replay = {
            "gpu-a": new_driver,
            "gpu-b": base / "old-driver.nvml.json",
            "gpu-c": new_driver,
        }
        inventory = {
            "all": {
                "hosts": {
                    h: {
                        "provision_home": str(self.home(h)),
                        "provision_environment": {"PROVISION_NVML_REPLAY": str(replay[h]), **self.slow(h)},
                    }
                    for h in HOSTS
                },
                "vars": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                    "provision_bin": provision_bin,
                    "provision_controller": provision_bin,
                    "provision_fleet_dir": str(self.fleet_dir),
                    "provision_remote_dir": str(base / "{{ inventory_hostname }}" / "remote"),
                    "provision_lock_python": PY,  # create takes the lock's Python: nothing more to say
                    "provision_index": self.mirrors,
                },
            }
        }
        self.inventory = base / "inventory.yml"
        self.write(inventory)

    @staticmethod
    def slow(host: str) -> dict[str, str]:
        """gpu-c runs the new stack slower (what its baseline measures there)."""
        return {"FLEET_SLOW_STACK": "cu130"} if host == "gpu-c" else {}

    def write(self, inventory: dict[str, Any]) -> None:
        self.inventory.write_text(json.dumps(inventory, indent=1))  # JSON is YAML

    def fix_driver(self, host: str) -> None:
        """The host gets the new driver (its recorded NVML reading is now the H200's)."""
        inventory = json.loads(self.inventory.read_text())
        self.replay[host] = DATA / "h200.nvml.json"
        inventory["all"]["hosts"][host]["provision_environment"]["PROVISION_NVML_REPLAY"] = str(
            self.replay[host]
        )
        self.write(inventory)

    def home(self, host: str) -> Path:
        return self.base / host / "home"

    def play(self, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "LC_ALL": "C.UTF-8",
            "ANSIBLE_HOME": str(self.base / "ansible"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(self.base / "ansible" / "tmp"),
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_PIPELINING": "1",
            "PROVISION_INDEX_DEFAULT": self.default.url,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        }
        return subprocess.run(
            [playbook_binary(), "-i", str(self.inventory), str(PLAYBOOKS / name), *extra],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=self.base,
        )

    def provision_env(self, host: str) -> dict[str, str]:
        return {
            **os.environ,
            "PROVISION_HOME": str(self.home(host)),
            "PROVISION_INDEX_DEFAULT": self.default.url,
            "PROVISION_NVML_REPLAY": str(self.replay[host]),
            **self.slow(host),
            **{f"PROVISION_INDEX_{name.upper()}": url for name, url in self.mirrors.items()},
        }

    def by_hand(self, profile: Path) -> None:
        lock = self.base / f"pylock.{profile.stem}.toml"
        for argv, host in [(["lock", str(profile), "--python", PY, "-o", str(lock)], HOSTS[0])] + [
            (["create", str(profile), "--lock", str(lock), "--python", sys.executable], h) for h in HOSTS
        ]:
            done = run_provision(*argv, timeout=120, env=self.provision_env(host))
            assert done.returncode == 0, done.stderr

    def envs(self, host: str) -> dict[str, Any]:
        done = run_provision("envs", "--json", timeout=60, env={"PROVISION_HOME": str(self.home(host))})
        assert done.returncode == 0, done.stderr
        return {e["name"]: e for e in json.loads(done.stdout)["environments"]}

    def active(self) -> list[str | None]:
        """The active environment of each host, one `envs --json` read of each home."""
        return [active(self.envs(h)) for h in HOSTS]


def active(envs: dict[str, Any]) -> str | None:
    return next((n for n, e in envs.items() if e["active"]), None)


def snapshot(home: Path) -> dict[str, bytes | str]:
    """Everything in a home: file contents and link targets, to prove a host was not touched."""
    found: dict[str, bytes | str] = {}
    for path in sorted(home.rglob("*")):
        key = str(path.relative_to(home))
        if path.is_symlink():
            found[key] = os.readlink(path)
        elif path.is_file() and "venv" not in path.parts:
            found[key] = path.read_bytes()
    return found


@pytest.mark.slow
# four playbooks over three hosts: past 300 s on 2 loaded cores beside the other processes
@pytest.mark.timeout(900)
def test_fleet_probe_report_rolling_upgrade_stops_at_failing_host_and_rollback(
    tmp_path: Path, index_server: IndexServer, provision_bin: str
) -> None:
    fleet = Fleet(tmp_path, index_server, provision_bin, password=SECRET)

    # Today's stack everywhere, built host by host without Ansible (the rollout below shows a host passing through it).
    fleet.by_hand(fleet.old)
    assert fleet.active() == ["serve-cu128"] * 3

    # Probe all, one report: gpu-b's driver cannot run the CUDA 13.0 stack, and the report says so first.
    profiles = json.dumps({"provision_report_profiles": [str(fleet.new), str(fleet.old)]})
    done = fleet.play("probe.yml", "-e", profiles)
    assert done.returncode == 0, done.stdout + done.stderr
    documents = [fleet.fleet_dir / f"{h}.probe.json" for h in HOSTS]
    assert json.loads(documents[1].read_text())["driver"]["version"] == "575.57.08"
    report = json.loads((fleet.fleet_dir / "fleet.json").read_text())
    assert [m["source"] for m in report["machines"]] == [str(d) for d in documents]
    by_name = {t["name"]: t for t in report["summary"]["targets"]}
    assert by_name["serve-cu130"]["fail"] == 1 and by_name["serve-cu130"]["machines"]["fail"] == [
        str(documents[1])
    ]
    assert by_name["serve-cu128"]["fail"] == 0
    (driver,) = [c for c in by_name["serve-cu130"]["causes"] if c["gate"] == "driver"]
    assert driver["machines"] == [str(documents[1])] and "580.65.06" in driver["reason"]
    markdown = (fleet.fleet_dir / "fleet.md").read_text()
    assert (
        markdown.startswith("## Fleet: 3 machines")
        and f"FAIL on 1 machine ({documents[1]}): driver" in markdown
    )
    assert "Fleet: 3 machines" in done.stdout  # the playbook shows the tables

    # Every host must move (-e provision_require_activation=true): gpu-a moves, gpu-b's driver gate FAILs (nothing is
    # built there) and the rollout stops at it, with its old stack active; gpu-c is never reached.
    untouched = snapshot(fleet.home("gpu-c"))
    upgrade = ("upgrade.yml", "-e", f"provision_profile={fleet.new}", "-e", "provision_runs=3")
    done = fleet.play(*upgrade, "-e", "provision_require_activation=true", "-v")
    assert done.returncode != 0, done.stdout
    assert (
        "gpu-b: serve-cu130 was not activated; serve-cu128 stays active: gates: profile serve-cu130 FAIL: driver"
        in done.stdout
    ), [line for line in done.stdout.splitlines() if "fatal" in line or "was not activated" in line]
    assert SECRET not in done.stdout + done.stderr, [
        line for line in done.stdout.splitlines() if SECRET in line
    ][:3]
    envs_a, envs_b = fleet.envs("gpu-a"), fleet.envs("gpu-b")  # one read of each home
    assert active(envs_a) == "serve-cu130" and set(envs_a) == {"serve-cu128", "serve-cu130"}
    assert envs_a["serve-cu130"]["upgrade"]["decision"] == "activated"
    assert active(envs_b) == "serve-cu128" and set(envs_b) == {"serve-cu128"}
    assert len(list((fleet.home("gpu-b") / "builds").iterdir())) == 1  # a gate FAIL builds nothing
    assert snapshot(fleet.home("gpu-c")) == untouched
    # not even the lock was copied
    assert not (tmp_path / "gpu-c" / "remote" / "pylock.serve-cu130.toml").exists()
    said_a = json.loads((fleet.fleet_dir / "gpu-a.upgrade.json").read_text())
    assert said_a["decision"] == "activated" and said_a["baseline"]["from"]["median"] == 82.0
    assert said_a["baseline"]["to"]["median"] == 89.5 and said_a["baseline"]["verdict"] == "better"
    said_b = json.loads((fleet.fleet_dir / "gpu-b.upgrade.json").read_text())
    assert said_b["decision"] == "kept" and [s["step"] for s in said_b["steps"]] == ["gates"]
    first_lock = (fleet.fleet_dir / "pylock.serve-cu130.toml").read_bytes()

    # By default a host that keeps its stack is reported, not a failed rollout: gpu-a is skipped (moved already),
    # gpu-b is kept again, gpu-c (slower there) builds, measures and keeps serve-cu128; the summary lists them all.
    done = fleet.play(*upgrade)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "gpu-a: serve-cu130 is active already" in done.stdout
        and "reusing the lock of the first run" in done.stdout
    )
    assert fleet.active() == ["serve-cu130", "serve-cu128", "serve-cu128"]
    said_c = json.loads((fleet.fleet_dir / "gpu-c.upgrade.json").read_text())
    assert said_c["decision"] == "kept" and said_c["steps"][-1] == {
        **said_c["steps"][-1],
        "step": "decide",
        "status": "fail",
    }
    assert (said_c["baseline"]["from"]["median"], said_c["baseline"]["to"]["median"]) == (82.0, 71.6)
    assert "serve-cu130" in fleet.envs("gpu-c")  # built, listed, never activated
    summary = (fleet.fleet_dir / "upgrade.txt").read_text()
    assert summary.startswith("Fleet upgrade: 1 activated, 2 kept, 0 without a decision, of 3 hosts"), summary
    assert "gpu-a: activated; serve-cu128 82.00 -> serve-cu130 89.50 tok/s (+9.1%)" in summary
    assert "gpu-c: kept; serve-cu128 82.00 -> serve-cu130 71.60 tok/s (-12.7%)" in summary
    assert (
        "gpu-b: kept; serve-cu128 - -> serve-cu130 -" in summary
        and "Fleet upgrade: 1 activated" in done.stdout
    )
    assert [h["decision"] for h in json.loads((fleet.fleet_dir / "upgrade.json").read_text())["hosts"]] == [
        "activated",
        "kept",
        "kept",
    ]

    # gpu-b gets its new driver; the same command moves it, with the first run's lock; gpu-c's decision is shown again
    # (its build is not made twice). Two at a time: gpu-a (moved) and gpu-b (not) share a batch.
    fleet.fix_driver("gpu-b")
    builds_c = sorted((fleet.home("gpu-c") / "builds").iterdir())
    (tmp_path / "gpu-a" / "remote" / "pylock.serve-cu130.toml").unlink()
    done = fleet.play(*upgrade, "-e", "provision_serial=2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert not (tmp_path / "gpu-a" / "remote" / "pylock.serve-cu130.toml").exists(), (
        "gpu-a ended before the copy"
    )
    assert fleet.active() == ["serve-cu130", "serve-cu130", "serve-cu128"]
    assert sorted((fleet.home("gpu-c") / "builds").iterdir()) == builds_c
    assert (fleet.fleet_dir / "pylock.serve-cu130.toml").read_bytes() == first_lock
    assert (tmp_path / "gpu-c" / "remote" / "pylock.serve-cu130.toml").read_bytes() == first_lock
    # the profile's [files] reached every host with it, and create wrote them into the venv
    for host in HOSTS:
        venv = fleet.home(host) / "envs" / "serve-cu130" / "venv"
        assert (drift.site_packages(venv) / "fleet_patch.py").read_text() == FLEET_PATCH, host
        assert (drift.site_packages(venv) / "deep" / "fleet_patch.py").read_text() == DEEP_PATCH, host

    # The fleet rollback: every host where serve-cu130 is active goes back to serve-cu128, all at once.
    done = fleet.play("rollback.yml", "-e", "provision_env=serve-cu130")
    assert done.returncode == 0, done.stdout + done.stderr
    assert fleet.active() == ["serve-cu128"] * 3
    assert all(f"{h}: serve-cu130 -> serve-cu128" in done.stdout for h in HOSTS[:2])
    # locks, the hosts' archive, probe documents, reports, create and compare
    for written in fleet.fleet_dir.iterdir():
        assert SECRET.encode() not in written.read_bytes(), written


def test_inventory_values_with_shell_syntax_run_nothing_on_the_hosts(
    tmp_path: Path, index_server: IndexServer, provision_bin: str
) -> None:
    """provision_remote_dir and provision_venv are paths, whatever they hold: `;`, `$(...)` and backquotes run nothing
    (the role's shell step gets them as environment variables, never as script text). One host carries all three in
    one value (each would run `touch` on its own as script text); the other two are left out of the inventory: a host
    per attack tripled the playbooks' cost and proved nothing more."""
    fleet = Fleet(tmp_path, index_server, provision_bin)
    marker = tmp_path / "MARKER"
    inventory = json.loads(fleet.inventory.read_text())
    attack = f"x; touch {marker}; y$(touch {marker})z`touch {marker}`"
    host = inventory["all"]["hosts"]["gpu-a"]
    host["provision_remote_dir"] = str(tmp_path / "gpu-a" / attack)
    host["provision_venv"] = str(tmp_path / "gpu-a" / "venv" / attack)
    inventory["all"]["hosts"] = {"gpu-a": host}
    fleet.write(inventory)
    done = fleet.play("probe.yml")
    assert not marker.exists(), "an inventory value ran as a shell command"
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "gpu-a" / attack / "probe.json").is_file(), "the remote folder is the literal path"
    fleet.play("rollback.yml")  # nothing to roll back to: it fails, and still runs nothing
    assert not marker.exists(), "an inventory value ran as a shell command"
