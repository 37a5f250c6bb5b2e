"""NVML's failures to start told apart (issue 36, item 1). Right after a driver upgrade without a reboot nvmlInit
answers NVML_ERROR_LIB_RM_VERSION_MISMATCH: probe said "no NVIDIA driver on this machine", every GPU check was SKIP and
`create` made the environment active. Each failure is now named in probe with what to do; where a driver is installed
but does not answer, GPU checks are ERROR, create does not activate and the report's driver gate FAILs. Proven through
a real libnvidia-ml.so.1 (tests/standin_nvml.py) that returns each error code, first on the loader's path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest
import standin_nvml
import tiny
from conftest import ROOT
from launch import run_provision

from provision.machine import nvmlstart

pytestmark = pytest.mark.skipif(not standin_nvml.CC, reason="no C compiler to build a stand-in NVML library")
# the GPU machine: a missing library is no "no driver"
MODULE_LOADED = os.path.exists("/proc/driver/nvidia/version")
KINDS = [
    ("NVML_ERROR_LIB_RM_VERSION_MISMATCH", "version_mismatch", "reboot"),
    ("NVML_ERROR_NO_PERMISSION", "no_permission", "/dev/nvidia"),
    ("NVML_ERROR_DRIVER_NOT_LOADED", "driver_not_loaded", "modprobe nvidia"),
    ("NVML_ERROR_TIMEOUT", "timeout", "dmesg"),
    ("NVML_ERROR_LIBRARY_NOT_FOUND", "library_missing" if MODULE_LOADED else "no_driver", "install"),
    ("NVML_ERROR_UNKNOWN", "failed", "dmesg"),
]


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standin_nvml.build(tmp_path_factory.mktemp("standin"))


def test_the_table_names_only_nvidia_ml_pys_constants() -> None:
    assert all(isinstance(getattr(pynvml, name), int) for name in nvmlstart.KIND_OF_ERROR)
    assert set(nvmlstart.KIND_OF_ERROR.values()) <= set(nvmlstart.KINDS)


def test_probe_names_each_failure_and_what_to_do(lib: Path) -> None:
    for constant, kind, advice in KINDS:
        env = standin_nvml.environment(lib, getattr(pynvml, constant))
        done = run_provision("probe", "--json", env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        facts = json.loads(done.stdout)
        start = facts["driver"]["nvml"]
        assert (start["state"], start["error"]) == (kind, constant), start
        assert advice in start["hint"] and facts["gpus"] == [], start
        assert any(n.startswith(f"NVML did not start ({constant}): ") for n in facts["notes"]), facts["notes"]
        table = run_provision("probe", env=env, timeout=120).stdout
        assert f"{kind} ({constant})" in table and "what to do" in table, table
    wrong = ("version_mismatch", "no_permission", "driver_not_loaded")
    assert all("no NVIDIA driver" not in nvmlstart.KINDS[k][0] for k in wrong)


def test_a_driver_that_starts_is_ok(lib: Path) -> None:
    facts = json.loads(
        run_provision("probe", "--json", env=standin_nvml.environment(lib, 0), check=True).stdout
    )
    assert facts["driver"]["nvml"] == {"state": "ok", "error": None, "reason": None, "hint": None}


def test_a_mismatch_is_recorded_and_replayed_as_nvml_answered_it(lib: Path, tmp_path: Path) -> None:
    """The recording holds what nvidia-ml-py raised (nvmlInit's error code); its replay reads as the machine did."""
    recording = tmp_path / "mismatch.nvml.json"
    env = standin_nvml.environment(lib, pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    run_provision("probe", "--record-nvml", recording, env=env, check=True)
    calls = json.loads(recording.read_text())["calls"]
    assert calls[0] == {
        "fn": "nvmlInit",
        "args": [],
        "error": 18,
        "error_name": "NVMLError_LibRmVersionMismatch",
    }
    replayed = run_provision("probe", "--json", env={"PROVISION_NVML_REPLAY": str(recording)}, check=True)
    assert json.loads(replayed.stdout)["driver"]["nvml"]["state"] == "version_mismatch"


def test_check_is_error_and_create_never_activates_on_a_driver_that_does_not_answer(
    lib: Path, tmp_path: Path, index_server
) -> None:
    tool = tiny.make_tool(tmp_path, "", tiny.index(index_server))
    mismatch = standin_nvml.environment(lib, pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    created = tool("create", "tiny", "--python", tiny.PY, "--json", check=False, env=mismatch)
    assert created.returncode == 1, created.stderr
    document = json.loads(created.stdout)
    assert document["activated"] is False and document["passed"] is False, document
    driver = next(c for c in document["checks"] if c["id"] == "driver")  # tiny requires imports only: added
    assert (
        driver["status"] == "error"
        and "version_mismatch" in driver["reason"]
        and "reboot" in driver["reason"]
    )
    assert tool.envs() == {}
    tool.create("tiny", "--no-checks")
    checked = tool("check", "tiny", "--json", check=False, env=mismatch)
    assert checked.returncode == 1 and json.loads(checked.stdout)["status"] == "error", checked.stdout
    if not MODULE_LOADED:  # no driver at all: a machine without GPUs, GPU checks SKIP as before
        absent = tool(
            "check", "tiny", "--json", env=standin_nvml.environment(lib, pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        )
        assert {c["status"] for c in json.loads(absent.stdout)["checks"]} == {"pass"}


def test_the_reports_driver_gate_fails_with_the_reason(lib: Path, tmp_path: Path) -> None:
    env = standin_nvml.environment(lib, pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    machine = tmp_path / "machine.json"
    machine.write_text(run_provision("probe", "--json", env=env, check=True).stdout)
    for where in (("--machine", str(machine)), ()):
        done = run_provision(
            "report", *where, "--profile", str(ROOT / "profiles/cu130.toml"), "--json", env=env
        )
        assert done.returncode == 0, done.stderr
        (target,) = json.loads(done.stdout)["machines"][0]["targets"]
        gate = next(g for g in target["gates"] if g["id"] == "driver")
        assert gate["status"] == "fail" and "does not answer (version_mismatch)" in gate["reason"], gate
        assert target["verdict"] == "fail"
        table = run_provision(
            "report", *where, "--profile", str(ROOT / "profiles/cu130.toml"), env=env
        ).stdout
        assert (
            "The NVIDIA driver does not answer (version_mismatch)" in table
            and "every GPU gate is SKIP" not in table
        )


def test_a_probe_document_from_before_reads_as_unknown_not_as_silent() -> None:
    old = json.loads((ROOT / "docs/machines/h200.probe.json").read_text())
    old["driver"].pop("nvml", None)
    code = (
        "import json,sys; from provision.machine.facts import MachineFacts; "
        "f = MachineFacts.from_dict(json.loads(sys.argv[1]), 'x'); print(f.driver.nvml.state, f.driver.nvml.silent)"
    )
    said = subprocess.run(
        [sys.executable, "-c", code, json.dumps(old)], capture_output=True, text=True, check=True
    )
    assert said.stdout.split() == ["unknown", "False"]
