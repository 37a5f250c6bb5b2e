"""What the report says follows from the machine, the profile and what the environment's checks saw: {arch_list}
filled per GPU, no torch means SKIP, a CPU torch FAILs, feature gates follow the checks, sources anyone can open."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from provision import knowledge
from provision.envs import variables
from provision.machine import nvml
from provision.machine.facts import MachineFacts
from provision.records.details import NcclAllreduceDetails, SymmetricMemoryDetails
from provision.records.results import CheckResult
from provision.report import environments, observed
from provision.report import gates as report
from provision.stacks import profiles

RECORDED = sorted((ROOT / "docs/machines").glob("*.probe.json"))


def facts_from(recording: str) -> MachineFacts:
    r = nvml.read(nvml.replay_file(DATA / recording))
    return MachineFacts(driver=r.driver, gpus=tuple(r.gpus), topology=tuple(r.topology))


@pytest.mark.parametrize(
    ("ccs", "nvcc", "expected"),
    [
        (["9.0"], "13.0", "9.0a"),
        (["10.0"], "13.0", "10.0a"),
        (["12.0"], "13.0", "12.0f"),
        (["12.0"], "12.8", "12.0a"),
        (["12.0", "9.0", "9.0"], "12.9", "9.0a 12.0f"),
        (["8.6"], "13.0", "8.6"),
        ([], "13.0", ""),
    ],
)
def test_arch_list_is_what_flashinfer_would_pick(ccs: list[str], nvcc: str, expected: str) -> None:
    assert knowledge.flashinfer_arch_list(ccs, nvcc) == expected


def test_fill_env_leaves_arch_list_unset_without_gpus() -> None:
    template = {"A": "{arch_list}", "B": "{env}/x", "C": "{site}"}
    assert variables.fill_env(template, env="/e", venv="/e/venv", site="/s", arch_list="") == {
        "B": "/e/x",
        "C": "/s",
    }
    assert variables.fill_env(template, env="/e", venv="/v", site="/s", arch_list="9.0a")["A"] == "9.0a"


def test_checks_fill_arch_list_for_the_gpus_they_run_on(tmp_path: Path) -> None:
    from provision.checks import runner

    h200 = facts_from("h200.nvml.json").gpus
    from provision.envs.records import EnvRecord, EnvTemplate

    meta = EnvRecord(
        name="env",
        env={"FLASHINFER_CUDA_ARCH_LIST": "12.0f"},
        env_template=EnvTemplate(env={"FLASHINFER_CUDA_ARCH_LIST": "{arch_list}", "W": "{env}"}, nvcc="13.0"),
    )
    env = runner.environment(tmp_path / "venv", meta, list(h200), tmp_path)
    assert env["FLASHINFER_CUDA_ARCH_LIST"] == "9.0a" and env["W"] == str(tmp_path)
    # no reading: as stored
    assert runner.environment(tmp_path / "venv", meta)["FLASHINFER_CUDA_ARCH_LIST"] == "12.0f"


@pytest.mark.parametrize("machine", RECORDED, ids=lambda p: p.stem)
def test_shipped_profiles_follow_the_gpu(machine: Path) -> None:
    facts = report.load_machine(machine)
    for target in report.report([facts], profiles.available())[0].targets:
        jit = next(g for g in target.gates if g.id == "flashinfer-jit")
        assert "has nothing for" not in jit.reason, (target.name, jit.reason)


def test_rtx_keeps_the_sm120_verdicts() -> None:
    facts = report.load_machine(ROOT / "docs/machines/rtx-pro-6000-x8.probe.json")
    by_name = {t.name: t for t in report.report([facts], profiles.available())[0].targets}
    jit = {n: next(g for g in t.gates if g.id == "flashinfer-jit") for n, t in by_name.items()}
    assert jit["cu130"].status == "pass" and "12.0f" in jit["cu130"].reason
    assert jit["cu128"].status == "warn" and "12.0a" in jit["cu128"].reason


def test_a_profile_without_torch_skips_the_torch_wheels_gate(tmp_path: Path) -> None:
    path = tmp_path / "notorch.toml"
    path.write_text('schema = 1\nname = "notorch"\ncuda = "13.0"\n[packages]\nninja = {}\n')
    gate = next(
        g
        for g in report.judge(facts_from("h200.nvml.json"), profiles.load_file(path)).gates
        if g.id == "torch-wheels"
    )
    assert gate.status == "skip" and "no torch" in gate.reason


def test_the_torch_table_is_the_fallback_and_says_so() -> None:
    gate = next(
        g
        for g in report.judge(facts_from("h200.nvml.json"), profiles.load("cu130")).gates
        if g.id == "torch-wheels"
    )
    assert (
        gate.status == "pass" and "from the table" in gate.reason and "no torch wheel scanned" in gate.reason
    )


def test_a_cpu_torch_fails() -> None:
    gate = environments.torch_build_gate({"torch": "2.9.1+cpu"}, None)
    assert gate.status == "fail" and "torch is a CPU build" in gate.reason
    assert environments.torch_build_gate({}, None).status == "skip"


def _symm(multicast: bool, world: int = 2) -> CheckResult:
    return CheckResult(
        id="symmetric-memory",
        status="pass",
        reason="ok",
        details=SymmetricMemoryDetails(world_size=world, multicast=multicast),
    )


def test_feature_gates_follow_what_the_checks_saw() -> None:
    facts = facts_from("h100-nvlink-x2.nvml.json")
    topology_only = {g.id: g for g in report.machine_gates(facts, None)}
    assert topology_only["symm-mem-allreduce"].status == "pass"  # NVLink, SM90: the fabric could
    nccl = CheckResult(
        id="nccl-allreduce",
        status="warn",
        details=NcclAllreduceDetails(world_size=2, peer_access=[[True, False], [False, True]]),
    )
    seen = {
        g.id: g
        for g in observed.apply(
            report.machine_gates(facts, None), {"symmetric-memory": _symm(False), "nccl-allreduce": nccl}, 2
        )
    }
    assert (
        seen["symm-mem-allreduce"].status == "fail"
        and "saw no multicast" in seen["symm-mem-allreduce"].reason
    )
    assert seen["p2p"].status == "warn" and "0-1" in seen["p2p"].reason
    seen = {
        g.id: g
        for g in observed.apply(report.machine_gates(facts, None), {"symmetric-memory": _symm(True, 1)}, 2)
    }
    assert seen["symm-mem-allreduce"].status == "pass" and "1 of 2 GPUs" in seen["symm-mem-allreduce"].reason


def test_last_smoke_checks_is_the_last_full_run() -> None:
    full = [
        {"id": c, "status": "pass", "reason": ""}
        for c in ("imports", "driver", "torch-cuda", "symmetric-memory")
    ]
    from provision.envs.records import EnvRecord

    meta = EnvRecord.parse(
        Path("env.json"),
        {
            "checks": {"results": full, "at": "T1"},
            "checks_subset": {"results": [_symm(False).to_dict()], "at": "T2", "only": ["symmetric-memory"]},
        },
        "env",
    )
    gates = {g.id: g for g in environments.stored_gates(meta)}
    assert gates["checks"].title == "last smoke checks (T1)" and gates["checks"].reason.startswith("4 pass")
    assert gates["checks-only"].status == "info" and "T2" in gates["checks-only"].title
    assert meta.latest_results()["symmetric-memory"] == _symm(False)  # the newest evidence


_URL = re.compile(r"https?://\S+")


@pytest.mark.parametrize("machine", RECORDED, ids=lambda p: p.stem)
def test_every_source_is_a_url_or_a_file_of_this_repository(machine: Path) -> None:
    facts = report.load_machine(machine)
    for target in report.report([facts], profiles.available())[0].targets:
        for gate in target.gates:
            if not gate.source:
                assert gate.status == "skip", f"{gate.id} {gate.status} without a source"  # docs/json.md
                continue
            assert "../shared" not in gate.source, gate
            files = re.findall(r"(?:docs|provision|profiles)/[\w./-]+\.(?:md|toml|json|py)", gate.source)
            assert _URL.search(gate.source) or files, gate
            assert all((ROOT / f).exists() for f in files), gate


@pytest.mark.parametrize("table", ["driver", "arch", "toolkit", "torch_wheels", "sm_rule", "feature_wheel"])
def test_knowledge_sources_can_be_opened(table: str) -> None:
    for row in knowledge.tables()[table]:
        assert "../shared" not in row["source"] and (
            _URL.search(row["source"]) or "docs/" in row["source"]
        ), row
