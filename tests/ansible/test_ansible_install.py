"""The Ansible role installs only what it is given and uses only this provision: the distribution's name is free on
the public registry (the name `provision` there is an unrelated project), a host without provision and without
`provision_wheel`/`provision_package` stops with a message, and a `provision` that is not this tool is never run
for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_ansible import PLAYBOOKS, playbook_binary

from provision import DISTRIBUTION

pytest.importorskip("ansible", reason="ansible-core is not installed (pip install -e '.[test]')")


@pytest.mark.network
def test_the_distribution_name_is_free_on_the_public_registry() -> None:
    """Asked of the registry's own project pages (PEP 691, the registry uv uses by default), as pip and uv ask it."""
    from provision.stacks import index, newprofile

    registry = newprofile.default_index()
    # the yardstick: this check does find a name that is taken
    assert index.project_files(registry, "provision"), registry
    assert index.project_files(registry, DISTRIBUTION) == []  # 404: no such project


def play(
    tmp_path: Path, host_vars: dict[str, str], *, path: str = "/usr/bin:/bin"
) -> subprocess.CompletedProcess[str]:
    """probe.yml on one local host, with a PATH that holds no provision unless the test puts one there."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        json.dumps(
            {
                "all": {
                    "hosts": {"solo": host_vars},
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": sys.executable,
                        "provision_venv": str(tmp_path / "tool"),
                        "provision_remote_dir": str(tmp_path / "remote"),
                        "provision_fleet_dir": str(tmp_path / "fleet"),
                        "provision_controller": str(Path(sys.executable).with_name("provision")),
                        "provision_python": str(Path(sys._base_executable).resolve()),
                    },
                }
            }
        )
    )
    env = {
        **os.environ,
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_HOME": str(tmp_path / "ansible"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible" / "tmp"),
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "PROVISION_HOME": str(tmp_path / "home"),
        "PATH": path,
    }
    return subprocess.run(
        [playbook_binary(), "-i", str(inventory), str(PLAYBOOKS / "probe.yml")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )


def decoy(folder: Path) -> Path:
    """Another project's `provision` on PATH: it must never be run for this one."""
    folder.mkdir()
    script = folder / "provision"
    script.write_text(f"#!/bin/sh\necho provision 0.9.2\ntouch {folder}/ran-$1\n")
    script.chmod(0o755)
    return script


def test_nothing_is_installed_unless_named_and_another_provision_is_never_used(tmp_path: Path) -> None:
    fake = decoy(tmp_path / "decoy")
    done = play(tmp_path, {}, path=f"{fake.parent}:/usr/bin:/bin")
    assert done.returncode != 0
    assert "solo has no provision (cuda-provision) and nothing to install was named" in done.stdout
    assert "set provision_wheel" in done.stdout and "provision_package" in done.stdout
    assert not (tmp_path / "tool").exists()  # nothing installed
    # asked who it is, nothing more
    assert sorted(p.name for p in fake.parent.iterdir()) == [
        "provision",
        "ran---version",
    ]
    done = play(tmp_path, {"provision_bin": str(fake)})
    assert done.returncode != 0 and f"provision_bin={fake} is not this provision" in done.stdout


@pytest.mark.network  # provision's dependencies come from the host's pip configuration
def test_a_host_without_provision_gets_the_wheel_it_is_given(tmp_path: Path) -> None:
    from provision.stacks import uvtool

    # built as the role's message tells a user to (uv build --wheel): pip wheel took 7 s of CPU for the same file
    built = subprocess.run(
        [uvtool.binary(), "build", "--wheel", "--quiet", "-o", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("cuda_provision-*.whl")
    # provision_pip_args reaches pip (--no-compile: the bytecode of 40 MB of dependencies cost 3.5 s of CPU here)
    done = play(tmp_path, {"provision_wheel": str(wheel), "provision_pip_args": "--no-compile"})
    assert done.returncode == 0, done.stdout + done.stderr
    installed = subprocess.run(
        [str(tmp_path / "tool" / "bin" / "provision"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert installed.stdout.strip().endswith(f"({DISTRIBUTION})")
    assert json.loads((tmp_path / "fleet" / "solo.probe.json").read_text())["schema_version"] == 1


def test_a_quote_in_an_inventory_value_never_chooses_the_program_and_the_distribution_is_no_pattern(
    tmp_path: Path,
) -> None:
    """Issue 39, item 3: the role's answer was printed with printf '{"found": "%s", ...}', so provision_venv holding
    `", "found": "PROGRAM` added a key (from_json keeps the last) and every task ran PROGRAM, its --version unchecked;
    provision_distribution `.*` was a grep pattern that took any `provision`."""
    evil = tmp_path / "evil"
    evil.mkdir()
    program = evil / "program"
    program.write_text(f"#!/bin/sh\ntouch {evil}/ran\n")
    program.chmod(0o755)
    hostile = f'{tmp_path}/tool", "found": "{program}'
    done = play(tmp_path, {"provision_venv": hostile})
    assert done.returncode != 0 and "nothing to install was named" in done.stdout, done.stdout + done.stderr
    assert not (evil / "ran").exists()
    fake = decoy(tmp_path / "decoy")
    fake.write_text(f"#!/bin/sh\necho 'provision, version 0.9.2 (provision)'\ntouch {fake.parent}/ran-$1\n")
    done = play(tmp_path, {"provision_distribution": ".*"}, path=f"{fake.parent}:/usr/bin:/bin")
    assert done.returncode != 0 and "nothing to install was named" in done.stdout, done.stdout
    # asked who it is, nothing more
    assert sorted(p.name for p in fake.parent.iterdir()) == [
        "provision",
        "ran---version",
    ]
