"""Never hung, nothing left running: a rollback during a create's checks does not wait for them, and a check payload
dies with a provision that is killed with -9 (then gc removes its build)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import tiny


@pytest.fixture
def tool(tmp_path: Path, provision_bin: str, index_server) -> tiny.Tool:
    served = tiny.index(index_server)
    served.add("sleepy", "1.0", files={"sleepy/__init__.py": b"import time\ntime.sleep(120)\n"})
    return tiny.make_tool(tmp_path, provision_bin, served, ("sleepy", 'sleepy = "==1.0"'))


def processes_under(folder: Path, also: str = "") -> list[int]:
    needle = os.fsencode(str(folder))
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if needle in cmdline and also.encode() in cmdline:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_rollback_does_not_wait_for_a_create_and_its_payload_dies_with_it(tool: tiny.Tool) -> None:
    tool.create("tiny", "--name", "a", "--no-checks")
    tool.create("tiny", "--name", "b", "--no-checks")
    creating = tool.popen("create", "sleepy", "--python", tiny.PY)
    builds = tool.home / "builds"
    # a loaded machine: the check starts after the venv, the install and the inventory
    deadline = time.time() + 240
    while (
        time.time() < deadline and not processes_under(builds, "check_imports.py") and creating.poll() is None
    ):
        time.sleep(0.1)
    assert processes_under(builds, "check_imports.py"), (
        f"the sleepy import check never started: {creating.poll()}"
    )
    started = time.perf_counter()
    rolled = json.loads(tool("rollback", "--json").stdout)
    # not after the import check's 120 s sleep
    assert rolled["active"] == "a" and time.perf_counter() - started < 60
    creating.send_signal(signal.SIGKILL)
    creating.wait()
    deadline = time.time() + 10
    while time.time() < deadline and processes_under(builds):
        time.sleep(0.1)
    assert not processes_under(builds), "the check payload outlived provision"
    removed = json.loads(tool("gc", "--json").stdout)["removed"]
    assert [r for r in removed if r.startswith("builds/sleepy-")] and set(tool.envs()) == {"a", "b"}
