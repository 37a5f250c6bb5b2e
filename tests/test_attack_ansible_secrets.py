"""upgrade.yml with a mirror that needs a password (`provision_index: {fleet: https://alice:PASSWORD@mirror/...}`): the
plays handed it to provision as `--index fleet=URL` on the command line, where every local user of the controller and
each host can read it (ps), and Ansible prints a failed command's argv whole: the host whose checks failed showed the
password in the rollout's own output. The URLs go by PROVISION_INDEX_<NAME> now, as provision's own rule wants
(README: credentials go by variable), and appear nowhere in what the rollout prints or writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_ansible import Fleet
from wheelhouse import IndexServer

pytest.importorskip("ansible", reason="ansible-core is not installed (pip install -e '.[test]')")
SECRET = "s3cretPassw0rd"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_mirrors_password_never_reaches_a_command_line_or_the_rollouts_output(tmp_path: Path, index_server: IndexServer,
                                                                              provision_bin: str) -> None:
    fleet = Fleet(tmp_path, index_server, provision_bin)
    served = index_server.indexes["fleet"]
    served.password = SECRET
    inventory = json.loads(fleet.inventory.read_text())
    inventory["all"]["hosts"] = {"gpu-b": inventory["all"]["hosts"]["gpu-b"]}  # its old driver fails the checks
    inventory["all"]["vars"]["provision_index"] = {"fleet": served.url.replace("http://", f"http://alice:{SECRET}@")}
    fleet.write(inventory)
    done = fleet.play("upgrade.yml", "-e", f"provision_profile={fleet.new}", "-v")
    assert done.returncode != 0 and "gpu-b: serve-cu130 was not activated" in done.stdout, done.stdout + done.stderr
    assert "driver: the driver supports CUDA 12.9" in done.stdout  # it got past the index: the password was used
    assert SECRET not in done.stdout + done.stderr, [line for line in done.stdout.splitlines() if SECRET in line][:3]
    for written in fleet.fleet_dir.iterdir():
        assert SECRET not in written.read_text(), written
