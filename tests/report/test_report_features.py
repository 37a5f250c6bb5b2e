"""What to turn on and what to leave off, judged by the versions of the stack (issue 37): the facts of knowledge.toml
[[feature_fact]] chosen by a lock's, an environment's or a profile's versions; FlashInfer's kernels and caches; the
NVSwitch fabric read through NVML and replayed; the date of the knowledge and a WARN for releases newer than it."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

from conftest import DATA, ROOT
from launch import run_provision

from provision import knowledge
from provision.machine import facts as machine
from provision.machine import nvml
from provision.machine.recording import Recorder, Replay
from provision.report import features, gates, kernels

# 8 x RTX PRO 6000 (SM120), PCIe only, driver 590.48.01
RTX = ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"


def lock_target(lock: Path, tmp_path: Path) -> tuple[dict, dict]:
    """`report --lock LOCK --machine RTX --json --no-fetch` as a process, with caches of its own: (document, lock target)."""
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    done = run_provision(
        "report",
        "--lock",
        str(lock),
        "--machine",
        str(RTX),
        "--json",
        "--no-fetch",
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode in (0, 1), done.stderr
    document = json.loads(done.stdout)
    return document, next(t for t in document["machines"][0]["targets"] if t["kind"] == "lock")


def test_a_lock_of_sglang_0_5_23_on_the_rtx_machine_turns_the_pcie_all_reduce_on(tmp_path: Path) -> None:
    document, target = lock_target(DATA / "pylock.sglang-0.5.23.toml", tmp_path)
    assert document["machines"][0]["driver"].startswith("590.")
    assert document["knowledge_as_of"] == knowledge.as_of() and len(knowledge.as_of()) == 10
    gate = {g["id"]: g for g in target["gates"]}
    assert target["features_on"] == ["pcie-allreduce"]
    pcie = gate["pcie-allreduce"]
    assert pcie["status"] == "pass" and pcie["turn_on"] == "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1"
    assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1" in pcie["reason"] and "sglang 0.5.23 (lock)" in pcie["reason"]
    assert "bf16 only" in pcie["reason"] and "13.62 ms" in pcie["reason"]
    fusion = gate["allreduce-fusion"]
    assert fusion["status"] == "fail" and fusion["reason"].startswith("compiles; SGLang will not use it")
    assert "sglang 0.5.23" in fusion["reason"] and "--flashinfer-allreduce-fusion-backend" in fusion["reason"]
    assert "--enable-flashinfer-allreduce-fusion is deprecated" in fusion["reason"]
    symm = gate["symm-mem-allreduce"]
    assert 'SGLang 0.5.23 logs "Device capability 12 not supported" and falls back to NCCL' in symm["reason"]
    assert "KeyError" not in symm["reason"]
    assert set(target["features_off"]) == {"symm-mem-allreduce", "allreduce-fusion"}
    assert "sglang 0.5.23 (lock)" in gate["custom-allreduce"]["reason"]
    kernels_gate = gate["flashinfer-kernels"]
    assert (
        kernels_gate["status"] == "warn"
        and "no flashinfer-cubin 0.7.2: cubins downloaded at first use" in kernels_gate["reason"]
    )
    assert "knowledge" not in gate  # 0.5.23 is the newest the knowledge knows


def test_an_older_sglang_lock_gets_the_older_facts(tmp_path: Path) -> None:
    _, target = lock_target(DATA / "pylock.sglang-0.5.20.toml", tmp_path)
    gate = {g["id"]: g for g in target["gates"]}
    assert target["features_on"] == []
    assert (
        gate["pcie-allreduce"]["status"] == "skip"
        and "not in this stack [sglang 0.5.20 (lock)]" in gate["pcie-allreduce"]["reason"]
    )
    assert gate["pcie-allreduce"]["turn_on"] == ""


def facts_rtx() -> machine.MachineFacts:
    from provision.report import documents

    return documents.load_machine(RTX)


def test_sglang_before_0_5_20_dies_with_key_error_12_and_an_unknown_version_says_what_judged_it() -> None:
    old = features.symm_mem([12], True, gates.Versions(found={"sglang": "0.5.6"}, origin="lock"))
    assert old.status == "fail" and "KeyError: 12" in old.reason and "[sglang 0.5.6 (lock)]" in old.reason
    unknown = features.symm_mem([12], False, gates.Versions(origin="profile pins"))
    assert "KeyError: 12" in unknown.reason and "judged by the facts for sglang <0.5.20" in unknown.reason
    hopper = features.symm_mem([9], False, gates.Versions(found={"sglang": "0.5.23"}, origin="lock"))
    assert hopper.status == "pass"


def test_fusion_on_hopper_with_sglang_0_5_23_passes_with_its_flag() -> None:
    versions = gates.Versions(found={"sglang": "0.5.23", "flashinfer-python": "0.7.2"}, origin="environment")
    gate = features.fusion([9], False, versions)
    assert gate.status == "pass" and "--flashinfer-allreduce-fusion-backend" in gate.reason


def test_pcie_all_reduce_needs_flashinfer_with_pcie_ipc_comm_and_a_tp_size_it_serves() -> None:
    rtx = facts_rtx()
    from provision.report import pcipath

    found = pcipath.findings(rtx)
    old_kernels = features.pcie_allreduce(
        rtx, found, gates.Versions(found={"sglang": "0.5.21", "flashinfer-python": "0.6.18"}, origin="lock")
    )
    assert (
        old_kernels.status == "skip" and "no pcie_ipc_comm" in old_kernels.reason and not old_kernels.turn_on
    )
    one_pair = rtx._replace(
        gpus=rtx.gpus[:3], topology=tuple(link for link in rtx.topology if link.gpu_b < 3)
    )
    three = features.pcie_allreduce(
        one_pair,
        pcipath.findings(one_pair),
        gates.Versions(found={"sglang": "0.5.23", "flashinfer-python": "0.7.2"}),
    )
    assert three.status == "pass" and "TP 2 on these 3" in three.reason


def test_a_release_newer_than_the_knowledge_is_a_warn_naming_the_rules_used() -> None:
    gate = features.newer_than_known(gates.Versions(found={"sglang": "0.5.24"}, origin="lock"))
    assert gate is not None and gate.status == "warn" and gate.kind == "stack"
    assert (
        "sglang 0.5.24 is newer than 0.5.23" in gate.reason
        and "judged by the newest facts known" in gate.reason
    )
    assert knowledge.as_of() in gate.title
    assert features.newer_than_known(gates.Versions(found={"sglang": "0.5.23"})) is None


def test_flashinfer_kernels_from_matching_wheels_downloads_or_offline() -> None:
    matching = gates.Versions(
        found={
            "flashinfer-python": "0.7.2",
            "flashinfer-cubin": "0.7.2",
            "flashinfer-jit-cache": "0.7.2+cu130",
        },
        origin="environment",
    )
    gate = kernels.flashinfer_kernels(matching, nvcc="13.0", offline=True)
    assert gate is not None and gate.status == "pass" and "cubins from flashinfer-cubin 0.7.2" in gate.reason
    stale = gates.Versions(found={"flashinfer-python": "0.7.2", "flashinfer-cubin": "0.6.13"}, origin="lock")
    warned = kernels.flashinfer_kernels(stale, nvcc="13.0", offline=False)
    assert (
        warned is not None
        and warned.status == "warn"
        and "flashinfer-cubin 0.6.13 is not 0.7.2: ignored" in warned.reason
    )
    assert "JIT-compiled at first use with nvcc 13.0" in warned.reason
    failed = kernels.flashinfer_kernels(stale, nvcc=None, offline=True)
    assert failed is not None and failed.status == "fail" and "offline = true" in failed.reason
    assert (
        kernels.flashinfer_kernels(gates.Versions(found={"torch": "2.14.1"}), nvcc=None, offline=True) is None
    )


def test_caches_gate_lists_each_cache_and_its_size(tmp_path: Path) -> None:
    build = tmp_path / "envs" / "today"
    (build / "cache" / "sglang" / "triton").mkdir(parents=True)
    (build / "cache" / "sglang" / "triton" / "k.bin").write_bytes(b"x" * 2**20)
    env = {"SGLANG_CACHE_DIR": f"{build}/cache/sglang", "FLASHINFER_WORKSPACE_BASE": str(build)}
    gate = kernels.caches_gate(env, build, tmp_path / "home")
    assert gate.status == "info" and f"{build}/cache/sglang (1.0 MiB; SGLANG_CACHE_DIR)" in gate.reason
    assert f"FlashInfer cubins: {build}/.cache/flashinfer/cubins (not made yet" in gate.reason
    assert "outside" not in gate.reason
    default = kernels.caches_gate({}, build, tmp_path / "home")
    assert "outside" in default.reason and "SGLang (triton" in default.reason


def _fabric_call(index: int, state: int, status: int = 0) -> dict:
    info = {
        "version": 0x02000024,
        "clusterUuid": [7] * 16,
        "status": status,
        "cliqueId": 32766,
        "state": state,
        "healthMask": 0,
    }
    return {
        "fn": "nvmlDeviceGetGpuFabricInfoV",
        "args": [{"handle": index}, {"out": "c_nvmlGpuFabricInfo_v2_t"}],
        "result": 0,
        "out": [None, {"struct": info}],
    }


def test_fabric_state_is_replayed_and_an_incomplete_registration_fails_naming_fabric_manager_and_nvlsm() -> (
    None
):
    data = json.loads((DATA / "h200.nvml.json").read_text())
    data["calls"].append(_fabric_call(0, state=2))
    r = nvml.read(Replay(data))
    assert r.gpus[0].fabric == machine.Fabric(
        state="in_progress", status=0, clique_id=32766, cluster_uuid="07" * 16, health_mask=0
    )
    facts = machine.MachineFacts(driver=r.driver, gpus=tuple(r.gpus))
    again = machine.MachineFacts.from_dict(json.loads(json.dumps(facts.to_dict())), source="x")
    # the probe document carries it, and report --machine reads it back
    assert again.gpus[0].fabric == r.gpus[0].fabric
    gate = gates.fabric_gate(facts)
    assert gate is not None and gate.status == "fail" and "GPU 0 in_progress" in gate.reason
    assert "Fabric Manager" in gate.reason and "NVLSM" in gate.reason and "802" in gate.reason
    data["calls"][-1] = _fabric_call(0, state=3)
    done = machine.MachineFacts(gpus=tuple(nvml.read(Replay(data)).gpus))
    assert gates.fabric_gate(done) is not None and gates.fabric_gate(done).status == "pass"  # type: ignore[union-attr]


def test_no_fabric_is_no_finding() -> None:
    """A recording without the fabric calls, or NVML's NotSupported (PCIe GPUs, H100 PCIe): no fabric, no gate."""
    data = json.loads((DATA / "h200.nvml.json").read_text())
    data["calls"].append(
        {
            "fn": "nvmlDeviceGetGpuFabricInfoV",
            "args": [{"handle": 0}, {"out": "c_nvmlGpuFabricInfo_v2_t"}],
            "error": 3,
            "error_name": "NVMLError_NotSupported",
        }
    )
    facts = machine.MachineFacts(gpus=tuple(nvml.read(Replay(data)).gpus))
    assert facts.gpus[0].fabric is None and gates.fabric_gate(facts) is None
    assert gates.fabric_gate(facts_rtx()) is None


def test_the_recorder_writes_what_an_out_parameter_received() -> None:
    """The recorder around a binding that fills the structure it is given, as libnvidia-ml does: the replay of its
    recording fills the caller's structure the same way, and answers only names nvidia-ml-py has."""
    import pynvml

    class Filling:
        c_nvmlGpuFabricInfoV_t = pynvml.c_nvmlGpuFabricInfoV_t

        def nvmlDeviceGetGpuFabricInfoV(self, handle: object, info: object) -> int:
            target = info._obj  # type: ignore[attr-defined]
            target.state, target.cliqueId, target.status = 3, 5, 0
            return 0

    recorder = Recorder(Filling())
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    from provision.machine.recording import Handle

    recorder.nvmlDeviceGetGpuFabricInfoV(Handle(1), ctypes.byref(info))
    document = recorder.document()
    assert document["calls"][0]["args"][1] == {"out": "c_nvmlGpuFabricInfo_v2_t"}
    replayed = pynvml.c_nvmlGpuFabricInfoV_t()
    Replay(document).nvmlDeviceGetGpuFabricInfoV(Handle(1), ctypes.byref(replayed))
    assert (replayed.state, replayed.cliqueId) == (3, 5)
