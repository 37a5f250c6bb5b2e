"""The report gives the verdicts the facts predict, live and from recorded machines, in all three forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA, ROOT
from launch import run_provision

from provision.machine import nvml
from provision.machine.facts import MachineFacts, Toolkit
from provision.machine.recording import Replay
from provision.report import gates as report
from provision.stacks import profiles

RTX = ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"


def facts_from(recording: str, toolkits: tuple[Toolkit, ...] = ()) -> MachineFacts:
    r = nvml.read(nvml.replay_file(DATA / recording))
    return MachineFacts(driver=r.driver, gpus=tuple(r.gpus), topology=tuple(r.topology), toolkits=toolkits)


def gates(target: report.Target) -> dict[str, str]:
    return {g.id: g.status for g in target.gates}


def test_first_users_machine_cu130_allowed_and_pcie_features_flagged() -> None:
    machine = report.load_machine(RTX)
    by_name = {t.name: t for t in report.report([machine], profiles.available())[0].targets}
    cu130 = gates(by_name["cu130"])
    assert cu130["driver"] == "pass"  # 590 driver, CUDA 13.1
    assert (
        cu130["toolkit"] == "pass" and cu130["flashinfer-jit"] == "pass" and cu130["torch-wheels"] == "pass"
    )
    assert cu130["symm-mem-allreduce"] == "fail"  # KeyError: 12, and PCIe has no multicast
    assert cu130["allreduce-fusion"] == "warn"  # 0.6.17 builds for SM120 but assumes NVLink/multicast
    assert cu130["custom-allreduce"] == "warn"
    assert by_name["cu130"].verdict == "pass"
    cu128 = gates(by_name["cu128"])
    assert cu128["flashinfer-jit"] == "warn"  # nvcc 12.8 only through the 12.0a workaround
    assert cu128["allreduce-fusion"] == "fail"  # FlashInfer 0.6.9: majors 9, 10 only
    reason = next(g.reason for g in by_name["cu128"].gates if g.id == "symm-mem-allreduce")
    assert "KeyError: 12" in reason


def test_h200_one_gpu() -> None:
    h200 = facts_from(
        "h200.nvml.json",
        (Toolkit(version="13.0", path="/usr/local/cuda", nvcc="nvcc", sms=("sm_90", "sm_120")),),
    )
    target = report.judge(h200, profiles.load("cu130"))
    assert gates(target)["driver"] == "pass" and gates(target)["multi-gpu"] == "skip"


def test_old_driver_fails_cu130_with_the_minimum() -> None:
    data = json.loads((DATA / "h200.nvml.json").read_text())
    answers = {"nvmlSystemGetDriverVersion": "575.57.08", "nvmlSystemGetCudaDriverVersion_v2": 12090}
    for call in data["calls"]:
        call["result"] = answers.get(call["fn"], call.get("result"))
    r = nvml.read(Replay(data))
    target = report.judge(MachineFacts(driver=r.driver, gpus=tuple(r.gpus)), profiles.load("cu130"))
    reason = next(g.reason for g in target.gates if g.id == "driver")
    assert target.verdict == "fail" and "580.65.06" in reason


@pytest.mark.parametrize(
    ("cuda", "driver", "status"),
    [(13020, "580.95.05", "pass"), (13000, "580.95.05", "pass"), (12090, "575.57.08", "fail")],
)
def test_a_cuda_13_2_stack_runs_on_a_driver_of_cuda_13_0_under_minor_version_compatibility(
    cuda: int, driver: str, status: str
) -> None:
    """Every 13.x runs on R580+ (a PASS with a note where the driver reports an older 13.x); 12.x drivers still FAIL."""
    data = json.loads((DATA / "h200.nvml.json").read_text())
    answers = {"nvmlSystemGetDriverVersion": driver, "nvmlSystemGetCudaDriverVersion_v2": cuda}
    for call in data["calls"]:
        call["result"] = answers.get(call["fn"], call.get("result"))
    r = nvml.read(Replay(data))
    gate = report.driver_gate(MachineFacts(driver=r.driver, gpus=tuple(r.gpus)), "13.2")
    assert gate.status == status
    noted = "minor-version compatibility" in gate.reason and "cudaErrorUnsupportedPtxVersion" in gate.reason
    assert noted is (cuda == 13000), gate.reason
    assert ("minor-version-compatibility" in gate.source) is noted


def test_no_gpu_machine_skips_gpu_gates() -> None:
    target = report.judge(MachineFacts(), profiles.load("cu130"))
    assert set(gates(target).values()) == {"skip"}


def test_unsuffixed_arch_list_under_old_nvcc_fails(tmp_path: Path) -> None:
    text = (ROOT / "profiles/cu128.toml").read_text().replace('"{arch_list}"', '"12.0"')
    path = tmp_path / "x.toml"
    path.write_text(text)
    machine = report.load_machine(RTX)
    assert gates(report.judge(machine, profiles.load_file(path)))["flashinfer-jit"] == "fail"


@pytest.mark.parametrize("form", ["--json", "--markdown", None])
def test_report_process_forms(provision_bin: str, form: str | None) -> None:
    argv = [
        "report",
        "--machine",
        str(RTX),
        "--machine",
        str(DATA.parent.parent / "docs/machines/rtx-pro-6000-x8.probe.json"),
    ]
    done = run_provision(*argv, *([form] if form else []), timeout=60)
    assert done.returncode == 0, done.stderr
    if form == "--json":
        doc = json.loads(done.stdout)
        assert doc["schema_version"] == 1 and len(doc["machines"]) == 2
        target = doc["machines"][0]["targets"][0]
        assert {"kind", "name", "cuda", "verdict", "gates", "features_off"} <= set(target)
        assert all(g["source"] for g in target["gates"] if g["status"] != "skip")
    elif form == "--markdown":
        assert "| gate | kind | status | reason | source |" in done.stdout
    else:
        assert "Verdicts" in done.stdout and "cu130" in done.stdout


def test_report_live_on_this_machine(provision_bin: str) -> None:
    done = run_provision("report", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["machines"][0]["source"] == "live"


def test_bad_machine_file(provision_bin: str, tmp_path: Path) -> None:
    bad = tmp_path / "m.json"
    bad.write_text("{}")
    done = run_provision("report", "--machine", str(bad))
    assert done.returncode == 2 and "not a probe document" in done.stderr


def test_environment_in_the_report(tmp_path: Path, provision_bin: str) -> None:
    """An adopted venv judged on the recorded 8-GPU machine: versions that disagree fail, never-checked warns."""
    import sys

    from wheelhouse import build_wheel

    from provision.stacks import uvtool

    wheels = tmp_path / "wheels"
    build_wheel(wheels, "torch", "2.9.1+cu128")
    build_wheel(wheels, "flashinfer-python", "0.6.9")
    build_wheel(wheels, "flashinfer-jit-cache", "0.6.8+cu128")
    venv = tmp_path / "venv"
    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"])
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(venv / "bin/python"),
            "--no-index",
            "--find-links",
            str(wheels),
            "--quiet",
            "torch",
            "flashinfer-python",
            "flashinfer-jit-cache",
        ]
    )
    home = ["--home", str(tmp_path / "home")]
    run_provision("adopt", "old", str(venv), "--profile", "cu128", "--no-lock", *home, check=True)
    done = run_provision(
        "report", "--machine", str(RTX), "--profile", "cu130", "--env", "old", "--json", *home, timeout=120
    )
    assert done.returncode == 0, done.stderr
    targets = json.loads(done.stdout)["machines"][0]["targets"]
    env = next(t for t in targets if t["kind"] == "environment")
    by_id = {g["id"]: g for g in env["gates"]}
    assert (
        by_id["versions"]["status"] == "fail" and "flashinfer-jit-cache 0.6.8" in by_id["versions"]["reason"]
    )
    assert by_id["checks"]["status"] == "warn" and by_id["driver"]["status"] == "pass"
    assert by_id["scan"]["status"] == "pass"  # no CUDA code in these wheels: nothing fails
    assert by_id["torch-build"]["status"] == "fail" and "CPU build" in by_id["torch-build"]["reason"]
    assert env["verdict"] == "fail"


def test_an_environment_whose_ptx_a_newer_cuda_made_warns_with_the_driver_to_install(
    tmp_path: Path, provision_bin: str
) -> None:
    """torch 2.15.0 without a local tag, built for CUDA 13.2 (its torch/version.py: adopt reads the environment's CUDA
    there), carrying only PTX for SM120: on the 590 driver (CUDA 13.1) the driver gate PASSes under minor-version
    compatibility, and `ptx-driver` WARNs that the JIT of that PTX fails with cudaErrorUnsupportedPtxVersion."""
    import subprocess
    import sys

    from test_scan_hostile import container, elf64

    from provision.scan import fatbin

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "version.py").write_text("__version__ = '2.15.0'\ncuda = '13.2'\n")
    code = container(90) + container(120, fatbin.KIND_PTX)
    (site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(
        elf64([(".nv_fatbin", 1, 2, 64, len(code))], payload=code)
    )
    info = site / "torch-2.15.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0\n")
    (info / "RECORD").write_text(
        "torch/version.py,,\ntorch/lib/libtorch_cuda.so,,\ntorch-2.15.0.dist-info/METADATA,,\n"
    )
    home = ["--home", str(tmp_path / "home")]
    run_provision("adopt", "new", str(venv), "--no-lock", *home, check=True)
    done = run_provision("report", "--machine", str(RTX), "--env", "new", "--json", *home, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    env = next(t for t in json.loads(done.stdout)["machines"][0]["targets"] if t["kind"] == "environment")
    by_id = {g["id"]: g for g in env["gates"]}
    assert (
        env["cuda"] == "13.2"
        and by_id["driver"]["status"] == "pass"
        and "minor-version compatibility" in by_id["driver"]["reason"]
    )
    assert by_id["scan"]["status"] == "warn"
    ptx = by_id["ptx-driver"]
    assert ptx["status"] == "warn" and "torch 2.15.0 on sm_120: PTX only, made by CUDA 13.2" in ptx["reason"]
    assert (
        "cudaErrorUnsupportedPtxVersion" in ptx["reason"]
        and "install a driver that supports CUDA 13.2" in ptx["reason"]
    )


def test_recorded_h200_probe_document() -> None:
    """The real `probe --json` recorded on the H200 (docs/machines/h200.probe.json) gives the verdicts its facts predict."""
    machine = report.load_machine(ROOT / "docs/machines/h200.probe.json")
    assert (
        machine.gpus[0].sm == "sm_90"
        and machine.driver.cuda == "13.0"
        and machine.toolkits[0].version == "13.0"
    )
    by_name = {t.name: t for t in report.report([machine], profiles.available())[0].targets}
    cu130 = gates(by_name["cu130"])
    assert cu130["driver"] == "pass" and cu130["toolkit"] == "pass" and cu130["torch-wheels"] == "pass"
    assert cu130["multi-gpu"] == "skip"  # one GPU: no all-reduce gates
    # {arch_list} is filled from this SM90 GPU: both stacks can JIT for it, so neither fails on an SM120 setting
    for name in ("cu128", "cu130", "cu130-stable"):
        reason = next(g.reason for g in by_name[name].gates if g.id == "flashinfer-jit")
        assert gates(by_name[name])["flashinfer-jit"] == "pass" and "FLASHINFER_CUDA_ARCH_LIST=9.0a" in reason
        assert by_name[name].verdict == "pass", by_name[name].to_dict()
